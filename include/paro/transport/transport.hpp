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
// Optional: void issue() where isend/irecv only record (a stepwise transport issues them at a wait):
// starts what is recorded. A schedule calls issue_posted(t) before it works on another communicator
// while its messages are in flight (the ring's hooks), so that they progress meanwhile.
// Optional: void abandon(const std::string& why) where a backend must be told before an error that is not
// its own leaves a wait (a decorator's check failed): it gives up this communicator's outstanding messages
// so that no peer later writes into buffers the unwinding frees, and tells its peers (threads: stops the
// world with `why`). Decorators forward it; abandon_posted(t, why) calls it where t has it.
// Optional: bool test(Request&): whether wait would return without blocking (wait then finishes the request
// and reports its errors); point-to-point messages (communicator/point_to_point.hpp) need it.
// Optional: void bind_thread() where the backend's calls depend on per-thread state (CUDA's current device):
// a Communicator's progress thread calls it before running any collective.
// With has_native_collectives, also native_all_reduce / native_all_gather / native_reduce_scatter /
// native_all_to_all taking the public verbs' arguments (the passthrough baseline).
//
// Messages between one pair of ranks with one tag are matched in the order they were posted (MPI's
// non-overtaking rule), which is what lets a schedule reuse a tag across steps.
//
// check_transport<T>() (at the bottom) names every member T lacks at compile time; paro/testing/
// transport_check.hpp checks at run time that a backend behaves as described here.

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/memory.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

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

template <class T>
using request = typename T::Request;
template <class T>
using rank = decltype(const_self<T>().rank());
template <class T>
using size = decltype(const_self<T>().size());
template <class T>
using isend = decltype(self<T>().isend(std::declval<const void*>(), std::size_t{}, 0, 0));
template <class T>
using irecv = decltype(self<T>().irecv(std::declval<void*>(), std::size_t{}, 0, 0));
template <class T>
using wait = decltype(self<T>().wait(std::declval<typename T::Request&>()));
template <class T>
using wait_all = decltype(self<T>().wait_all(std::declval<std::vector<typename T::Request>&>()));
template <class T>
using split = std::enable_if_t<std::is_same_v<decltype(self<T>().split(0, 0)), T>>;
template <class T>
using allocate = decltype(self<T>().allocate(std::size_t{}).data());
template <class T>
using copy = decltype(self<T>().copy(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T>
using reduce = decltype(self<T>().reduce(std::declval<void*>(), std::declval<const void*>(),
                                         std::declval<const void*>(), std::size_t{}, DataType{}, ReduceOp{}));
template <class T>
using divide = decltype(self<T>().divide(std::declval<void*>(), std::size_t{}, DataType{}, 0));
template <class T>
using upload = decltype(self<T>().upload(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T>
using download = decltype(self<T>().download(std::declval<void*>(), std::declval<const void*>(), std::size_t{}));
template <class T>
using concurrent_use = decltype(bool{const_self<T>().concurrent_use()});
template <class T>
using name = decltype(static_cast<const char*>(T::name));
template <class T>
using has_native_collectives = decltype(bool{T::has_native_collectives});

template <class T>
inline constexpr bool all_members =
    has<request, T>&& has<rank, T>&& has<size, T>&& has<isend, T>&& has<irecv, T>&& has<wait, T>&& has<wait_all, T>&&
        has<split, T>&& has<allocate, T>&& has<copy, T>&& has<reduce, T>&& has<divide, T>&& has<upload, T>&&
            has<download, T>&& has<concurrent_use, T>&& has<name, T>&& has<has_native_collectives, T>;

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
  static_assert(has<reduce, T>,
                "paro Transport: T has no `void reduce(void* dst, const void* a, const void* b, "
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

// The optional members, detected as the concept's members are.
namespace detail::transport_concept {
template <class T>
using bind_thread = decltype(self<T>().bind_thread());
template <class T>
using issue = decltype(self<T>().issue());
template <class T>
using abandon = decltype(self<T>().abandon(std::declval<const std::string&>()));
template <class T>
using test = decltype(bool{self<T>().test(std::declval<typename T::Request&>())});
}  // namespace detail::transport_concept

template <class T>
inline constexpr bool has_test_v = detail::transport_concept::has<detail::transport_concept::test, T>;

template <class T>
inline constexpr bool has_bind_thread_v = detail::transport_concept::has<detail::transport_concept::bind_thread, T>;

// Starts t's recorded messages, where it records them (see issue() above); otherwise they are under way.
template <class T>
void issue_posted(T& t) {
  if constexpr (detail::transport_concept::has<detail::transport_concept::issue, T>) t.issue();
}

template <class T>
inline constexpr bool has_abandon_v = detail::transport_concept::has<detail::transport_concept::abandon, T>;

// Gives up t's outstanding messages before an error of the caller's own leaves (see abandon() above).
template <class T>
void abandon_posted(T& t, const std::string& why) {
  if constexpr (has_abandon_v<T>) t.abandon(why);
}

// Whether T's buffers live in host memory (its scratch is a HostBuffer): host control data then needs
// no staging. Decorators that forward their inner transport's memory space keep the answer.
template <class T>
inline constexpr bool is_host_memory_v =
    std::is_same_v<decltype(std::declval<T&>().allocate(std::size_t{})), HostBuffer>;

}  // namespace paro
