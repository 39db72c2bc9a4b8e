#pragma once
// Groups and rails. A grouping cuts the host-ordered ranks into groups: all ranks of a node, of a switch,
// of a pod, or consecutive runs of a custom size. Rail j holds the j-th member of every group that has
// one. PaRO's intra-group collectives run inside a group; inter-group ones on a rail.
//
// PARO_GROUP=node|switch|pod|<size> picks the grouping (default node). Groups by a level are as uneven
// as the cluster is (nodes with different rank counts give groups of different sizes and rails of
// different lengths). A custom size must divide the rank count unless PARO_GROUP_UNEVEN=1, which lets
// the last group be smaller.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/topology/topology.hpp"

namespace paro {

struct GroupSpec {
  std::optional<Level> level = Level::node;  // nullopt: custom size
  int custom_size = 0;
  bool allow_uneven = false;

  static GroupSpec by(Level l) { return GroupSpec{l, 0, false}; }
  static GroupSpec custom(int size, bool allow_uneven = false) { return GroupSpec{std::nullopt, size, allow_uneven}; }

  static GroupSpec parse(std::string_view text, bool allow_uneven = false) {
    for (Level l : all_levels)
      if (text == name_of(l)) return by(l);
    long size = 0;
    try {
      size = env::parse_integer(text, "PARO_GROUP", 1, 1 << 24);
    } catch (const Error&) {
      throw UsageError(
          detail::concat("PARO_GROUP='", text, "': unknown grouping; allowed: node switch pod, or a group size"));
    }
    return custom(static_cast<int>(size), allow_uneven);
  }

  static GroupSpec from_env() {
    const bool uneven = env::integer_or("PARO_GROUP_UNEVEN", 0, 0, 1) == 1;
    auto v = env::get("PARO_GROUP");
    return v ? parse(*v, uneven) : GroupSpec{Level::node, 0, uneven};
  }

  std::string describe() const { return level ? name_of(*level) : detail::concat("custom(", custom_size, ")"); }
};

// Identical on every rank: computed from the Topology alone.
struct Groups {
  std::vector<std::vector<int>> members;  // group -> ranks, host order
  std::vector<int> group_of;              // rank -> group
  std::vector<int> index_of;              // rank -> position in its group (= its rail)
  std::vector<std::vector<int>> rails;    // rail -> ranks, by group

  bool uneven() const {
    for (const auto& g : members)
      if (g.size() != members.front().size()) return true;
    return false;
  }

  static Groups make(const Topology& topo, const GroupSpec& spec) {
    const int n = topo.size();
    const std::vector<int> order = topo.host_order();
    Groups g;
    g.group_of.assign(static_cast<std::size_t>(n), -1);
    g.index_of.assign(static_cast<std::size_t>(n), -1);
    if (spec.level) {
      detail::require(topo.knows(*spec.level) || *spec.level == Level::node, "grouping by ", name_of(*spec.level),
                      ": no source described the ", name_of(*spec.level),
                      " level (give PARO_TOPO_FILE, SLURM_TOPOLOGY_ADDR or PARO_EMULATE), so all ranks would form "
                      "one group; ask for that with PARO_GROUP=",
                      n, " if it is what you want");
      std::map<std::string, int> group_of_name;
      for (int r : order) {
        const std::string& name = topo.ranks[static_cast<std::size_t>(r)].name_at(*spec.level);
        auto it = group_of_name.emplace(name, static_cast<int>(g.members.size())).first;
        if (it->second == static_cast<int>(g.members.size())) g.members.emplace_back();
        g.members[static_cast<std::size_t>(it->second)].push_back(r);
      }
    } else {
      const int size = spec.custom_size;
      detail::require(size >= 1 && size <= n, "PARO_GROUP=", size, ": a group size must be in [1, ", n, "]");
      detail::require(n % size == 0 || spec.allow_uneven, "PARO_GROUP=", size, " does not divide ", n,
                      " ranks; allowed: a divisor of ", n, " (", divisors(n),
                      "), node, switch or pod, or set "
                      "PARO_GROUP_UNEVEN=1 for a smaller last group");
      for (int i = 0; i < n; ++i) {
        if (i % size == 0) g.members.emplace_back();
        g.members.back().push_back(order[static_cast<std::size_t>(i)]);
      }
    }
    for (std::size_t gi = 0; gi < g.members.size(); ++gi) {
      for (std::size_t j = 0; j < g.members[gi].size(); ++j) {
        const auto r = static_cast<std::size_t>(g.members[gi][j]);
        g.group_of[r] = static_cast<int>(gi);
        g.index_of[r] = static_cast<int>(j);
        if (g.rails.size() <= j) g.rails.emplace_back();
        g.rails[j].push_back(static_cast<int>(r));
      }
    }
    return g;
  }

 private:
  static std::string divisors(int n) {
    std::string out;
    for (int d = 1; d <= n; ++d)
      if (n % d == 0) out += (out.empty() ? "" : " ") + std::to_string(d);
    return out;
  }
};

}  // namespace paro
