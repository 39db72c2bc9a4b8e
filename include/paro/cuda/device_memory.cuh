#pragma once
// DeviceMemory: the CUDA device memory space for transports (the threads backend over GPUs, the NCCL
// backend's local steps). Every communicator has its own non-blocking stream on its device; a split gets a
// fresh one, so the lanes of an overlapped schedule (one sub-communicator each, driven from their own
// threads) run on different streams at once. Each local step (copy, reduce, divide, staging) is enqueued
// on that stream and returns when it is done, so a lane may hand its result to another lane (another
// stream) through the host; the wait is bounded by PARO_TIMEOUT.

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/cuda/kernels.cuh"
#include "paro/cuda/runtime.hpp"

namespace paro::cuda {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(int device)
      : stream_(std::make_shared<Stream>(device)),
        done_(std::make_shared<Event>(device)),
        timeout_(env::timeout_seconds()) {}

  int device() const { return stream_->device(); }
  cudaStream_t stream() const { return stream_->get(); }

  DeviceBuffer allocate(std::size_t bytes) const { return DeviceBuffer(device(), bytes); }

  // Between any two of this process's device buffers (peer copies between GPUs included), or host memory.
  void copy(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0 || dst == src) return;
    set_device(device());
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()), "cudaMemcpyAsync");
    finish("a device copy");
  }
  void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) const {
    set_device(device());
    reduce_async(dst, a, b, count, dt, op, stream());
    finish("a reduction kernel");
  }
  void divide(void* buf, std::size_t count, DataType dt, int divisor) const {
    set_device(device());
    divide_async(buf, count, dt, divisor, stream());
    finish("a divide kernel");
  }
  void upload(void* dst, const void* host, std::size_t bytes) const { copy(dst, host, bytes); }
  void download(void* host, const void* src, std::size_t bytes) const { copy(host, src, bytes); }

  // A synchronous copy outside the stream (cudaMemcpy; unified addressing finds the devices), for staging
  // that any thread may do while others drive the stream.
  void stage(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0 || dst == src) return;
    cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }

  // A split communicator: same device, a stream of its own.
  DeviceMemory for_split() const { return DeviceMemory(device()); }

  // Blocks until everything enqueued on the stream so far is done, or throws after PARO_TIMEOUT.
  void finish(const char* what) const {
    done_->record(stream());
    wait_event(*done_, timeout_, what);
  }

 private:
  std::shared_ptr<Stream> stream_;
  std::shared_ptr<Event> done_;
  double timeout_ = 300.0;
};

}  // namespace paro::cuda
