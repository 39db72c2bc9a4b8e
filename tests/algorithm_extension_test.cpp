// An algorithm added without changing paro: a direct all-gather (every rank sends its block straight to
// every other) described in this file and registered with one line, then run through the public verbs,
// PARO_ALGO and the automatic choice like a built-in one.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::algorithms::Call;
using paro::algorithms::CostModel;
using paro::algorithms::CostShape;
using paro::algorithms::Prediction;

struct DirectAllGather {
  static constexpr Algorithm id = Algorithm{100};
  static constexpr const char* name = "direct_all_gather";
  static constexpr paro::algorithms::Family family = paro::algorithms::Family::flat;
  static Prediction predict(const CostModel& m, Collective c, double N, const CostShape& s) {
    return {m.flat_level(c, N, s.ranks, m.flat_link(s))};
  }
  // Only all_gather: the Communicator rejects the other collectives for it.
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    auto& t = x.comm();
    const std::size_t block = c.count * paro::size_of(c.dt);
    char* buf = static_cast<char*>(c.recv);
    std::vector<typename std::decay_t<decltype(t)>::Request> requests;
    for (int peer = 0; peer < t.size(); ++peer) {
      if (peer == t.rank()) continue;
      requests.push_back(t.irecv(buf + static_cast<std::size_t>(peer) * block, block, peer, tag));
      requests.push_back(t.isend(buf + static_cast<std::size_t>(t.rank()) * block, block, peer, tag));
    }
    t.wait_all(requests);
  }
  static constexpr int tag = 0x7e01;
};

using WithDirect = paro::algorithms::BuiltinAlgorithms::with<DirectAllGather>;  // the registration

// Runs body(comm) on n thread ranks with a Communicator that knows the direct all-gather.
template <class Body>
std::vector<std::string> on_ranks(int n, Body body) {
  return paro::testing::joined(paro::tools::on_thread_ranks(n, [&](paro::threads::Transport& t) {
    paro::Communicator<paro::threads::Transport, WithDirect> comm(std::move(t));
    return body(comm);
  }));
}

TEST(AlgorithmExtension, RunsThroughThePublicVerbsAtEveryRankCount) {
  for (int n = 1; n <= 7; ++n) {
    auto failures = on_ranks(n, [](auto& comm) {
      return paro::testing::run_matrix(comm, Collective::all_gather, DirectAllGather::id, {0, 1, 7, 1000});
    });
    EXPECT_TRUE(failures.empty()) << n << " ranks:\n" << paro::testing::first_lines(failures);
  }
}

TEST(AlgorithmExtension, NamedInParoAlgoAndInMessages) {
  setenv("PARO_ALGO", "allgather:direct-all-gather", 1);
  auto failures = on_ranks(3, [](auto& comm) {
    std::vector<std::string> f;
    if (comm.resolve(Collective::all_gather, 1 << 20) != DirectAllGather::id) f.push_back("PARO_ALGO not applied");
    if (std::string(comm.name_of(DirectAllGather::id)) != "direct_all_gather") f.push_back("name");
    auto more = paro::testing::run_matrix(comm, Collective::all_gather, Algorithm::automatic, {5});
    f.insert(f.end(), more.begin(), more.end());
    return f;
  });
  unsetenv("PARO_ALGO");
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
  const std::string msg = paro::testing::error_of([] {
    on_ranks(2, [](auto& comm) {
      float x = 1, y[2];
      comm.reduce_scatter(y, &x, 1, paro::ReduceOp::sum, {DirectAllGather::id});
      return std::vector<std::string>{};
    });
  });
  EXPECT_NE(msg.find("reduce_scatter: algorithm direct_all_gather has no reduce_scatter schedule; allowed: "
                     "automatic ring tree mics_hcs paro_seq paro_cc"),
            std::string::npos)
      << msg;
}

TEST(AlgorithmExtension, AutomaticConsidersIt) {
  // On one node of 4 ranks, small all-gathers: one direct round beats ring's 3 steps and Bruck's 2.
  using Registry = WithDirect;
  const CostModel model;
  CostShape flat;
  flat.ranks = 4;
  EXPECT_EQ(Registry::best(model, Collective::all_gather, 4096, flat).algorithm, DirectAllGather::id);
  EXPECT_NE(Registry::best(model, Collective::all_reduce, 4096, flat).algorithm, DirectAllGather::id)
      << "it has no all_reduce schedule";
}

}  // namespace
