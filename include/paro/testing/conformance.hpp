#pragma once
// Randomized conformance: random clusters (1-4 levels, uneven nodes, round-robin placement, groups by node,
// switch, pod or a custom size) and on each a random sequence of collectives (every collective, algorithm,
// scope, data type, op, count from 0 to large, in and out of place, blocking; broadcast, gather, scatter and
// reduce from a random root; all_to_allv; nonblocking ones of all kinds in flight), every result checked element by
// element against its exact value (collective_check.hpp). Everything follows from one seed: every rank draws the same
// cluster and the same cases, so a failure is replayed from the seed that the report prints.

#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "paro/testing/nonblocking_check.hpp"
#include "paro/testing/rooted_check.hpp"

namespace paro::testing {

// A cluster for the emulation (PARO_EMULATE's form) and a grouping (PARO_GROUP's), of `ranks` ranks when
// that is > 0, else of 1..16.
struct RandomCluster {
  std::string emulate;
  std::string group;
  int ranks = 0;
};

inline RandomCluster random_cluster(std::uint64_t seed, int ranks = 0) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  const int want = ranks > 0 ? ranks : pick(1, 16);
  // Levels above the node: none, switches, or pods of switches; each must leave nodes for the ranks.
  int pods = 1, switches = 1;
  const int shape = pick(0, 3);
  if (shape >= 2 && want >= 2) switches = pick(2, want >= 6 ? 3 : 2);
  if (shape == 3 && want >= 2 * switches) pods = 2;
  const int parents = pods * switches;
  const int max_nodes_each = std::max(1, want / parents);
  const int nodes = shape == 0 ? 1 : pick(1, std::min(4, max_nodes_each));
  const int total_nodes = parents * nodes;
  // Ranks per node: an even split where it divides and a coin says so, else uneven counts that sum to want
  // with at least one rank on every node (the emulation wants no empty node).
  std::vector<int> counts(static_cast<std::size_t>(total_nodes), 1);
  int left = want - total_nodes;
  if (left < 0) {  // more nodes than ranks: one node per rank
    counts.assign(static_cast<std::size_t>(want), 1);
    left = 0;
  }
  const bool even = want % static_cast<int>(counts.size()) == 0 && pick(0, 1) == 0;
  if (even)
    for (int& c : counts) c = want / static_cast<int>(counts.size());
  else
    while (left-- > 0) ++counts[static_cast<std::size_t>(pick(0, static_cast<int>(counts.size()) - 1))];
  const int node_count = static_cast<int>(counts.size());
  // The nodes actually made: where ranks forced fewer nodes, fold the levels above away.
  if (node_count != total_nodes) pods = switches = 1;
  RandomCluster c;
  c.ranks = want;
  c.emulate =
      detail::concat("pods=", pods, ",switches=", switches, ",nodes=", node_count / (pods * switches), ",ranks=");
  if (even) {
    c.emulate += std::to_string(counts[0]);
  } else {
    for (std::size_t k = 0; k < counts.size(); ++k) c.emulate += (k ? ":" : "") + std::to_string(counts[k]);
  }
  if (pick(0, 3) == 0) c.emulate += ",order=cyclic";
  std::vector<std::string> groups{"node"};
  if (switches > 1) groups.push_back("switch");
  if (pods > 1) groups.push_back("pod");
  groups.push_back(std::to_string(pick(1, want)));  // a custom size: uneven where it does not divide
  c.group = groups[static_cast<std::size_t>(pick(0, static_cast<int>(groups.size()) - 1))];
  return c;
}

// A random count: mostly small and odd sizes, sometimes empty, sometimes large (several ring chunks).
inline std::size_t random_count(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 2 + rng() % 15;
    case 7: return rng() % 4 == 0 ? 150000 + rng() % 100000 : 5000 + rng() % 20000;
    default: return 1 + rng() % 3000;
  }
}

// `cases` random cases on comm, drawn from seed (the same on every rank): blocking collectives, broadcasts,
// gathers, scatters and reduces from a random root, all_to_allv, and batches of nonblocking ones in flight. Returns
// this rank's failure descriptions; `done` counts the cases run (a nonblocking batch counts each of its collectives).
template <class Transport, class Registry>
std::vector<std::string> run_random_cases(Communicator<Transport, Registry>& comm, std::uint64_t seed, int cases,
                                          int& done) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> failures;
  auto note = [&](const std::string& what) { failures.push_back(detail::concat("case seed ", seed, ": ", what)); };
  while (done < cases) {
    const std::uint64_t kind = rng() % 10;
    if (kind == 0) {  // a batch in flight, with a blocking call among them
      const int in_flight = 2 + static_cast<int>(rng() % 4);
      for (auto& f : check_nonblocking(comm, rng(), in_flight)) note(f);
      done += in_flight + 1;
      continue;
    }
    if (kind == 1) {  // a broadcast, gather, scatter, reduce or all_to_allv
      const std::size_t count = random_count(rng);
      std::string f;
      try {
        if (rng() % 5 == 0) {
          const Scope scope = all_scopes[rng() % std::size(all_scopes)];
          const DataType dt = all_data_types[rng() % std::size(all_data_types)];
          f = check_broadcast(comm, dt, count,
                              static_cast<int>(rng() % static_cast<std::uint64_t>(comm.transport(scope).size())),
                              scope);
        } else {
          f = finished(start_random_verb(comm, rng, count));
        }
      } catch (const Error& e) {
        f = detail::concat("a broadcast, gather, scatter, reduce or all_to_allv of count ", count, ": ", e.what());
      }
      if (!f.empty()) note(f);
      ++done;
      continue;
    }
    Case c = random_case<Transport, Registry>(rng);
    c.count = random_count(rng);
    try {
      const CheckResult r = check_case(comm, c);
      if (r.wrong) note(r.report);
    } catch (const Error& e) {
      note(detail::concat(describe(c, comm.transport(c.scope).size()), ": ", e.what()));
    }
    ++done;
  }
  return failures;
}

}  // namespace paro::testing
