// Every collective x algorithm on the threads backend at every rank count 1..16: all data types and ops,
// counts 0, 1, small primes and a buffer of several MiB, in place and out of place, exact expected values.

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "any_communicator_check.hpp"
#include "paro/testing/collective_check.hpp"
#include "paro/testing/rooted_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::testing::any_communicator_matrix;
using paro::testing::first_lines;
using paro::testing::on_cluster;
using paro::testing::on_threads;
using paro::testing::on_transports;
using paro::testing::run_matrix;

using Param = std::tuple<Collective, Algorithm, int>;

class ThreadsCollective : public ::testing::TestWithParam<Param> {};

TEST_P(ThreadsCollective, EveryTypeOpAndShape) {
  auto [coll, algo, n] = GetParam();
  // 7 and 1000 are not multiples of most rank counts; 1 leaves most ranks' all-reduce blocks empty.
  const std::vector<std::size_t> counts = {0, 1, 7, 1000};
  auto failures = on_threads(n, [&](auto& comm) { return run_matrix(comm, coll, algo, counts); });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(paro::name_of(std::get<0>(info.param))) + "_" + paro::name_of(std::get<1>(info.param)) + "_" +
         std::to_string(std::get<2>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ThreadsCollective,
                         ::testing::Combine(::testing::Values(Collective::all_reduce, Collective::all_gather,
                                                              Collective::reduce_scatter, Collective::all_to_all),
                                            ::testing::Values(Algorithm::ring, Algorithm::tree, Algorithm::automatic),
                                            ::testing::Range(1, 17)),
                         param_name);

// Multi-MiB buffers: the ring's chunked pipeline (1 MiB chunks) with uneven blocks.
// The same matrix through AnyCommunicator, the backend chosen at run time (any_communicator_check.hpp).
TEST(ThreadsAnyCommunicator, RunsTheMatrix) {
  for (int n : {1, 3, 4}) {
    auto failures = on_transports(n, [](auto t) { return any_communicator_matrix(std::move(t)); });
    EXPECT_TRUE(failures.empty()) << n << " ranks: " << first_lines(failures);
  }
}

class ThreadsLargeCollective : public ::testing::TestWithParam<Param> {};

TEST_P(ThreadsLargeCollective, SeveralMiB) {
  auto [coll, algo, n] = GetParam();
  const std::size_t count = coll == Collective::all_reduce   ? (std::size_t{3} << 20) + 5
                            : coll == Collective::all_to_all ? (std::size_t{3} << 20) / (n * n) + 3
                                                             : (std::size_t{3} << 20) / n + 3;
  auto failures = on_threads(n, [&](auto& comm) {
    std::vector<std::string> f;
    for (auto dt : {paro::DataType::f32, paro::DataType::bf16})
      for (bool in_place : {false, true}) {
        auto msg = paro::testing::run_case(comm, {coll, algo, dt, paro::ReduceOp::sum, count, in_place});
        if (!msg.empty()) f.push_back(msg);
      }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadsLargeCollective,
                         ::testing::Combine(::testing::Values(Collective::all_reduce, Collective::all_gather,
                                                              Collective::reduce_scatter, Collective::all_to_all),
                                            ::testing::Values(Algorithm::ring, Algorithm::tree),
                                            ::testing::Values(3, 8, 13)),
                         param_name);

// Tiny ring chunks and a short window: many chunks per block, slots reused many times, chunks of
// different lengths in one block.
TEST(ThreadsRingPipeline, TinyChunksEveryShape) {
  setenv("PARO_RING_CHUNK", "12", 1);
  setenv("PARO_RING_WINDOW", "2", 1);
  for (int n : {2, 3, 5, 8}) {
    auto failures = on_threads(n, [&](auto& comm) {
      std::vector<std::string> f;
      for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter}) {
        auto g = run_matrix(comm, coll, Algorithm::ring, {1, 7, 100});
        f.insert(f.end(), g.begin(), g.end());
      }
      return f;
    });
    EXPECT_TRUE(failures.empty()) << "ranks=" << n << "\n" << first_lines(failures);
  }
  unsetenv("PARO_RING_CHUNK");
  unsetenv("PARO_RING_WINDOW");
}

// Broadcast at every rank count: every data type, counts 0, 1, 7, 1000 (binomial trees) and 3 MiB + 3 bytes of
// u8 and f32 (the chain where n > 3, pipelined in 1 MiB chunks), from the first, middle and last rank.
class ThreadsBroadcast : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsBroadcast, EveryTypeRootAndSize) {
  const int n = GetParam();
  auto failures = on_threads(n, [&](auto& comm) {
    return paro::testing::broadcast_matrix(comm, {0, 1, 7, 1000}, paro::Scope::global, true);
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ThreadsBroadcast, ::testing::Range(1, 17));

// Tiny chunks and a window of 2 make a chain of many pieces; the schedule rule picks chain or tree alike on
// every rank, and a bad root or algorithm is refused with what is allowed.
TEST(ThreadsBroadcast, ChainOfManyChunksAndBadArguments) {
  setenv("PARO_RING_CHUNK", "16", 1);
  setenv("PARO_RING_WINDOW", "2", 1);
  EXPECT_TRUE(paro::algorithms::broadcast_chains(5, 32, 16));   // 2 chunks: (3 + 2) / 2 steps < ceil(log2 5)
  EXPECT_FALSE(paro::algorithms::broadcast_chains(5, 16, 16));  // one chunk: 4 steps > 3
  EXPECT_FALSE(paro::algorithms::broadcast_chains(2, 1000, 16));
  auto failures = on_threads(5, [&](auto& comm) {
    auto f = paro::testing::broadcast_matrix(comm, {250, 1001});
    std::vector<float> buf(4);
    for (auto [root, algo, want] : {std::tuple{5, Algorithm::automatic,
                                               "root 5 is not a rank of the global scope; "
                                               "allowed: 0 .. 4"},
                                    std::tuple{0, Algorithm::ring, "allowed: automatic"}}) {
      const std::string e = paro::testing::error_of([&] { comm.broadcast(buf.data(), buf.size(), root, {algo}); });
      if (e.find(want) == std::string::npos) f.push_back("rank " + std::to_string(comm.rank()) + ": " + e);
    }
    return f;
  });
  unsetenv("PARO_RING_CHUNK");
  unsetenv("PARO_RING_WINDOW");
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

// Gather, scatter and reduce at every rank count: every data type (reduce: every op), counts 0, 1 and 1000,
// the first, middle and last root, in place and out of place.
class ThreadsRooted : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsRooted, EveryTypeOpRootAndSize) {
  auto failures = on_threads(GetParam(), [&](auto& comm) { return paro::testing::rooted_matrix(comm, {0, 1, 1000}); });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ThreadsRooted, ::testing::Range(1, 17));

// Several MiB per rank with the root in the middle, on the scopes of an uneven cluster, and the bad arguments
// each refused with what is allowed.
TEST(ThreadsRooted, LargeScopedAndBadArguments) {
  auto failures = on_cluster("nodes=3,ranks=2", "2", [&](auto& comm) {
    std::vector<std::string> f;
    auto add = [&](std::string x) {
      if (!x.empty()) f.push_back(std::move(x));
    };
    const std::size_t large = (std::size_t{3} << 20) + 3;
    for (bool in_place : {false, true}) {
      add(paro::testing::check_gather(comm, paro::DataType::u8, large, 3, in_place, paro::Scope::global));
      add(paro::testing::check_scatter(comm, paro::DataType::u8, large, 3, in_place, paro::Scope::global));
      add(paro::testing::check_reduce(comm, paro::DataType::f32, paro::ReduceOp::sum, large / 4, 3, in_place,
                                      paro::Scope::global));
    }
    for (paro::Scope s : {paro::Scope::intra, paro::Scope::inter})
      for (auto& x : paro::testing::rooted_matrix(comm, {1, 100}, s)) f.push_back(x);
    std::vector<float> a(6), b(36);
    for (auto [call, want] : std::vector<std::pair<std::function<void()>, std::string>>{
             {[&] { comm.gather(a.data(), b.data(), 6, paro::DataType::f32, 6); },
              "gather: root 6 is not a rank of the global scope; allowed: 0 .. 5"},
             {[&] { comm.scatter(b.data(), a.data(), 6, paro::DataType::f32, -1); },
              "scatter: root -1 is not a rank of the global scope; allowed: 0 .. 5"},
             {[&] {
                comm.reduce(a.data(), b.data(), 6, paro::DataType::f32, paro::ReduceOp::sum, 2,
                            {Algorithm::automatic, paro::Scope::intra});
              },
              "reduce: root 2 is not a rank of the intra scope; allowed: 0 .. 1"},
             {[&] { comm.gather(a.data(), b.data(), 6, paro::DataType::f32, 0, {Algorithm::ring}); },
              "gather: algorithm ring; gather has one schedule (a direct exchange with the root), so allowed: "
              "automatic"},
         }) {
      const std::string e = paro::testing::error_of(call);
      if (e.find(want) == std::string::npos) f.push_back("rank " + std::to_string(comm.rank()) + ": " + e);
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
  // The root's own buffers, checked on one rank (a root's local error would leave the others waiting).
  failures = on_threads(1, [&](auto& comm) {
    std::vector<std::string> f;
    std::vector<float> b(6);
    for (auto [call, want] : std::vector<std::pair<std::function<void()>, std::string>>{
             {[&] { comm.gather(b.data(), nullptr, 6, paro::DataType::f32, 0); },
              "gather: recv buffer is null but 24 bytes are to be received"},
             {[&] { comm.scatter(b.data(), b.data() + 1, 3, paro::DataType::f32, 0); },
              "scatter: send and recv buffers overlap without being in place; in place means recv == send + "
              "root*count"},
         }) {
      const std::string e = paro::testing::error_of(call);
      if (e.find(want) == std::string::npos) f.push_back(e);
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

// all_to_allv at every rank count: blocks of their own lengths (zeros among them) in the reverse rank order
// with gaps, every data type, in and out of place.
class ThreadsAllToAllv : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsAllToAllv, EveryTypeUnevenBlocks) {
  auto failures = on_threads(GetParam(), [&](auto& comm) {
    return paro::testing::all_to_allv_matrix(comm, {0, 1, 250});
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ThreadsAllToAllv, ::testing::Range(1, 17));

// Blocks of about a MiB in every scope of an uneven cluster; the bad arguments each refused with what is
// allowed; under PARO_CHECK a pair of ranks that disagree on a block's length is named on every rank.
TEST(ThreadsAllToAllv, LargeScopedBadArgumentsAndDisagreement) {
  auto failures = on_cluster("nodes=3,ranks=2", "2", [&](auto& comm) {
    std::vector<std::string> f;
    for (paro::Scope s : paro::all_scopes)
      for (bool in_place : {false, true}) {
        std::string x = paro::testing::check_all_to_allv(comm, paro::DataType::u8, std::size_t{1} << 20, in_place, s);
        if (!x.empty()) f.push_back(std::move(x));
      }
    std::vector<float> a(64), b(64);
    const int me = comm.rank();
    const auto ones = paro::Blocks::packed(std::vector<std::size_t>(6, 1));
    for (
        auto [call, want] : std::vector<std::pair<std::function<void()>, std::string>>{
            {[&] {
               comm.all_to_allv(a.data(), paro::Blocks::packed({1, 1}), b.data(), ones);
             },
             "all_to_allv: send_blocks has 2 counts and 2 displs for a scope of 6 ranks; allowed: one of each per "
             "rank"},
            {[&] {
               auto more = ones;
               more.counts[static_cast<std::size_t>(me)] = 2;
               comm.all_to_allv(a.data(), more, b.data(), ones);
             },
             "all_to_allv: this rank (" + std::to_string(me) + ") sends itself 2 elements (send_blocks.counts[" +
                 std::to_string(me) + "]) but takes 1 from itself"},
            {[&] {
               const std::vector<std::size_t> twos(6, 2);
               comm.all_to_allv(a.data(), paro::Blocks::packed(twos), b.data(), paro::Blocks{twos, {0, 2, 4, 6, 8, 9}});
             },
             "all_to_allv: recv_blocks's blocks of ranks 4 and 5 overlap (elements 8 .. 9 and 9 .. 10); each rank's "
             "block needs its own elements"},
            {[&] {
               comm.all_to_allv(a.data(), ones, a.data(), paro::Blocks{ones.counts, {6, 7, 8, 9, 10, 11}});
             },
             "all_to_allv: in place (send == recv) with send_blocks != recv_blocks; in place means send == recv with "
             "the same blocks"},
            {[&] { comm.all_to_allv(a.data(), ones, a.data() + 3, ones); },
             "all_to_allv: send and recv buffers overlap without being in place"},
            {[&] { comm.all_to_allv(static_cast<const float*>(nullptr), ones, b.data(), ones); },
             "all_to_allv: send buffer is null but 24 bytes are to be sent"},
            {[&] { comm.all_to_allv(a.data(), ones, b.data(), ones, {Algorithm::tree}); },
             "all_to_allv: algorithm tree; all_to_allv has one schedule (the pairwise exchange), so allowed: "
             "automatic ring"},
        }) {
      const std::string e = paro::testing::error_of(call);
      if (e.find(want) == std::string::npos) f.push_back("rank " + std::to_string(me) + ": " + e);
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
  // Rank 1 sends rank 2 three elements, which rank 2 expects two of: every rank names the pair.
  paro::CommunicatorConfig config;
  config.tuning.check_signatures = true;
  failures =
      paro::testing::joined(paro::tools::run_on_thread_ranks<paro::testing::TestLauncher>(4, config, [](auto& comm) {
        std::vector<float> a(16), b(16);
        auto sends = paro::Blocks::packed(std::vector<std::size_t>(4, 2)), receives = sends;
        if (comm.rank() == 1) sends = paro::Blocks::packed({2, 2, 3, 2});
        const std::string e = paro::testing::error_of([&] { comm.all_to_allv(a.data(), sends, b.data(), receives); });
        const std::string want =
            "PARO_CHECK: the ranks of this all_to_allv disagree: rank 1 sends 3 elements to rank 2 "
            "(send_blocks.counts[2]), which takes 2 from it (recv_blocks.counts[1])";
        if (e.find(want) == std::string::npos)
          return std::vector<std::string>{"rank " + std::to_string(comm.rank()) + ": " + e};
        return std::vector<std::string>{};
      }));
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

// Point-to-point messages at every rank count from 2: two tags, three messages each, receives posted in
// another order than the sends, counts 0, 1 and 1000; a wrong length fails that receive alone.
class ThreadsMessages : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsMessages, RingInOrderPerTagAndWrongLength) {
#ifdef PARO_TEST_RECORDED
  GTEST_SKIP() << "the recording transport (NCCL's rules) carries no point-to-point messages";
#endif
  auto failures = on_threads(GetParam(), [&](auto& comm) {
    std::vector<std::string> f;
    for (std::size_t count : {0, 1, 1000})
      for (auto& x : paro::testing::check_messages(comm, count)) f.push_back(x);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ThreadsMessages, ::testing::Range(2, 17));

// Messages of several MiB inside the groups and along the rails of a cluster (peers are ranks of the scope),
// and every bad argument refused before anything is sent.
TEST(ThreadsMessages, ScopedLargeAndBadArguments) {
#ifdef PARO_TEST_RECORDED
  GTEST_SKIP() << "the recording transport (NCCL's rules) carries no point-to-point messages";
#endif
  auto failures = on_cluster("nodes=3,ranks=2", "2", [&](auto& comm) {
    std::vector<std::string> f;
    for (paro::Scope s : paro::all_scopes)
      for (auto& x : paro::testing::check_messages(comm, (std::size_t{1} << 20) + 1, s)) f.push_back(x);
    std::vector<float> a(4);
    const int me = comm.rank();
    for (auto [call, want] : std::vector<std::pair<std::function<void()>, std::string>>{
             {[&] { comm.send(a.data(), 4, paro::DataType::f32, me); },
              "send: peer " + std::to_string(me) + " is this rank"},
             {[&] { comm.recv(a.data(), 4, paro::DataType::f32, 6); },
              "recv: peer 6 is not a rank of the global scope; allowed: 0 .. 5"},
             {[&] { comm.send(a.data(), 4, paro::DataType::f32, (me + 1) % 6, -1); },
              "send: tag -1; allowed: 0 .. 16383"},
             {[&] { comm.isend(a.data(), 4, paro::DataType::f32, (me + 1) % 6, 16384); },
              "send: tag 16384; allowed: 0 .. 16383"},
             {[&] { comm.recv(nullptr, 4, paro::DataType::f32, (me + 1) % 6); },
              "recv: recv buffer is null but 16 bytes are to be received"},
             {[&] { comm.send(a.data(), 4, paro::DataType::f32, 2, 0, paro::Scope::intra); },
              "send: peer 2 is not a rank of the intra scope; allowed: 0 .. 1"},
         }) {
      const std::string e = paro::testing::error_of(call);
      if (e.find(want) == std::string::npos) f.push_back("rank " + std::to_string(me) + ": " + e);
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << first_lines(failures);
}

// Random floats: every rank must get bit-identical all-reduce results, close to a double-precision sum.
TEST(ThreadsAllReduce, RandomFloatsAgreeAcrossRanks) {
  const int n = 7;
  const std::size_t count = 10007;
  for (Algorithm algo : {Algorithm::ring, Algorithm::tree}) {
    std::vector<std::vector<float>> results(n);
    on_threads(n, [&](auto& comm) {
      std::vector<float> in(count), out(count);
      for (std::size_t i = 0; i < count; ++i)
        in[i] = std::sin(static_cast<float>(i * 31 + static_cast<std::size_t>(comm.rank()) * 17)) * 1000.0f;
      comm.all_reduce(in.data(), out.data(), count, paro::ReduceOp::sum, {algo});
      results[static_cast<std::size_t>(comm.rank())] = out;
      return std::vector<std::string>{};
    });
    for (int r = 1; r < n; ++r) EXPECT_EQ(results[0], results[static_cast<std::size_t>(r)]) << "rank " << r;
    for (std::size_t i = 0; i < count; i += 97) {
      double want = 0;
      for (int r = 0; r < n; ++r)
        want += static_cast<double>(std::sin(static_cast<float>(i * 31 + static_cast<std::size_t>(r) * 17)) * 1000.0f);
      EXPECT_NEAR(results[0][i], want, 1e-3 + 1e-5 * std::abs(want)) << "element " << i;
    }
  }
}

}  // namespace
