#pragma once
// Scopes: the ranks a collective runs among (global: every rank; intra: my group; inter: my rail), their
// sub-communicators, how the hierarchical algorithms cut each (partitions, built into a Hierarchy at its
// first use) and how the cost model sees each (CostShape). Also the per-level communicators (my node,
// switch, pod).

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "paro/algorithms/cost/cost_shape.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/core/error.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology.hpp"

namespace paro {

enum class Scope { global, intra, inter };

inline constexpr Scope all_scopes[] = {Scope::global, Scope::intra, Scope::inter};

inline const char* name_of(Scope s) {
  switch (s) {
    case Scope::global: return "global";
    case Scope::intra: return "intra";
    case Scope::inter: return "inter";
  }
  return "invalid";
}

inline Scope parse_scope(std::string_view s) {
  for (Scope x : all_scopes)
    if (s == name_of(x)) return x;
  throw UsageError(detail::concat("unknown scope '", s, "'; allowed: global intra inter"));
}

// The world ranks of my scope s.
inline std::vector<int> scope_members(Scope s, const Groups& groups, int rank, int size) {
  const auto me = static_cast<std::size_t>(rank);
  if (s == Scope::intra) return groups.members[static_cast<std::size_t>(groups.group_of[me])];
  if (s == Scope::inter) return groups.rails[static_cast<std::size_t>(groups.index_of[me])];
  std::vector<int> all(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) all[static_cast<std::size_t>(r)] = r;
  return all;
}

template <class Transport>
class Scopes {
 public:
  // Collective over `world`: splits off the intra-group, rail and per-level communicators.
  // lanes: where paro_cc's lanes may run here (the cost model predicts their schedules).
  Scopes(Transport& world, const Topology& topo, const Groups& groups, NicModel bound_nic,
         algorithms::LaneChoice lanes) {
    const int rank = world.rank();
    const auto me = static_cast<std::size_t>(rank);
    intra_ = world.split(groups.group_of[me], groups.index_of[me]);
    inter_ = world.split(groups.index_of[me], groups.group_of[me]);
    for (Level l : topo.known_levels) levels_.emplace(l, world.split(topo.ordinals(l)[me], rank));
    for (Scope s : all_scopes) {
      const std::vector<int> members = scope_members(s, groups, rank, world.size());
      for (bool by_nodes : {false, true})
        partitions_[by_nodes][index(s)] = algorithms::scope_partitions(topo, groups.group_of, members, by_nodes);
      shapes_[index(s)] =
          algorithms::scope_shape(topo, members, partitions_[false][index(s)], partitions_[true][index(s)], bound_nic);
      shapes_[index(s)].lanes = lanes;
    }
  }

  // The sub-communicator of scope s, or `world` for the global scope (the Communicator's own, not kept
  // here so that a Communicator stays movable).
  Transport& transport(Scope s, Transport& world) {
    return s == Scope::global ? world : s == Scope::intra ? intra_ : inter_;
  }

  // The ranks that share this rank's node, switch or pod (a level the topology knows).
  Transport& level(Level l) {
    auto it = levels_.find(l);
    detail::require(it != levels_.end(), "level ", name_of(l), ": no source described it");
    return it->second;
  }

  const algorithms::CostShape& shape(Scope s) const { return shapes_[index(s)]; }
  void set_lanes(algorithms::LaneChoice lanes) {
    for (algorithms::CostShape& shape : shapes_) shape.lanes = lanes;
  }

  // Collective over the scope (its transport: `scoped`) at its first use: the hierarchical algorithms'
  // sub-communicators, for the scope cut by its levels or by its nodes alone (CostShape::node_cut).
  algorithms::Hierarchy<Transport>& hierarchy(Scope s, Transport& scoped, bool by_nodes = false) {
    auto& h = hierarchies_[by_nodes][index(s)];
    if (!h)
      h = algorithms::Hierarchy<Transport>::build(scoped.split(0, scoped.rank()), partitions_[by_nodes][index(s)],
                                                  true);
    return *h;
  }

 private:
  using Cuts = std::array<std::vector<std::vector<int>>, 3>;  // per scope
  Transport intra_, inter_;
  std::map<Level, Transport> levels_;
  std::array<Cuts, 2> partitions_;  // [by_nodes]
  std::array<algorithms::CostShape, 3> shapes_;
  std::array<std::array<std::unique_ptr<algorithms::Hierarchy<Transport>>, 3>, 2> hierarchies_;  // [by_nodes]

  static std::size_t index(Scope s) { return static_cast<std::size_t>(s); }
};

}  // namespace paro
