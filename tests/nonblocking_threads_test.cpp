// The nonblocking verbs on the threads backend: many collectives in flight with exact results, over rank
// counts and emulated clusters; requests' semantics; a failure reaching its request and every later one.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "paro/testing/nonblocking_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::ReduceOp;
using namespace std::chrono_literals;

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

class NonblockingRankCounts : public ::testing::TestWithParam<int> {};

TEST_P(NonblockingRankCounts, ManyInFlightMixedExact) {
  const int n = GetParam();
  auto failures = paro::testing::on_threads(n, [n](auto& comm) {
    std::vector<std::string> f;
    for (std::uint64_t seed = 0; seed < 3; ++seed)
      for (auto& s : paro::testing::check_nonblocking(comm, 100 * static_cast<std::uint64_t>(n) + seed)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Threads, NonblockingRankCounts, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 11, 16));

// Hierarchical algorithms and the intra and inter scopes on clusters with uneven and non-contiguous groups.
class NonblockingClusters : public ::testing::TestWithParam<const char*> {};

TEST_P(NonblockingClusters, ManyInFlightMixedExact) {
  auto failures = paro::testing::on_cluster(GetParam(), "node", [](auto& comm) {
    std::vector<std::string> f;
    for (std::uint64_t seed = 0; seed < 4; ++seed)
      for (auto& s : paro::testing::check_nonblocking(comm, seed, 12)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, NonblockingClusters,
                         ::testing::Values("nodes=2,ranks=4", "nodes=3,ranks=3,order=cyclic", "nodes=2,ranks=3:5",
                                           "switches=2,nodes=2,ranks=2"));

TEST(Nonblocking, AnEmptyRequestIsComplete) {
  paro::Request r;
  EXPECT_TRUE(r.test());
  EXPECT_TRUE(r.wait_for(0s));
  EXPECT_NO_THROW(r.wait());
  EXPECT_EQ(r.error(), nullptr);
}

// Bad arguments are reported by the call that issues the collective, and nothing is queued.
TEST(Nonblocking, BadArgumentsThrowAtIssue) {
  auto failures = paro::testing::on_threads(3, [](auto& comm) {
    std::vector<std::string> f;
    const std::string msg =
        paro::testing::error_of([&] { comm.iall_reduce(nullptr, nullptr, 4, paro::DataType::f32, ReduceOp::sum); });
    if (msg.find("all_reduce") == std::string::npos) f.push_back("no usage error at issue: " + msg);
    float x = 1;
    comm.all_reduce(&x, &x, 1, ReduceOp::sum);  // the communicator is still usable
    if (x != 3) f.push_back("sum after a rejected call: " + std::to_string(x));
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// A collective that fails (here the ranks disagree, which PARO_CHECK detects on every rank) reports its
// error on its request; the ones issued after it fail without running, naming it; the one before succeeds.
TEST(Nonblocking, AFailureReachesItsRequestAndEveryLaterOne) {
  setenv("PARO_CHECK", "1", 1);
  auto failures = paro::testing::on_threads(4, [](auto& comm) {
    std::vector<std::string> f;
    std::vector<float> a(8, 1), b(8 + (comm.rank() == 1 ? 1 : 0), 1), c(8, 1), d(8, 1);
    paro::Request ok = comm.iall_reduce(a.data(), a.data(), a.size(), ReduceOp::sum);
    paro::Request bad = comm.iall_reduce(b.data(), b.data(), b.size(), ReduceOp::sum, {Algorithm::ring});
    paro::Request later = comm.iall_gather(c.data(), d.data(), 2);
    const std::string ok_error = paro::testing::error_of([&] { ok.wait(); });
    if (ok_error != "(no error)" || a[0] != 4) f.push_back("the request before the failure: " + ok_error);
    const std::string bad_error = paro::testing::error_of([&] { bad.wait(); });
    if (bad_error.find("PARO_CHECK") == std::string::npos) f.push_back("the failing request: " + bad_error);
    const std::string later_error = paro::testing::error_of([&] { later.wait(); });
    if (later_error.find("all_gather") == std::string::npos ||
        later_error.find("not run: the earlier all_reduce ring global count=") == std::string::npos)
      f.push_back("the later request: " + later_error);
    if (!later.error()) f.push_back("later.error() is null");
    // Blocking calls and wait_all report it too.
    float x = 1;
    const std::string blocking = paro::testing::error_of([&] { comm.all_reduce(&x, &x, 1, ReduceOp::sum); });
    if (blocking.find("not run") == std::string::npos) f.push_back("a later blocking call: " + blocking);
    if (paro::testing::error_of([&] { comm.wait_all(); }) == "(no error)") f.push_back("wait_all reported nothing");
    return f;
  });
  unsetenv("PARO_CHECK");
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// A peer that never issues the collective: wait_for says "not yet", then the request fails within
// PARO_TIMEOUT (a timeout, or the peer failure the first rank to time out sends the others).
TEST(Nonblocking, APeerThatNeverIssuesEndsInAnError) {
  setenv("PARO_TIMEOUT", "0.5", 1);
  std::atomic<int> errors{0}, not_yet{0};
  try {
    paro::threads::run(3, [&](paro::threads::Transport t) {
      paro::Communicator comm(std::move(t));
      if (comm.rank() == 2) return;
      float x = 1;
      paro::Request r = comm.iall_reduce(&x, &x, 1, ReduceOp::sum, {Algorithm::ring});
      if (!r.wait_for(10ms)) ++not_yet;
      try {
        r.wait();
      } catch (const paro::Error& e) {
        if (e.kind() == paro::ErrorKind::timeout || e.kind() == paro::ErrorKind::peer_failure) ++errors;
      }
    });
  } catch (const paro::Error&) {
  }
  unsetenv("PARO_TIMEOUT");
  EXPECT_EQ(errors.load(), 2);
  EXPECT_EQ(not_yet.load(), 2);
}

// The communicator's destructor lets queued collectives finish (their buffers are the caller's concern).
TEST(Nonblocking, DestroyingTheCommunicatorFinishesWhatWasIssued) {
  auto sums = paro::tools::on_thread_ranks(4, [](paro::threads::Transport& t) {
    std::vector<std::int64_t> x(10000, t.rank() + 1);
    paro::Request r;
    {
      paro::Communicator comm(std::move(t));
      for (int i = 0; i < 5; ++i) r = comm.iall_reduce(x.data(), x.data(), x.size(), ReduceOp::sum);
    }
    EXPECT_TRUE(r.test());
    r.wait();
    return x[9999];
  });
  for (auto s : sums) EXPECT_EQ(s, 10 * 4 * 4 * 4 * 4);
}

}  // namespace
