#pragma once
// The Transport concept: what an algorithm may ask of a backend. Backends model it; algorithms are
// templates over it and never name a backend's own types (MPI_Comm, ncclComm_t, ...).
//
//   struct Request                                                   what isend/irecv return; movable
//   int  rank() const, size() const
//   Request isend(const void* buf, size_t bytes, int peer, int tag)   nonblocking; buf stays valid until done
//   Request irecv(void* buf, size_t bytes, int peer, int tag)         sizes must match the send exactly
//   void wait(Request&), wait_all(std::vector<Request>&)              throw paro::Error on failure or timeout;
//                                                                      wait_all leaves the vector empty
//   T    split(int color, int key)                                    collective; members ordered by (key, rank);
//                                                                      a negative color gives an empty T (size 0)
//   Buffer allocate(size_t bytes)                                      scratch in the transport's memory space
//   void copy(void* dst, const void* src, size_t bytes)
//   void reduce(void* dst, const void* a, const void* b, size_t count, DataType, ReduceOp)   dst = a op b
//   void divide(void* buf, size_t count, DataType, int divisor)       the last step of avg
//   void upload(void* dst, const void* host, size_t), download(void* host, const void* src, size_t)
//                                      staging between the transport's memory space and the host
//   bool concurrent_use() const        may different communicators of one rank be driven from different
//                                      threads at once (the lanes of overlapped algorithms)
//   static constexpr const char* name; static constexpr bool has_native_collectives
// Optional: static constexpr bool stepwise = true where messages progress only in matched groups (NCCL's
// grouped send/recv), so that a schedule must not post receives ahead of its current step; the
// Communicator then runs rings one whole block and one receive at a time. A stepwise transport may ignore
// tags (NCCL does): its messages between a pair match in posting order whatever their tags.
// With has_native_collectives, also native_all_reduce / native_all_gather / native_reduce_scatter taking
// the public verbs' arguments (the passthrough baseline).
//
// Messages between one pair of ranks with one tag are matched in the order they were posted (MPI's
// non-overtaking rule), which is what lets a schedule reuse a tag across steps.
//
// check_transport<T>() (at the bottom) names every member T lacks at compile time; paro/testing/
// transport_check.hpp checks at run time that a backend behaves as described here.

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
      : pool_(o.pool_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
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

// --- The concept, checked member by member -------------------------------------------------------------
// One detector per member, so that a backend missing one is told which: Communicator and the decorators
// call check_transport<T>(), which fails with one static_assert per missing member.

namespace detail::transport_concept {

template <class Void, template <class> class Member, class T>
struct detect : std::false_type {};
template <template <class> class Member, class T>
struct detect<std::void_t<Member<T>>, Member, T> : std::true_type {};
template <template <class> class Member, class T>
inline constexpr bool has = detect<void, Member, T>::value;

// A T in the unevaluated expressions below.
template <class T>
T& self();
template <class T>
const T& const_self();

template <class T> using request = typename T::Request;
template <class T> using rank = decltype(const_self<T>().rank());
template <class T> using size = decltype(const_self<T>().size());
template <class T> using isend = decltype(self<T>().isend(std::declval<const void*>(), std::size_t{}, 0, 0));
template <class T> using irecv = decltype(self<T>().irecv(std::declval<void*>(), std::size_t{}, 0, 0));
template <class T> using wait = decltype(self<T>().wait(std::declval<typename T::Request&>()));
template <class T> using wait_all = decltype(self<T>().wait_all(std::declval<std::vector<typename T::Request>&>()));
template <class T> using split = std::enable_if_t<std::is_same_v<decltype(self<T>().split(0, 0)), T>>;
template <class T> using allocate = decltype(self<T>().allocate(std::size_t{}).data());
template <class T>
using copy = decltype(self<T>().copy(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T>
using reduce = decltype(self<T>().reduce(std::declval<void*>(), std::declval<const void*>(),
                                         std::declval<const void*>(), std::size_t{}, DataType{}, ReduceOp{}));
template <class T> using divide = decltype(self<T>().divide(std::declval<void*>(), std::size_t{}, DataType{}, 0));
template <class T>
using upload = decltype(self<T>().upload(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T>
using download = decltype(self<T>().download(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T> using concurrent_use = decltype(bool{const_self<T>().concurrent_use()});
template <class T> using name = decltype(static_cast<const char*>(T::name));
template <class T> using has_native_collectives = decltype(bool{T::has_native_collectives});

template <class T>
inline constexpr bool all_members = has<request, T> && has<rank, T> && has<size, T> && has<isend, T> &&
                                    has<irecv, T> && has<wait, T> && has<wait_all, T> && has<split, T> &&
                                    has<allocate, T> && has<copy, T> && has<reduce, T> && has<divide, T> &&
                                    has<upload, T> && has<download, T> && has<concurrent_use, T> &&
                                    has<name, T> && has<has_native_collectives, T>;

template <class T>
constexpr bool check() {
  static_assert(has<request, T>, "paro Transport: T has no nested type `Request` (what isend and irecv return)");
  static_assert(has<rank, T>, "paro Transport: T has no `int rank() const`");
  static_assert(has<size, T>, "paro Transport: T has no `int size() const`");
  static_assert(has<isend, T>, "paro Transport: T has no `Request isend(const void*, size_t, int peer, int tag)`");
  static_assert(has<irecv, T>, "paro Transport: T has no `Request irecv(void*, size_t, int peer, int tag)`");
  static_assert(has<wait, T>, "paro Transport: T has no `void wait(Request&)`");
  static_assert(has<wait_all, T>, "paro Transport: T has no `void wait_all(std::vector<Request>&)`");
  static_assert(has<split, T>, "paro Transport: T has no `T split(int color, int key)` returning T");
  static_assert(has<allocate, T>, "paro Transport: T has no `Buffer allocate(size_t)` with `Buffer::data()`");
  static_assert(has<copy, T>, "paro Transport: T has no `void copy(void* dst, const void* src, size_t)`");
  static_assert(has<reduce, T>, "paro Transport: T has no `void reduce(void* dst, const void* a, const void* b, "
                                "size_t count, DataType, ReduceOp)`");
  static_assert(has<divide, T>, "paro Transport: T has no `void divide(void* buf, size_t count, DataType, int)`");
  static_assert(has<upload, T>, "paro Transport: T has no `void upload(void* dst, const void* host, size_t)`");
  static_assert(has<download, T>, "paro Transport: T has no `void download(void* host, const void* src, size_t)`");
  static_assert(has<concurrent_use, T>, "paro Transport: T has no `bool concurrent_use() const`");
  static_assert(has<name, T>, "paro Transport: T has no `static constexpr const char* name`");
  static_assert(has<has_native_collectives, T>,
                "paro Transport: T has no `static constexpr bool has_native_collectives`");
  return all_members<T>;
}

}  // namespace detail::transport_concept

template <class T>
inline constexpr bool is_transport_v = detail::transport_concept::all_members<T>;

// True for a transport; otherwise a compile error that names each member T lacks.
template <class T>
constexpr bool check_transport() {
  return detail::transport_concept::check<T>();
}

namespace detail {
template <class T, class = void>
struct is_stepwise : std::false_type {};
template <class T>
struct is_stepwise<T, std::enable_if_t<T::stepwise>> : std::true_type {};
}  // namespace detail

template <class T>
inline constexpr bool is_stepwise_v = detail::is_stepwise<T>::value;

// Whether T's buffers live in host memory (its scratch is a HostBuffer): host control data then needs
// no staging. Decorators that forward their inner transport's memory space keep the answer.
template <class T>
inline constexpr bool is_host_memory_v =
    std::is_same_v<decltype(std::declval<T&>().allocate(std::size_t{})), HostBuffer>;

}  // namespace paro
