// The hierarchical algorithms (mics_hcs, paro_seq, paro_cc) on emulated clusters of the threads backend:
// two and three levels, even and uneven groups, contiguous and round-robin rank numbering, every scope,
// every collective, data type and op, counts 0 / 1 / odd / multi-MiB, in and out of place, exact values.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "paro/tools/calibration.hpp"
#include "paro/tools/launch.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::Scope;

using paro::all_collectives;
// The hierarchical algorithms that run coll (mics_hcs has no all_to_all).
std::vector<Algorithm> hierarchical_for(Collective coll) {
  using Builtin = paro::algorithms::BuiltinAlgorithms;
  std::vector<Algorithm> out;
  for (Algorithm a : Builtin::in_family(paro::algorithms::Family::hierarchical))
    if (Builtin::implements(a, coll)) out.push_back(a);
  return out;
}

using ClusterParam = std::tuple<const char*, const char*, Scope>;  // emulation, grouping, scope
class HierarchicalExact : public ::testing::TestWithParam<ClusterParam> {};

TEST_P(HierarchicalExact, EveryTypeOpAndShape) {
  auto [emulate, group, scope] = GetParam();
  auto failures = paro::testing::on_cluster(emulate, group, [&, scope = scope](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : hierarchical_for(coll))
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
      for (Algorithm algo : hierarchical_for(coll))
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {1, 7, 1000})) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << emulate << "\n" << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(OneToSixteen, HierarchicalRankCounts, ::testing::Range(1, 17));

// Several MiB: many all-reduce pipeline chunks (PARO_CC_CHUNK) and ring chunks inside the levels; and
// paro_cc with every level direct, whatever its blocks' size (PARO_CC_DIRECT=1).
TEST(HierarchicalLarge, PipelinedChunks) {
  setenv("PARO_CC_CHUNK", "300K", 1);
  setenv("PARO_RING_CHUNK", "64K", 1);
  for (const char* all_direct : {"0", "1"})
    for (const char* emulate : {"nodes=2,ranks=4", "switches=2,nodes=2,ranks=2", "nodes=3,ranks=2,order=cyclic"}) {
      setenv("PARO_CC_DIRECT", all_direct, 1);
      auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
        std::vector<std::string> f;
        for (Collective coll : all_collectives)
          for (Algorithm algo : hierarchical_for(coll)) {
            const std::size_t blocks = coll == Collective::all_reduce   ? 1
                                       : coll == Collective::all_to_all ? comm.size() * comm.size()
                                                                        : comm.size();
            const std::size_t count = (std::size_t{1} << 20) / blocks + 3;
            for (auto dt : {paro::DataType::f32, paro::DataType::bf16})
              for (bool in_place : {false, true}) {
                auto msg = paro::testing::run_case(comm, {coll, algo, dt, paro::ReduceOp::sum, count, in_place});
                if (!msg.empty()) f.push_back(msg);
              }
          }
        return f;
      });
      EXPECT_TRUE(failures.empty()) << emulate << " PARO_CC_DIRECT=" << all_direct << "\n"
                                    << paro::testing::first_lines(failures);
    }
  unsetenv("PARO_CC_DIRECT");
  unsetenv("PARO_CC_CHUNK");
  unsetenv("PARO_RING_CHUNK");
}

// paro_cc's levels by lanes (threads; inline: one thread, the unit's steps in the rail's hooks, as
// backends without concurrent communicators get) and by level schedule (PARO_DIRECT_MAX=0: rings
// everywhere; 1M: direct exchanges, inline either each level's shards together or one at a time), on two
// to four levels, uneven and cyclic groups, and blocks of many ring chunks, so that hooks run between the
// chunks of a step. Together with PARO_CC_CHUNK=1K the blocks are cut into pieces that flow through the
// levels at once (an all-gather of 100 floats per rank on 8 ranks: 4 pieces; of 5000: 157).
using LanesParam = std::tuple<const char*, const char*, const char*, const char*>;  // PARO_LANES, _DIRECT_MAX,
                                                                                    // _CC_TOGETHER, _CC_CHUNK
class HierarchicalLanes : public ::testing::TestWithParam<LanesParam> {};

TEST_P(HierarchicalLanes, ParoCcExact) {
  setenv("PARO_LANES", std::get<0>(GetParam()), 1);
  setenv("PARO_DIRECT_MAX", std::get<1>(GetParam()), 1);
  setenv("PARO_CC_TOGETHER", std::get<2>(GetParam()), 1);
  setenv("PARO_CC_CHUNK", std::get<3>(GetParam()), 1);
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
  unsetenv("PARO_CC_CHUNK");
  unsetenv("PARO_DIRECT_WINDOW");
  unsetenv("PARO_CC_TOGETHER");
  unsetenv("PARO_DIRECT_MAX");
  unsetenv("PARO_LANES");
}

// The default (auto: threads or inline per call, as the cost model predicts faster), which every other
// test here runs, takes inline lanes for calls this small.
INSTANTIATE_TEST_SUITE_P(LanesAndSchedules, HierarchicalLanes,
                         ::testing::Values(LanesParam{"threads", "0", "0", "0"},
                                           LanesParam{"threads", "256K", "0", "0"}, LanesParam{"inline", "0", "0", "0"},
                                           LanesParam{"inline", "1M", "1", "0"}, LanesParam{"inline", "1M", "1", "1K"},
                                           LanesParam{"inline", "1M", "0", "0"}));

// paro_cc over a scope cut by its nodes alone (PARO_CC_NODES_ONLY=1: one rail over every node where the
// topology has switches or pods above them), on lane threads, inline together and inline one shard at a
// time; uneven and cyclic placements.
TEST(HierarchicalNodesOnly, ParoCcExact) {
  setenv("PARO_CC_NODES_ONLY", "1", 1);
  setenv("PARO_DIRECT_MAX", "1M", 1);
  for (const char* lanes : {"threads", "inline"})
    for (const char* together : {"0", "1"}) {
      if (std::string(lanes) == "threads" && std::string(together) == "1") continue;  // together is inline only
      setenv("PARO_LANES", lanes, 1);
      setenv("PARO_CC_TOGETHER", together, 1);
      for (const char* emulate : {"pods=2,switches=2,nodes=2,ranks=2", "pods=2,nodes=3,ranks=2:3:2:3:3:2",
                                  "switches=2,nodes=2,ranks=3,order=cyclic"}) {
        auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
          std::vector<std::string> f;
          for (Collective coll : all_collectives)
            for (auto& s : paro::testing::run_matrix(comm, coll, Algorithm::paro_cc, {0, 1, 7, 100, 3000}))
              f.push_back(s);
          return f;
        });
        EXPECT_TRUE(failures.empty()) << emulate << " PARO_LANES=" << lanes << " PARO_CC_TOGETHER=" << together << "\n"
                                      << paro::testing::first_lines(failures);
      }
    }
  for (const char* name : {"PARO_CC_NODES_ONLY", "PARO_DIRECT_MAX", "PARO_LANES", "PARO_CC_TOGETHER"}) unsetenv(name);
}

// paro_cc's all-reduce with its rail in one round (direct_all_reduce: every unit's piece to every other,
// reduced in rank order), pinned; the units' own levels on lane threads and inline; uneven, cyclic and
// three-level placements, and 18 units (more than the 16 exchanges in flight).
TEST(HierarchicalOneRound, ParoCcAllReduceExact) {
  setenv("PARO_ALGO", "all_reduce:paro_cc(one_round=1)", 1);
  for (const char* lanes : {"threads", "inline"}) {
    setenv("PARO_LANES", lanes, 1);
    for (const char* emulate : {"nodes=2,ranks=4", "nodes=3,ranks=2:3:1", "switches=2,nodes=2,ranks=3,order=cyclic",
                                "pods=2,switches=2,nodes=2,ranks=2", "nodes=18,ranks=2"}) {
      auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
        std::vector<std::string> f;
        for (auto& s :
             paro::testing::run_matrix(comm, Collective::all_reduce, Algorithm::paro_cc, {0, 1, 7, 100, 3000}))
          f.push_back(s);
        return f;
      });
      EXPECT_TRUE(failures.empty()) << emulate << " PARO_LANES=" << lanes << "\n"
                                    << paro::testing::first_lines(failures);
    }
  }
  unsetenv("PARO_ALGO");
  unsetenv("PARO_LANES");
}

// Hierarchies built ahead (Communicator::build_hierarchies, as paro-bench does before timing) are the ones
// later calls use: every hierarchical algorithm, both cuts (pods: by levels or by nodes alone), every scope
// (the intra and inter scopes of groups by switch), exact afterwards; building twice changes nothing.
TEST(HierarchiesBuiltAhead, LaterCallsAreExact) {
  for (const char* emulate : {"pods=2,switches=2,nodes=2,ranks=2", "nodes=3,ranks=2:3:1"}) {
    auto failures = paro::testing::on_cluster(emulate, "switch", [](auto& comm) {
      comm.build_hierarchies();
      comm.build_hierarchies();
      std::vector<std::string> f;
      for (Collective coll : all_collectives)
        for (Algorithm a : hierarchical_for(coll))
          for (paro::Scope scope : paro::all_scopes) {
            auto msg =
                paro::testing::run_case(comm, {coll, a, paro::DataType::f32, paro::ReduceOp::sum, 37, false, scope});
            if (!msg.empty()) f.push_back(msg);
          }
      return f;
    });
    EXPECT_TRUE(failures.empty()) << emulate << "\n" << paro::testing::first_lines(failures);
  }
}

// Inline lanes together over rails of more units than direct exchanges in flight (16 with
// PARO_DIRECT_WINDOW=0; small blocks otherwise go to every unit at once): my unit moves the units' shards
// in batches of a window while the rail's next window flies (paro_cc.hpp, rail_batches); 18 units: two
// windows, 34: three; whole, and in pieces (PARO_CC_CHUNK=1K: 43 for 300 floats per rank on 36 ranks);
// and with the default window, one.
TEST(HierarchicalBatches, ParoCcExactOverSeveralWindows) {
  setenv("PARO_LANES", "inline", 1);
  setenv("PARO_DIRECT_MAX", "1M", 1);
  setenv("PARO_CC_TOGETHER", "1", 1);
  for (const char* window : {"0", "1M"})
    for (const char* chunk : {"0", "1K"})
      for (const char* emulate : {"nodes=18,ranks=2", "nodes=34,ranks=2"}) {
        setenv("PARO_DIRECT_WINDOW", window, 1);
        setenv("PARO_CC_CHUNK", chunk, 1);
        auto failures = paro::testing::on_cluster(emulate, "node", [](auto& comm) {
          std::vector<std::string> f;
          for (Collective coll : all_collectives)
            for (auto dt : {paro::DataType::f32, paro::DataType::i32})
              for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{300}})
                for (bool in_place : {false, true}) {
                  auto msg = paro::testing::run_case(
                      comm, {coll, Algorithm::paro_cc, dt, paro::ReduceOp::sum, count, in_place});
                  if (!msg.empty()) f.push_back(msg);
                }
          return f;
        });
        EXPECT_TRUE(failures.empty()) << emulate << " PARO_CC_CHUNK=" << chunk << " PARO_DIRECT_WINDOW=" << window
                                      << "\n"
                                      << paro::testing::first_lines(failures);
      }
  unsetenv("PARO_CC_CHUNK");
  unsetenv("PARO_CC_TOGETHER");
  unsetenv("PARO_DIRECT_MAX");
  unsetenv("PARO_LANES");
}

// A plan is a value: the PARO_ALGO entry that pins automatic's pick (Communicator::pin, what paro-bench
// --explain prints) plans the same on every rank and gives the same bits as the automatic run, on floats
// whose sums depend on the order of their additions; a pin of another plan takes effect.
TEST(PinnedPlans, ReproduceTheAutomaticRunBitwise) {
  struct Run {
    std::string pin;  // what this rank would run
    std::vector<float> out;
  };
  auto run = [](const std::string& emulate, const std::string& algorithms, Collective coll, std::size_t count) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    config.tuning.algorithms = algorithms;
    const int n = paro::topology::EmulationSpec::parse(emulate).rank_count().value();
    return paro::tools::run_on_thread_ranks(n, config, [&](auto& comm) {
      const paro::BufferShape shape = paro::buffer_shape(coll, count, n, comm.rank());
      std::vector<float> in(shape.in);
      Run mine{comm.pin(coll, shape.full * sizeof(float)), std::vector<float>(shape.out)};
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1e3f * std::sin(1.7f * static_cast<float>(i) + comm.rank());
      comm.collective(coll, in.data(), mine.out.data(), count, paro::DataType::f32, paro::ReduceOp::sum, {});
      return mine;
    });
  };
  for (const char* emulate : {"nodes=2,ranks=4,intra_gbps=20,inter_gbps=2,nic=shared",
                              "nodes=4,ranks=2,intra_gbps=20,inter_gbps=2,nic=per_rank"})
    for (Collective coll : all_collectives)
      for (std::size_t count : {std::size_t{4096}, std::size_t{1} << 18}) {
        const auto automatic = run(emulate, "", coll, count);
        const std::string pin = automatic.front().pin;
        const auto pinned = run(emulate, pin, coll, count);
        for (std::size_t r = 0; r < automatic.size(); ++r) {
          EXPECT_EQ(automatic[r].pin, pin) << emulate << " rank " << r;
          EXPECT_EQ(pinned[r].pin, pin) << emulate << " rank " << r;
          ASSERT_EQ(pinned[r].out.size(), automatic[r].out.size());
          EXPECT_EQ(std::memcmp(pinned[r].out.data(), automatic[r].out.data(), automatic[r].out.size() * sizeof(float)),
                    0)
              << emulate << " " << pin << " rank " << r << ": not the same bits";
        }
      }
  // Pins fix what they name and leave the rest to the model.
  const std::string other = "allgather:paro_cc(chunk=4K,lanes=inline,together=1)";
  const auto forced = run("nodes=2,ranks=4,intra_gbps=20,inter_gbps=2,nic=shared", other, Collective::all_gather, 4096);
  for (const char* part : {"all_gather:paro_cc(chunk=4K,lanes=inline,together=1,", ",direct="})
    EXPECT_NE(forced.front().pin.find(part), std::string::npos) << forced.front().pin;
}

TEST(PinnedPlans, BadPinsSayWhatIsAllowed) {
  auto error_of = [](const char* text) {
    return paro::testing::error_of([&] { paro::AlgorithmOverrides::parse(text); });
  };
  EXPECT_NE(error_of("allreduce:paro_cc(bogus=1)")
                .find("unknown parameter 'bogus'; allowed: chunk, lanes, together, "
                      "nodes_only, direct"),
            std::string::npos);
  EXPECT_NE(error_of("paro_cc(lanes=sideways)").find("lanes=sideways; allowed: inline or threads"), std::string::npos);
  EXPECT_NE(error_of("paro_cc(chunk=lots)").find("is not a size"), std::string::npos);
  EXPECT_NE(error_of("allreduce:ring(chunk=1M)").find("ring takes no parameters"), std::string::npos);
  EXPECT_NE(error_of("allreduce:paro_cc(chunk=1M").find("is not '(key=value,...)'"), std::string::npos);
  // Entries split at ';' and ',' outside the parentheses only.
  const auto o = paro::AlgorithmOverrides::parse("allgather:paro_cc(chunk=1M,together=1),allreduce:ring");
  EXPECT_EQ(o[Collective::all_gather], Algorithm::paro_cc);
  EXPECT_EQ(o.pins(Collective::all_gather).size(), 2u);
  EXPECT_EQ(o[Collective::all_reduce], Algorithm::ring);
  // An entry for all collectives applies to those its algorithm runs; the others stay automatic.
  const auto all = paro::AlgorithmOverrides::parse("mics_hcs");
  EXPECT_EQ(all[Collective::all_gather], Algorithm::mics_hcs);
  EXPECT_EQ(all[Collective::all_to_all], Algorithm::automatic);
}

#ifndef PARO_TEST_RECORDED  // a calibration measures host backends; NCCL's message rules add nothing here
// A calibration on a backend that allows lane threads (PARO_LANES=auto) times paro_cc at every size both
// on threads and inline, and leaves the communicator's lanes as they were: automatic calls after it are
// exact.
TEST(Calibrate, TimesParoCcOnBothLanesAndRestoresThem) {
  auto failures = paro::testing::on_cluster("nodes=2,ranks=2", "node", [](auto& comm) {
    std::vector<std::string> f;
    const paro::algorithms::FitReport fit = paro::calibrate(comm, /*rounds=*/1);
    std::map<std::pair<Collective, double>, std::set<bool>> lanes;
    for (const auto& p : fit.points)
      if (p.algorithm == Algorithm::paro_cc && p.collective != Collective::all_to_all)  // all_to_all has no lanes
        lanes[{p.collective, p.bytes}].insert(p.lanes_inline);
    if (lanes.size() != 3 * 8) f.push_back(paro::detail::concat(lanes.size(), " paro_cc sizes, not 24"));
    for (const auto& [point, ran] : lanes)
      if (ran.size() != 2)
        f.push_back(paro::detail::concat(paro::name_of(point.first), " ", point.second, ": paro_cc on one lane mode"));
    if (comm.tuning().lanes != paro::algorithms::LaneChoice::faster ||
        comm.shape(Scope::global).lanes != paro::algorithms::LaneChoice::faster)
      f.push_back("the lanes were not restored");
    for (Collective coll : all_collectives)
      for (auto& s : paro::testing::run_matrix(comm, coll, Algorithm::automatic, {1, 5000})) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}
#endif

// NaN and infinity through every algorithm (flat and hierarchical, on an emulated 2 x 3 cluster), as
// core/reduce_op.hpp documents: a NaN on any rank, or +inf meeting -inf in a sum, gives the canonical NaN
// whatever the combining order; infinities otherwise win sums, products, minima and maxima. Element g
// holds its special values on ranks (g / 5) % n and the one after; the others hold 1 (or 2).
namespace non_finite {

template <class T>
T make(double v) {
  return T(static_cast<float>(v));
}
template <>
double make<double>(double v) {
  return v;
}
template <class T>
double value(T x) {
  return static_cast<double>(static_cast<float>(x));
}
template <>
double value<double>(double x) {
  return x;
}
// A NaN with a payload, which every op must replace by the canonical one.
template <class T>
T payload_nan();
template <>
float payload_nan<float>() {
  return paro::detail::bits_float(0x7FC12345u);
}
template <>
double payload_nan<double>() {
  const std::uint64_t bits = 0x7FF8000012345678ull;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
template <>
paro::f16 payload_nan<paro::f16>() {
  return paro::f16::from_bits(0x7E55);
}
template <>
paro::bf16 payload_nan<paro::bf16>() {
  return paro::bf16::from_bits(0x7FD5);
}
template <class T>
bool is_canonical_nan(T x) {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t bits;
    std::memcpy(&bits, &x, 2);
    return bits == paro::detail::half_nan_bits;
  } else if constexpr (sizeof(T) == 4) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return bits == paro::detail::float_nan_bits;
  } else {
    std::uint64_t bits;
    std::memcpy(&bits, &x, 8);
    return bits == paro::detail::double_nan_bits;
  }
}

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_marker = std::numeric_limits<double>::quiet_NaN();

template <class T>
T input(std::size_t g, int r, int n) {
  const int s = static_cast<int>(g / 5 % static_cast<std::size_t>(n)), s2 = (s + 1) % n;
  switch (g % 5) {
    case 0: return r == s ? payload_nan<T>() : make<T>(1);
    case 1: return make<T>(r == s ? inf : 1);
    case 2: return make<T>(r == s ? inf : r == s2 ? -inf : 1);
    case 3: return make<T>(1);
    default: return make<T>(r == s ? -inf : 2);
  }
}

// The expected result at g (nan_marker: the canonical NaN).
double expected(std::size_t g, paro::ReduceOp op, int n) {
  using paro::ReduceOp;
  const bool sum_like = op == ReduceOp::sum || op == ReduceOp::avg;
  switch (g % 5) {
    case 0: return nan_marker;
    case 1: return op == ReduceOp::min ? 1 : inf;
    case 2:
      if (n == 1) return inf;  // the one rank holds +inf
      return sum_like ? nan_marker : op == ReduceOp::max ? inf : -inf;
    case 3: return op == ReduceOp::sum ? n : 1;
    default: return op == ReduceOp::max && n > 1 ? 2 : -inf;
  }
}

template <class T, class Comm>
std::vector<std::string> check(Comm& comm, Collective c, Algorithm a, paro::ReduceOp op) {
  constexpr std::size_t count = 50;
  const int n = comm.size(), me = comm.rank();
  const std::size_t in_count = c == Collective::all_reduce ? count : count * static_cast<std::size_t>(n);
  std::vector<T> in(in_count), out(count);
  for (std::size_t g = 0; g < in_count; ++g) in[g] = input<T>(g, me, n);
  if (c == Collective::all_reduce)
    comm.all_reduce(in.data(), out.data(), count, op, {a});
  else
    comm.reduce_scatter(in.data(), out.data(), count, op, {a});
  std::vector<std::string> f;
  const std::size_t first = c == Collective::all_reduce ? 0 : static_cast<std::size_t>(me) * count;
  for (std::size_t i = 0; i < count && f.empty(); ++i) {
    const double want = expected(first + i, op, n), got = value(out[i]);
    const bool ok = std::isnan(want) ? is_canonical_nan(out[i]) : got == want;
    if (!ok)
      f.push_back(paro::detail::concat("rank ", me, ": ", paro::name_of(c), " ", paro::name_of(a), " ",
                                       paro::name_of(paro::data_type_v<T>), " ", paro::name_of(op), " element ",
                                       first + i, ": ", got, " where ", want, " was due"));
  }
  return f;
}

}  // namespace non_finite

TEST(NonFinite, NaNAndInfinityFollowTheOpsOnEveryAlgorithm) {
  auto failures = paro::testing::on_cluster("nodes=2,ranks=3", "node", [](auto& comm) {
    std::vector<std::string> f;
    auto add = [&](std::vector<std::string> more) { f.insert(f.end(), more.begin(), more.end()); };
    for (Collective c : {Collective::all_reduce, Collective::reduce_scatter})
      for (Algorithm a :
           {Algorithm::ring, Algorithm::tree, Algorithm::mics_hcs, Algorithm::paro_seq, Algorithm::paro_cc})
        for (paro::ReduceOp op : paro::all_reduce_ops) {
          add(non_finite::check<float>(comm, c, a, op));
          add(non_finite::check<double>(comm, c, a, op));
          add(non_finite::check<paro::f16>(comm, c, a, op));
          add(non_finite::check<paro::bf16>(comm, c, a, op));
        }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

}  // namespace
