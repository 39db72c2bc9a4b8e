#pragma once
// A verb's call once it is checked (and, for the registry's collectives, planned): a job the Communicator's
// progress engine runs now or later, on whichever thread it picks (progress.hpp); and what the algorithm's
// schedules see while it runs. Comm is the Communicator that made it and runs it (Comm::execute).

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/all_to_all.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/communicator/planner.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

template <class Comm>
struct CollectiveJob {
  Comm* self;
  Collective collective;
  Scope scope;
  typename Comm::Plan plan;
  algorithms::Call call;
  bool in_place;
  std::function<void()> inputs_ready;  // Options::inputs_ready
  void operator()() const { self->execute(*this); }
  // "all_reduce ring global count=... float sum in-place": for logs and errors, formatted only there.
  friend std::ostream& operator<<(std::ostream& out, const CollectiveJob& j) {
    out << Comm::name_of(j.collective) << " " << Comm::name_of(j.plan.algorithm) << " " << paro::name_of(j.scope)
        << " count=" << j.call.count << " " << paro::name_of(j.call.dt);
    if (Comm::Collectives::reduces(j.collective)) out << " " << paro::name_of(j.call.op);
    return out << (j.in_place ? " in-place" : "");
  }
  std::string describe() const { return detail::concat(*this); }
};

// A checked broadcast, gather or scatter: not one of the registry's collectives (one schedule each, no
// plan). broadcast: recv is the buffer; gather: send to the root's recv; scatter: the root's send to recv.
enum class Rooted { broadcast, gather, scatter };

inline const char* name_of(Rooted k) {
  switch (k) {
    case Rooted::broadcast: return "broadcast";
    case Rooted::gather: return "gather";
    case Rooted::scatter: return "scatter";
  }
  return "invalid";
}

template <class Comm>
struct RootedJob {
  Comm* self;
  Rooted kind;
  Scope scope;
  const void* send;
  void* recv;
  std::size_t count;  // per rank
  DataType dt;
  int root;
  std::function<void()> inputs_ready;
  void operator()() const { self->execute(*this); }
  friend std::ostream& operator<<(std::ostream& out, const RootedJob& j) {
    return out << name_of(j.kind) << " " << paro::name_of(j.scope) << " count=" << j.count << " " << paro::name_of(j.dt)
               << " root=" << j.root;
  }
  std::string describe() const { return detail::concat(*this); }
};

// A checked all_to_allv (one schedule, no plan): each rank's block of send and of recv, in bytes.
template <class Comm>
struct AllToAllvJob {
  Comm* self;
  Scope scope;
  const void* send;
  void* recv;
  DataType dt;
  std::vector<algorithms::Extent> sends, recvs;
  bool in_place;
  std::function<void()> inputs_ready;
  void operator()() const { self->execute(*this); }
  friend std::ostream& operator<<(std::ostream& out, const AllToAllvJob& j) {
    std::size_t sent = 0, received = 0;
    for (const auto& e : j.sends) sent += e.bytes;
    for (const auto& e : j.recvs) received += e.bytes;
    return out << "all_to_allv " << paro::name_of(j.scope) << " " << paro::name_of(j.dt) << " sends "
               << sent / size_of(j.dt) << " receives " << received / size_of(j.dt) << " elements"
               << (j.in_place ? " in-place" : "");
  }
  std::string describe() const { return detail::concat(*this); }
};

// What a descriptor's schedules see of the Communicator that runs them (algorithms/registry.hpp).
template <class Comm>
struct ScheduleContext {
  Comm& self;
  Scope scope;
  const typename Comm::Plan& plan;
  auto& comm() { return self.transport(scope); }
  // The scope's levels, or (by_nodes) the scope cut by its nodes alone (CostShape::node_cut).
  auto& hierarchy(bool by_nodes = false) { return self.scopes_.hierarchy(scope, comm(), by_nodes); }
  const algorithms::RingParams& ring() const { return self.tuning_.ring; }
  const algorithms::DirectParams& direct() const { return self.tuning_.direct; }
  // This call's plan, as the descriptor's Params.
  template <class Params>
  const Params& params() const {
    return std::get<Params>(plan.params);
  }
};

}  // namespace paro
