#pragma once
// Direct all-gather and reduce-scatter: every rank exchanges its blocks with every other rank directly,
// up to `peers_in_flight` exchanges at a time. The bytes are the ring's (each rank sends and receives n-1
// blocks), but latencies overlap instead of adding up, so for small blocks, where latency dominates,
// this is the faster schedule for a level of paro_cc; the ring keeps large blocks in a bounded pipeline.
// The bound on exchanges in flight keeps matching queues short (MPI libraries and SimGrid scan them).
//
// Cost (n ranks, N bytes in the full buffer): a (1 + (n-1)/16) + (n-1)/n N b.
// The same hooks as the ring (ring.hpp), in the same orders, so a level can switch schedules freely.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/core/tags.hpp"

namespace paro::algorithms {

namespace direct_detail {
constexpr int tag = tags::direct;
constexpr int peers_in_flight = 16;
}  // namespace direct_detail

// Fills every block of `buf` from its owner; this rank's block must already be in place. after_block(b)
// once block b is in place, in the order r, r-1, r-2, ...
template <class T, class Layout, class AfterBlock = NoHook>
void direct_all_gather(T& t, void* buf, const Layout& layout, DataType dt, AfterBlock&& after_block = {}) {
  const int n = t.size(), r = t.rank();
  if (n == 1) return after_block(0);
  activity::PhaseScope phase("direct all-gather");
  const std::size_t esize = size_of(dt);
  char* data = static_cast<char*>(buf);
  auto block = [&](int b) { return data + layout.offset(b) * esize; };
  const int w = std::min(direct_detail::peers_in_flight, n - 1);
  std::vector<typename T::Request> recvs(static_cast<std::size_t>(w)), sends(static_cast<std::size_t>(w));
  // Exchange k: receive block r-k from its owner, send this rank's block to rank r+k (whose k-th it is).
  auto post = [&](int k) {
    const auto slot = static_cast<std::size_t>((k - 1) % w);
    const int from = ring_detail::mod(r - k, n), to = ring_detail::mod(r + k, n);
    recvs[slot] = t.irecv(block(from), layout.count(from) * esize, from, direct_detail::tag);
    t.wait(sends[slot]);
    sends[slot] = t.isend(block(r), layout.count(r) * esize, to, direct_detail::tag);
  };
  for (int k = 1; k <= w; ++k) post(k);
  run_hook(t, after_block, r);
  for (int k = 1; k < n; ++k) {
    t.wait(recvs[static_cast<std::size_t>((k - 1) % w)]);
    if (k + w < n) post(k + w);
    run_hook(t, after_block, ring_detail::mod(r - k, n));
  }
  t.wait_all(sends);
}

// Reduces `in` (block b, destined to rank b) over all ranks into this rank's block `out` (which may be
// its own block of `in`), divided by n for avg. before_block(b) before block b of `in` is read, in the
// order r-1, r-2, ..., r.
template <class T, class Layout, class BeforeBlock = NoHook>
void direct_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                           BeforeBlock&& before_block = {}) {
  activity::PhaseScope phase("direct reduce-scatter");
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt), mine = layout.count(r), bytes = mine * esize;
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);
  if (n == 1) {
    before_block(0);
    t.copy(output, input + layout.offset(0) * esize, bytes);
    return;
  }
  const int w = std::min(direct_detail::peers_in_flight, n - 1);
  // The others' partials of my block, in w receive slots, summed into `others` as they arrive: my own
  // block is read last (the hooks' order), and `out` may be it.
  auto scratch = t.allocate(static_cast<std::size_t>(w + 1) * bytes);
  char* others = scratch.data();
  auto slot = [&](int k) { return others + static_cast<std::size_t>(1 + (k - 1) % w) * bytes; };
  std::vector<typename T::Request> recvs(static_cast<std::size_t>(w)), sends(static_cast<std::size_t>(w));
  // Exchange k: receive rank r+k's partial of my block, send my partial of block r-k (its k-th).
  auto post = [&](int k) {
    const auto at = static_cast<std::size_t>((k - 1) % w);
    const int to = ring_detail::mod(r - k, n);
    recvs[at] = t.irecv(slot(k), bytes, ring_detail::mod(r + k, n), direct_detail::tag);
    run_hook(t, before_block, to);
    t.wait(sends[at]);
    sends[at] = t.isend(input + layout.offset(to) * esize, layout.count(to) * esize, to, direct_detail::tag);
  };
  for (int k = 1; k <= w; ++k) post(k);
  for (int k = 1; k < n; ++k) {
    t.wait(recvs[static_cast<std::size_t>((k - 1) % w)]);
    if (k == 1)
      t.copy(others, slot(k), bytes);
    else
      t.reduce(others, others, slot(k), mine, dt, op);
    if (k + w < n) post(k + w);
  }
  run_hook(t, before_block, r);
  t.reduce(output, input + layout.offset(r) * esize, others, mine, dt, op);
  t.wait_all(sends);
  if (op == ReduceOp::avg) t.divide(output, mine, dt, n);
}

// A level of a hierarchical schedule: direct where its largest block is at most `direct_max_bytes`,
// else the ring. Every member sees the same layout, so all choose alike.
template <class T, class Layout, class AfterBlock = NoHook>
void level_all_gather(T& t, void* buf, const Layout& layout, DataType dt, const RingParams& ring,
                      std::size_t direct_max_bytes, AfterBlock&& after_block = {}) {
  if (layout.max_count() * size_of(dt) <= direct_max_bytes) return direct_all_gather(t, buf, layout, dt, after_block);
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
