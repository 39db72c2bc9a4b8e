#pragma once
// Topology: for every rank its place in the cluster tree pod > switch > node > local index, and where
// each of those facts came from. Built by discovery.hpp; grouped by grouping.hpp.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "paro/core/error.hpp"

namespace paro {

// The levels of the tree, innermost first. (switch_ because `switch` is a keyword.)
enum class Level { node, switch_, pod };

inline constexpr Level all_levels[] = {Level::node, Level::switch_, Level::pod};

inline const char* name_of(Level l) {
  switch (l) {
    case Level::node: return "node";
    case Level::switch_: return "switch";
    case Level::pod: return "pod";
  }
  return "invalid";
}

struct RankPlace {
  std::string pod;
  std::string switch_name;
  std::string node;
  int local = 0;    // index among the ranks of its node, 0 .. node size - 1
  int device = -1;  // accelerator index where known

  const std::string& name_at(Level l) const {
    return l == Level::node ? node : l == Level::switch_ ? switch_name : pod;
  }
};

// Bandwidth and latency of the links that join the members of one level (topology file, PARO_EMULATE).
struct LinkSpec {
  double gbps = 0;        // Gbit/s: per rank inside a node, per NIC between nodes; 0 = unknown
  double latency_us = 0;  // 0 = unknown
  bool known() const { return gbps > 0 || latency_us > 0; }
  double us_per_byte() const { return gbps > 0 ? 8e-3 / gbps : 0; }
};

// How the ranks of a node reach other nodes: through one NIC they share (public cloud), or each
// through its own (rail-optimized GPU clusters). Which algorithm wins depends on it.
enum class NicModel { shared, per_rank };

inline const char* name_of(NicModel m) { return m == NicModel::shared ? "shared" : "per_rank"; }

inline NicModel parse_nic_model(std::string_view s, std::string_view where) {
  if (s == "shared") return NicModel::shared;
  if (s == "per_rank" || s == "rank") return NicModel::per_rank;
  throw UsageError(detail::concat(where, ": nic='", s, "' is not one of: shared per_rank"));
}

struct Topology {
  std::vector<RankPlace> ranks;                     // by communicator rank
  std::map<std::string, std::string> sources;       // fact ("node", "local", "switch", "pod") -> where it came from
  std::map<Level, LinkSpec> links;                  // per level, where a topology file or PARO_EMULATE gave them
  std::optional<NicModel> nic;                      // where a topology file or PARO_EMULATE said
  std::vector<Level> known_levels = {Level::node};  // levels some source described (node always)

  int size() const { return static_cast<int>(ranks.size()); }
  bool knows(Level l) const { return std::find(known_levels.begin(), known_levels.end(), l) != known_levels.end(); }

  // Index of each name at a level, in order of first appearance by rank.
  std::vector<int> ordinals(Level l) const {
    std::map<std::string, int> seen;
    std::vector<int> out;
    for (const auto& p : ranks) out.push_back(seen.emplace(p.name_at(l), static_cast<int>(seen.size())).first->second);
    return out;
  }

  // Ranks sorted by (pod, switch, node, local): the host-ordered view, where the ranks of a node are
  // adjacent whatever numbering the launcher used.
  std::vector<int> host_order() const {
    const auto pod = ordinals(Level::pod), sw = ordinals(Level::switch_), node = ordinals(Level::node);
    std::vector<int> order(ranks.size());
    for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      auto key = [&](int r) {
        const auto u = static_cast<std::size_t>(r);
        return std::make_tuple(pod[u], sw[u], node[u], ranks[u].local);
      };
      return key(a) < key(b);
    });
    return order;
  }

  // Every node inside one switch and every switch inside one pod; local indices 0..k-1 per node.
  void validate() const {
    std::map<std::string, std::string> switch_of_node, pod_of_switch;
    std::map<std::string, std::vector<int>> locals;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const auto& p = ranks[r];
      auto [it, fresh] = switch_of_node.emplace(p.node, p.switch_name);
      detail::require(fresh || it->second == p.switch_name, "topology: node '", p.node, "' is under two switches ('",
                      it->second, "' and '", p.switch_name, "', rank ", r, "; switch from ", source("switch"), ")");
      auto [jt, fresh2] = pod_of_switch.emplace(p.switch_name, p.pod);
      detail::require(fresh2 || jt->second == p.pod, "topology: switch '", p.switch_name, "' is in two pods ('",
                      jt->second, "' and '", p.pod, "', rank ", r, "; pod from ", source("pod"), ")");
      locals[p.node].push_back(p.local);
    }
    for (auto& [node, list] : locals) {
      std::sort(list.begin(), list.end());
      for (std::size_t i = 0; i < list.size(); ++i)
        detail::require(list[i] == static_cast<int>(i), "topology: local indices on node '", node, "' are not 0..",
                        list.size() - 1, " (local index from ", source("local"), ")");
    }
  }

  std::string source(const std::string& fact) const {
    auto it = sources.find(fact);
    return it == sources.end() ? "unknown" : it->second;
  }
};

}  // namespace paro
