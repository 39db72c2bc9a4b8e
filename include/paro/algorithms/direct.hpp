#pragma once
// Direct all-gather and reduce-scatter: every rank exchanges its blocks with every other rank at once, in
// one step. The bytes are the ring's (each rank sends and receives n-1 blocks), but the latency is paid
// once instead of n-1 times, so for small blocks, where latency dominates, this is the faster schedule
// for a level of paro_cc; the ring keeps large blocks in a bounded pipeline.
//
// Cost (n ranks, N bytes in the full buffer): a + (n-1)/n N b, the n-1 messages sharing the links.
// The same hooks as the ring (ring.hpp), in the same orders, so a level can switch schedules freely.

#include <cstddef>
#include <vector>

#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro::algorithms {

namespace direct_detail {
constexpr int tag = 0x44;
}

// Fills every block of `buf` from its owner; this rank's block must already be in place. after_block(b)
// once block b is in place, in the order r, r-1, r-2, ...
template <class T, class Layout, class AfterBlock = NoHook>
void direct_all_gather(T& t, void* buf, const Layout& layout, DataType dt, AfterBlock&& after_block = {}) {
  const int n = t.size(), r = t.rank();
  if (n == 1) return after_block(0);
  const std::size_t esize = size_of(dt);
  char* data = static_cast<char*>(buf);
  auto block = [&](int b) { return data + layout.offset(b) * esize; };
  std::vector<typename T::Request> recvs, sends;
  recvs.reserve(static_cast<std::size_t>(n - 1));
  sends.reserve(static_cast<std::size_t>(n - 1));
  for (int k = 1; k < n; ++k) {  // block r-k, the k-th this rank waits for
    const int from = ring_detail::mod(r - k, n);
    recvs.push_back(t.irecv(block(from), layout.count(from) * esize, from, direct_detail::tag));
  }
  for (int k = 1; k < n; ++k)  // rank r+k waits for this block k-th
    sends.push_back(t.isend(block(r), layout.count(r) * esize, ring_detail::mod(r + k, n), direct_detail::tag));
  after_block(r);
  for (int k = 1; k < n; ++k) {
    t.wait(recvs[static_cast<std::size_t>(k - 1)]);
    after_block(ring_detail::mod(r - k, n));
  }
  t.wait_all(sends);
}

// Reduces `in` (block b, destined to rank b) over all ranks into this rank's block `out` (which may be
// its own block of `in`), divided by n for avg. before_block(b) before block b of `in` is read, in the
// order r-1, r-2, ..., r.
template <class T, class Layout, class BeforeBlock = NoHook>
void direct_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                           BeforeBlock&& before_block = {}) {
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt), mine = layout.count(r);
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);
  if (n == 1) {
    before_block(0);
    t.copy(output, input + layout.offset(0) * esize, mine * esize);
    return;
  }
  auto partials = t.allocate(static_cast<std::size_t>(n - 1) * mine * esize);
  auto partial = [&](int k) { return partials.data() + static_cast<std::size_t>(k - 1) * mine * esize; };
  std::vector<typename T::Request> recvs, sends;
  recvs.reserve(static_cast<std::size_t>(n - 1));
  sends.reserve(static_cast<std::size_t>(n - 1));
  for (int k = 1; k < n; ++k)  // rank r+k sends its partial of my block k-th
    recvs.push_back(t.irecv(partial(k), mine * esize, ring_detail::mod(r + k, n), direct_detail::tag));
  for (int k = 1; k < n; ++k) {
    const int to = ring_detail::mod(r - k, n);
    before_block(to);
    sends.push_back(t.isend(input + layout.offset(to) * esize, layout.count(to) * esize, to, direct_detail::tag));
  }
  before_block(r);
  const char* own = input + layout.offset(r) * esize;
  for (int k = 1; k < n; ++k) {
    t.wait(recvs[static_cast<std::size_t>(k - 1)]);
    t.reduce(output, k == 1 ? own : output, partial(k), mine, dt, op);
  }
  t.wait_all(sends);
  if (op == ReduceOp::avg) t.divide(output, mine, dt, n);
}

// A level of a hierarchical schedule: direct where its largest block is at most `direct_max_bytes`,
// else the ring. Every member sees the same layout, so all choose alike.
template <class T, class Layout, class AfterBlock = NoHook>
void level_all_gather(T& t, void* buf, const Layout& layout, DataType dt, const RingParams& ring,
                      std::size_t direct_max_bytes, AfterBlock&& after_block = {}) {
  if (layout.max_count() * size_of(dt) <= direct_max_bytes)
    return direct_all_gather(t, buf, layout, dt, after_block);
  ring_all_gather(t, buf, layout, dt, ring, after_block);
}

template <class T, class Layout, class BeforeBlock = NoHook>
void level_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                          const RingParams& ring, std::size_t direct_max_bytes, BeforeBlock&& before_block = {}) {
  if (layout.max_count() * size_of(dt) <= direct_max_bytes)
    return direct_reduce_scatter(t, in, out, layout, dt, op, before_block);
  ring_reduce_scatter(t, in, out, layout, dt, op, ring, before_block);
}

// Reduce-scatter then all-gather of balanced blocks, each level_ as above. `out` may equal `in`.
template <class T>
void level_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op,
                      const RingParams& ring, std::size_t direct_max_bytes) {
  const BlockLayout layout = BlockLayout::balanced(t.size(), count);
  char* mine = static_cast<char*>(out) + layout.offset(t.rank()) * size_of(dt);
  level_reduce_scatter(t, in, mine, layout, dt, op, ring, direct_max_bytes);
  level_all_gather(t, out, layout, dt, ring, direct_max_bytes);
}

}  // namespace paro::algorithms
