#pragma once
// The per-rank blocks of an all_to_allv buffer, and their checks: a count and a displacement (both in
// elements) for each rank of the call's scope.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "paro/algorithms/all_to_all.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"

namespace paro {

struct Blocks {
  std::vector<std::size_t> counts;  // counts[j]: the elements of rank j's block
  std::vector<std::size_t> displs;  // displs[j]: where that block starts, in elements from the buffer's start

  // The blocks one after the other in rank order (displs = the running sum of counts).
  static Blocks packed(std::vector<std::size_t> counts) {
    std::vector<std::size_t> displs(counts.size());
    std::size_t at = 0;
    for (std::size_t j = 0; j < counts.size(); ++j) {
      displs[j] = at;
      at += counts[j];
    }
    return {std::move(counts), std::move(displs)};
  }
  std::size_t total() const { return std::accumulate(counts.begin(), counts.end(), std::size_t{0}); }
  bool operator==(const Blocks& o) const { return counts == o.counts && displs == o.displs; }
};

namespace validation {

// blocks as byte extents, checked: one count and one displacement per rank of a scope of `ranks`, and
// every block's end addressable. name: "send_blocks" or "recv_blocks".
inline std::vector<algorithms::Extent> extents(const char* what, const char* name, const Blocks& blocks, DataType dt,
                                               int ranks) {
  const auto n = static_cast<std::size_t>(ranks);
  detail::require(blocks.counts.size() == n && blocks.displs.size() == n, what, ": ", name, " has ",
                  blocks.counts.size(), " counts and ", blocks.displs.size(), " displs for a scope of ", ranks,
                  " ranks; allowed: one of each per rank");
  const std::size_t limit = std::numeric_limits<std::size_t>::max() / size_of(dt);
  std::vector<algorithms::Extent> out(n);
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t c = blocks.counts[j], d = blocks.displs[j];
    detail::require(c <= limit && d <= limit - c, what, ": ", name, "'s block of rank ", j, " (", c, " elements at ", d,
                    ") ends beyond the addressable size");
    out[j] = {d * size_of(dt), c * size_of(dt)};
  }
  return out;
}

// Received blocks may not overlap (each would overwrite another's bytes).
inline void disjoint(const char* what, const char* name, const std::vector<algorithms::Extent>& blocks, DataType dt) {
  std::vector<std::size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  order.erase(std::remove_if(order.begin(), order.end(), [&](std::size_t j) { return blocks[j].bytes == 0; }),
              order.end());
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return blocks[a].offset < blocks[b].offset; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const algorithms::Extent &a = blocks[order[k - 1]], &b = blocks[order[k]];
    detail::require(a.offset + a.bytes <= b.offset, what, ": ", name, "'s blocks of ranks ", order[k - 1], " and ",
                    order[k], " overlap (elements ", a.offset / size_of(dt), " .. ",
                    (a.offset + a.bytes) / size_of(dt) - 1, " and ", b.offset / size_of(dt), " .. ",
                    (b.offset + b.bytes) / size_of(dt) - 1, "); each rank's block needs its own elements");
  }
}

}  // namespace validation
}  // namespace paro
