#pragma once
// The `native` baseline: the backend's own collective (MPI_Allreduce, ..., MPI_Alltoall), for transports
// that have one.

#include <cstddef>
#include <type_traits>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro::algorithms {

template <class T>
inline constexpr bool has_native_v = T::has_native_collectives;

template <class T>
void native_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op) {
  static_assert(has_native_v<T>, "paro: this transport has no native collectives (algorithm native needs e.g. mpi)");
  t.native_all_reduce(in, out, count, dt, op);
}

template <class T>
void native_all_gather(T& t, const void* in, void* out, std::size_t count, DataType dt) {
  static_assert(has_native_v<T>, "paro: this transport has no native collectives (algorithm native needs e.g. mpi)");
  t.native_all_gather(in, out, count, dt);
}

template <class T>
void native_reduce_scatter(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op) {
  static_assert(has_native_v<T>, "paro: this transport has no native collectives (algorithm native needs e.g. mpi)");
  t.native_reduce_scatter(in, out, count, dt, op);
}

// A transport's own all_to_all, where it has one (MPI; NCCL from 2.28).
template <class T, class = void>
struct has_native_all_to_all : std::false_type {};
template <class T>
struct has_native_all_to_all<
    T, std::void_t<decltype(std::declval<T&>().native_all_to_all(nullptr, nullptr, std::size_t{}, DataType{}))>>
    : std::true_type {};

template <class T>
void native_all_to_all(T& t, const void* in, void* out, std::size_t count, DataType dt) {
  if constexpr (has_native_all_to_all<T>::value)
    t.native_all_to_all(in, out, count, dt);
  else
    throw UsageError(detail::concat("all_to_all: algorithm native; the ", T::name,
                                    " backend has no all_to_all of its own here (NCCL's needs NCCL 2.28 or later)"));
}

// The descriptor (registry.hpp). Not modelled (predict says 0), so automatic never picks it; the
// Communicator rejects it on backends without native collectives before a schedule runs.
struct Native {
  static constexpr Algorithm id = Algorithm::native;
  static constexpr const char* name = "native";
  static constexpr Family family = Family::native;
  static Prediction predict(const CostModel&, Collective, double, const CostShape&) { return {}; }
  template <class Ctx>
  static void all_reduce(Ctx& x, const Call& c) {
    if constexpr (has_native_v<std::decay_t<decltype(x.comm())>>)
      native_all_reduce(x.comm(), c.send, c.recv, c.count, c.dt, c.op);
  }
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    if constexpr (has_native_v<std::decay_t<decltype(x.comm())>>)
      native_all_gather(x.comm(), c.send, c.recv, c.count, c.dt);
  }
  template <class Ctx>
  static void reduce_scatter(Ctx& x, const Call& c) {
    if constexpr (has_native_v<std::decay_t<decltype(x.comm())>>)
      native_reduce_scatter(x.comm(), c.send, c.recv, c.count, c.dt, c.op);
  }
  template <class Ctx>
  static void all_to_all(Ctx& x, const Call& c) {
    if constexpr (has_native_v<std::decay_t<decltype(x.comm())>>)
      native_all_to_all(x.comm(), c.send, c.recv, c.count, c.dt);
  }
};

}  // namespace paro::algorithms
