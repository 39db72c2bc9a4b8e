#pragma once
// The verbs' typed forms, where the data type follows from the element type T: a base of the Communicator
// (communicator.hpp), which calls its untyped verbs.

#include <cstddef>

#include "paro/communicator/options.hpp"
#include "paro/communicator/progress.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

template <class Derived>
class TypedVerbs {
 public:
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    self().all_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, o);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count, Options o = {}) {
    self().all_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, o);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    self().reduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, o);
  }
  template <class T>
  void broadcast(T* buf, std::size_t count, int root, Options o = {}) {
    self().broadcast(static_cast<void*>(buf), count, data_type_v<T>, root, o);
  }
  template <class T>
  Request iall_reduce(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    return self().iall_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op, o);
  }
  template <class T>
  Request iall_gather(const T* send, T* recv, std::size_t count, Options o = {}) {
    return self().iall_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, o);
  }
  template <class T>
  Request ireduce_scatter(const T* send, T* recv, std::size_t count, ReduceOp op, Options o = {}) {
    return self().ireduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), count, data_type_v<T>, op,
                                  o);
  }
  template <class T>
  Request ibroadcast(T* buf, std::size_t count, int root, Options o = {}) {
    return self().ibroadcast(static_cast<void*>(buf), count, data_type_v<T>, root, o);
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace paro
