#pragma once
// One number per rank reduced over every rank of a communicator: times averaged as nccl-tests reports
// them, error counts summed, flags combined. The value is staged through the transport's memory space,
// so that these work on device backends too.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "paro/communicator/communicator.hpp"

namespace paro {

// v reduced with op over every rank of comm (collective); every rank gets the result.
template <class Transport, class Registry, class V>
V reduce_over_ranks(Communicator<Transport, Registry>& comm, V v, ReduceOp op) {
  Transport& t = comm.transport();
  auto staged = t.allocate(sizeof v);
  t.upload(staged.data(), &v, sizeof v);
  comm.all_reduce(staged.data(), staged.data(), 1, data_type_v<V>, op, {Algorithm::tree});
  t.download(&v, staged.data(), sizeof v);
  return v;
}

template <class Transport, class Registry>
double mean_over_ranks(Communicator<Transport, Registry>& comm, double v) {
  return reduce_over_ranks(comm, v, ReduceOp::sum) / comm.size();
}

// Counts travel as int64, a type every backend reduces.
template <class Transport, class Registry>
std::size_t sum_over_ranks(Communicator<Transport, Registry>& comm, std::size_t v) {
  return static_cast<std::size_t>(reduce_over_ranks(comm, static_cast<std::int64_t>(v), ReduceOp::sum));
}

template <class Transport, class Registry>
bool any_rank(Communicator<Transport, Registry>& comm, bool flag) {
  return reduce_over_ranks(comm, std::int32_t{flag ? 1 : 0}, ReduceOp::max) != 0;
}

// Runs this rank's part of a collective step whose failure on one rank (a file that cannot be written)
// must not leave the others waiting: any rank's exception becomes an error on every rank (collective); the
// failing rank's keeps its kind.
template <class Transport, class Registry, class Body>
void on_every_rank_or_none(Communicator<Transport, Registry>& comm, const char* what, Body&& body) {
  std::string error;
  ErrorKind kind = ErrorKind::usage;
  try {
    body();
  } catch (const Error& e) {
    error = e.message();
    kind = e.kind();
  } catch (const std::exception& e) {  // std::filesystem, std::bad_alloc, ...
    error = detail::concat(what, ": ", e.what());
    kind = ErrorKind::backend;
  }
  if (any_rank(comm, !error.empty()))
    throw_error(error.empty() ? ErrorKind::usage : kind,
                error.empty() ? detail::concat(what, ": another rank failed (its error says why)") : error);
}

}  // namespace paro
