#pragma once
// The threads backend over CUDA device memory: ranks are threads of one process, buffers are device
// memory, messages are copied device to device (peer copies between GPUs) by cudaMemcpyAsync, local
// reductions run as paro's kernels. Rank r uses GPU r mod (the number of GPUs), so every algorithm's
// device data path runs on one GPU, and on several where there are.
//
//   paro::threads::run_on_devices(8, [](paro::threads::DeviceTransport t) {
//     paro::Communicator comm(std::move(t));
//     comm.all_reduce(d_send, d_recv, count, paro::ReduceOp::sum);   // d_*: device pointers
//   });

#include "paro/cuda/device_memory.cuh"
#include "paro/transport/threads.hpp"

namespace paro::threads {

using DeviceTransport = BasicTransport<cuda::DeviceMemory>;

// Like run(), with every rank's buffers on a GPU; throws paro::Error when there is none.
template <class Fn>
void run_on_devices(int n, Fn&& fn) {
  const int gpus = cuda::device_count();
  paro::detail::require(gpus > 0, "threads::run_on_devices: no usable GPU (", cuda::device_census().why_none, ")");
  cuda::enable_peer_access();
  run_with(
      n, [gpus](int rank) { return cuda::DeviceMemory(rank % gpus); }, std::forward<Fn>(fn));
}

}  // namespace paro::threads
