#pragma once
// How a scope looks to the cost model and to the hierarchical schedules: the chain of nested partitions
// they cut its members by, and the CostShape the formulas read. Free functions of the topology, the
// grouping and the scope's members (world ranks), so that tests build shapes the way Communicator does.

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/topology/topology.hpp"

namespace paro::algorithms {

// The label of every member in a per-world-rank labelling.
inline std::vector<int> labels_of(const std::vector<int>& of_rank, const std::vector<int>& members) {
  std::vector<int> out;
  out.reserve(members.size());
  for (int r : members) out.push_back(of_rank[static_cast<std::size_t>(r)]);
  return out;
}

// The topology's levels that the hierarchical algorithms cut a scope by: those whose crossing takes a
// link of its own. A topology's links are the node's, the NIC's (its switch level's) and a pod uplink's:
// a node is always a level (inside it, the node's links; out of it, the NIC); a pod where its uplink is
// given and is not the NIC's; a leaf switch never, because between leaf switches a message crosses the
// NICs as between two nodes under one switch, and a rail between switches would add a phase and its
// latencies for no faster link (simulated, 128 ranks in 16 nodes of 8 under 4 leaf switches, a NIC per
// rank: paro_cc's all-gather of 64 KiB took 10.0 us with the switch level, 5.5 without). Where the
// topology gives no links, every level it knows is kept: nothing says that two of them are alike.
inline std::vector<Level> hierarchy_levels(const Topology& topo) {
  if (topo.links.empty()) return topo.known_levels;
  auto link = [&](Level l) {
    const auto it = topo.links.find(l);
    return it == topo.links.end() ? LinkSpec{} : it->second;
  };
  const LinkSpec nic = link(Level::switch_), uplink = link(Level::pod);
  const bool own_uplink = uplink.known() && (uplink.gbps != nic.gbps || uplink.latency_us != nic.latency_us);
  std::vector<Level> out;
  for (Level l : topo.known_levels)
    if (l == Level::node || (l == Level::pod && own_uplink)) out.push_back(l);
  return out;
}

// The topology's levels (hierarchy_levels; by_nodes: the node alone) and the grouping (group_of: a
// group per world rank), as the nested partitions of the members that the hierarchical algorithms walk,
// coarsest first.
inline std::vector<std::vector<int>> scope_partitions(const Topology& topo, const std::vector<int>& group_of,
                                                      const std::vector<int>& members, bool by_nodes = false) {
  std::vector<std::vector<int>> candidates;
  for (Level l : hierarchy_levels(topo))
    if (!by_nodes || l == Level::node) candidates.push_back(labels_of(topo.ordinals(l), members));
  candidates.push_back(labels_of(group_of, members));
  return nested_partitions(candidates);
}

// The cost model's view of a scope cut by `chain` (scope_partitions). bound_nic: whether the topology's
// NICs are per rank or shared per node, for the pod term of the lower bound.
inline CostShape cost_shape(const Topology& topo, const std::vector<int>& members,
                            const std::vector<std::vector<int>>& chain, NicModel bound_nic) {
  CostShape s;
  s.ranks = static_cast<int>(members.size());
  const std::vector<int> world_nodes = topo.ordinals(Level::node);
  const std::vector<int> nodes = normalized(labels_of(world_nodes, members));
  s.nodes = unit_count(nodes);
  std::vector<int> per_node(static_cast<std::size_t>(s.nodes)), world_per_node(world_nodes.size());
  for (int x : nodes) s.ranks_per_node = std::max(s.ranks_per_node, ++per_node[static_cast<std::size_t>(x)]);
  int world_max = 1;
  for (int x : world_nodes) world_max = std::max(world_max, ++world_per_node[static_cast<std::size_t>(x)]);
  // Every rank runs its own instance of this scope's collective at the same time (intra and inter
  // scopes: one per group or rail); their messages share the NICs.
  s.nic_flows = world_max;
  const double instances = static_cast<double>(world_max) / s.ranks_per_node;
  int crossings = 0;
  std::vector<int> leaving(static_cast<std::size_t>(s.nodes));
  for (std::size_t i = 0; i < nodes.size() && nodes.size() > 1; ++i)
    if (nodes[i] != nodes[(i + 1) % nodes.size()]) {
      ++s.ring_inter_hops;
      crossings = std::max(crossings, ++leaving[static_cast<std::size_t>(nodes[i])]);
    }
  s.ring_nic_flows = crossings * instances;
  const bool pods_known =
      std::find(topo.known_levels.begin(), topo.known_levels.end(), Level::pod) != topo.known_levels.end();
  const std::vector<int> pods =
      pods_known ? normalized(labels_of(topo.ordinals(Level::pod), members)) : std::vector<int>(nodes.size(), 0);
  if (pods_known) {
    s.pods = unit_count(pods);
    std::vector<int> exits(static_cast<std::size_t>(s.pods));
    for (std::size_t i = 0; i < pods.size() && pods.size() > 1; ++i)
      if (pods[i] != pods[(i + 1) % pods.size()]) {
        ++s.ring_pod_hops;
        s.ring_pod_flows = std::max(s.ring_pod_flows, ++exits[static_cast<std::size_t>(pods[i])] * instances);
      }
    std::vector<int> ranks_in(static_cast<std::size_t>(s.pods));
    std::vector<std::set<int>> nodes_in(static_cast<std::size_t>(s.pods));
    for (std::size_t i = 0; i < pods.size(); ++i) {
      ++ranks_in[static_cast<std::size_t>(pods[i])];
      nodes_in[static_cast<std::size_t>(pods[i])].insert(nodes[i]);
    }
    for (int p = 0; p < s.pods; ++p)
      if (ranks_in[static_cast<std::size_t>(p)] > s.pod_ranks) {
        s.pod_ranks = ranks_in[static_cast<std::size_t>(p)];
        s.pod_nics = bound_nic == NicModel::per_rank ? s.pod_ranks
                                                     : static_cast<int>(nodes_in[static_cast<std::size_t>(p)].size());
      }
  }
  int parent_units = 1;
  const std::vector<int>* parent = nullptr;
  for (const auto& p : chain) {
    const int units = unit_count(p);
    std::vector<int> sizes(static_cast<std::size_t>(units));
    for (int x : p) ++sizes[static_cast<std::size_t>(x)];
    s.even = s.even && units % parent_units == 0 &&
             std::all_of(sizes.begin(), sizes.end(), [&](int z) { return z == sizes[0]; });
    s.units.push_back(std::max(1, units / parent_units));
    s.rail_inter.push_back(refines(nodes, p));
    // The rail joins members of one parent unit: it crosses pods where that unit spans several.
    s.rail_pods.push_back(s.pods > 1 && (parent ? !refines(*parent, pods) : true));
    parent_units = units;
    parent = &p;
  }
  const std::vector<int>& leaf = chain.empty() ? std::vector<int>(nodes.size(), 0) : chain.back();
  std::map<int, int> node_of_leaf;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!node_of_leaf.emplace(leaf[i], nodes[i]).second && node_of_leaf[leaf[i]] != nodes[i]) s.leaf_inter = true;
  return s;
}

// The scope's shape cut by `chain` (scope_partitions), with its cut by nodes alone (`node_chain`:
// scope_partitions by_nodes) as CostShape::node_cut where the two differ.
inline CostShape scope_shape(const Topology& topo, const std::vector<int>& members,
                             const std::vector<std::vector<int>>& chain,
                             const std::vector<std::vector<int>>& node_chain, NicModel bound_nic) {
  CostShape s = cost_shape(topo, members, chain, bound_nic);
  if (node_chain != chain)
    s.node_cut = std::make_shared<const CostShape>(cost_shape(topo, members, node_chain, bound_nic));
  return s;
}

}  // namespace paro::algorithms
