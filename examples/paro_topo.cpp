// paro-topo: prints the cluster tree paro discovers, the groups and rails, and where each fact came from.
//
//   PARO_EMULATE=pods=2,switches=2,nodes=2,ranks=2 build/bin/paro-topo          (16 thread ranks)
//   mpirun -np 8 tests/slurm_env.sh build/bin/paro-topo --backend mpi --json
//
// --json prints {"ranks": [{"rank", "pod", "switch", "node", "local"}, ...], "levels", "grouping",
// "groups", "rails", "sources", "links"}.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "paro/paro.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/transport/mpi.hpp"
#endif

namespace {

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out;
}

nlohmann::json as_json(const paro::Topology& t, const paro::Groups& g, const paro::GroupSpec& spec) {
  nlohmann::json j;
  j["ranks"] = nlohmann::json::array();
  for (int r = 0; r < t.size(); ++r) {
    const auto& p = t.ranks[static_cast<std::size_t>(r)];
    j["ranks"].push_back({{"rank", r},
                          {"pod", p.pod},
                          {"switch", p.switch_name},
                          {"node", p.node},
                          {"local", p.local},
                          {"group", g.group_of[static_cast<std::size_t>(r)]}});
  }
  j["levels"] = nlohmann::json::array();
  for (paro::Level l : t.known_levels) j["levels"].push_back(paro::name_of(l));
  j["grouping"] = spec.describe();
  j["groups"] = g.members;
  j["rails"] = g.rails;
  j["sources"] = t.sources;
  j["links"] = nlohmann::json::object();
  for (auto& [level, link] : t.links)
    j["links"][paro::name_of(level)] = {{"gbps", link.gbps}, {"latency_us", link.latency_us}};
  return j;
}

void print_tree(const paro::Topology& t, const paro::Groups& g, const paro::GroupSpec& spec, const char* backend) {
  std::string levels;
  for (auto it = t.known_levels.rbegin(); it != t.known_levels.rend(); ++it)
    levels += std::string(levels.empty() ? "" : " > ") + paro::name_of(*it);
  std::printf("# paro-topo: %d ranks on %s; levels %s; grouping by %s: %zu groups%s\n", t.size(), backend,
              levels.c_str(), spec.describe().c_str(), g.members.size(), g.uneven() ? " (uneven)" : "");
  std::printf("# sources: node from %s; local index from %s; switch from %s; pod from %s\n", t.source("node").c_str(),
              t.source("local").c_str(), t.source("switch").c_str(), t.source("pod").c_str());
  std::string pod, sw, node;
  for (int r : t.host_order()) {
    const auto& p = t.ranks[static_cast<std::size_t>(r)];
    const bool new_pod = p.pod != pod, new_switch = new_pod || p.switch_name != sw,
               new_node = new_switch || p.node != node;
    if (new_node && !node.empty()) std::printf("\n");
    if (new_pod) std::printf("pod %s\n", p.pod.c_str());
    if (new_switch) std::printf("  switch %s\n", p.switch_name.c_str());
    if (new_node) std::printf("    node %s: ranks", p.node.c_str());
    std::printf(" %d", r);
    pod = p.pod;
    sw = p.switch_name;
    node = p.node;
  }
  if (!node.empty()) std::printf("\n");
  std::printf("groups (by %s):\n", spec.describe().c_str());
  for (std::size_t i = 0; i < g.members.size(); ++i) std::printf("  group %zu: %s\n", i, join(g.members[i]).c_str());
  std::printf("rails (same index in every group):\n");
  for (std::size_t i = 0; i < g.rails.size(); ++i) std::printf("  rail %zu: %s\n", i, join(g.rails[i]).c_str());
  for (auto& [level, link] : t.links)
    std::printf("link %s: %g GB/s, %g us\n", paro::name_of(level), link.gbps, link.latency_us);
}

template <class Transport>
void report(paro::Communicator<Transport>& comm, bool json) {
  if (comm.rank() != 0) return;
  if (json)
    std::printf("%s\n", as_json(comm.topology(), comm.groups(), comm.grouping()).dump(1).c_str());
  else
    print_tree(comm.topology(), comm.groups(), comm.grouping(), Transport::name);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "threads", group;
  int ranks = 0;
  bool json = false;
  CLI::App app{"paro-topo: the discovered cluster tree, groups and rails"};
  app.add_option("--backend", backend, "threads or mpi")
      ->check(CLI::IsMember({"threads", "mpi"}))
      ->capture_default_str();
  app.add_option("-t,--nthreads", ranks, "thread ranks (default: what PARO_EMULATE describes, else 8)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--group", group, "node, switch, pod or a size (default: PARO_GROUP, else node)");
  app.add_flag("--json", json, "print JSON instead of the tree");
  CLI11_PARSE(app, argc, argv);
  try {
    paro::CommunicatorConfig config;
    if (!group.empty()) config.group = paro::GroupSpec::parse(group, config.group.allow_uneven);
    if (backend == "threads") {
      if (ranks == 0 && config.discovery.emulate)
        ranks = paro::topology::EmulationSpec::parse(*config.discovery.emulate).rank_count().value_or(8);
      paro::threads::run(ranks ? ranks : 8, [&](paro::threads::Transport t) {
        paro::Communicator comm(std::move(t), config);
        report(comm, json);
      });
    } else {
#ifdef PARO_HAVE_MPI
      paro::mpi::Environment env(&argc, &argv);
      paro::Communicator comm(paro::mpi::Transport::world(), config);
      report(comm, json);
#else
      throw paro::UsageError("--backend mpi: this paro-topo was built without MPI");
#endif
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-topo: %s\n", e.what());
    return 2;
  }
}
