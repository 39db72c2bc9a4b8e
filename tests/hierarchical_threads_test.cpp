// The hierarchical algorithms (mics_hcs, paro_seq, paro_cc) on emulated clusters of the threads backend:
// two and three levels, even and uneven groups, contiguous and round-robin rank numbering, every scope,
// every collective, data type and op, counts 0 / 1 / odd / multi-MiB, in and out of place, exact values.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "paro/testing/collective_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::Scope;

using paro::all_collectives;
const auto hierarchical_algorithms =
    paro::algorithms::BuiltinAlgorithms::in_family(paro::algorithms::Family::hierarchical);

using ClusterParam = std::tuple<const char*, const char*, Scope>;  // emulation, grouping, scope
class HierarchicalExact : public ::testing::TestWithParam<ClusterParam> {};

TEST_P(HierarchicalExact, EveryTypeOpAndShape) {
  auto [emulate, group, scope] = GetParam();
  auto failures = paro::testing::on_cluster(emulate, group, [&, scope = scope](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : hierarchical_algorithms)
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, scope)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, HierarchicalExact,
    ::testing::Combine(::testing::Values("nodes=2,ranks=4",                    // the paper's shape, small
                                         "nodes=3,ranks=3,order=cyclic",       // groups not contiguous in rank order
                                         "nodes=2,ranks=3:5",                  // uneven groups
                                         "switches=2,nodes=2,ranks=2",         // three levels
                                         "pods=2,switches=2,nodes=2,ranks=2",  // four levels, 16 ranks
                                         "nodes=5,ranks=1"),                   // one rank per node: flat
                       ::testing::Values("node", "switch"),
                       ::testing::Values(Scope::global, Scope::intra, Scope::inter)));

// Every rank count 1..16, as nodes of two or three ranks (the last node takes what is left).
class HierarchicalRankCounts : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalRankCounts, GlobalScope) {
  const int n = GetParam();
  const int per_node = n % 3 == 0 ? 3 : 2;
  std::string ranks;
  for (int left = n; left > 0; left -= per_node)
    ranks += (ranks.empty() ? "" : ":") + std::to_string(std::min(per_node, left));
  const int nodes = (n + per_node - 1) / per_node;
  const std::string emulate = "nodes=" + std::to_string(nodes) + ",ranks=" + ranks;
  auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : hierarchical_algorithms)
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {1, 7, 1000})) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << emulate << "\n" << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(OneToSixteen, HierarchicalRankCounts, ::testing::Range(1, 17));

// Several MiB: many all-reduce pipeline chunks (PARO_CC_CHUNK) and ring chunks inside the levels.
TEST(HierarchicalLarge, PipelinedChunks) {
  setenv("PARO_CC_CHUNK", "300K", 1);
  setenv("PARO_RING_CHUNK", "64K", 1);
  for (const char* emulate : {"nodes=2,ranks=4", "switches=2,nodes=2,ranks=2", "nodes=3,ranks=2,order=cyclic"}) {
    auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
      std::vector<std::string> f;
      for (Collective coll : all_collectives)
        for (Algorithm algo : hierarchical_algorithms) {
          const std::size_t count =
              coll == Collective::all_reduce ? (std::size_t{1} << 20) + 3 : (std::size_t{1} << 20) / comm.size() + 3;
          for (auto dt : {paro::DataType::f32, paro::DataType::bf16})
            for (bool in_place : {false, true}) {
              auto msg = paro::testing::run_case(comm, {coll, algo, dt, paro::ReduceOp::sum, count, in_place});
              if (!msg.empty()) f.push_back(msg);
            }
        }
      return f;
    });
    EXPECT_TRUE(failures.empty()) << emulate << "\n" << paro::testing::first_lines(failures);
  }
  unsetenv("PARO_CC_CHUNK");
  unsetenv("PARO_RING_CHUNK");
}

// paro_cc's levels by lanes (threads; inline: one thread, the unit's steps in the rail's hooks, as
// backends without concurrent communicators get) and by level schedule (PARO_DIRECT_MAX=0: rings
// everywhere; 1M: direct exchanges), on two to four levels, uneven and cyclic groups, and blocks of many
// ring chunks, so that hooks run between the chunks of a step.
using LanesParam = std::tuple<const char*, const char*>;  // PARO_LANES, PARO_DIRECT_MAX
class HierarchicalLanes : public ::testing::TestWithParam<LanesParam> {};

TEST_P(HierarchicalLanes, ParoCcExact) {
  setenv("PARO_LANES", std::get<0>(GetParam()), 1);
  setenv("PARO_DIRECT_MAX", std::get<1>(GetParam()), 1);
  setenv("PARO_RING_CHUNK", "4K", 1);
  for (const char* emulate : {"nodes=2,ranks=4", "nodes=3,ranks=3,order=cyclic", "nodes=2,ranks=3:5",
                              "switches=2,nodes=2,ranks=2", "pods=2,switches=2,nodes=2,ranks=2"}) {
    auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
      std::vector<std::string> f;
      for (Collective coll : all_collectives)
        for (auto& s : paro::testing::run_matrix(comm, coll, Algorithm::paro_cc, {0, 1, 7, 100, 5000})) f.push_back(s);
      return f;
    });
    EXPECT_TRUE(failures.empty()) << emulate << "\n" << paro::testing::first_lines(failures);
  }
  unsetenv("PARO_RING_CHUNK");
  unsetenv("PARO_DIRECT_MAX");
  unsetenv("PARO_LANES");
}

// threads with direct levels is the default, which every other test here runs.
INSTANTIATE_TEST_SUITE_P(LanesAndSchedules, HierarchicalLanes,
                         ::testing::Values(LanesParam{"threads", "0"}, LanesParam{"inline", "0"},
                                           LanesParam{"inline", "1M"}));

}  // namespace
