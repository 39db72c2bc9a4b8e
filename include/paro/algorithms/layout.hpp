#pragma once
// How a buffer is cut into per-rank blocks and blocks into pipeline chunks. Both sides of every message
// compute the same cuts from the same layout, which is what keeps sizes matched without any handshake.

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace paro::algorithms {

// Rank a taken around a ring of n (a may be negative: r - k).
inline int mod(int a, int n) { return ((a % n) + n) % n; }

// n blocks of elements: either all `per_block` long, or `total` split as evenly as possible
// (the first total % n blocks one element longer).
class BlockLayout {
 public:
  static BlockLayout uniform(int n, std::size_t per_block) {
    return BlockLayout(n, per_block * static_cast<std::size_t>(n), true);
  }
  static BlockLayout balanced(int n, std::size_t total) { return BlockLayout(n, total, false); }

  int blocks() const { return n_; }
  std::size_t total() const { return total_; }
  std::size_t offset(int b) const {
    const auto ub = static_cast<std::size_t>(b);
    return ub * base_ + std::min(ub, extra_);
  }
  std::size_t count(int b) const { return base_ + (static_cast<std::size_t>(b) < extra_ ? 1 : 0); }
  std::size_t max_count() const { return base_ + (extra_ ? 1 : 0); }
  // Elements from the start of block `first` to the start of block `last` (last may be n).
  std::size_t span(int first, int last) const { return offset(last) - offset(first); }

 private:
  BlockLayout(int n, std::size_t total, bool)
      : n_(n), total_(total), base_(total / static_cast<std::size_t>(n)), extra_(total % static_cast<std::size_t>(n)) {}
  int n_;
  std::size_t total_;
  std::size_t base_;
  std::size_t extra_;
};

// Blocks at arbitrary element offsets of one buffer, each with its own length: the blocks a hierarchical
// schedule hands to a sub-communicator (the shards of one group, scattered over the full buffer).
class BlockList {
 public:
  BlockList() = default;
  void add(std::size_t offset, std::size_t count) {
    offsets_.push_back(offset);
    counts_.push_back(count);
    max_ = std::max(max_, count);
  }
  template <class Layout>
  static BlockList from(const Layout& layout) {
    BlockList list;
    for (int b = 0; b < layout.blocks(); ++b) list.add(layout.offset(b), layout.count(b));
    return list;
  }
  int blocks() const { return static_cast<int>(offsets_.size()); }
  std::size_t offset(int b) const { return offsets_[static_cast<std::size_t>(b)]; }
  std::size_t count(int b) const { return counts_[static_cast<std::size_t>(b)]; }
  std::size_t max_count() const { return max_; }
  std::size_t total() const {
    std::size_t t = 0;
    for (std::size_t c : counts_) t += c;
    return t;
  }

 private:
  std::vector<std::size_t> offsets_, counts_;
  std::size_t max_ = 0;
};

// Pipelining: every block is cut into the same number of chunks, so a step's chunk c always pairs with
// the neighbour's chunk c.
struct ChunkPlan {
  std::size_t chunks;

  template <class Layout>
  static ChunkPlan for_layout(const Layout& layout, std::size_t element_size, std::size_t chunk_bytes) {
    const std::size_t chunk_elements = std::max<std::size_t>(1, chunk_bytes / element_size);
    const std::size_t chunks = (layout.max_count() + chunk_elements - 1) / chunk_elements;
    return {std::clamp<std::size_t>(chunks, 1, std::size_t{1} << 30)};  // chunk indices stay ints
  }

  // Chunk c of a block of `count` elements: {offset within the block, length}.
  std::pair<std::size_t, std::size_t> piece(std::size_t count, std::size_t c) const {
    const BlockLayout split = BlockLayout::balanced(static_cast<int>(chunks), count);
    return {split.offset(static_cast<int>(c)), split.count(static_cast<int>(c))};
  }
  std::size_t max_piece(std::size_t max_count) const { return (max_count + chunks - 1) / chunks; }
};

}  // namespace paro::algorithms
