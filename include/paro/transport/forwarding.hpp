#pragma once
// The base of the transport decorators (checksum, faults, paced, recording): Forwarding<Derived, Inner>
// holds the inner transport and forwards every member and trait of the Transport concept (transport.hpp)
// to it, the optional ones exactly where Inner has them, so that a decorator writes only what it changes
// and never loses a member by forgetting to copy it (as bind_thread once was: a decorated nccl transport's
// progress thread ran on the wrong device).
//
//   template <class Inner>
//   class Transport : public Forwarding<Transport<Inner>, Inner> {   // CRTP: split returns the decorator
//     using Base = Forwarding<Transport<Inner>, Inner>;
//     using Base::inner_;
//    public:
//     Transport() = default;
//     explicit Transport(Inner inner) : Base(std::move(inner)) {}
//     struct Request { ... };  isend, irecv, wait   // what it changes; name hiding replaces the base's
//   };
//
// Forwarded: Request, rank, size, isend, irecv, wait, wait_all, split (Derived(inner.split(...)): a
// decorator with state of its own overrides it), allocate (and Buffer), copy, reduce, divide, upload,
// download, concurrent_use, name, has_native_collectives, stepwise, inner(); where Inner has them:
// bind_thread, issue, abandon, shared_memory_id, and native_all_reduce / native_all_gather /
// native_reduce_scatter / native_all_to_all where the decorator also declares has_native_collectives. The memory space
// is the inner one, so is_host_memory_v and the Buffer type carry over.

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

template <class Derived, class Inner>
class Forwarding {
  static_assert(check_transport<Inner>(), "a transport decorator's Inner must model the Transport concept");

 public:
  static constexpr const char* name = Inner::name;
  static constexpr bool has_native_collectives = Inner::has_native_collectives;
  static constexpr bool stepwise = is_stepwise_v<Inner>;
  using Request = typename Inner::Request;
  using Buffer = decltype(std::declval<Inner&>().allocate(std::size_t{}));

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  bool concurrent_use() const { return inner_.concurrent_use(); }
  Inner& inner() { return inner_; }
  const Inner& inner() const { return inner_; }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) { return inner_.isend(buf, bytes, peer, tag); }
  Request irecv(void* buf, std::size_t bytes, int peer, int tag) { return inner_.irecv(buf, bytes, peer, tag); }
  void wait(Request& r) { inner_.wait(r); }
  // Through the decorator's own wait, one request after another; where the decorator waits as the inner
  // transport does (same requests, wait not overridden), the whole vector goes to the inner wait_all.
  template <class R>
  void wait_all(std::vector<R>& requests) {
    if constexpr (std::is_same_v<R, Request> && waits_as_inner<Derived>::value) {
      inner_.wait_all(requests);
    } else {
      for (auto& r : requests) derived().wait(r);
      requests.clear();
    }
  }

  Derived split(int color, int key) { return Derived(inner_.split(color, key)); }

  Buffer allocate(std::size_t bytes) { return inner_.allocate(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) { inner_.copy(dst, src, bytes); }
  void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    inner_.reduce(dst, a, b, count, dt, op);
  }
  void divide(void* buf, std::size_t count, DataType dt, int divisor) { inner_.divide(buf, count, dt, divisor); }
  void upload(void* dst, const void* host, std::size_t bytes) { inner_.upload(dst, host, bytes); }
  void download(void* host, const void* src, std::size_t bytes) { inner_.download(host, src, bytes); }

  // The optional members: each a template whose default argument fails where Inner lacks the member, so
  // that the decorator then lacks it too (has_bind_thread_v and the other detectors see through).
  template <class I = Inner, class = decltype(std::declval<I&>().bind_thread())>
  void bind_thread() {
    inner_.bind_thread();
  }
  template <class I = Inner, class = decltype(std::declval<I&>().issue())>
  void issue() {
    inner_.issue();
  }
  template <class I = Inner, class = decltype(std::declval<I&>().abandon(std::declval<const std::string&>()))>
  void abandon(const std::string& why) {
    inner_.abandon(why);
  }
  // The host identity for topology discovery (mpi: MPI_COMM_TYPE_SHARED).
  template <class I = Inner, class = decltype(std::declval<I&>().shared_memory_id())>
  int shared_memory_id() {
    return inner_.shared_memory_id();
  }

  // The passthrough baseline, unchanged by the decorator; absent where the decorator declares no native
  // collectives (recording: NCCL's rules on a host transport).
  template <class D = Derived, class I = Inner, class = std::enable_if_t<D::has_native_collectives>,
            class = decltype(std::declval<I&>().native_all_reduce(nullptr, nullptr, std::size_t{}, DataType{},
                                                                  ReduceOp{}))>
  void native_all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    inner_.native_all_reduce(send, recv, count, dt, op);
  }
  template <class D = Derived, class I = Inner, class = std::enable_if_t<D::has_native_collectives>,
            class = decltype(std::declval<I&>().native_all_gather(nullptr, nullptr, std::size_t{}, DataType{}))>
  void native_all_gather(const void* send, void* recv, std::size_t count, DataType dt) {
    inner_.native_all_gather(send, recv, count, dt);
  }
  template <class D = Derived, class I = Inner, class = std::enable_if_t<D::has_native_collectives>,
            class = decltype(std::declval<I&>().native_reduce_scatter(nullptr, nullptr, std::size_t{}, DataType{},
                                                                      ReduceOp{}))>
  void native_reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    inner_.native_reduce_scatter(send, recv, count, dt, op);
  }
  template <class D = Derived, class I = Inner, class = std::enable_if_t<D::has_native_collectives>,
            class = decltype(std::declval<I&>().native_all_to_all(nullptr, nullptr, std::size_t{}, DataType{}))>
  void native_all_to_all(const void* send, void* recv, std::size_t count, DataType dt) {
    inner_.native_all_to_all(send, recv, count, dt);
  }

 protected:
  Forwarding() = default;
  explicit Forwarding(Inner inner) : inner_(std::move(inner)) {}

  Inner inner_;

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }

  // Whether D's wait is this base's (D neither overrides nor overloads it).
  template <class D, class = void>
  struct waits_as_inner : std::false_type {};
  template <class D>
  struct waits_as_inner<D, std::enable_if_t<std::is_same_v<decltype(&D::wait), void (Forwarding::*)(Request&)>>>
      : std::true_type {};
};

}  // namespace paro
