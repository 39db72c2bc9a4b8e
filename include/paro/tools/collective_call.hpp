#pragma once
// A collective named by value (Collective::all_gather, ...) rather than by verb, and the buffers one rank
// gives it: for code that loops over collectives, such as calibration, benchmarks and checks.

#include <cstddef>

#include "paro/communicator/communicator.hpp"

namespace paro {

// One rank's buffers for a collective of `count` elements (the per-rank block; the whole buffer for
// all-reduce) over n ranks: element counts, and where send and recv sit in the single buffer of an
// in-place call (paro's in-place conventions).
struct BufferShape {
  std::size_t in, out, full;
  std::size_t send_at, recv_at;  // in place: offsets into the `full`-element buffer
  std::size_t first_input;       // global index of the rank's first input element
};

inline BufferShape buffer_shape(Collective c, std::size_t count, int n, int r) {
  const std::size_t block = count, mine = static_cast<std::size_t>(r) * block;
  const std::size_t all = block * static_cast<std::size_t>(n);
  switch (c) {
    case Collective::all_reduce: return {count, count, count, 0, 0, 0};
    case Collective::all_gather: return {block, all, all, mine, 0, mine};
    case Collective::reduce_scatter: return {all, block, all, 0, mine, 0};
  }
  throw UsageError("invalid Collective");
}

// Calls collective c through the public verbs.
template <class Comm>
void call_collective(Comm& comm, Collective c, const void* send, void* recv, std::size_t count, DataType dt,
                     ReduceOp op, Options o) {
  switch (c) {
    case Collective::all_reduce: return comm.all_reduce(send, recv, count, dt, op, o);
    case Collective::all_gather: return comm.all_gather(send, recv, count, dt, o);
    case Collective::reduce_scatter: return comm.reduce_scatter(send, recv, count, dt, op, o);
  }
}

// Starts collective c through the nonblocking verbs.
template <class Comm>
Request start_collective(Comm& comm, Collective c, const void* send, void* recv, std::size_t count, DataType dt,
                         ReduceOp op, Options o) {
  switch (c) {
    case Collective::all_reduce: return comm.iall_reduce(send, recv, count, dt, op, o);
    case Collective::all_gather: return comm.iall_gather(send, recv, count, dt, o);
    case Collective::reduce_scatter: return comm.ireduce_scatter(send, recv, count, dt, op, o);
  }
  throw UsageError("invalid Collective");
}

}  // namespace paro
