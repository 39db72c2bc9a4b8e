#pragma once
// The statistic the benchmarks report over interleaved rounds: the median, which one round slowed by a
// neighbour on a shared machine cannot move.

#include <algorithm>
#include <vector>

namespace paro::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

}  // namespace paro::bench
