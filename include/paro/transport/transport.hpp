#pragma once
// The Transport concept: what an algorithm may ask of a backend. Backends model it; algorithms are
// templates over it and never name a backend's own types (MPI_Comm, ncclComm_t, ...).
//
//   int  rank() const, size() const
//   Request isend(const void* buf, size_t bytes, int peer, int tag)   nonblocking; buf stays valid until done
//   Request irecv(void* buf, size_t bytes, int peer, int tag)         sizes must match the send exactly
//   void wait(Request&), wait_all(std::vector<Request>&)              throw paro::Error on failure or timeout
//   T    split(int color, int key)                                    collective; members ordered by (key, rank)
//   Buffer allocate(size_t bytes)                                      scratch in the transport's memory space
//   void copy(void* dst, const void* src, size_t bytes)
//   void reduce(void* dst, const void* a, const void* b, size_t count, DataType, ReduceOp)   dst = a op b
//   void divide(void* buf, size_t count, DataType, int divisor)       the last step of avg
//   bool concurrent_use() const        may different communicators of one rank be driven from different
//                                      threads at once (the lanes of overlapped algorithms)
//   static constexpr const char* name; static constexpr bool has_native_collectives
// With has_native_collectives, also native_all_reduce / native_all_gather / native_reduce_scatter taking
// the public verbs' arguments (the passthrough baseline).
//
// Messages between one pair of ranks with one tag are matched in the order they were posted (MPI's
// non-overtaking rule), which is what lets a schedule reuse a tag across steps.

#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/dtype.hpp"
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
// collective would otherwise fault in fresh pages on every call. PARO_SCRATCH_CACHE (bytes, default 1G)
// bounds what is kept; 0 turns the cache off.
class ScratchPool {
 public:
  static ScratchPool& instance() {
    static ScratchPool pool(env::bytes_or("PARO_SCRATCH_CACHE", std::size_t{1} << 30));
    return pool;
  }

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
    return {host_allocate(bytes), bytes};
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
    host_free(data, capacity);
  }

  ~ScratchPool() {
    for (auto& [capacity, data] : free_) host_free(data, capacity);
  }

 private:
  explicit ScratchPool(std::size_t limit) : limit_(limit) {}
  std::mutex mutex_;
  std::multimap<std::size_t, char*> free_;  // capacity -> buffer
  std::size_t held_ = 0;
  const std::size_t limit_;
};

}  // namespace detail

// Scratch memory on the host, for transports whose buffers live in host memory; reused through the pool.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes) {
    if (bytes == 0) return;
    std::tie(data_, capacity_) = detail::ScratchPool::instance().take(bytes);
    bytes_ = bytes;
  }
  HostBuffer(HostBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { release(); }

  char* data() { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  char* data_ = nullptr;
  std::size_t bytes_ = 0, capacity_ = 0;

  void release() {
    if (data_) detail::ScratchPool::instance().give(data_, capacity_);
    data_ = nullptr;
  }
};

// Local memory operations of transports that move host memory (threads, mpi); backends inherit them.
struct HostMemory {
  static HostBuffer allocate(std::size_t bytes) { return HostBuffer(bytes); }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes != 0 && dst != src && !detail::simulated_data(bytes)) std::memmove(dst, src, bytes);
  }
  static void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    if (!detail::simulated_data(count * size_of(dt))) host_reduce(dst, a, b, count, dt, op);
  }
  static void divide(void* buf, std::size_t count, DataType dt, int divisor) {
    if (!detail::simulated_data(count * size_of(dt))) host_divide(buf, count, dt, divisor);
  }
};

namespace detail {

template <class T, class = void>
struct is_transport : std::false_type {};

template <class T>
struct is_transport<
    T, std::void_t<decltype(std::declval<const T&>().rank()), decltype(std::declval<const T&>().size()),
                   decltype(std::declval<T&>().isend(std::declval<const void*>(), std::size_t{}, 0, 0)),
                   decltype(std::declval<T&>().irecv(std::declval<void*>(), std::size_t{}, 0, 0)),
                   decltype(std::declval<T&>().split(0, 0)),
                   decltype(std::declval<T&>().allocate(std::size_t{})),
                   decltype(std::declval<const T&>().concurrent_use()),
                   decltype(T::has_native_collectives), decltype(T::name)>> : std::true_type {};

}  // namespace detail

template <class T>
inline constexpr bool is_transport_v = detail::is_transport<T>::value;

}  // namespace paro
