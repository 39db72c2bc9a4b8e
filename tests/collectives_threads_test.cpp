// Every collective x algorithm on the threads backend at every rank count 1..16: all data types and ops,
// counts 0, 1, small primes and a buffer of several MiB, in place and out of place, exact expected values.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "paro/testing/collective_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::testing::first_lines;
using paro::testing::on_threads;
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
                                                              Collective::reduce_scatter),
                                            ::testing::Values(Algorithm::ring, Algorithm::tree, Algorithm::automatic),
                                            ::testing::Range(1, 17)),
                         param_name);

// Multi-MiB buffers: the ring's chunked pipeline (1 MiB chunks) with uneven blocks.
class ThreadsLargeCollective : public ::testing::TestWithParam<Param> {};

TEST_P(ThreadsLargeCollective, SeveralMiB) {
  auto [coll, algo, n] = GetParam();
  const std::size_t count =
      coll == Collective::all_reduce ? (std::size_t{3} << 20) + 5 : (std::size_t{3} << 20) / n + 3;
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

INSTANTIATE_TEST_SUITE_P(
    Sizes, ThreadsLargeCollective,
    ::testing::Combine(::testing::Values(Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter),
                       ::testing::Values(Algorithm::ring, Algorithm::tree), ::testing::Values(3, 8, 13)),
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
