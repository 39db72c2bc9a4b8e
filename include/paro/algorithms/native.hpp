#pragma once
// The `native` baseline: the backend's own collective (MPI_Allreduce, ...), for transports that have one.

#include <cstddef>

#include "paro/core/dtype.hpp"
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

}  // namespace paro::algorithms
