#pragma once
// The public verbs. A Communicator owns a transport; every verb validates its arguments, picks an
// algorithm (the argument, else PARO_ALGO, else automatic) and runs it.
//
// Buffer conventions (NCCL's):
//   all_reduce(send, recv, count)          both hold count elements; in place when send == recv
//   all_gather(send, recv, count)          send holds count, recv holds size()*count, rank r's block at
//                                          recv + r*count; in place when send == recv + rank()*count
//   reduce_scatter(send, recv, count)      send holds size()*count, recv holds count; in place when
//                                          recv == send + rank()*count (the other blocks of send are then
//                                          left undefined)
// All ranks must call the same verbs in the same order with the same count, type, op, algorithm and scope.
//
// Scopes: global (every rank), intra (the ranks of my group), inter (my rail: the ranks with my index in
// every group). Groups come from the topology (topology/discovery.hpp) and PARO_GROUP (topology/grouping.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/native.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/algorithms/select.hpp"
#include "paro/algorithms/tree.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/topology/discovery.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

enum class Scope { global, intra, inter };

inline const char* name_of(Scope s) {
  switch (s) {
    case Scope::global: return "global";
    case Scope::intra: return "intra";
    case Scope::inter: return "inter";
  }
  return "invalid";
}

inline Scope parse_scope(std::string_view s) {
  for (Scope x : {Scope::global, Scope::intra, Scope::inter})
    if (s == name_of(x)) return x;
  throw Error(detail::concat("unknown scope '", s, "'; allowed: global intra inter"));
}

struct Options {
  Algorithm algorithm = Algorithm::automatic;
  Scope scope = Scope::global;
};

// How a Communicator learns its topology and forms its groups; the defaults read the environment.
struct CommunicatorConfig {
  std::optional<Topology> topology;  // given: no discovery
  topology::DiscoveryOptions discovery = topology::DiscoveryOptions::from_env();
  GroupSpec group = GroupSpec::from_env();
};

template <class Transport>
class Communicator {
  static_assert(is_transport_v<Transport>,
                "paro::Communicator<T>: T does not model the Transport concept (see paro/transport/transport.hpp)");

 public:
  // Collective: discovers the topology (unless config gives it), forms the groups and splits off the
  // intra-group, rail and per-level communicators.
  explicit Communicator(Transport transport, CommunicatorConfig config = {})
      : t_(std::move(transport)),
        overrides_(AlgorithmOverrides::from_env()),
        policy_(algorithms::SelectionPolicy::from_env()),
        ring_(algorithms::RingParams::from_env()),
        check_signatures_(env::integer_or("PARO_CHECK", 0, 0, 1) == 1),
        topology_(config.topology ? std::move(*config.topology) : topology::discover(t_, config.discovery)),
        groups_(Groups::make(checked(topology_), config.group)),
        grouping_(config.group) {
    const auto me = static_cast<std::size_t>(rank());
    intra_ = t_.split(groups_.group_of[me], groups_.index_of[me]);
    inter_ = t_.split(groups_.index_of[me], groups_.group_of[me]);
    for (Level l : topology_.known_levels) levels_.emplace(l, t_.split(topology_.ordinals(l)[me], rank()));
    if (groups_.uneven())
      log::info(rank(), "grouping by ", grouping_.describe(), ": groups of different sizes (", groups_.members.front().size(),
                " .. ", groups_.members.back().size(), " ranks); intra and inter collectives run on communicators of ",
                "those sizes");
  }

  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }
  Transport& transport() { return t_; }
  Transport& transport(Scope s) { return s == Scope::global ? t_ : s == Scope::intra ? intra_ : inter_; }
  // The ranks that share this rank's node, switch or pod (a level the topology knows).
  Transport& level(Level l) {
    auto it = levels_.find(l);
    detail::require(it != levels_.end(), "level ", name_of(l), ": no source described it");
    return it->second;
  }
  const Topology& topology() const { return topology_; }
  const Groups& groups() const { return groups_; }
  const GroupSpec& grouping() const { return grouping_; }

  // The algorithm a verb would run: an explicit request, else PARO_ALGO, else the automatic choice.
  Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic,
                    Scope scope = Scope::global) {
    Algorithm a = requested != Algorithm::automatic ? requested : overrides_[c];
    if (a == Algorithm::automatic) a = policy_.choose(c, transport(scope).size(), full_bytes);
    detail::require(a != Algorithm::native || Transport::has_native_collectives, name_of(c),
                    ": algorithm native is not available on the ", Transport::name,
                    " backend; allowed here: automatic ring tree");
    return a;
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    const char* what = "all_reduce";
    Transport& t = scoped(what, o.scope);
    validate_common(what, dt, op);
    const std::size_t bytes = checked_bytes(what, count, dt, 1);
    validate_buffers(what, send, bytes, recv, bytes);
    require_in_place_or_disjoint(what, send, bytes, recv, bytes, recv);
    const Algorithm a = resolve(Collective::all_reduce, bytes, o.algorithm, o.scope);
    check_agreement(t, Collective::all_reduce, o.scope, a, count, dt, op);
    if (count == 0) return;
    log::info(rank(), what, " ", name_of(o.scope), " ", name_of(a), " count=", count, " ", name_of(dt), " ",
              name_of(op), send == recv ? " in-place" : "");
    switch (a) {
      case Algorithm::ring: return algorithms::ring_all_reduce(t, send, recv, count, dt, op, ring_);
      case Algorithm::tree: return algorithms::tree_all_reduce(t, send, recv, count, dt, op);
      case Algorithm::native: return native(t, [&](auto& n) { algorithms::native_all_reduce(n, send, recv, count, dt, op); });
      case Algorithm::automatic: break;
    }
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    const char* what = "all_gather";
    Transport& t = scoped(what, o.scope);
    validate_common(what, dt, ReduceOp::sum);
    const std::size_t block = checked_bytes(what, count, dt, 1);
    const std::size_t bytes = checked_bytes(what, count, dt, t.size());
    validate_buffers(what, send, block, recv, bytes);
    char* mine = static_cast<char*>(recv) + static_cast<std::size_t>(t.rank()) * block;
    require_in_place_or_disjoint(what, send, block, recv, bytes, mine);
    const Algorithm a = resolve(Collective::all_gather, bytes, o.algorithm, o.scope);
    check_agreement(t, Collective::all_gather, o.scope, a, count, dt, ReduceOp::sum);
    if (count == 0) return;
    log::info(rank(), what, " ", name_of(o.scope), " ", name_of(a), " count=", count, " ", name_of(dt),
              send == mine ? " in-place" : "");
    if (a == Algorithm::native)
      return native(t, [&](auto& n) { algorithms::native_all_gather(n, send, recv, count, dt); });
    t.copy(mine, send, block);
    if (a == Algorithm::ring)
      algorithms::ring_all_gather(t, recv, algorithms::BlockLayout::uniform(t.size(), count), dt, ring_);
    else
      algorithms::bruck_all_gather(t, recv, count, dt);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    const char* what = "reduce_scatter";
    Transport& t = scoped(what, o.scope);
    validate_common(what, dt, op);
    const std::size_t block = checked_bytes(what, count, dt, 1);
    const std::size_t bytes = checked_bytes(what, count, dt, t.size());
    validate_buffers(what, send, bytes, recv, block);
    const char* mine = static_cast<const char*>(send) + static_cast<std::size_t>(t.rank()) * block;
    require_in_place_or_disjoint(what, recv, block, send, bytes, mine);
    const Algorithm a = resolve(Collective::reduce_scatter, bytes, o.algorithm, o.scope);
    check_agreement(t, Collective::reduce_scatter, o.scope, a, count, dt, op);
    if (count == 0) return;
    log::info(rank(), what, " ", name_of(o.scope), " ", name_of(a), " count=", count, " ", name_of(dt), " ",
              name_of(op), recv == mine ? " in-place" : "");
    switch (a) {
      case Algorithm::ring:
        return algorithms::ring_reduce_scatter(t, send, recv, algorithms::BlockLayout::uniform(t.size(), count), dt,
                                               op, ring_);
      case Algorithm::tree: return algorithms::tree_reduce_scatter(t, send, recv, count, dt, op);
      case Algorithm::native:
        return native(t, [&](auto& n) { algorithms::native_reduce_scatter(n, send, recv, count, dt, op); });
      case Algorithm::automatic: break;
    }
  }

  // Typed forms: the data type follows from T.
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    all_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, o);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count, Options o = {}) {
    all_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, o);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    reduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, o);
  }

 private:
  Transport t_;
  AlgorithmOverrides overrides_;
  algorithms::SelectionPolicy policy_;
  algorithms::RingParams ring_;
  bool check_signatures_;
  Topology topology_;
  Groups groups_;
  GroupSpec grouping_;
  Transport intra_, inter_;
  std::map<Level, Transport> levels_;

  const Topology& checked(const Topology& topo) const {
    detail::require(t_.size() > 0, "Communicator: the transport is empty (a split with a negative color)");
    detail::require(topo.size() == t_.size(), "Communicator: the topology describes ", topo.size(),
                    " ranks but the transport has ", t_.size());
    topo.validate();
    return topo;
  }

  // The construction rejected empty transports, and every rank is in a group and a rail, so no scope is empty.
  Transport& scoped(const char* what, Scope s) {
    detail::require(s == Scope::global || s == Scope::intra || s == Scope::inter, what, ": invalid Scope value ",
                    static_cast<int>(s), "; allowed: global intra inter");
    return transport(s);
  }

  // PARO_CHECK=1: before a call, the ranks of its scope exchange what they are about to do, so that ranks
  // calling different collectives, counts, types, ops or algorithms get one error each instead of a hang
  // or garbage. Costs one small all-gather per call.
  void check_agreement(Transport& t, Collective c, Scope s, Algorithm a, std::size_t count, DataType dt, ReduceOp op) {
    if (!check_signatures_) return;
    constexpr std::size_t fields = 8;  // the ring's chunking too: ranks must cut chunks alike
    const std::int64_t mine[fields] = {static_cast<std::int64_t>(c),     static_cast<std::int64_t>(s),
                                       static_cast<std::int64_t>(a),     static_cast<std::int64_t>(count),
                                       static_cast<std::int64_t>(dt),    static_cast<std::int64_t>(op),
                                       static_cast<std::int64_t>(ring_.chunk_bytes),
                                       static_cast<std::int64_t>(ring_.window)};
    std::vector<std::int64_t> all(fields * static_cast<std::size_t>(t.size()));
    std::copy(mine, mine + fields, all.begin() + static_cast<std::ptrdiff_t>(fields * static_cast<std::size_t>(t.rank())));
    algorithms::bruck_all_gather(t, all.data(), fields, DataType::i64);
    auto describe = [&](int r) {
      const std::int64_t* f = all.data() + fields * static_cast<std::size_t>(r);
      return detail::concat(name_of(static_cast<Collective>(f[0])), " scope=", name_of(static_cast<Scope>(f[1])),
                            " algo=", name_of(static_cast<Algorithm>(f[2])), " count=", f[3], " ",
                            name_of(static_cast<DataType>(f[4])), " ", name_of(static_cast<ReduceOp>(f[5])),
                            " (PARO_RING_CHUNK=", f[6], " PARO_RING_WINDOW=", f[7], ")");
    };
    for (int r = 1; r < t.size(); ++r)
      detail::require(std::equal(all.begin(), all.begin() + fields, all.begin() + static_cast<std::ptrdiff_t>(fields * static_cast<std::size_t>(r))),
                      "PARO_CHECK: the ranks of this ", name_of(s), " call disagree: rank 0 calls ", describe(0),
                      ", rank ", r, " calls ", describe(r));
  }

  template <class F>
  static void native(Transport& t, F&& f) {
    if constexpr (Transport::has_native_collectives) f(t);
  }

  void validate_common(const char* what, DataType dt, ReduceOp op) const {
    try {
      validate(dt);
      validate(op);
    } catch (const Error& e) {
      throw Error(detail::concat(what, ": ", e.what() + 6));
    }
  }

  static std::size_t checked_bytes(const char* what, std::size_t count, DataType dt, int blocks) {
    const std::size_t limit = std::numeric_limits<std::size_t>::max() / size_of(dt) / static_cast<std::size_t>(blocks);
    detail::require(count <= limit, what, ": count ", count, " of ", name_of(dt), " over ", blocks,
                    " rank(s) overflows the addressable size");
    return count * size_of(dt) * static_cast<std::size_t>(blocks);
  }

  static void validate_buffers(const char* what, const void* send, std::size_t send_bytes, const void* recv,
                               std::size_t recv_bytes) {
    detail::require(send != nullptr || send_bytes == 0, what, ": send buffer is null but ", send_bytes,
                    " bytes are to be sent; pass a valid buffer or count 0");
    detail::require(recv != nullptr || recv_bytes == 0, what, ": recv buffer is null but ", recv_bytes,
                    " bytes are to be received; pass a valid buffer or count 0");
  }

  // `small` must either sit exactly at `in_place_at` inside `big`, or not overlap it at all.
  static void require_in_place_or_disjoint(const char* what, const void* small, std::size_t small_bytes,
                                           const void* big, std::size_t big_bytes, const void* in_place_at) {
    if (small == in_place_at || small_bytes == 0 || big_bytes == 0) return;
    const auto s = reinterpret_cast<std::uintptr_t>(small), b = reinterpret_cast<std::uintptr_t>(big);
    detail::require(s + small_bytes <= b || b + big_bytes <= s, what,
                    ": send and recv buffers overlap without being in place; in place means ",
                    "send == recv for all_reduce, send == recv + rank*count for all_gather and ",
                    "recv == send + rank*count for reduce_scatter");
  }
};

}  // namespace paro
