#pragma once
// Memory: host scratch buffers from a caching pool, and HostMemory, the memory space of transports that
// move host memory (threads, mpi). Device memory spaces (paro/cuda/device_memory.cuh) reuse the pool with
// their own allocator.

#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

namespace detail {

// Under a simulator that models only time (bench/sim: SimGrid SMPI, which defines PARO_SIMULATED_DATA_BYTES),
// host buffers of at least that many bytes share one physical copy across the simulated ranks and nothing
// computes on them: only the simulated time of moving them counts. Smaller ones (the benchmark's own
// bookkeeping) stay real.
inline bool simulated_data(std::size_t bytes) {
#ifdef PARO_SIMULATED_DATA_BYTES
  return bytes >= PARO_SIMULATED_DATA_BYTES;
#else
  (void)bytes;
  return false;
#endif
}

inline char* host_allocate(std::size_t bytes) {
#ifdef PARO_SIMULATED_DATA_BYTES
  if (simulated_data(bytes)) return static_cast<char*>(SMPI_SHARED_MALLOC(bytes));
#endif
  return new char[bytes];
}

inline void host_free(char* data, std::size_t capacity) {
#ifdef PARO_SIMULATED_DATA_BYTES
  if (simulated_data(capacity)) return SMPI_SHARED_FREE(data);
#endif
  (void)capacity;
  delete[] data;
}

// Freed scratch buffers kept for reuse, as NCCL keeps its buffers and PyTorch its cached blocks: a large
// collective would otherwise fault in fresh pages (or call cudaMalloc) on every call. One pool per memory
// space: the host's, and one per CUDA device (paro/cuda/runtime.hpp). Allocator: char* allocate(size_t)
// and void release(char*, size_t bytes). PARO_SCRATCH_CACHE (bytes, default 1G) bounds what each pool keeps; 0 turns
// the cache off.
template <class Allocator>
class CachingPool {
 public:
  explicit CachingPool(Allocator allocator = {})
      : allocator_(std::move(allocator)), limit_(env::bytes_or("PARO_SCRATCH_CACHE", std::size_t{1} << 30)) {}
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A buffer of at least `bytes` (and at most twice that, so small requests do not pin big blocks).
  std::pair<char*, std::size_t> take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= 2 * bytes) {
        auto found = std::make_pair(it->second, it->first);
        held_ -= it->first;
        free_.erase(it);
        return found;
      }
    }
    return {allocator_.allocate(bytes), bytes};
  }

  // Simulated buffers are not kept: remaking them costs nothing, and SMPI must see them freed before the
  // simulation ends.
  void give(char* data, std::size_t capacity) {
    if (!simulated_data(capacity)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (held_ + capacity <= limit_) {
        free_.emplace(capacity, data);
        held_ += capacity;
        return;
      }
    }
    allocator_.release(data, capacity);
  }

  ~CachingPool() {
    for (auto& [capacity, data] : free_) allocator_.release(data, capacity);
  }

 private:
  Allocator allocator_;
  std::mutex mutex_;
  std::multimap<std::size_t, char*> free_;  // capacity -> buffer
  std::size_t held_ = 0;
  const std::size_t limit_;
};

struct HostAllocator {
  char* allocate(std::size_t bytes) const { return host_allocate(bytes); }
  void release(char* data, std::size_t bytes) const { host_free(data, bytes); }
};

using ScratchPool = CachingPool<HostAllocator>;

inline ScratchPool& host_pool() {
  static ScratchPool pool;
  return pool;
}

}  // namespace detail

// Scratch memory taken from a CachingPool and given back to it when destroyed.
template <class Pool>
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(Pool& pool, std::size_t bytes) : pool_(&pool) {
    if (bytes == 0) return;
    std::tie(data_, capacity_) = pool.take(bytes);
    bytes_ = bytes;
  }
  PooledBuffer(PooledBuffer&& o) noexcept
      : pool_(o.pool_),
        data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  PooledBuffer& operator=(PooledBuffer&& o) noexcept {
    if (this != &o) {
      release();
      pool_ = o.pool_;
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { release(); }

  char* data() { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  Pool* pool_ = nullptr;
  char* data_ = nullptr;
  std::size_t bytes_ = 0, capacity_ = 0;

  void release() {
    if (data_) pool_->give(data_, capacity_);
    data_ = nullptr;
  }
};

// Scratch memory on the host, for transports whose buffers live in host memory.
class HostBuffer : public PooledBuffer<detail::ScratchPool> {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes) : PooledBuffer(detail::host_pool(), bytes) {}
};

// The memory space of transports that move host memory (threads, mpi); backends inherit it. A memory
// space gives scratch buffers, local copies and reductions, and the staging to and from the host that
// tests and tools use (a no-op copy here; cudaMemcpy for device memory, paro/cuda/device_memory.cuh).
struct HostMemory {
  static HostBuffer allocate(std::size_t bytes) { return HostBuffer(bytes); }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (!detail::simulated_data(bytes)) move(dst, src, bytes);
  }
  static void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    if (!detail::simulated_data(count * size_of(dt))) host_reduce(dst, a, b, count, dt, op);
  }
  static void divide(void* buf, std::size_t count, DataType dt, int divisor) {
    if (!detail::simulated_data(count * size_of(dt))) host_divide(buf, count, dt, divisor);
  }
  // Staged host data is always real, also under a simulator (detail::simulated_data).
  static void upload(void* dst, const void* host, std::size_t bytes) { move(dst, host, bytes); }
  static void download(void* host, const void* src, std::size_t bytes) { move(host, src, bytes); }
  // The memory space of a communicator split off this one (device spaces give it its own stream).
  HostMemory for_split() const { return {}; }

 private:
  static void move(void* dst, const void* src, std::size_t bytes) {
    if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
  }
};

}  // namespace paro
