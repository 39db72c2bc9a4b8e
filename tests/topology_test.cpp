// Topology discovery from every source, groupings and rails, bad input, and scoped collectives on the
// threads backend. Resolution is a pure function of all ranks' facts, so most cases build those facts
// by hand; the threads cases run the real exchange.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Groups;
using paro::GroupSpec;
using paro::Level;
using paro::Topology;
using paro::topology::EmulationSpec;
using paro::topology::LocalFacts;
using paro::topology::resolve;
using paro::topology::TopologyFile;

#define EXPECT_ERROR_CONTAINS(statement, part)                                  \
  try {                                                                         \
    statement;                                                                  \
    ADD_FAILURE() << "no error; expected one containing: " << (part);           \
  } catch (const paro::Error& e) {                                              \
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what(); \
  }

// One rank's facts: its host and boot id plus any variables.
LocalFacts facts(const std::string& host, std::map<std::string, std::string> vars = {}, const std::string& boot = "b") {
  LocalFacts f;
  f.values = std::move(vars);
  f.values["host"] = host;
  f.values["boot"] = boot;
  return f;
}

std::vector<int> locals(const Topology& t) {
  std::vector<int> out;
  for (auto& p : t.ranks) out.push_back(p.local);
  return out;
}

std::vector<std::string> nodes(const Topology& t) {
  std::vector<std::string> out;
  for (auto& p : t.ranks) out.push_back(p.node);
  return out;
}

TEST(Discovery, HostIdentityWithNonContiguousRanks) {
  const Topology t = resolve({facts("a"), facts("a"), facts("b"), facts("b"), facts("a"), facts("b")}, nullptr);
  EXPECT_EQ(nodes(t), (std::vector<std::string>{"a", "a", "b", "b", "a", "b"}));
  EXPECT_EQ(locals(t), (std::vector<int>{0, 1, 0, 1, 2, 2}));
  EXPECT_EQ(t.host_order(), (std::vector<int>{0, 1, 4, 2, 3, 5}));
  EXPECT_EQ(t.source("node"), "hostname + boot id");
  EXPECT_EQ(t.source("local"), "rank order within the node");
  EXPECT_FALSE(t.knows(Level::switch_));
}

TEST(Discovery, SameHostnameDifferentBootIsTwoNodes) {
  const Topology t = resolve({facts("a", {}, "x"), facts("a", {}, "y")}, nullptr);
  EXPECT_NE(t.ranks[0].node, t.ranks[1].node);
}

TEST(Discovery, LauncherLocalRanksAreUsedAsGiven) {
  auto f = [](const char* host, int local) {
    return facts(host, {{"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}});
  };
  const Topology t = resolve({f("a", 2), f("a", 0), f("b", 0), f("a", 1), f("b", 1), f("b", 2)}, nullptr);
  EXPECT_EQ(locals(t), (std::vector<int>{2, 0, 0, 1, 1, 2}));
  EXPECT_EQ(t.source("local"), "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(t.host_order(), (std::vector<int>{1, 3, 0, 2, 4, 5}));
}

// Every launcher's local-rank variable orders the ranks of a node (given here in reverse rank order).
class LauncherLocals : public ::testing::TestWithParam<paro::topology::LocalVariables> {};

TEST_P(LauncherLocals, OrderTheNode) {
  const auto vars = GetParam();
  std::vector<LocalFacts> all;
  for (int r = 0; r < 3; ++r) {
    std::map<std::string, std::string> v = {{vars.local, std::to_string(2 - r)}};
    if (vars.size) v[vars.size] = "3";
    all.push_back(facts("h", v));
  }
  const Topology t = resolve(all, nullptr);
  EXPECT_EQ(t.source("local"), vars.local);
  EXPECT_EQ(locals(t), (std::vector<int>{2, 1, 0}));
}

INSTANTIATE_TEST_SUITE_P(Every, LauncherLocals, ::testing::ValuesIn(paro::topology::launcher_locals));

TEST(Discovery, EveryLauncherNodeVariable) {
  for (const char* var : paro::topology::launcher_nodes) {
    const Topology t = resolve({facts("h", {{var, "0"}}), facts("h", {{var, "1"}}), facts("h", {{var, "0"}})}, nullptr);
    EXPECT_EQ(t.source("node"), var);
    EXPECT_EQ(nodes(t), (std::vector<std::string>{"h", "h#1", "h"}));
  }
}

TEST(Discovery, AContradictoryLauncherIsSkippedForAConsistentOne) {
  // mpirun inside one Slurm step: every rank inherits SLURM_LOCALID=0; Open MPI's variables are right.
  std::vector<LocalFacts> all;
  for (int r = 0; r < 4; ++r)
    all.push_back(facts("a", {{"SLURM_LOCALID", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)}}));
  const Topology t = resolve(all, nullptr);
  EXPECT_EQ(t.source("local"), "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(locals(t), (std::vector<int>{0, 1, 2, 3}));
}

TEST(Discovery, ContradictionsAreErrorsNamingTheSource) {
  auto sized = [](int local, const char* size) {
    return facts("a", {{"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", size}});
  };
  EXPECT_ERROR_CONTAINS(
      resolve({sized(0, "1"), sized(1, "1")}, nullptr),
      "OMPI_COMM_WORLD_LOCAL_SIZE=1 on rank 0 but its OMPI_COMM_WORLD_LOCAL_RANK is 0 and node 'a' has 2 ranks");
  EXPECT_ERROR_CONTAINS(resolve({facts("a", {{"LOCAL_RANK", "0"}}), facts("a", {{"LOCAL_RANK", "0"}})}, nullptr),
                        "LOCAL_RANK gives ranks 0 and 1 the same local index 0 on node 'a'");
  EXPECT_ERROR_CONTAINS(
      resolve({facts("a", {{"LOCAL_RANK", "0"}}), facts("a", {{"LOCAL_RANK", "1"}}), facts("a")}, nullptr),
      "LOCAL_RANK is set on 2 rank(s) but not on rank 2");
  EXPECT_ERROR_CONTAINS(resolve({facts("a", {{"SLURM_NODEID", "0"}}), facts("b", {{"SLURM_NODEID", "0"}})}, nullptr),
                        "SLURM_NODEID puts two ranks on node '0' but they run on different hosts");
  EXPECT_ERROR_CONTAINS(resolve({facts("a", {{"LOCAL_RANK", "x"}})}, nullptr), "LOCAL_RANK='x' on rank 0");
}

TEST(Discovery, ASubCommunicatorKeepsTheLauncherOrder) {
  // Ranks 1 and 3 of a node whose world has 4: local indices become 0 and 1 in launcher order.
  auto f = [](int local) { return facts("a", {{"LOCAL_RANK", std::to_string(local)}, {"LOCAL_WORLD_SIZE", "4"}}); };
  const Topology t = resolve({f(3), f(1)}, nullptr);
  EXPECT_EQ(locals(t), (std::vector<int>{1, 0}));
}

TEST(Discovery, LauncherNodeIdsSplitOneHost) {
  // Slurm-style node ids on one machine (a wrapper emulating nodes): four nodes named after the host.
  std::vector<LocalFacts> all;
  for (int r = 0; r < 8; ++r)
    all.push_back(facts("vm", {{"SLURM_NODEID", std::to_string(r / 2)}, {"SLURM_LOCALID", std::to_string(r % 2)}}));
  const Topology t = resolve(all, nullptr);
  EXPECT_EQ(t.source("node"), "SLURM_NODEID");
  EXPECT_EQ(t.source("local"), "SLURM_LOCALID");
  EXPECT_EQ(Groups::make(t, GroupSpec::by(Level::node)).members.size(), 4u);
}

TEST(Discovery, SlurmTopologyAddressGivesSwitchAndPod) {
  std::vector<LocalFacts> all;
  for (int r = 0; r < 8; ++r)
    all.push_back(facts("vm", {{"SLURM_TOPOLOGY_ADDR", "top" + std::to_string(r / 4) + ".leaf" + std::to_string(r / 2) +
                                                           ".node" + std::to_string(r)},
                               {"SLURM_TOPOLOGY_ADDR_PATTERN", "switch.switch.node"}}));
  const Topology t = resolve(all, nullptr);
  EXPECT_TRUE(t.knows(Level::switch_));
  EXPECT_TRUE(t.knows(Level::pod));
  EXPECT_EQ(t.ranks[5].node, "node5");
  EXPECT_EQ(t.ranks[5].switch_name, "leaf2");
  EXPECT_EQ(t.ranks[5].pod, "top1");
  EXPECT_EQ(Groups::make(t, GroupSpec::by(Level::switch_)).members.size(), 4u);
  EXPECT_EQ(Groups::make(t, GroupSpec::by(Level::pod)).members.size(), 2u);
  all[3].values["SLURM_TOPOLOGY_ADDR"] = "leaf1.node3";
  EXPECT_ERROR_CONTAINS(resolve(all, nullptr), "does not match SLURM_TOPOLOGY_ADDR_PATTERN");
}

const char* good_file = R"({
  "hosts": [ {"name": "g1", "switch": "s1", "pod": "p1"}, {"name": "g2", "switch": "s1", "pod": "p1"},
             {"name": "g3", "switch": "s2", "pod": "p1"} ],
  "ranks": ["g1", "g1", "g2", "g3", "g3", "g2"],
  "links": {"node": {"gbps": 300, "latency_us": 0.5}, "switch": {"gbps": 25}}
})";

TEST(TopologyFileSource, HostsRanksAndLinks) {
  const TopologyFile file = TopologyFile::parse_text(good_file, "t.json");
  std::vector<LocalFacts> all(6, facts("whatever"));
  const Topology t = resolve(all, &file);
  EXPECT_EQ(nodes(t), (std::vector<std::string>{"g1", "g1", "g2", "g3", "g3", "g2"}));
  EXPECT_EQ(t.ranks[3].switch_name, "s2");
  EXPECT_EQ(t.source("switch"), "PARO_TOPO_FILE");
  EXPECT_EQ(t.links.at(Level::node).gbps, 300);
  EXPECT_EQ(t.links.at(Level::switch_).latency_us, 0);
  const Groups by_switch = Groups::make(t, GroupSpec::by(Level::switch_));
  EXPECT_EQ(by_switch.members, (std::vector<std::vector<int>>{{0, 1, 2, 5}, {3, 4}}));
  EXPECT_EQ(by_switch.rails, (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2}, {5}}));
}

TEST(TopologyFileSource, HostsFromOtherSources) {
  const TopologyFile file =
      TopologyFile::parse_text(R"({"hosts": [{"name": "a", "switch": "x"}, {"name": "b", "switch": "y"}]})", "t.json");
  const Topology t = resolve({facts("a"), facts("b")}, &file);
  EXPECT_EQ(t.ranks[1].switch_name, "y");
  EXPECT_FALSE(t.knows(Level::pod));
  EXPECT_ERROR_CONTAINS(resolve({facts("a"), facts("c")}, &file),
                        "host 'c' (rank 1, node from hostname + boot id) is not listed");
}

TEST(TopologyFileSource, BadFilesNameTheFileAndField) {
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text("{\n  \"hosts\": [\n    {\"name\": \"a\",, }\n  ]\n}", "bad.json"),
                        "PARO_TOPO_FILE 'bad.json': line 3, column");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"rack": {"gbps": 1}}})", "f"),
                        "links.rack: unknown level; allowed: node switch pod");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a", "switch": 3}]})", "f"),
                        "hosts[0].switch: expected a string");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "ranks": ["b"]})", "f"),
                        "ranks[0]: host 'b' is not in \"hosts\"");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [], "extra": 1})", "f"), "extra: unknown field");
  // Numbers out of range: beyond double's (1e400), zero or negative bandwidth, a level that is not an object.
  EXPECT_ERROR_CONTAINS(
      TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"node": {"gbps": 1e400}}})", "big.json"),
      "PARO_TOPO_FILE 'big.json': not readable JSON (");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"node": {"gbps": 0}}})", "f"),
                        "links.node.gbps: expected Gbit/s in [0.001, 1e9]; leave the field out");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"pod": {"gbps": -2}}})", "f"),
                        "links.pod.gbps: expected Gbit/s in [0.001, 1e9]");
  EXPECT_ERROR_CONTAINS(
      TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"node": {"latency_us": "1"}}})", "f"),
      "links.node.latency_us: expected microseconds in [0, 1e9]");
  EXPECT_ERROR_CONTAINS(TopologyFile::parse_text(R"({"hosts": [{"name": "a"}], "links": {"node": 5}})", "f"),
                        "links.node: expected {\"gbps\": .., \"latency_us\": ..}");
  EXPECT_ERROR_CONTAINS(TopologyFile::load("/nonexistent/topo.json"), "cannot open");
  const TopologyFile file = TopologyFile::parse_text(good_file, "t.json");
  EXPECT_ERROR_CONTAINS(resolve(std::vector<LocalFacts>(4, facts("a")), &file),
                        "\"ranks\" lists 6 ranks but the communicator has 4");
}

TEST(Emulation, ThreeLevelsBlockAndCyclic) {
  const Topology t = EmulationSpec::parse("pods=2,switches=2,nodes=2,ranks=2").place(16);
  EXPECT_EQ(t.ranks[13].pod, "pod1");
  EXPECT_EQ(t.ranks[13].switch_name, "sw3");
  EXPECT_EQ(t.ranks[13].node, "n6");
  EXPECT_EQ(t.ranks[13].local, 1);
  const Topology c = EmulationSpec::parse("nodes=2,ranks=3,order=cyclic").place(6);
  EXPECT_EQ(nodes(c), (std::vector<std::string>{"n0", "n1", "n0", "n1", "n0", "n1"}));
  EXPECT_EQ(c.host_order(), (std::vector<int>{0, 2, 4, 1, 3, 5}));
  const Topology u = EmulationSpec::parse("nodes=2,ranks=3:5").place(8);
  EXPECT_EQ(u.ranks[2].node, "n0");
  EXPECT_EQ(u.ranks[3].node, "n1");
  EXPECT_EQ(u.ranks[7].local, 4);
  EXPECT_EQ(EmulationSpec::parse("nodes=4").place(8).ranks[7].node, "n3");
}

TEST(Emulation, BadSpecs) {
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("racks=2"),
                        "unknown key 'racks'; allowed: pods switches nodes ranks order");
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("nodes=0"), "nodes='0' is not a positive integer");
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("nodes=3,ranks=1:2"), "ranks lists 2 counts but there are 3 nodes");
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("nodes=2,ranks=4").place(6),
                        "describes 8 ranks but the communicator has 6");
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("nodes=4").place(6), "6 ranks do not split evenly over 4 nodes");
  EXPECT_ERROR_CONTAINS(EmulationSpec::parse("order=random"), "order='random' is not one of: block cyclic");
}

TEST(Grouping, LevelsCustomSizesAndRails) {
  const Topology t = EmulationSpec::parse("pods=2,switches=2,nodes=2,ranks=2").place(16);
  EXPECT_EQ(Groups::make(t, GroupSpec::by(Level::node)).members.size(), 8u);
  EXPECT_EQ(Groups::make(t, GroupSpec::by(Level::switch_)).members.size(), 4u);
  const Groups pods = Groups::make(t, GroupSpec::by(Level::pod));
  EXPECT_EQ(pods.members.size(), 2u);
  EXPECT_EQ(pods.rails[3], (std::vector<int>{3, 11}));
  // Custom groups follow the host order, not the rank numbering.
  const Topology cyclic = EmulationSpec::parse("nodes=2,ranks=4,order=cyclic").place(8);
  const Groups fours = Groups::make(cyclic, GroupSpec::custom(4));
  EXPECT_EQ(fours.members, (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(fours.index_of[5], 2);
  EXPECT_ERROR_CONTAINS(Groups::make(cyclic, GroupSpec::custom(3)),
                        "PARO_GROUP=3 does not divide 8 ranks; allowed: a divisor of 8 (1 2 4 8)");
  const Groups threes = Groups::make(cyclic, GroupSpec::custom(3, true));
  EXPECT_EQ(threes.members.back().size(), 2u);
  EXPECT_TRUE(threes.uneven());
}

TEST(Grouping, UnevenNodesGiveUnevenGroupsAndRails) {
  const Groups g = Groups::make(EmulationSpec::parse("nodes=2,ranks=3:5").place(8), GroupSpec::by(Level::node));
  EXPECT_EQ(g.members, (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5, 6, 7}}));
  EXPECT_EQ(g.rails, (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2, 5}, {6}, {7}}));
}

TEST(Grouping, BadRequests) {
  const Topology flat = resolve({facts("a"), facts("a")}, nullptr);
  EXPECT_ERROR_CONTAINS(Groups::make(flat, GroupSpec::by(Level::switch_)), "no source described the switch level");
  EXPECT_ERROR_CONTAINS(GroupSpec::parse("rack"),
                        "PARO_GROUP='rack': unknown grouping; allowed: node switch pod, or a group size");
  EXPECT_ERROR_CONTAINS(Groups::make(flat, GroupSpec::custom(3)), "a group size must be in [1, 2]");
}

TEST(ThreadsDiscovery, RealExchangeAndEmulation) {
  auto failures = paro::testing::on_threads(5, [](auto& comm) {
    std::vector<std::string> f;
    const Topology& t = comm.topology();
    if (t.source("node") != "hostname + boot id" || t.ranks[4].node != t.ranks[0].node || t.ranks[4].local != 4)
      f.push_back("threads ranks should share one node in rank order");
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
  paro::threads::run(16, [](paro::threads::Transport tr) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = "pods=2,switches=2,nodes=2,ranks=2";
    config.group = GroupSpec::by(Level::switch_);
    paro::Communicator comm(std::move(tr), config);
    EXPECT_EQ(comm.transport(paro::Scope::intra).size(), 4);
    EXPECT_EQ(comm.transport(paro::Scope::inter).size(), 4);
    EXPECT_EQ(comm.level(Level::pod).size(), 8);
    EXPECT_EQ(comm.level(Level::node).size(), 2);
  });
}

TEST(ThreadsDiscovery, SettingsThatDifferBetweenRanksFailOnEveryRank) {
  for (int variant = 0; variant < 2; ++variant) {
    std::atomic<int> failed{0};
    std::string message;
    std::mutex m;
    try {
      paro::threads::run(4, [&](paro::threads::Transport tr) {
        paro::topology::DiscoveryOptions options;
        if (variant == 0 && tr.rank() == 3) options.emulate = "nodes=2";                   // one rank emulates
        if (variant == 1 && tr.rank() == 1) options.topo_file = "/nonexistent/topo.json";  // one rank's file is missing
        try {
          paro::topology::discover(tr, options);
        } catch (const paro::Error& e) {
          ++failed;
          std::lock_guard<std::mutex> lock(m);
          message = e.what();
        }
      });
    } catch (const paro::Error& e) {
      ADD_FAILURE() << e.what();
    }
    EXPECT_EQ(failed.load(), 4) << "every rank must get the error";
    EXPECT_NE(message.find(variant == 0 ? "ranks disagree on PARO_EMULATE: rank 0 has '', rank 3 has 'nodes=2'"
                                        : "cannot open the file (on rank 1)"),
              std::string::npos)
        << message;
  }
}

// Scoped collectives: intra (my group) and inter (my rail) on even, uneven, non-contiguous and
// three-level emulated clusters, every collective, ring and tree, exact values.
using ScopeParam = std::tuple<const char*, const char*, paro::Scope>;  // emulation, grouping, scope
class ThreadsScoped : public ::testing::TestWithParam<ScopeParam> {};

TEST_P(ThreadsScoped, EveryCollectiveIsExact) {
  auto [emulate, group, scope] = GetParam();
  const int ranks = EmulationSpec::parse(emulate).rank_count().value();  // every spec below gives ranks
  std::vector<std::string> failures;
  std::mutex m;
  paro::threads::run(ranks, [&](paro::threads::Transport tr) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    config.group = GroupSpec::parse(group);
    paro::Communicator comm(std::move(tr), config);
    std::vector<std::string> mine;
    for (auto coll : {paro::Collective::all_reduce, paro::Collective::all_gather, paro::Collective::reduce_scatter})
      for (auto algo : {paro::Algorithm::ring, paro::Algorithm::tree}) {
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 100}, scope)) mine.push_back(s);
      }
    std::lock_guard<std::mutex> lock(m);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, ThreadsScoped,
                         ::testing::Combine(::testing::Values("nodes=2,ranks=4", "nodes=2,ranks=3:5",
                                                              "nodes=3,ranks=2,order=cyclic",
                                                              "pods=2,switches=2,nodes=2,ranks=2"),
                                            ::testing::Values("node", "switch"),
                                            ::testing::Values(paro::Scope::intra, paro::Scope::inter)));

}  // namespace
