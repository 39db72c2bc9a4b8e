// The generic collective checks of collective_check.hpp under mpirun (2, 3, 4 and 8 ranks; see
// CMakeLists.txt), with the native MPI collectives as a fourth algorithm. Every rank runs every test;
// ranks other than 0 print only failures.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "any_communicator_check.hpp"
#include "paro/testing/collective_check.hpp"
#include "paro/testing/dp_check.hpp"
#include "paro/testing/nonblocking_check.hpp"
#include "paro/testing/transport_check.hpp"
#include "paro/tools/backends.hpp"
#include "paro/transport/mpi.hpp"
#include "paro/transport/paced.hpp"
#ifdef PARO_HAVE_COMPRESSION
#include "paro/compression/separate.hpp"
#include "paro/testing/separate_check.hpp"
#endif

namespace {

using paro::Algorithm;
using paro::Collective;
using MpiComm = paro::Communicator<paro::mpi::Transport>;
using paro::topology::EmulationSpec;
using PacedMpi = paro::paced::Transport<paro::mpi::Transport>;

MpiComm& world() {
  static MpiComm comm(paro::mpi::Transport::world());
  return comm;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < 8; ++i) out += lines[i] + "\n";
  return out;
}

using Param = std::tuple<Collective, Algorithm>;
class MpiCollective : public ::testing::TestWithParam<Param> {};

TEST_P(MpiCollective, EveryTypeOpAndShape) {
  auto [coll, algo] = GetParam();
  auto failures = paro::testing::run_matrix(world(), coll, algo, {0, 1, 7, 1000});
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(MpiCollective, OneMiBPerRankChunked) {
  auto [coll, algo] = GetParam();
  std::vector<std::string> failures;
  for (bool in_place : {false, true}) {
    auto f = paro::testing::run_case(world(),
                                     {coll, algo, paro::DataType::f32, paro::ReduceOp::sum, (1u << 18) + 3, in_place});
    if (!f.empty()) failures.push_back(f);
  }
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// The same matrix through AnyCommunicator, the backend chosen at run time (any_communicator_check.hpp).
TEST(MpiAnyCommunicator, RunsTheMatrix) {
  auto failures = paro::testing::any_communicator_matrix(paro::mpi::Transport::world());
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// A backend by name: this process's rank of the job, and clear errors for names it cannot join.
TEST(MpiAnyCommunicator, ConnectsByName) {
  paro::AnyCommunicator comm = paro::tools::connect("mpi");
  EXPECT_STREQ(comm.backend(), "mpi");
  std::int64_t x = 1;
  comm.all_reduce(&x, &x, 1, paro::ReduceOp::sum);
  EXPECT_EQ(x, comm.size());
  auto error_of = [](const char* name) {
    try {
      paro::tools::connect(name);
    } catch (const paro::UsageError& e) {
      return e.message();
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("bogus").find("unknown backend; allowed: threads mpi ucx nccl"), std::string::npos)
      << error_of("bogus");
  EXPECT_NE(error_of("threads").find("threads of one process"), std::string::npos) << error_of("threads");
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(paro::name_of(std::get<0>(info.param))) + "_" + paro::name_of(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Mpi, MpiCollective,
                         ::testing::Combine(::testing::Values(Collective::all_reduce, Collective::all_gather,
                                                              Collective::reduce_scatter, Collective::all_to_all),
                                            ::testing::Values(Algorithm::ring, Algorithm::tree, Algorithm::native,
                                                              Algorithm::automatic)),
                         param_name);

TEST(MpiBroadcast, EveryTypeRootAndSize) {
  const auto failures = paro::testing::broadcast_matrix(world(), {0, 1, 7, 1000}, paro::Scope::global, true);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(MpiSplit, ParitySubCommunicatorsReduceIndependently) {
  const auto failures = paro::testing::check_parity_split(world());
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Scoped collectives on groups of 2 (the last one smaller for odd rank counts) and their rails.
class MpiScoped : public ::testing::TestWithParam<paro::Scope> {};

TEST_P(MpiScoped, EveryCollectiveIsExact) {
  paro::CommunicatorConfig config;
  config.group = paro::GroupSpec::custom(2, /*allow_uneven=*/true);
  MpiComm comm(paro::mpi::Transport::world(), config);
  std::vector<std::string> failures;
  for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all})
    for (auto algo : {Algorithm::ring, Algorithm::tree, Algorithm::native})
      for (auto& f : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, GetParam())) failures.push_back(f);
  for (auto& f : paro::testing::broadcast_matrix(comm, {0, 1, 100}, GetParam())) failures.push_back(f);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

INSTANTIATE_TEST_SUITE_P(Mpi, MpiScoped, ::testing::Values(paro::Scope::intra, paro::Scope::inter));

// An emulated cluster for this rank count: three levels at 8 ranks, else two nodes (uneven when odd).
std::string emulated_cluster(int n) {
  if (n == 8) return "switches=2,nodes=2,ranks=2";
  if (n % 2 == 0) return "nodes=2";
  return "nodes=2,ranks=" + std::to_string(n / 2) + ":" + std::to_string(n - n / 2);
}

// The hierarchical algorithms on every scope, with the lanes of paro_cc on MPI_THREAD_MULTIPLE.
class MpiHierarchical : public ::testing::TestWithParam<paro::Scope> {};

TEST_P(MpiHierarchical, EveryCollectiveIsExact) {
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulated_cluster(world().size());
  config.group.allow_uneven = true;
  MpiComm comm(paro::mpi::Transport::world(), config);
  EXPECT_TRUE(comm.transport().concurrent_use()) << "paro::mpi::Environment asks for MPI_THREAD_MULTIPLE";
  std::vector<std::string> failures;
  for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
    for (auto algo : {Algorithm::mics_hcs, Algorithm::paro_seq, Algorithm::paro_cc}) {
      for (auto& f : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, GetParam())) failures.push_back(f);
      for (bool in_place : {false, true}) {  // a MiB per rank: pipeline pieces and chunks
        auto f = paro::testing::run_case(
            comm, {coll, algo, paro::DataType::f32, paro::ReduceOp::sum, (1u << 18) + 3, in_place, GetParam()});
        if (!f.empty()) failures.push_back(f);
      }
    }
  EXPECT_TRUE(failures.empty()) << join(failures);
}

INSTANTIATE_TEST_SUITE_P(Mpi, MpiHierarchical,
                         ::testing::Values(paro::Scope::global, paro::Scope::intra, paro::Scope::inter));

// Nonblocking collectives in flight on an emulated cluster: mixed collectives, algorithms (native
// included), scopes, types and counts, completed out of order, exact.
TEST(MpiNonblocking, ManyInFlightMixedExact) {
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulated_cluster(world().size());
  config.group.allow_uneven = true;
  MpiComm comm(paro::mpi::Transport::world(), config);
  std::vector<std::string> failures;
  for (std::uint64_t seed = 0; seed < 4; ++seed)
    for (auto& f : paro::testing::check_nonblocking(comm, seed, 10)) failures.push_back(f);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Processes of one machine share the emulated NICs through shared memory.
TEST(MpiPaced, SharedLinksAcrossProcesses) {
  const std::string emulate = emulated_cluster(world().size()) + ",intra_gbps=400,inter_gbps=40,inter_us=50";
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulate;
  config.group.allow_uneven = true;
  paro::Communicator comm(PacedMpi::wrap(paro::mpi::Transport::world(), EmulationSpec::parse(emulate)), config);
  std::vector<std::string> failures;
  for (auto coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
    for (auto algo : {Algorithm::ring, Algorithm::paro_cc, Algorithm::automatic})
      for (auto& f : paro::testing::run_matrix(comm, coll, algo, {1, 1000})) failures.push_back(f);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// The transport conformance suite (paro/testing/transport_check.hpp), plain and through the paced decorator.
TEST(MpiTransport, Conformance) {
  auto t = paro::mpi::Transport::world();
  auto failures = paro::testing::check_transport_conformance(t);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(PacedMpiTransport, Conformance) {
  const std::string emulate = emulated_cluster(world().size()) + ",intra_gbps=8000,inter_gbps=800,inter_us=5";
  auto t = PacedMpi::wrap(paro::mpi::Transport::world(), EmulationSpec::parse(emulate));
  auto failures = paro::testing::check_transport_conformance(t);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// PaRO-DP over processes: every strategy against plain data parallelism, and the model's bytes exactly.
TEST(MpiDp, EveryStrategyMatchesAndSendsTheModelsBytes) {
  const int n = world().size();
  const std::string emulate = n % 2 == 0 ? "nodes=2" : "nodes=" + std::to_string(n);
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulate;
  paro::Communicator comm(PacedMpi::wrap(paro::mpi::Transport::world(), EmulationSpec::parse(emulate), true), config);
  const int me = comm.rank();
  auto failures = paro::testing::check_strategies(comm, {}, [me] { return paro::testing::take_traced_traffic(me); });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

#ifdef PARO_HAVE_COMPRESSION
// SEPARATE over processes: the flat, hierarchical and native all-reduces and a sharded reduce-scatter.
TEST(MpiSeparate, MatchesTheTranscription) {
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulated_cluster(world().size());
  config.group.allow_uneven = true;
  MpiComm comm(paro::mpi::Transport::world(), config);
  std::vector<std::string> failures;
  for (auto algo : {Algorithm::ring, Algorithm::paro_cc, Algorithm::native})
    for (bool sharded : {false, true})
      for (auto& f : paro::testing::check_separate<paro::compression::Separate>(
               comm, {algo, paro::Scope::global, paro::DataType::f32, sharded}))
        failures.push_back(f);
  EXPECT_TRUE(failures.empty()) << join(failures);
}
#endif

// Without Slurm variables, mpirun's ranks share one machine: MPI_COMM_TYPE_SHARED names the node and
// Open MPI's local ranks order it. Under tests/slurm_env.sh: 4 nodes, 2 leaf switches, one pod.
TEST(MpiTopology, DiscoveredFromTheLauncher) {
  const paro::Topology& t = world().topology();
  if (!paro::env::get("SLURM_TOPOLOGY_ADDR")) {
    EXPECT_EQ(t.source("node"), "MPI_COMM_TYPE_SHARED");
    EXPECT_EQ(t.source("local"), "OMPI_COMM_WORLD_LOCAL_RANK");
    EXPECT_EQ(world().groups().members.size(), 1u);
    return;
  }
  ASSERT_EQ(world().size(), 8) << "slurm_env.sh describes 8 ranks";
  EXPECT_EQ(t.source("node"), "SLURM_TOPOLOGY_ADDR");
  EXPECT_EQ(t.source("local"), "SLURM_LOCALID");
  EXPECT_EQ(t.source("switch"), "SLURM_TOPOLOGY_ADDR");
  EXPECT_EQ(t.ranks[5].node, "node2");
  EXPECT_EQ(t.ranks[5].switch_name, "leaf1");
  EXPECT_EQ(t.ranks[5].pod, "top");
  paro::CommunicatorConfig config;
  config.group = paro::GroupSpec::by(paro::Level::switch_);
  MpiComm by_switch(paro::mpi::Transport::world(), config);
  EXPECT_EQ(by_switch.groups().members, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  auto failures =
      paro::testing::run_matrix(by_switch, Collective::all_reduce, Algorithm::ring, {1, 100}, paro::Scope::intra);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// Pacing changes no discovery: over paced mpi the node still comes from MPI_COMM_TYPE_SHARED (without
// Slurm variables), which needs the inner transport's shared_memory_id.
TEST(MpiTopology, PacedKeepsTheSources) {
  const auto spec = EmulationSpec::parse(emulated_cluster(world().size()) + ",inter_gbps=800");
  paro::Communicator paced(PacedMpi::wrap(paro::mpi::Transport::world(), spec));
  EXPECT_EQ(paced.topology().sources, world().topology().sources);
  if (!paro::env::get("SLURM_TOPOLOGY_ADDR")) {
    EXPECT_EQ(paced.topology().source("node"), "MPI_COMM_TYPE_SHARED");
  }
}

}  // namespace

int main(int argc, char** argv) {
  paro::mpi::Environment env(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) GTEST_FLAG_SET(brief, true);  // read by InitGoogleTest when it picks the printer
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
