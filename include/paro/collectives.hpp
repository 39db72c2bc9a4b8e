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
// All ranks must call the same verbs in the same order with the same count, type, op and algorithm.

#include <cstddef>
#include <cstdint>
#include <limits>
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
#include "paro/transport/transport.hpp"

namespace paro {

struct Options {
  Algorithm algorithm = Algorithm::automatic;
};

template <class Transport>
class Communicator {
  static_assert(is_transport_v<Transport>,
                "paro::Communicator<T>: T does not model the Transport concept (see paro/transport/transport.hpp)");

 public:
  explicit Communicator(Transport transport)
      : t_(std::move(transport)),
        overrides_(AlgorithmOverrides::from_env()),
        policy_(algorithms::SelectionPolicy::from_env()),
        ring_(algorithms::RingParams::from_env()) {}

  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }
  Transport& transport() { return t_; }

  // The algorithm a verb would run: an explicit request, else PARO_ALGO, else the automatic choice.
  Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic) const {
    Algorithm a = requested != Algorithm::automatic ? requested : overrides_[c];
    if (a == Algorithm::automatic) a = policy_.choose(c, size(), full_bytes);
    detail::require(a != Algorithm::native || Transport::has_native_collectives, name_of(c),
                    ": algorithm native is not available on the ", Transport::name,
                    " backend; allowed here: automatic ring tree");
    return a;
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    const char* what = "all_reduce";
    validate_common(what, dt, op);
    const std::size_t bytes = checked_bytes(what, count, dt, 1);
    validate_buffers(what, send, bytes, recv, bytes);
    require_in_place_or_disjoint(what, send, bytes, recv, bytes, recv);
    if (count == 0) return;
    const Algorithm a = resolve(Collective::all_reduce, bytes, o.algorithm);
    log::info(t_.rank(), what, " ", name_of(a), " count=", count, " ", name_of(dt), " ", name_of(op),
              send == recv ? " in-place" : "");
    switch (a) {
      case Algorithm::ring: return algorithms::ring_all_reduce(t_, send, recv, count, dt, op, ring_);
      case Algorithm::tree: return algorithms::tree_all_reduce(t_, send, recv, count, dt, op);
      case Algorithm::native: return native([&](auto& t) { algorithms::native_all_reduce(t, send, recv, count, dt, op); });
      case Algorithm::automatic: break;
    }
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    const char* what = "all_gather";
    validate_common(what, dt, ReduceOp::sum);
    const std::size_t block = checked_bytes(what, count, dt, 1);
    const std::size_t bytes = checked_bytes(what, count, dt, size());
    validate_buffers(what, send, block, recv, bytes);
    char* mine = static_cast<char*>(recv) + static_cast<std::size_t>(rank()) * block;
    require_in_place_or_disjoint(what, send, block, recv, bytes, mine);
    if (count == 0) return;
    const Algorithm a = resolve(Collective::all_gather, bytes, o.algorithm);
    log::info(t_.rank(), what, " ", name_of(a), " count=", count, " ", name_of(dt), send == mine ? " in-place" : "");
    if (a == Algorithm::native)
      return native([&](auto& t) { algorithms::native_all_gather(t, send, recv, count, dt); });
    t_.copy(mine, send, block);
    if (a == Algorithm::ring)
      algorithms::ring_all_gather(t_, recv, algorithms::BlockLayout::uniform(size(), count), dt, ring_);
    else
      algorithms::bruck_all_gather(t_, recv, count, dt);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    const char* what = "reduce_scatter";
    validate_common(what, dt, op);
    const std::size_t block = checked_bytes(what, count, dt, 1);
    const std::size_t bytes = checked_bytes(what, count, dt, size());
    validate_buffers(what, send, bytes, recv, block);
    const char* mine = static_cast<const char*>(send) + static_cast<std::size_t>(rank()) * block;
    require_in_place_or_disjoint(what, recv, block, send, bytes, mine);
    if (count == 0) return;
    const Algorithm a = resolve(Collective::reduce_scatter, bytes, o.algorithm);
    log::info(t_.rank(), what, " ", name_of(a), " count=", count, " ", name_of(dt), " ", name_of(op),
              recv == mine ? " in-place" : "");
    switch (a) {
      case Algorithm::ring:
        return algorithms::ring_reduce_scatter(t_, send, recv, algorithms::BlockLayout::uniform(size(), count), dt,
                                               op, ring_);
      case Algorithm::tree: return algorithms::tree_reduce_scatter(t_, send, recv, count, dt, op);
      case Algorithm::native:
        return native([&](auto& t) { algorithms::native_reduce_scatter(t, send, recv, count, dt, op); });
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

  template <class F>
  void native(F&& f) {
    if constexpr (Transport::has_native_collectives) f(t_);
  }

  void validate_common(const char* what, DataType dt, ReduceOp op) const {
    detail::require(size() > 0, what, ": the communicator is empty (a split with a negative color)");
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
