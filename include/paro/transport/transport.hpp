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
//   void upload(void* dst, const void* host, size_t), download(void* host, const void* src, size_t)
//                                      staging between the transport's memory space and the host
//   bool concurrent_use() const        may different communicators of one rank be driven from different
//                                      threads at once (the lanes of overlapped algorithms)
//   static constexpr const char* name; static constexpr bool has_native_collectives
// Optional: static constexpr bool stepwise = true where messages progress only in matched groups (NCCL's
// grouped send/recv), so that a schedule must not post receives ahead of its current step; the
// Communicator then runs rings one whole block and one receive at a time.
// With has_native_collectives, also native_all_reduce / native_all_gather / native_reduce_scatter taking
// the public verbs' arguments (the passthrough baseline).
//
// Messages between one pair of ranks with one tag are matched in the order they were posted (MPI's
// non-overtaking rule), which is what lets a schedule reuse a tag across steps.

#include <cstddef>
#include <type_traits>
#include <utility>

#include "paro/core/memory.hpp"

namespace paro {

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

namespace detail {
template <class T, class = void>
struct is_stepwise : std::false_type {};
template <class T>
struct is_stepwise<T, std::enable_if_t<T::stepwise>> : std::true_type {};
}  // namespace detail

template <class T>
inline constexpr bool is_stepwise_v = detail::is_stepwise<T>::value;

}  // namespace paro
