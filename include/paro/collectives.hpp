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
//
// Algorithms: ring and tree (flat), mics_hcs, paro_seq and paro_cc (hierarchical: over the levels of the
// topology among the scope's ranks), native (the backend's own), automatic (the cost model's fastest).
// PARO_CC_CHUNK (bytes) fixes the paro_cc all-reduce pipeline chunk, which the cost model sizes otherwise.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <array>
#include <map>
#include <string>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost_model.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/algorithms/mics_hcs.hpp"
#include "paro/algorithms/native.hpp"
#include "paro/algorithms/paro_cc.hpp"
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
  static_assert(check_transport<Transport>(),
                "paro::Communicator<T>: T does not model the Transport concept (see paro/transport/transport.hpp)");

 public:
  // Collective: discovers the topology (unless config gives it), forms the groups and splits off the
  // intra-group, rail and per-level communicators.
  explicit Communicator(Transport transport, CommunicatorConfig config = {})
      : t_(std::move(transport)),
        overrides_(AlgorithmOverrides::from_env()),
        ring_(algorithms::RingParams::from_env()),
        pipeline_chunk_(env::bytes_or("PARO_CC_CHUNK", 0)),
        lane_threads_(lane_threads_from_env()),
        direct_max_(env::bytes_or("PARO_DIRECT_MAX", algorithms::CostModel::default_direct_max_bytes)),
        check_signatures_(env::integer_or("PARO_CHECK", 0, 0, 1) == 1),
        topology_(config.topology ? std::move(*config.topology) : topology::discover(t_, config.discovery)),
        groups_(Groups::make(checked(topology_), config.group)),
        grouping_(config.group) {
    if constexpr (is_stepwise_v<Transport>) {  // no receives posted ahead of the current step
      ring_.window = 1;
      ring_.chunk_bytes = std::numeric_limits<std::size_t>::max();
    }
    const auto me = static_cast<std::size_t>(rank());
    intra_ = t_.split(groups_.group_of[me], groups_.index_of[me]);
    inter_ = t_.split(groups_.index_of[me], groups_.group_of[me]);
    for (Level l : topology_.known_levels) levels_.emplace(l, t_.split(topology_.ordinals(l)[me], rank()));
    cost_ = algorithms::CostModel(algorithms::link_model_for(topology_), algorithms::link_model_for(topology_, false),
                                  direct_max_);
    for (Scope s : {Scope::global, Scope::intra, Scope::inter}) {
      const std::vector<int> members = scope_members(s);
      partitions_[index(s)] = scope_partitions(members);
      shapes_[index(s)] = cost_shape(members, partitions_[index(s)]);
    }
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

  // Returns once every rank of the scope has called it.
  void barrier(Scope s = Scope::global) { algorithms::barrier(transport(s)); }
  const Groups& groups() const { return groups_; }
  const GroupSpec& grouping() const { return grouping_; }

  // The algorithm a verb would run: an explicit request, else PARO_ALGO, else the automatic choice.
  Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic,
                    Scope scope = Scope::global) const {
    return plan(c, full_bytes, requested, scope).algorithm;
  }

  // The cost model's view: predicted time of an algorithm (native is not modelled: 0), the lower bound,
  // and the shape of a scope (how the hierarchical algorithms cut it).
  const algorithms::CostModel& cost_model() const { return cost_; }
  // Replaces the model (e.g. with one measured at run time); every rank must set the same one, since the
  // model decides algorithms and pipeline chunks that the ranks must agree on.
  void set_cost_model(algorithms::CostModel model) { cost_ = std::move(model); }
  const algorithms::CostShape& shape(Scope s) const { return shapes_[index(s)]; }
  double predict_us(Algorithm a, Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return cost_.predict(a, c, full_bytes, shape(s)).time_us;
  }
  double lower_bound_us(Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return cost_.lower_bound(c, full_bytes, shape(s));
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    const char* what = "all_reduce";
    Transport& t = scoped(what, o.scope);
    validate_common(what, dt, op);
    const std::size_t bytes = checked_bytes(what, count, dt, 1);
    validate_buffers(what, send, bytes, recv, bytes);
    require_in_place_or_disjoint(what, send, bytes, recv, bytes, recv);
    const Plan chosen = plan(Collective::all_reduce, bytes, o.algorithm, o.scope);
    const Algorithm a = chosen.algorithm;
    check_agreement(t, Collective::all_reduce, o.scope, a, count, dt, op);
    if (count == 0) return;
    log::info(rank(), what, " ", name_of(o.scope), " ", name_of(a), " count=", count, " ", name_of(dt), " ",
              name_of(op), send == recv ? " in-place" : "");
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    switch (a) {
      case Algorithm::ring: return algorithms::ring_all_reduce(t, send, recv, count, dt, op, ring_);
      case Algorithm::tree: return algorithms::tree_all_reduce(t, send, recv, count, dt, op);
      case Algorithm::native: return native(t, [&](auto& n) { algorithms::native_all_reduce(n, send, recv, count, dt, op); });
      case Algorithm::mics_hcs: return algorithms::mics_all_reduce(hierarchy(o.scope), in, out, count, dt, op, ring_);
      case Algorithm::paro_seq:
      case Algorithm::paro_cc:
        return algorithms::paro_all_reduce(hierarchy(o.scope), in, out, count, dt, op,
                                           hierarchical(chosen));
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
    const Plan chosen = plan(Collective::all_gather, bytes, o.algorithm, o.scope);
    const Algorithm a = chosen.algorithm;
    check_agreement(t, Collective::all_gather, o.scope, a, count, dt, ReduceOp::sum);
    if (count == 0) return;
    log::info(rank(), what, " ", name_of(o.scope), " ", name_of(a), " count=", count, " ", name_of(dt),
              send == mine ? " in-place" : "");
    if (a == Algorithm::native)
      return native(t, [&](auto& n) { algorithms::native_all_gather(n, send, recv, count, dt); });
    t.copy(mine, send, block);
    const auto layout = algorithms::BlockLayout::uniform(t.size(), count);
    char* out = static_cast<char*>(recv);
    switch (a) {
      case Algorithm::ring: return algorithms::ring_all_gather(t, recv, layout, dt, ring_);
      case Algorithm::tree: return algorithms::bruck_all_gather(t, recv, count, dt);
      case Algorithm::mics_hcs:
        return algorithms::mics_all_gather(hierarchy(o.scope), out, algorithms::BlockList::from(layout), dt, ring_);
      case Algorithm::paro_seq:
      case Algorithm::paro_cc:
        return algorithms::paro_all_gather(hierarchy(o.scope), out, algorithms::BlockList::from(layout), dt,
                                           hierarchical(chosen));
      case Algorithm::native:
      case Algorithm::automatic: break;
    }
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
    const Plan chosen = plan(Collective::reduce_scatter, bytes, o.algorithm, o.scope);
    const Algorithm a = chosen.algorithm;
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
      case Algorithm::mics_hcs:
      case Algorithm::paro_seq:
      case Algorithm::paro_cc: {
        // The levels combine partial sums; avg divides once, at the end.
        const ReduceOp partial_op = op == ReduceOp::avg ? ReduceOp::sum : op;
        const auto blocks = algorithms::BlockList::from(algorithms::BlockLayout::uniform(t.size(), count));
        const char* in = static_cast<const char*>(send);
        char* out = static_cast<char*>(recv);
        if (a == Algorithm::mics_hcs)
          algorithms::mics_reduce_scatter(hierarchy(o.scope), in, blocks, out, dt, partial_op, ring_);
        else
          algorithms::paro_reduce_scatter(hierarchy(o.scope), in, blocks, out, dt, partial_op,
                                          hierarchical(chosen));
        if (op == ReduceOp::avg) t.divide(out, count, dt, t.size());
        return;
      }
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
  algorithms::RingParams ring_;
  std::size_t pipeline_chunk_;  // PARO_CC_CHUNK; 0: from the cost model
  bool lane_threads_;           // PARO_LANES: paro_cc's levels on threads of their own where the backend allows
  std::size_t direct_max_;      // PARO_DIRECT_MAX: paro_cc's levels with blocks up to this exchange directly
  bool check_signatures_;
  Topology topology_;
  Groups groups_;
  GroupSpec grouping_;
  Transport intra_, inter_;
  std::map<Level, Transport> levels_;
  algorithms::CostModel cost_;
  // Per scope: the levels the hierarchical algorithms cut it by, the cost model's view of it, and the
  // hierarchy (built at its first use).
  std::array<std::vector<std::vector<int>>, 3> partitions_;
  std::array<algorithms::CostShape, 3> shapes_;
  std::array<std::unique_ptr<algorithms::Hierarchy<Transport>>, 3> hierarchies_;

  static std::size_t index(Scope s) { return static_cast<std::size_t>(s); }

  std::vector<int> scope_members(Scope s) const {
    const auto me = static_cast<std::size_t>(rank());
    if (s == Scope::intra) return groups_.members[static_cast<std::size_t>(groups_.group_of[me])];
    if (s == Scope::inter) return groups_.rails[static_cast<std::size_t>(groups_.index_of[me])];
    std::vector<int> all(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) all[static_cast<std::size_t>(r)] = r;
    return all;
  }

  std::vector<int> labels_of(const std::vector<int>& of_rank, const std::vector<int>& members) const {
    std::vector<int> out;
    for (int r : members) out.push_back(of_rank[static_cast<std::size_t>(r)]);
    return out;
  }

  // The topology's levels and the grouping, as partitions of the scope's members.
  std::vector<std::vector<int>> scope_partitions(const std::vector<int>& members) const {
    std::vector<std::vector<int>> candidates;
    for (Level l : topology_.known_levels) candidates.push_back(labels_of(topology_.ordinals(l), members));
    candidates.push_back(labels_of(groups_.group_of, members));
    return algorithms::nested_partitions(candidates);
  }

  algorithms::CostShape cost_shape(const std::vector<int>& members, const std::vector<std::vector<int>>& chain) const {
    algorithms::CostShape s;
    s.ranks = static_cast<int>(members.size());
    const std::vector<int> world_nodes = topology_.ordinals(Level::node);
    const std::vector<int> nodes = algorithms::normalized(labels_of(world_nodes, members));
    s.nodes = algorithms::unit_count(nodes);
    std::vector<int> per_node(static_cast<std::size_t>(s.nodes)), world_per_node(world_nodes.size());
    for (int x : nodes) s.ranks_per_node = std::max(s.ranks_per_node, ++per_node[static_cast<std::size_t>(x)]);
    int world_max = 1;
    for (int x : world_nodes) world_max = std::max(world_max, ++world_per_node[static_cast<std::size_t>(x)]);
    // Every rank runs its own instance of this scope's collective at the same time (intra and inter
    // scopes: one per group or rail); their messages share the NICs.
    s.nic_flows = world_max;
    const double instances = static_cast<double>(world_max) / s.ranks_per_node;
    int crossings = 0;
    std::vector<int> leaving(static_cast<std::size_t>(s.nodes));
    for (std::size_t i = 0; i < nodes.size() && nodes.size() > 1; ++i)
      if (nodes[i] != nodes[(i + 1) % nodes.size()]) crossings = std::max(crossings, ++leaving[static_cast<std::size_t>(nodes[i])]);
    s.ring_nic_flows = crossings * instances;
    if (std::find(topology_.known_levels.begin(), topology_.known_levels.end(), Level::pod) != topology_.known_levels.end()) {
      const std::vector<int> pods = algorithms::normalized(labels_of(topology_.ordinals(Level::pod), members));
      s.pods = algorithms::unit_count(pods);
      std::vector<int> ranks_in(static_cast<std::size_t>(s.pods));
      std::vector<std::set<int>> nodes_in(static_cast<std::size_t>(s.pods));
      for (std::size_t i = 0; i < pods.size(); ++i) {
        ++ranks_in[static_cast<std::size_t>(pods[i])];
        nodes_in[static_cast<std::size_t>(pods[i])].insert(nodes[i]);
      }
      for (int p = 0; p < s.pods; ++p)
        if (ranks_in[static_cast<std::size_t>(p)] > s.pod_ranks) {
          s.pod_ranks = ranks_in[static_cast<std::size_t>(p)];
          s.pod_nics = cost_.bound_links().nic == NicModel::per_rank ? s.pod_ranks : static_cast<int>(nodes_in[static_cast<std::size_t>(p)].size());
        }
    }
    int parent_units = 1;
    for (const auto& p : chain) {
      const int units = algorithms::unit_count(p);
      std::vector<int> sizes(static_cast<std::size_t>(units));
      for (int x : p) ++sizes[static_cast<std::size_t>(x)];
      s.even = s.even && units % parent_units == 0 && std::all_of(sizes.begin(), sizes.end(), [&](int z) { return z == sizes[0]; });
      s.units.push_back(std::max(1, units / parent_units));
      s.rail_inter.push_back(algorithms::refines(nodes, p));
      parent_units = units;
    }
    const std::vector<int>& leaf = chain.empty() ? std::vector<int>(nodes.size(), 0) : chain.back();
    std::map<int, int> node_of_leaf;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (!node_of_leaf.emplace(leaf[i], nodes[i]).second && node_of_leaf[leaf[i]] != nodes[i]) s.leaf_inter = true;
    return s;
  }

  algorithms::Hierarchy<Transport>& hierarchy(Scope s) {
    auto& h = hierarchies_[index(s)];
    if (!h) h = algorithms::Hierarchy<Transport>::build(transport(s).split(0, transport(s).rank()), partitions_[index(s)], true);
    return *h;
  }

  // What a call runs: the algorithm (an explicit request, else PARO_ALGO, else the model's fastest) and,
  // for paro_cc, its pipeline chunk; predicted once per call.
  struct Plan {
    Algorithm algorithm;
    std::size_t pipeline_chunk_bytes = 0;
  };

  Plan plan(Collective c, std::size_t full_bytes, Algorithm requested, Scope scope) const {
    Plan p{requested != Algorithm::automatic ? requested : overrides_[c]};
    if (p.algorithm == Algorithm::automatic) {
      const auto best = cost_.best(c, full_bytes, shape(scope));
      p = {best.algorithm, best.prediction.pipeline_chunk_bytes};
    } else if (p.algorithm == Algorithm::paro_cc) {
      p.pipeline_chunk_bytes = cost_.predict(p.algorithm, c, full_bytes, shape(scope)).pipeline_chunk_bytes;
    }
    detail::require(p.algorithm != Algorithm::native || Transport::has_native_collectives, name_of(c),
                    ": algorithm native is not available on the ", Transport::name,
                    " backend; allowed here: automatic ring tree mics_hcs paro_seq paro_cc");
    if (pipeline_chunk_) p.pipeline_chunk_bytes = pipeline_chunk_;
    return p;
  }

  algorithms::HierarchicalParams hierarchical(const Plan& plan) const {
    algorithms::HierarchicalParams p;
    p.ring = ring_;
    p.direct_max_bytes = direct_max_;
    p.overlap = plan.algorithm == Algorithm::paro_cc;
    p.concurrent = lanes_on_threads(t_);
    // Lanes that run one after the other gain nothing from a pipeline, and every piece costs its latency.
    p.pipeline_chunk_bytes = p.concurrent ? plan.pipeline_chunk_bytes : 0;
    return p;
  }

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
    constexpr std::size_t fields = 11;  // the chunking and lanes too: ranks must cut chunks alike
    const std::int64_t mine[fields] = {static_cast<std::int64_t>(c),     static_cast<std::int64_t>(s),
                                       static_cast<std::int64_t>(a),     static_cast<std::int64_t>(count),
                                       static_cast<std::int64_t>(dt),    static_cast<std::int64_t>(op),
                                       static_cast<std::int64_t>(ring_.chunk_bytes),
                                       static_cast<std::int64_t>(ring_.window),
                                       static_cast<std::int64_t>(pipeline_chunk_),
                                       static_cast<std::int64_t>(lanes_on_threads(t)),
                                       static_cast<std::int64_t>(direct_max_)};
    std::vector<std::int64_t> all(fields * static_cast<std::size_t>(t.size()));
    std::copy(mine, mine + fields, all.begin() + static_cast<std::ptrdiff_t>(fields * static_cast<std::size_t>(t.rank())));
    algorithms::bruck_all_gather_host(t, all.data(), fields, DataType::i64);
    auto describe = [&](int r) {
      const std::int64_t* f = all.data() + fields * static_cast<std::size_t>(r);
      return detail::concat(name_of(static_cast<Collective>(f[0])), " scope=", name_of(static_cast<Scope>(f[1])),
                            " algo=", name_of(static_cast<Algorithm>(f[2])), " count=", f[3], " ",
                            name_of(static_cast<DataType>(f[4])), " ", name_of(static_cast<ReduceOp>(f[5])),
                            " (PARO_RING_CHUNK=", f[6], " PARO_RING_WINDOW=", f[7], " PARO_CC_CHUNK=", f[8], " lanes=", f[9] ? "threads" : "inline",
                            " PARO_DIRECT_MAX=", f[10], ")");
    };
    for (int r = 1; r < t.size(); ++r)
      detail::require(std::equal(all.begin(), all.begin() + fields, all.begin() + static_cast<std::ptrdiff_t>(fields * static_cast<std::size_t>(r))),
                      "PARO_CHECK: the ranks of this ", name_of(s), " call disagree: rank 0 calls ", describe(0),
                      ", rank ", r, " calls ", describe(r));
  }

  // Whether paro_cc's lanes get threads of their own on this communicator (else they share the caller's).
  bool lanes_on_threads(const Transport& t) const { return lane_threads_ && t.concurrent_use(); }

  // PARO_LANES=threads (default) or inline: paro_cc overlaps its levels on one thread, through the rail's
  // hooks, even where the backend could drive them from threads (fewer threads per rank).
  static bool lane_threads_from_env() {
    const std::string lanes = env::get("PARO_LANES").value_or("threads");
    detail::require(lanes == "threads" || lanes == "inline", "PARO_LANES=", lanes, ": allowed values are threads and inline");
    return lanes == "threads";
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
