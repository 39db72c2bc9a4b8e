#pragma once
// MiCS-HCS's cost formula (mics_hcs.hpp runs the schedules), from the cost model's shared terms
// (cost_model.hpp); docs/algorithms.md, "mics_hcs".

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"

namespace paro::algorithms {

// The rail ring and a ring per unit member, one after the other; a flat ring without levels.
inline double mics_hcs_time(const CostModel& model, Collective c, double N, const CostShape& s) {
  if (!s.hierarchical()) return model.flat_ring(c, N, s.ranks, model.ring_link(s));
  using Hop = CostModel::Hop;
  const int g = s.units[0], m = s.ranks / g;
  const Hop rail = model.rail_hop(s, 0);
  const bool unit_inter = s.units.size() > 1 ? true : s.leaf_inter;
  const Hop unit_link = model.hop(unit_inter, s.nic_flows);
  CostModel::RingHops unit{unit_link, unit_link};
  if (unit_inter && s.ring_inter_hops > 0) {  // a unit's ring leaves a node as often as the scope's ring
    const double f = static_cast<double>(s.ring_inter_hops) / s.ranks;
    unit.mean = CostModel::mean_hop({{1 - f, model.hop(false, 0)}, {f, unit_link}});
  }
  const double block = N / s.ranks;
  switch (c) {
    case Collective::all_gather:
      return model.flat_ring(c, block * g, g, rail) + model.copy_us(block * g) +
             g * model.flat_ring(c, block * m, m, unit);
    case Collective::reduce_scatter:
      return model.copy_us(N) + g * model.flat_ring(c, block * m, m, unit) + model.flat_ring(c, block * g, g, rail);
    case Collective::all_reduce:
      return model.flat_ring(Collective::reduce_scatter, N, m, unit) + model.flat_ring(c, N / m, g, rail) +
             model.copy_us(N / m) + model.flat_ring(Collective::all_gather, N, m, unit);
    case Collective::all_to_all: break;  // mics_hcs has no all_to_all schedule
  }
  return 0;
}

}  // namespace paro::algorithms
