// Randomized conformance (testing/conformance.hpp): random clusters, and on each a random sequence of
// collectives checked against their exact results. Built twice: paro-tests-conformance (thread ranks, each
// cluster 1..16 of them) and, with PARO_CONFORMANCE_MPI, paro-tests-conformance-mpi (the ranks of mpirun,
// each cluster an emulated placement of them).
//
//   paro-tests-conformance [--cases N] [--per-cluster M] [--seed S] [--clusters K] [--soak SECONDS]
//
// Runs clusters seed, seed+1, ... until N cases ran (or K clusters, or for SECONDS with --soak). A failure
// prints its cluster's seed and the command that replays that cluster alone. Exit status: 0 when every
// case was right, 1 when one was not, 2 for bad arguments.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "paro/testing/conformance.hpp"
#include "paro/tools/launch.hpp"
#include "threads_harness.hpp"
#ifdef PARO_CONFORMANCE_MPI
#include "paro/transport/mpi.hpp"
#endif

namespace {

struct Settings {
  long cases = 5000;
  int per_cluster = 25;
  std::uint64_t seed = 1;
  long clusters = 0;  // 0: as many as the cases need
  double soak_seconds = 0;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw paro::UsageError("conformance: " + flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--cases")
      s.cases = static_cast<long>(paro::env::parse_integer(value, "--cases", 1, 100000000));
    else if (flag == "--per-cluster")
      s.per_cluster = static_cast<int>(paro::env::parse_integer(value, "--per-cluster", 1, 100000));
    else if (flag == "--seed")
      s.seed = static_cast<std::uint64_t>(paro::env::parse_integer(value, "--seed", 0, 1LL << 62));
    else if (flag == "--clusters")
      s.clusters = static_cast<long>(paro::env::parse_integer(value, "--clusters", 1, 100000000));
    else if (flag == "--soak")
      s.soak_seconds = paro::env::parse_number(value, "--soak");
    else
      throw paro::UsageError("conformance: unknown flag " + flag +
                             "; allowed: --cases --per-cluster --seed --clusters --soak");
  }
  return s;
}

// The cases of one cluster get a seed of their own, derived from the cluster's.
std::uint64_t case_seed(std::uint64_t cluster_seed) { return cluster_seed * 0x9E3779B97F4A7C15ull + 1; }

struct ClusterResult {
  int cases = 0;
  std::vector<std::string> failures;
};

template <class Comm>
ClusterResult run_cluster(Comm& comm, std::uint64_t cluster_seed, int per_cluster) {
  ClusterResult r;
  r.failures = paro::testing::run_random_cases(comm, case_seed(cluster_seed), per_cluster, r.cases);
  return r;
}

paro::CommunicatorConfig config_for(const paro::testing::RandomCluster& c) {
  paro::CommunicatorConfig config;
  config.topology = paro::topology::EmulationSpec::parse(c.emulate).place(c.ranks);
  config.group = paro::GroupSpec::parse(c.group, true);
  return config;
}

#ifdef PARO_CONFORMANCE_MPI
const char* const program = "paro-tests-conformance-mpi";
struct World {
  paro::mpi::Environment environment;  // first made, last gone
  paro::mpi::Transport transport = paro::mpi::Transport::world();
};
World& world() {
  static World w;
  return w;
}
// One cluster on the world's ranks, over a transport split off for it; every rank reports its own failures.
ClusterResult on_cluster(const paro::testing::RandomCluster& c, std::uint64_t seed, int per_cluster) {
  paro::mpi::Transport& t = world().transport;
  paro::Communicator<paro::mpi::Transport> comm(t.split(0, t.rank()), config_for(c));
  return run_cluster(comm, seed, per_cluster);
}
int world_size() { return world().transport.size(); }
bool prints_summary() { return world().transport.rank() == 0; }
#else
const char* const program = "paro-tests-conformance";
// One cluster on thread ranks: the cases rank 0 ran, and every rank's failures.
ClusterResult on_cluster(const paro::testing::RandomCluster& c, std::uint64_t seed, int per_cluster) {
  auto per_rank = paro::tools::run_on_thread_ranks(c.ranks, config_for(c),
                                                   [&](auto& comm) { return run_cluster(comm, seed, per_cluster); });
  ClusterResult all;
  all.cases = per_rank.front().cases;
  for (auto& r : per_rank) all.failures.insert(all.failures.end(), r.failures.begin(), r.failures.end());
  return all;
}
int world_size() { return 0; }  // every cluster draws its own rank count
bool prints_summary() { return true; }
#endif

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  try {
    s = parse(argc, argv);
  } catch (const paro::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  long cases = 0, clusters = 0, wrong_clusters = 0;
  int ranks = 0;
  try {
    ranks = world_size();
  } catch (const paro::Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  for (;;) {
    const bool more =
        s.soak_seconds > 0 ? seconds() < s.soak_seconds : (s.clusters > 0 ? clusters < s.clusters : cases < s.cases);
    if (!more) break;
    const std::uint64_t seed = s.seed + static_cast<std::uint64_t>(clusters);
    const paro::testing::RandomCluster c = paro::testing::random_cluster(seed, ranks);
    ClusterResult r;
    try {
      r = on_cluster(c, seed, s.per_cluster);
    } catch (const std::exception& e) {
      r.failures.push_back(std::string("the cluster failed: ") + e.what());
    }
    ++clusters;
    cases += r.cases;
    if (!r.failures.empty()) {
      ++wrong_clusters;
      std::printf("FAILED cluster seed %llu: %d ranks, PARO_EMULATE=%s PARO_GROUP=%s\n",
                  static_cast<unsigned long long>(seed), c.ranks, c.emulate.c_str(), c.group.c_str());
      std::printf("%s", paro::testing::first_lines(r.failures).c_str());
      std::printf("replay: %s --seed %llu --clusters 1 --per-cluster %d\n", program,
                  static_cast<unsigned long long>(seed), s.per_cluster);
    }
  }
  if (prints_summary() || wrong_clusters)
    std::printf("%s: %ld cases on %ld random clusters (seeds %llu..%llu) in %.1f s: %s\n", program, cases, clusters,
                static_cast<unsigned long long>(s.seed), static_cast<unsigned long long>(s.seed + clusters - 1),
                seconds(), wrong_clusters ? "WRONG" : "all right");
  return wrong_clusters ? 1 : 0;
}
