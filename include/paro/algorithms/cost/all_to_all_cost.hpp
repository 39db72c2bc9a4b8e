#pragma once
// The all-to-all schedules' cost formulas (all_to_all.hpp runs them), from the cost model's shared terms
// (cost_model.hpp); docs/algorithms.md, "all_to_all". N: one rank's buffer in bytes, n ranks, B = N/n.

#include <algorithm>
#include <cstddef>

#include "paro/algorithms/cost/cost_model.hpp"

namespace paro::algorithms {

// Pairwise: every exchange posted at once, one latency; the remote blocks through the NIC (those for other
// pods also through the pod's uplink) while the local ones cross the intra links, at once; my own block
// copied.
//   a + max((n-p) B b_pod, (n-m) B b_nic, (m-1) B b_intra) + copy(B)   (m, p: ranks of the fullest node, pod)
inline double pairwise_all_to_all_time(const CostModel& m, double N, const CostShape& s) {
  const int n = s.ranks;
  const double block = N / std::max(n, 1);
  if (n <= 1) return m.copy_us(block);
  const CostModel::Hop slowest = m.all_senders_hop(s), nic = m.hop(s.nodes > 1, s.nic_flows), intra = m.hop(false, 0);
  const int local = s.nodes > 1 ? std::clamp(s.ranks_per_node, 1, n) : n;
  const int in_pod = s.pods > 1 ? std::clamp(s.pod_ranks, local, n) : n;
  const double remote = std::max((n - in_pod) * block * slowest.beta, (n - local) * block * nic.beta);
  const double near = (local - 1) * block * intra.beta;
  return slowest.alpha + std::max(remote, near) + m.copy_us(block);
}

// Bruck: ceil(log2 n) steps; the step at distance d sends the blocks whose index has bit d (about half),
// packed and unpacked; the rotations before and after copy the buffer twice.
//   sum_d (a + k_d B b + copy(2 k_d B)) + copy(2N)
inline double bruck_all_to_all_time(const CostModel& m, double N, const CostShape& s) {
  const int n = s.ranks;
  const double block = N / std::max(n, 1);
  double time = m.copy_us(2 * N);
  if (n <= 1) return time;
  const CostModel::Hop h = m.all_senders_hop(s);
  for (int d = 1; d < n; d *= 2) {
    int moved = 0;
    for (int j = d; j < n; ++j) moved += (j & d) != 0;
    time += h.alpha + moved * block * h.beta + m.copy_us(2.0 * moved * block);
  }
  return time;
}

// Hierarchical, level by level: with U units of g members, a piece is my unit's exchange of one block per
// member (the level below, recursively; pairwise at the leaf), and U-1 pieces of g blocks cross the rail.
// Overlapped (paro_cc), the rail carries a piece while my unit makes the next:
//   piece + max((U-1) piece + g B b_rail, (U-1) g B b_rail) + a_rail + copy((U-1) g B)
// One after the other (paro_seq): U piece + a_rail + (U-1) g B b_rail + copy((U-1) g B).
inline double hierarchical_all_to_all_level(const CostModel& m, double block, int members, const CostShape& s,
                                            std::size_t level, bool overlap) {
  if (members <= 1) return m.copy_us(block);
  if (level >= s.units.size()) {
    const CostModel::Hop h = m.leaf_hop(s);
    return h.alpha + (members - 1) * block * h.beta + m.copy_us(block);
  }
  const int units = std::max(1, s.units[level]), g = members / units;
  const double piece = hierarchical_all_to_all_level(m, block, g, s, level + 1, overlap);
  const CostModel::Hop rail = m.rail_hop(s, level);
  const double one_piece = g * block * rail.beta, remote = units - 1.0;
  const double place = m.copy_us(remote * g * block);
  if (overlap) return piece + std::max(remote * piece + one_piece, remote * one_piece) + rail.alpha + place;
  return units * piece + rail.alpha + remote * one_piece + place;
}

inline double hierarchical_all_to_all_time(const CostModel& m, double N, const CostShape& s, bool overlap) {
  if (!s.hierarchical()) return pairwise_all_to_all_time(m, N, s);
  return hierarchical_all_to_all_level(m, N / s.ranks, s.ranks, s, 0, overlap);
}

}  // namespace paro::algorithms
