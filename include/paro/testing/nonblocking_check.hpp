#pragma once
// Nonblocking collectives checked as the blocking ones are (collective_check.hpp, rooted_check.hpp): several
// in flight on one communicator, mixed collectives (the registry's, and gather, scatter, reduce and
// all_to_allv), algorithms, scopes, types, ops and counts, a blocking call issued among them, and the
// requests completed in another order than issued. Every rank draws the same cases from the
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
#include "paro/testing/rooted_check.hpp"

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

// Issues `in_flight` random nonblocking cases (one in four a gather, scatter, reduce or all_to_allv; a
// blocking one after the first half), then completes them newest first, by wait(), wait_for() and test() in
// turn, and checks every result. Returns this rank's failure descriptions.
template <class Transport, class Registry>
std::vector<std::string> check_nonblocking(Communicator<Transport, Registry>& comm, std::uint64_t seed,
                                           int in_flight = 8) {
  using Staged = StagedCase<Transport, typename Registry::Collectives>;
  std::mt19937_64 rng(seed);
  std::vector<Issued> issued;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& why) {
    failures.push_back(detail::concat("rank ", comm.rank(), " seed ", seed, ": ", why));
  };
  auto described = [&](const Case& c) { return describe<typename Registry::Collectives>(c, comm.size()); };
  const std::size_t counts[] = {0, 1, 7, 1000, 4099};
  for (int i = 0; i < in_flight; ++i) {
    if (rng() % 4 == 0) {
      issued.push_back(start_random_verb(comm, rng, counts[rng() % std::size(counts)]));
    } else {
      const Case c = random_case<Transport, Registry>(rng);
      auto s = std::make_shared<Staged>(comm.transport(c.scope), c);
      Request q = comm.icollective(c.coll, s->send(), s->recv(), c.count, c.dt, c.op, {c.algo, c.scope});
      issued.push_back({std::move(q), [s, what = described(c)]() -> std::string {
                          const CheckResult r = s->verify();
                          return r.wrong ? what + ": " + r.report : std::string();
                        }});
    }
    if (i == in_flight / 2) {  // a blocking call runs after the requests issued before it
      const Case b = random_case<Transport, Registry>(rng);
      const CheckResult r = check_case(comm, b);
      if (r.wrong) fail(described(b) + ": (blocking) " + r.report);
    }
  }
  for (std::size_t k = issued.size(); k-- > 0;) {
    Request& q = issued[k].request;
    try {
      switch (k % 3) {
        case 0: q.wait(); break;
        case 1:
          while (!q.wait_for(std::chrono::milliseconds(1))) {
          }
          break;
        default:
          while (!q.test()) std::this_thread::yield();
          if (q.error()) std::rethrow_exception(q.error());
      }
    } catch (const Error& e) {
      fail(e.what());
      continue;
    }
    const std::string wrong = issued[k].verify();
    if (!wrong.empty()) fail(wrong);
  }
  return failures;
}

}  // namespace paro::testing
