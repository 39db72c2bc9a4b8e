#pragma once
// Nonblocking collectives checked as the blocking ones are (collective_check.hpp): several in flight on one
// communicator, mixed collectives, algorithms, scopes, types, ops and counts, a blocking call issued among
// them, and the requests completed in another order than issued. Every rank draws the same cases from the
// seed, so the ranks issue the same collectives in the same order, as the verbs require.

#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "paro/testing/collective_check.hpp"

namespace paro::testing {

// The algorithms a call of c may request on this communicator's backend, plus automatic.
template <class Transport, class Registry>
std::vector<Algorithm> runnable_algorithms(Collective c) {
  std::vector<Algorithm> out{Algorithm::automatic};
  for (Algorithm a : Registry::ids)
    if (Communicator<Transport, Registry>::available(a, c)) out.push_back(a);
  return out;
}

// A random case: every rank draws the same one from the same generator state.
template <class Transport, class Registry>
Case random_case(std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  using Collectives = typename Registry::Collectives;
  const Collective coll = Collectives::ids[pick(std::size(Collectives::ids))];
  const auto algos = runnable_algorithms<Transport, Registry>(coll);
  const Scope scopes[] = {Scope::global, Scope::intra, Scope::inter};
  const std::size_t counts[] = {0, 1, 7, 1000, 4099};
  Case c;
  c.coll = coll;
  c.algo = algos[pick(algos.size())];
  c.dt = all_data_types[pick(std::size(all_data_types))];
  c.op = Collectives::reduces(coll) ? all_reduce_ops[pick(std::size(all_reduce_ops))] : ReduceOp::sum;
  c.count = counts[pick(std::size(counts))];
  c.in_place = pick(2) == 1;
  c.scope = scopes[pick(3)];
  return c;
}

// Issues `in_flight` random nonblocking cases (a blocking one after the first half), then completes them
// newest first, by wait(), wait_for() and test() in turn, and checks every result. Returns this rank's
// failure descriptions.
template <class Transport, class Registry>
std::vector<std::string> check_nonblocking(Communicator<Transport, Registry>& comm, std::uint64_t seed,
                                           int in_flight = 8) {
  std::mt19937_64 rng(seed);
  std::vector<std::unique_ptr<StagedCase<Transport, typename Registry::Collectives>>> staged;
  std::vector<Request> requests;
  std::vector<std::string> failures;
  auto fail = [&](const Case& c, const std::string& why) {
    failures.push_back(detail::concat("rank ", comm.rank(), " seed ", seed, ": ",
                                      describe<typename Registry::Collectives>(c, comm.size()), ": ", why));
  };
  for (int i = 0; i < in_flight; ++i) {
    const Case c = random_case<Transport, Registry>(rng);
    staged.push_back(
        std::make_unique<StagedCase<Transport, typename Registry::Collectives>>(comm.transport(c.scope), c));
    auto& s = *staged.back();
    requests.push_back(comm.icollective(c.coll, s.send(), s.recv(), c.count, c.dt, c.op, {c.algo, c.scope}));
    if (i == in_flight / 2) {  // a blocking call runs after the requests issued before it
      const Case b = random_case<Transport, Registry>(rng);
      const CheckResult r = check_case(comm, b);
      if (r.wrong) fail(b, "(blocking) " + r.report);
    }
  }
  for (std::size_t k = requests.size(); k-- > 0;) {
    const Case& c = staged[k]->spec();
    try {
      switch (k % 3) {
        case 0: requests[k].wait(); break;
        case 1:
          while (!requests[k].wait_for(std::chrono::milliseconds(1))) {
          }
          break;
        default:
          while (!requests[k].test()) std::this_thread::yield();
          if (requests[k].error()) std::rethrow_exception(requests[k].error());
      }
    } catch (const Error& e) {
      fail(c, e.what());
      continue;
    }
    const CheckResult r = staged[k]->verify();
    if (r.wrong) fail(c, r.report);
  }
  return failures;
}

}  // namespace paro::testing
