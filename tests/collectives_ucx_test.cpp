// The generic checks (transport conformance, the collective matrix) on the ucx backend. Two ways to run:
//   in process (ctest ucx_threads): PARO_UCX_THREAD_RANKS (4) threads, each a rank with a UCX context and
//     worker of its own, bootstrapped over one MemoryStore; UCX moves their messages over shared memory or
//     TCP as between processes;
//   as processes under a launcher that sets RANK and WORLD_SIZE (ctest ucx_npN: paro-run -n N): each
//     process is one rank, bootstrapped from the environment.
// Every rank runs every test; under a launcher ranks other than 0 print only failures.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "any_communicator_check.hpp"
#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/from_env.hpp"
#include "paro/testing/collective_check.hpp"
#include "paro/testing/nonblocking_check.hpp"
#include "paro/testing/transport_check.hpp"
#include "paro/tools/backends.hpp"
#include "paro/transport/ucx.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::Scope;
using UcxComm = paro::Communicator<paro::ucx::Transport>;
using Failures = std::vector<std::string>;

int thread_ranks() { return static_cast<int>(paro::env::integer_or("PARO_UCX_THREAD_RANKS", 4, 1, 64)); }

// Under a launcher (RANK set): this process's rank of the world, bootstrapped from the environment.
bool as_processes() { return paro::env::get("RANK").has_value(); }

paro::ucx::Transport& process_world() {
  static std::unique_ptr<paro::bootstrap::Bootstrap> boot = paro::bootstrap::bootstrap_from_env("ucx-test");
  static paro::ucx::Transport world(*boot);
  return world;
}

// Runs body(world transport) on every rank run here and returns their failures.
template <class Body>
Failures everywhere(Body body) {
  if (as_processes()) return body(process_world());
  const int n = thread_ranks();
  paro::bootstrap::MemoryStore store;
  std::vector<Failures> results(static_cast<std::size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      auto& mine = results[static_cast<std::size_t>(r)];
      try {
        paro::bootstrap::StoreBootstrap boot(store, r, n, "ucx-test");
        paro::ucx::Transport world(boot);
        mine = body(world);
      } catch (const std::exception& e) {
        mine.push_back(paro::detail::concat("rank ", r, " threw: ", e.what()));
      }
    });
  for (auto& t : ranks) t.join();
  Failures all;
  for (auto& f : results) all.insert(all.end(), f.begin(), f.end());
  return all;
}

std::string join(const Failures& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < 8; ++i) out += lines[i] + "\n";
  return out;
}

// An emulated cluster for this rank count: three levels at 8 ranks, else two nodes (uneven when odd).
std::string emulated_cluster(int n) {
  if (n == 8) return "switches=2,nodes=2,ranks=2";
  if (n % 2 == 0) return "nodes=2";
  return "nodes=2,ranks=" + std::to_string(n / 2) + ":" + std::to_string(n - n / 2);
}

TEST(UcxTransport, Conformance) {
  auto failures = everywhere([](paro::ucx::Transport& t) { return paro::testing::check_transport_conformance(t); });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// The ranks' workers talk over UCX's inter-process transports, never `self` (a worker's endpoint to itself):
// shared memory between ranks of one host (PARO_UCX_PEER_ERRORS auto or off), TCP where every endpoint has
// UCX's peer error handling (PARO_UCX_PEER_ERRORS=ucx: UCX 1.13 offers no shared memory transport then).
// And the worker is multi-threaded (Debian's UCX is built with --enable-mt), which the lanes need.
TEST(UcxTransport, RanksUseSharedMemoryOrTcp) {
  const bool peer_errors = paro::env::get("PARO_UCX_PEER_ERRORS").value_or("auto") == "ucx";
  auto failures = everywhere([peer_errors](paro::ucx::Transport& t) {
    Failures f;
    if (!t.concurrent_use()) f.push_back("the worker is not UCS_THREAD_MODE_MULTI");
    if (t.size() < 2) return f;
    const std::string info = t.describe_endpoint((t.rank() + 1) % t.size());
    bool found = false;
    const auto wanted = peer_errors ? std::vector<const char*>{"tcp/"}
                                    : std::vector<const char*>{"posix/", "sysv/", "xpmem/", "cma/", "knem/"};
    for (const char* tl : wanted) found = found || info.find(tl) != std::string::npos;
    if (!found)
      f.push_back(paro::detail::concat("rank ", t.rank(), ": the endpoint uses none of the ",
                                       peer_errors ? "TCP" : "shared memory", " transports:\n", info));
    return f;
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Two thread ranks with PARO_TIMEOUT=2 (read when a world is created): what rank 0's wait throws when rank 1
// runs `peer` and rank 0 runs `me`.
template <class Peer, class Me>
std::string error_on_rank_0(Peer peer, Me me) {
  ::setenv("PARO_TIMEOUT", "2", 1);
  paro::bootstrap::MemoryStore store(30);
  std::string error;
  std::thread other([&] {
    paro::bootstrap::StoreBootstrap boot(store, 1, 2, "errors");
    paro::ucx::Transport t(boot);
    peer(t);
  });
  {
    paro::bootstrap::StoreBootstrap boot(store, 0, 2, "errors");
    paro::ucx::Transport t(boot);
    try {
      me(t);
      error = "nothing thrown";
    } catch (const paro::Error& e) {
      error = std::string(paro::name_of(e.kind())) + ": " + e.message();
    }
  }
  other.join();
  return error;
}

TEST(UcxErrors, AMissingMessageTimesOutNamingPeerBytesAndTag) {
  if (as_processes()) GTEST_SKIP() << "thread ranks only";
  // Rank 1 stays (leaving would be a peer failure) but never sends.
  const std::string error =
      error_on_rank_0([](paro::ucx::Transport&) { std::this_thread::sleep_for(std::chrono::seconds(4)); },
                      [](paro::ucx::Transport& t) {
                        char buf[24];
                        auto r = t.irecv(buf, sizeof buf, 1, 77);
                        t.wait(r);
                      });
  EXPECT_NE(error.find("timeout: rank 0: timed out after 2 s waiting for a message from rank 1 (24 bytes, tag 77)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("PARO_TIMEOUT sets the limit"), std::string::npos) << error;
}

TEST(UcxErrors, SizeMismatchIsAUsageErrorEitherWay) {
  if (as_processes()) GTEST_SKIP() << "thread ranks only";
  for (std::size_t sent : {std::size_t{8}, std::size_t{40000}, std::size_t{2}}) {
    const std::string error = error_on_rank_0(
        [sent](paro::ucx::Transport& t) {
          std::vector<char> data(sent, 'x');
          auto r = t.isend(data.data(), data.size(), 0, 5);
          try {
            t.wait(r);  // completes, or fails where the receiver gave up
          } catch (const paro::Error&) {
          }
        },
        [](paro::ucx::Transport& t) {
          char buf[4];
          auto r = t.irecv(buf, sizeof buf, 1, 5);
          t.wait(r);
        });
    const std::string want = sent < 4 ? "sent 2 bytes, expected 4" : "sent more than 4 bytes, expected 4";
    EXPECT_NE(error.find("usage: rank 0: message size mismatch on tag 5: rank 1 " + want), std::string::npos)
        << "sent " << sent << ": " << error;
  }
}

using Param = std::tuple<Collective, Algorithm>;
class UcxCollective : public ::testing::TestWithParam<Param> {};

// The flat algorithms on the world, every type, op and shape, and a larger message in and out of place.
TEST_P(UcxCollective, EveryTypeOpAndShape) {
  auto [coll, algo] = GetParam();
  auto failures = everywhere([coll = coll, algo = algo](paro::ucx::Transport& t) {
    UcxComm comm(t);
    Failures f = paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 1000});
    for (bool in_place : {false, true}) {
      auto one = paro::testing::run_case(
          comm, {coll, algo, paro::DataType::f32, paro::ReduceOp::sum, (1u << 17) + 3, in_place});
      if (!one.empty()) f.push_back(one);
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// The same matrix through AnyCommunicator, the backend chosen at run time (any_communicator_check.hpp).
TEST(UcxAnyCommunicator, RunsTheMatrix) {
  auto failures = everywhere([](paro::ucx::Transport& t) { return paro::testing::any_communicator_matrix(t); });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Under a launcher: this process's rank by the backend's name, bootstrapped through the launcher's store.
TEST(UcxAnyCommunicator, ConnectsByName) {
  if (!as_processes()) GTEST_SKIP() << "one rank per process only (under paro-run)";
  paro::AnyCommunicator comm = paro::tools::connect("ucx");
  EXPECT_STREQ(comm.backend(), "ucx");
  std::int64_t x = comm.rank();
  comm.all_reduce(&x, &x, 1, paro::ReduceOp::sum);
  EXPECT_EQ(x, std::int64_t{comm.size()} * (comm.size() - 1) / 2);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(paro::name_of(std::get<0>(info.param))) + "_" + paro::name_of(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxCollective,
                         ::testing::Combine(::testing::Values(Collective::all_reduce, Collective::all_gather,
                                                              Collective::reduce_scatter),
                                            ::testing::Values(Algorithm::ring, Algorithm::tree, Algorithm::automatic)),
                         param_name);

TEST(UcxBroadcast, EveryTypeRootAndSize) {
  auto failures = everywhere([](paro::ucx::Transport& t) {
    UcxComm comm(t);
    return paro::testing::broadcast_matrix(comm, {0, 1, 7, 1000}, paro::Scope::global, true);
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(UcxSplit, ParitySubCommunicatorsReduceIndependently) {
  auto failures = everywhere([](paro::ucx::Transport& t) {
    UcxComm comm(t);
    return paro::testing::check_parity_split(comm);
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Scoped collectives on groups of 2 (the last one smaller for odd rank counts) and their rails.
class UcxScoped : public ::testing::TestWithParam<Scope> {};

TEST_P(UcxScoped, EveryCollectiveIsExact) {
  const Scope scope = GetParam();
  auto failures = everywhere([scope](paro::ucx::Transport& t) {
    paro::CommunicatorConfig config;
    config.group = paro::GroupSpec::custom(2, /*allow_uneven=*/true);
    UcxComm comm(t, config);
    Failures f;
    for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
      for (auto algo : {Algorithm::ring, Algorithm::tree})
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, scope)) f.push_back(s);
    for (auto& s : paro::testing::broadcast_matrix(comm, {0, 1, 100}, scope)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxScoped, ::testing::Values(Scope::intra, Scope::inter));

// The hierarchical algorithms on an emulated cluster, every scope, with paro_cc's lanes on threads.
class UcxHierarchical : public ::testing::TestWithParam<Scope> {};

TEST_P(UcxHierarchical, EveryCollectiveIsExact) {
  const Scope scope = GetParam();
  auto failures = everywhere([scope](paro::ucx::Transport& t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulated_cluster(t.size());
    config.group.allow_uneven = true;
    UcxComm comm(t, config);
    Failures f;
    for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
      for (auto algo : {Algorithm::mics_hcs, Algorithm::paro_seq, Algorithm::paro_cc, Algorithm::automatic}) {
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, scope)) f.push_back(s);
        for (bool in_place : {false, true}) {  // pipeline pieces and chunks
          auto one = paro::testing::run_case(
              comm, {coll, algo, paro::DataType::f32, paro::ReduceOp::sum, (1u << 17) + 3, in_place, scope});
          if (!one.empty()) f.push_back(one);
        }
      }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxHierarchical, ::testing::Values(Scope::global, Scope::intra, Scope::inter));

// Nonblocking collectives in flight on an emulated cluster: mixed collectives, algorithms, scopes, types
// and counts, completed out of order, exact (testing/nonblocking_check.hpp).
TEST(UcxNonblocking, ManyInFlightMixedExact) {
  auto failures = everywhere([](paro::ucx::Transport& t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulated_cluster(t.size());
    config.group.allow_uneven = true;
    UcxComm comm(t, config);
    Failures f;
    for (std::uint64_t seed = 0; seed < 4; ++seed)
      for (auto& s : paro::testing::check_nonblocking(comm, seed, 10)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// A process killed in the middle of a collective (ctest ucx_peer_killed: paro-run --grace, PARO_TIMEOUT=10,
// PARO_UCX_FAULT_TEST=1). The victim, the last rank, kills itself with SIGKILL from a thread while every
// rank runs all-reduces; every survivor must leave its collective with a paro::Error (a PeerFailure where
// UCX reports the dead peer or a survivor that left before, else a TimeoutError) and says which.
TEST(UcxFault, AKilledPeerIsAnErrorOnEverySurvivor) {
  if (!as_processes() || !paro::env::get("PARO_UCX_FAULT_TEST")) GTEST_SKIP() << "run by ctest ucx_peer_killed";
  UcxComm comm(process_world());
  const int r = comm.rank(), n = comm.size();
  std::vector<float> grad(1 << 18, 1.0f);
  comm.all_reduce(grad.data(), grad.data(), grad.size(), paro::ReduceOp::sum);  // every endpoint wired
  std::thread killer;
  if (r == n - 1)
    killer = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::raise(SIGKILL);
    });
  std::string seen;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 100000; ++i)
      comm.all_reduce(grad.data(), grad.data(), grad.size(), paro::ReduceOp::max, {Algorithm::ring});
  } catch (const paro::Error& e) {
    seen = e.kind() == paro::ErrorKind::peer_failure ? "PeerFailure"
           : e.kind() == paro::ErrorKind::timeout    ? "TimeoutError"
                                                     : paro::name_of(e.kind());
    const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d saw %s after %.1f s: %s\n", r, seen.c_str(), after, e.message().c_str());
    std::fflush(stdout);
  }
  if (killer.joinable()) killer.join();  // not reached by the victim
  EXPECT_FALSE(seen.empty()) << "rank " << r << " finished every all-reduce although rank " << n - 1 << " was killed";
}

}  // namespace

int main(int argc, char** argv) {
  if (as_processes() && paro::env::get("RANK") != "0") GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
