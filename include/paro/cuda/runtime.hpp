#pragma once
// The CUDA runtime as paro uses it: errors as paro::Error naming the call, whether a GPU is usable,
// streams and events with owners, device scratch through a cache per device, and waits that become an
// error after PARO_TIMEOUT instead of hanging. Plain C++ over cuda_runtime.h (link CUDA::cudart, or use
// the paro::cuda CMake component); the kernels are in kernels.cuh.

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/memory.hpp"

namespace paro::cuda {

// Throws paro::Error "<what> failed: <CUDA's name and text>" unless rc is cudaSuccess.
inline void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  throw BackendError(paro::detail::concat(what, " failed: ", cudaGetErrorName(rc), ": ", cudaGetErrorString(rc)));
}

// The number of usable GPUs, 0 where there is none or no driver; asked once per process. why_none()
// says what CUDA answered when there is none (tests print it when they skip).
struct DeviceCensus {
  int count = 0;
  std::string why_none;
};

inline const DeviceCensus& device_census() {
  static const DeviceCensus census = [] {
    DeviceCensus c;
    const cudaError_t rc = cudaGetDeviceCount(&c.count);
    if (rc != cudaSuccess) {
      c.count = 0;
      c.why_none = paro::detail::concat("cudaGetDeviceCount: ", cudaGetErrorName(rc), ": ", cudaGetErrorString(rc));
      cudaGetLastError();  // clear the sticky error so later calls report their own
    } else if (c.count == 0) {
      c.why_none = "cudaGetDeviceCount found no device";
    }
    return c;
  }();
  return census;
}

inline int device_count() { return device_census().count; }

inline void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

// Lets every GPU of this process read and write every other's memory where the hardware allows (NVLink,
// PCIe peer-to-peer), once per process, so that device-to-device copies between ranks on different GPUs go
// straight instead of through host memory. Pairs without peer access keep the staged path.
inline void enable_peer_access() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int gpus = device_count();
    for (int a = 0; a < gpus; ++a)
      for (int b = 0; b < gpus; ++b) {
        int can = 0;
        if (a == b || cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can) continue;
        set_device(a);
        const cudaError_t rc = cudaDeviceEnablePeerAccess(b, 0);
        if (rc == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();  // enabled earlier by the program: fine
        else
          check(rc, "cudaDeviceEnablePeerAccess");
      }
  });
}

class Stream {
 public:
  explicit Stream(int device) : device_(device) {
    set_device(device);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// Timing off: events only mark completion, which is cheaper.
class Event {
 public:
  explicit Event(int device) {
    set_device(device);
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(event_); }
  void record(cudaStream_t s) { check(cudaEventRecord(event_, s), "cudaEventRecord"); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Polls ev until it has completed. every_poll() may throw (the NCCL backend checks its communicator
// there); after `timeout` seconds the wait becomes paro::Error naming `what`.
inline void wait_event(const Event& ev, double timeout, const std::string& what,
                       const std::function<void()>& every_poll = {}) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (unsigned spins = 0;; ++spins) {
    const cudaError_t rc = cudaEventQuery(ev.get());
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) check(rc, "cudaEventQuery");
    if (every_poll) every_poll();
    if ((spins & 255u) == 255u) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError(paro::detail::concat("timed out after ", timeout, " s waiting for ", what,
                                                " on the GPU; a peer is stuck or did not enter the same collective "
                                                "(PARO_TIMEOUT sets the limit)"));
      std::this_thread::yield();
    }
  }
}

// Options::inputs_ready for inputs that GPU work on `stream` is still producing: an event is recorded on the
// stream now, at the call, and the thread that runs the collective waits for it (bounded by PARO_TIMEOUT)
// before touching the buffers. paro's own streams are non-blocking, so without it a collective issued right
// after the kernel that writes its input could read unfinished data.
inline std::function<void()> after_stream(cudaStream_t stream) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  auto recorded = std::make_shared<Event>(device);
  recorded->record(stream);
  const double timeout = env::timeout_seconds();
  return [recorded, timeout] {
    wait_event(*recorded, timeout, "the caller's stream work that the collective's inputs come from");
  };
}

namespace detail {

struct DeviceAllocator {
  int device = 0;
  char* allocate(std::size_t bytes) const {
    set_device(device);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), paro::detail::concat("cudaMalloc of ", bytes, " bytes").c_str());
    return static_cast<char*>(p);
  }
  void release(char* data, std::size_t) const {
    cudaSetDevice(device);
    cudaFree(data);  // errors ignored: at exit the driver may already be gone
  }
};

using DevicePool = paro::detail::CachingPool<DeviceAllocator>;

// One cache per device, kept for the life of the process.
inline DevicePool& device_pool(int device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<DevicePool>> pools;
  std::lock_guard<std::mutex> lock(mutex);
  if (pools.empty()) pools.resize(static_cast<std::size_t>(std::max(1, device_count())));
  paro::detail::require(device >= 0 && device < static_cast<int>(pools.size()), "CUDA device ", device,
                        " does not exist; this machine has ", device_count());
  auto& pool = pools[static_cast<std::size_t>(device)];
  if (!pool) pool = std::make_unique<DevicePool>(DeviceAllocator{device});
  return *pool;
}

}  // namespace detail

// Device scratch memory from the device's cache.
class DeviceBuffer : public PooledBuffer<detail::DevicePool> {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes) : PooledBuffer(detail::device_pool(device), bytes) {}
};

}  // namespace paro::cuda
