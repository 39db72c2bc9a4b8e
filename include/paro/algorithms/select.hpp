#pragma once
// Automatic algorithm choice for a flat communicator: the logarithmic-latency tree algorithms while the
// full buffer is small, the bandwidth-optimal ring above. The crossover is PARO_TREE_MAX_BYTES (default
// 64K, measured with paro-bench on the threads and mpi backends; docs/results.md).

#include <cstddef>

#include "paro/algorithms/algorithm.hpp"
#include "paro/core/env.hpp"

namespace paro::algorithms {

struct SelectionPolicy {
  std::size_t tree_max_bytes = std::size_t{64} << 10;

  static SelectionPolicy from_env() {
    SelectionPolicy p;
    p.tree_max_bytes = env::bytes_or("PARO_TREE_MAX_BYTES", p.tree_max_bytes);
    return p;
  }

  // full_bytes: the size of the full buffer (n blocks for all-gather and reduce-scatter).
  Algorithm choose(Collective, int ranks, std::size_t full_bytes) const {
    if (ranks <= 2) return Algorithm::ring;  // one exchange either way; ring pipelines large ones
    return full_bytes <= tree_max_bytes ? Algorithm::tree : Algorithm::ring;
  }
};

}  // namespace paro::algorithms
