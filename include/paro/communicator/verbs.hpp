#pragma once
// The verbs named after their collective, and the typed forms of every verb (the data type follows from
// the element type T): a base of the Communicator and of AnyCommunicator, which give collective(),
// icollective(), broadcast(), ibroadcast(), all_to_allv() and iall_to_allv() (communicator.hpp).

#include <cstddef>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/communicator/blocks.hpp"
#include "paro/communicator/options.hpp"
#include "paro/communicator/progress.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

template <class Derived>
class Verbs {
 public:
  // recv = send reduced over the scope's ranks, element by element (count elements each; in place when
  // send == recv). Errors: UsageError for bad arguments or an algorithm this backend or collective does not
  // have; TimeoutError / PeerFailure / BackendError when the communication fails.
  void all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    self().collective(Collective::all_reduce, send, recv, count, dt, op, std::move(o));
  }
  // recv = every rank's send (count elements each) in rank order; in place when send == recv + rank*count.
  // Errors as all_reduce.
  void all_gather(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    self().collective(Collective::all_gather, send, recv, count, dt, ReduceOp::sum, std::move(o));
  }
  // recv = block rank() of send (size()*count elements) reduced over the scope's ranks; in place when
  // recv == send + rank*count. Errors as all_reduce.
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    self().collective(Collective::reduce_scatter, send, recv, count, dt, op, std::move(o));
  }
  // Block j of send (count elements; send and recv hold size()*count) goes to rank j, where it becomes
  // block rank(); in place when send == recv. Errors as all_reduce.
  void all_to_all(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    self().collective(Collective::all_to_all, send, recv, count, dt, ReduceOp::sum, std::move(o));
  }

  // Nonblocking forms (progress.hpp): the arguments are checked now (a UsageError is thrown here); the
  // collective runs on the communicator's progress thread after everything issued before it, and the Request
  // reports its completion and its error. The buffers belong to the collective until the request completes.
  // Every rank must issue the same collectives in the same order, blocking or not.
  Request iall_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    return self().icollective(Collective::all_reduce, send, recv, count, dt, op, std::move(o));
  }
  Request iall_gather(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    return self().icollective(Collective::all_gather, send, recv, count, dt, ReduceOp::sum, std::move(o));
  }
  Request ireduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o = {}) {
    return self().icollective(Collective::reduce_scatter, send, recv, count, dt, op, std::move(o));
  }
  Request iall_to_all(const void* send, void* recv, std::size_t count, DataType dt, Options o = {}) {
    return self().icollective(Collective::all_to_all, send, recv, count, dt, ReduceOp::sum, std::move(o));
  }

  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    all_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, std::move(o));
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count, Options o = {}) {
    all_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, std::move(o));
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    reduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, std::move(o));
  }
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, Options o = {}) {
    all_to_all(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, std::move(o));
  }
  template <class T>
  void all_to_allv(const T* send, const Blocks& send_blocks, T* recv, const Blocks& recv_blocks, Options o = {}) {
    self().all_to_allv(static_cast<const void*>(send), send_blocks, static_cast<void*>(recv), recv_blocks,
                       data_type_v<T>, std::move(o));
  }
  template <class T>
  void broadcast(T* buf, std::size_t count, int root, Options o = {}) {
    self().broadcast(static_cast<void*>(buf), count, data_type_v<T>, root, std::move(o));
  }
  template <class T>
  Request iall_reduce(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    return iall_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op,
                       std::move(o));
  }
  template <class T>
  Request iall_gather(const T* send, T* recv, std::size_t count, Options o = {}) {
    return iall_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, std::move(o));
  }
  template <class T>
  Request ireduce_scatter(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    return ireduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op,
                           std::move(o));
  }
  template <class T>
  Request iall_to_all(const T* send, T* recv, std::size_t count, Options o = {}) {
    return iall_to_all(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, std::move(o));
  }
  template <class T>
  Request iall_to_allv(const T* send, const Blocks& send_blocks, T* recv, const Blocks& recv_blocks, Options o = {}) {
    return self().iall_to_allv(static_cast<const void*>(send), send_blocks, static_cast<void*>(recv), recv_blocks,
                               data_type_v<T>, std::move(o));
  }
  template <class T>
  Request ibroadcast(T* buf, std::size_t count, int root, Options o = {}) {
    return self().ibroadcast(static_cast<void*>(buf), count, data_type_v<T>, root, std::move(o));
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace paro
