#pragma once
// One body for every backend's test binary: the collective matrix through paro::AnyCommunicator, the type
// whose backend is chosen at run time, over a transport of the backend under test. It must run exactly
// what Communicator<T> runs: every collective and type, flat and automatic algorithms, in and out of place,
// broadcasts, gathers, scatters, reduces, all_to_allv, point-to-point messages, a nonblocking collective, and the
// backend's name.

#include <string>
#include <utility>
#include <vector>

#include "paro/communicator/any_communicator.hpp"
#include "paro/testing/collective_check.hpp"
#include "paro/testing/rooted_check.hpp"

namespace paro::testing {

template <class Transport>
std::vector<std::string> any_communicator_matrix(Transport t) {
  AnyCommunicator comm(std::move(t));
  std::vector<std::string> failures;
  auto add = [&](std::vector<std::string> more) { failures.insert(failures.end(), more.begin(), more.end()); };
  if (std::string(comm.backend()) != Transport::name)
    failures.push_back(detail::concat("backend() is '", comm.backend(), "', want '", Transport::name, "'"));
  for (Collective coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
    for (Algorithm algo : {Algorithm::ring, Algorithm::automatic}) add(run_matrix(comm, coll, algo, {0, 1, 7, 1000}));
  add(broadcast_matrix(comm, {0, 1, 1000}));
  add(rooted_matrix(comm, {0, 1, 1000}));
  add(all_to_allv_matrix(comm, {0, 300}));
  if (comm.messages_available()) add(check_messages(comm, 1000));  // (not under NCCL's message rules)
  std::vector<float> grad(1000, 1.0f);
  Request r = comm.iall_reduce(grad.data(), grad.data(), grad.size(), ReduceOp::sum);
  r.wait();
  if (grad[999] != static_cast<float>(comm.size()))
    failures.push_back(detail::concat("rank ", comm.rank(), ": iall_reduce gave ", grad[999], ", want ", comm.size()));
  return failures;
}

}  // namespace paro::testing
