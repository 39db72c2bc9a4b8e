#pragma once
// A communicator seen level by level, as the hierarchical algorithms (paro_cc, paro_seq, mics_hcs) walk it:
// its members split into units (the groups of the coarsest level: pods, switches, nodes, ...), the rail
// through my unit (the members with my index in every unit), and my unit, which is a Hierarchy again for
// the finer levels. A communicator with no finer level is flat.
//
// Every communicator a lane uses is its own, because lanes run at once on different threads.

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/core/log.hpp"

namespace paro::algorithms {

// Partitions given as a unit label per member: relabelled 0, 1, ... in order of first appearance.
inline std::vector<int> normalized(const std::vector<int>& labels) {
  std::map<int, int> seen;
  std::vector<int> out;
  out.reserve(labels.size());
  for (int l : labels) out.push_back(seen.emplace(l, static_cast<int>(seen.size())).first->second);
  return out;
}

inline int unit_count(const std::vector<int>& normalized_labels) {
  return normalized_labels.empty() ? 0 : *std::max_element(normalized_labels.begin(), normalized_labels.end()) + 1;
}

// `fine` refines `coarse`: members in one unit of `fine` share their unit of `coarse`.
inline bool refines(const std::vector<int>& fine, const std::vector<int>& coarse) {
  std::map<int, int> parent;
  for (std::size_t i = 0; i < fine.size(); ++i) {
    auto [it, fresh] = parent.emplace(fine[i], coarse[i]);
    if (!fresh && it->second != coarse[i]) return false;
  }
  return true;
}

// From candidate partitions of the same members (topology levels, the grouping), the chain a hierarchy
// uses: coarsest first, each refining the one before, none trivial (one unit, or one member per unit),
// no two alike. A candidate that cuts across the chain is left out.
inline std::vector<std::vector<int>> nested_partitions(const std::vector<std::vector<int>>& candidates) {
  std::vector<std::vector<int>> useful;
  for (const auto& c : candidates) {
    std::vector<int> p = normalized(c);
    const int units = unit_count(p);
    if (units <= 1 || units == static_cast<int>(p.size())) continue;
    if (std::find(useful.begin(), useful.end(), p) == useful.end()) useful.push_back(std::move(p));
  }
  std::stable_sort(useful.begin(), useful.end(),
                   [](const auto& a, const auto& b) { return unit_count(a) < unit_count(b); });
  std::vector<std::vector<int>> chain;
  for (auto& p : useful)
    if (chain.empty() || refines(p, chain.back())) chain.push_back(std::move(p));
  return chain;
}

template <class T>
struct Hierarchy {
  T comm;                               // every member, in the communicator's rank order
  std::vector<std::vector<int>> units;  // unit -> its members (ranks of comm, ascending); empty when flat
  int my_unit = 0, my_index = 0;
  T rail;                                // the members with my index, one per unit, in unit order
  std::unique_ptr<Hierarchy> unit;       // my unit, level by level
  std::unique_ptr<Hierarchy> unit_copy;  // the same ranks again, for a second lane on my unit (all-reduce)

  bool flat() const { return units.empty(); }
  int unit_count() const { return static_cast<int>(units.size()); }
  int unit_size() const { return static_cast<int>(units[static_cast<std::size_t>(my_unit)].size()); }
  bool even() const {
    for (const auto& u : units)
      if (u.size() != units.front().size()) return false;
    return true;
  }
  int member(int u, int index) const { return units[static_cast<std::size_t>(u)][static_cast<std::size_t>(index)]; }

  // Collective over comm. partitions: from nested_partitions, for comm's members in rank order.
  static std::unique_ptr<Hierarchy> build(T comm, const std::vector<std::vector<int>>& partitions, bool with_copy) {
    auto h = std::make_unique<Hierarchy>();
    h->comm = std::move(comm);
    if (partitions.empty()) return h;
    const std::vector<int>& top = partitions.front();
    const int me = h->comm.rank();
    h->units.resize(static_cast<std::size_t>(algorithms::unit_count(top)));
    for (int r = 0; r < static_cast<int>(top.size()); ++r) {
      auto& u = h->units[static_cast<std::size_t>(top[static_cast<std::size_t>(r)])];
      if (r == me) h->my_index = static_cast<int>(u.size());
      u.push_back(r);
    }
    h->my_unit = top[static_cast<std::size_t>(me)];
    h->rail = h->comm.split(h->my_index, h->my_unit);
    // The finer partitions, seen from inside my unit.
    std::vector<std::vector<int>> inner;
    for (std::size_t k = 1; k < partitions.size(); ++k) {
      std::vector<int> labels;
      for (int r : h->units[static_cast<std::size_t>(h->my_unit)])
        labels.push_back(partitions[k][static_cast<std::size_t>(r)]);
      inner.push_back(std::move(labels));
    }
    inner = nested_partitions(inner);
    h->unit = build(h->comm.split(h->my_unit, me), inner, false);
    if (with_copy) h->unit_copy = build(h->comm.split(h->my_unit, me), inner, false);
    return h;
  }
};

// Helpers the hierarchical algorithms (paro_cc.hpp, mics_hcs.hpp) share.
namespace hierarchical_detail {

// The blocks of unit u's members, as laid out in the caller's buffer.
template <class T>
BlockList unit_blocks(const Hierarchy<T>& h, const BlockList& blocks, int u) {
  BlockList list;
  for (int r : h.units[static_cast<std::size_t>(u)]) list.add(blocks.offset(r), blocks.count(r));
  return list;
}

// My rail's blocks (i', j) for every unit i', as laid out in the caller's buffer.
template <class T>
BlockList rail_blocks(const Hierarchy<T>& h, const BlockList& blocks) {
  BlockList list;
  for (int u = 0; u < h.unit_count(); ++u) {
    const int r = h.member(u, h.my_index);
    list.add(blocks.offset(r), blocks.count(r));
  }
  return list;
}

// The same blocks packed one after the other from element `at` (a scratch buffer in rail order).
inline BlockList packed(const BlockList& blocks, std::size_t at = 0) {
  BlockList list;
  for (int b = 0; b < blocks.blocks(); ++b) {
    list.add(at, blocks.count(b));
    at += blocks.count(b);
  }
  return list;
}

// True where this level runs flat: a flat scope, or units of different sizes (logged).
template <class T>
bool flat_path(const Hierarchy<T>& h, const char* what) {
  if (h.flat()) return true;
  if (h.even()) return false;
  log::info(h.comm.rank(), what, ": units of different sizes at this level; one flat level runs here (correct, ",
            "without the hierarchical saving)");
  return true;
}

}  // namespace hierarchical_detail

// For hierarchical descriptors: the call's blocks, one per rank of the scope.
template <class Ctx>
BlockList blocks_of(Ctx& x, const Call& c) {
  return BlockList::from(BlockLayout::uniform(x.comm().size(), c.count));
}

// Hierarchical reduce-scatters combine partial sums level by level; avg divides once, at the end.
template <class Ctx, class Run>
void reduce_scatter_dividing_last(Ctx& x, const Call& c, Run&& run) {
  run(c.op == ReduceOp::avg ? ReduceOp::sum : c.op);
  if (c.op == ReduceOp::avg) x.comm().divide(c.recv, c.count, c.dt, x.comm().size());
}

}  // namespace paro::algorithms
