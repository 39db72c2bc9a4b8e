#pragma once
// Direct all-gather and reduce-scatter: every rank exchanges its blocks with every other rank directly,
// a window of exchanges at a time (cost_model.hpp's direct_window: every peer at once for small blocks,
// about PARO_DIRECT_WINDOW bytes in flight for large ones). The bytes are the ring's (each rank sends
// and receives n-1 blocks), but latencies overlap instead of adding up, so for small blocks, where
// latency dominates, this is the faster schedule for a level of paro_cc; the ring keeps large blocks in a
// bounded pipeline. The bound on bytes in flight lets large blocks arrive window by window (paro_cc's
// unit moves one window while the next flies) and keeps matching queues short for them.
//
// Cost (n ranks, N bytes in the full buffer, w exchanges in flight): a ceil((n-1)/w) + (n-1)/n N b.
// The same hooks as the ring (ring.hpp), in the same orders, so a level can switch schedules freely.

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/core/tags.hpp"

namespace paro::algorithms {

namespace direct_detail {
constexpr int tag = tags::direct;
}  // namespace direct_detail

// How levels exchange directly: blocks of at most max_bytes (PARO_DIRECT_MAX) directly, not in a ring,
// with about window_bytes (PARO_DIRECT_WINDOW) in flight.
struct DirectParams {
  std::size_t max_bytes = CostModel::default_direct_max_bytes;
  std::size_t window_bytes = CostModel::default_direct_window_bytes;
  // Exchanges in flight over n members, each carrying `exchange_bytes`, as the cost model prices them.
  int window(int n, std::size_t exchange_bytes) const {
    return direct_window(n, static_cast<double>(exchange_bytes), static_cast<double>(window_bytes));
  }
};

// The bytes one exchange carries to a peer: the largest block of each of `lists` layouts, alike on every
// rank, so that all size their windows alike.
template <class Layout>
std::size_t exchange_bytes(const Layout* layouts, std::size_t lists, DataType dt) {
  std::size_t bytes = 0;
  for (std::size_t l = 0; l < lists; ++l) bytes += layouts[l].max_count() * size_of(dt);
  return bytes;
}

// Fills every block of `buf` from its owner, for each of `lists` layouts over the same ranks; this rank's
// blocks must already be in place. Exchange k carries block r-k of every layout, so the layouts' latencies
// overlap: a level that gathers many small shards pays one round of latency, not one per shard.
// `window` exchanges in flight (at most n - 1 are). after_block(b) once block b of every layout is in
// place, in the order r, r-1, r-2, ...
template <class T, class Layout, class AfterBlock = NoHook>
void direct_all_gather(T& t, void* buf, const Layout* layouts, std::size_t lists, DataType dt, int window,
                       AfterBlock&& after_block = {}) {
  const int n = t.size(), r = t.rank();
  if (n == 1) return after_block(0);
  activity::PhaseScope phase("direct all-gather");
  const std::size_t esize = size_of(dt);
  char* data = static_cast<char*>(buf);
  auto block = [&](std::size_t l, int b) { return data + layouts[l].offset(b) * esize; };
  const int w = std::clamp(window, 1, n - 1);
  std::vector<typename T::Request> recvs(static_cast<std::size_t>(w) * lists), sends(recvs.size());
  // Exchange k: receive block r-k from its owner, send this rank's block to rank r+k (whose k-th it is).
  auto post = [&](int k) {
    const int from = mod(r - k, n), to = mod(r + k, n);
    for (std::size_t l = 0; l < lists; ++l) {
      const std::size_t slot = static_cast<std::size_t>((k - 1) % w) * lists + l;
      recvs[slot] = t.irecv(block(l, from), layouts[l].count(from) * esize, from, direct_detail::tag);
      t.wait(sends[slot]);
      sends[slot] = t.isend(block(l, r), layouts[l].count(r) * esize, to, direct_detail::tag);
    }
  };
  for (int k = 1; k <= w; ++k) post(k);
  run_hook(t, after_block, r);
  for (int k = 1; k < n; ++k) {
    for (std::size_t l = 0; l < lists; ++l) t.wait(recvs[static_cast<std::size_t>((k - 1) % w) * lists + l]);
    if (k + w < n) post(k + w);
    run_hook(t, after_block, mod(r - k, n));
  }
  t.wait_all(sends);
}

template <class T, class Layout, class AfterBlock = NoHook>
void direct_all_gather(T& t, void* buf, const Layout& layout, DataType dt, const DirectParams& direct,
                       AfterBlock&& after_block = {}) {
  direct_all_gather(t, buf, &layout, 1, dt, direct.window(t.size(), exchange_bytes(&layout, 1, dt)),
                    std::forward<AfterBlock>(after_block));
}

// Reduces `in` over all ranks, for each of `lists` layouts over the same ranks: block b of layout l is
// destined to rank b, and this rank's block of layout l goes to outs[l] (which may be that block of `in`),
// divided by n for avg. Exchange k carries every layout's block, so their latencies overlap; `window`
// exchanges in flight. before_block(b) before block b of `in` is read (of any layout), in the order r-1, r-2, ..., r;
// after_send(b) once block b of every layout is on its way to rank b, in the order r-1, r-2, ...
template <class T, class Layout, class BeforeBlock = NoHook, class AfterSend = NoHook>
void direct_reduce_scatter(T& t, const void* in, char* const* outs, const Layout* layouts, std::size_t lists,
                           DataType dt, ReduceOp op, int window, BeforeBlock&& before_block = {},
                           AfterSend&& after_send = {}) {
  activity::PhaseScope phase("direct reduce-scatter");
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt);
  const char* input = static_cast<const char*>(in);
  auto mine = [&](std::size_t l) { return layouts[l].count(r); };
  auto block = [&](std::size_t l, int b) { return input + layouts[l].offset(b) * esize; };
  if (n == 1) {
    before_block(0);
    for (std::size_t l = 0; l < lists; ++l) t.copy(outs[l], block(l, 0), mine(l) * esize);
    return;
  }
  const int w = std::clamp(window, 1, n - 1);
  // Per layout, the others' partials of my block in w receive slots, summed into its first slot as they
  // arrive: my own block is read last (the hooks' order), and outs[l] may be it. Its hook runs as soon as
  // the last partial for another rank is on its way, while the rest of theirs are still coming: in
  // paro_cc, my unit makes my own shard while the rail's messages fly, as its all-gather does.
  std::vector<std::size_t> at(lists + 1, 0);
  for (std::size_t l = 0; l < lists; ++l) at[l + 1] = at[l] + static_cast<std::size_t>(w + 1) * mine(l) * esize;
  auto scratch = t.allocate(at[lists]);
  auto others = [&](std::size_t l) { return scratch.data() + at[l]; };
  auto slot = [&](std::size_t l, int k) {
    return others(l) + static_cast<std::size_t>(1 + (k - 1) % w) * mine(l) * esize;
  };
  std::vector<typename T::Request> recvs(static_cast<std::size_t>(w) * lists), sends(recvs.size());
  // Exchange k: receive rank r+k's partials of my blocks, send my partials of rank r-k's (its k-th).
  auto post = [&](int k) {
    const std::size_t first = static_cast<std::size_t>((k - 1) % w) * lists;
    const int to = mod(r - k, n), from = mod(r + k, n);
    for (std::size_t l = 0; l < lists; ++l)
      recvs[first + l] = t.irecv(slot(l, k), mine(l) * esize, from, direct_detail::tag);
    run_hook(t, before_block, to);
    for (std::size_t l = 0; l < lists; ++l) {
      t.wait(sends[first + l]);
      sends[first + l] = t.isend(block(l, to), layouts[l].count(to) * esize, to, direct_detail::tag);
    }
    run_hook(t, after_send, to);
    if (k == n - 1) run_hook(t, before_block, r);
  };
  for (int k = 1; k <= w; ++k) post(k);
  for (int k = 1; k < n; ++k) {
    for (std::size_t l = 0; l < lists; ++l) {
      t.wait(recvs[static_cast<std::size_t>((k - 1) % w) * lists + l]);
      if (k == 1)
        t.copy(others(l), slot(l, k), mine(l) * esize);
      else
        t.reduce(others(l), others(l), slot(l, k), mine(l), dt, op);
    }
    if (k + w < n) post(k + w);
  }
  for (std::size_t l = 0; l < lists; ++l) t.reduce(outs[l], block(l, r), others(l), mine(l), dt, op);
  t.wait_all(sends);
  if (op == ReduceOp::avg)
    for (std::size_t l = 0; l < lists; ++l) t.divide(outs[l], mine(l), dt, n);
}

template <class T, class Layout, class BeforeBlock = NoHook>
void direct_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                           const DirectParams& direct, BeforeBlock&& before_block = {}) {
  char* const outs[1] = {static_cast<char*>(out)};
  direct_reduce_scatter(t, in, outs, &layout, 1, dt, op, direct.window(t.size(), exchange_bytes(&layout, 1, dt)),
                        std::forward<BeforeBlock>(before_block));
}

// All-reduce in one round: every rank sends its whole buffer to every other (a window of exchanges at a
// time) and reduces the n buffers itself, in rank order, so every rank gets the same bits.
// One latency per window instead of a reduce-scatter's and an all-gather's, for (n-1) N bytes instead of
// 2 (n-1)/n N: the schedule for buffers so small that the second latency costs more than the extra
// bytes (paro_cc's rail, where each unit contributes a small piece). `out` may equal `in`; avg divides.
// Cost: a ceil((n-1)/w) + (n-1) (N b + reduce(N)).
template <class T>
void direct_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op,
                       const DirectParams& direct) {
  const int n = t.size(), r = t.rank();
  const std::size_t bytes = count * size_of(dt);
  if (n == 1 || count == 0) {
    t.copy(out, in, bytes);
    return;
  }
  activity::PhaseScope phase("direct all-reduce");
  // Slot b holds rank b's buffer (mine too, so that `out` may be `in`), reduced in rank order at the end.
  auto scratch = t.allocate(bytes * static_cast<std::size_t>(n));
  auto slot = [&](int b) { return scratch.data() + static_cast<std::size_t>(b) * bytes; };
  t.copy(slot(r), in, bytes);
  const int w = direct.window(n, bytes);
  std::vector<typename T::Request> recvs(static_cast<std::size_t>(w)), sends(recvs.size());
  auto post = [&](int k) {  // exchange k: receive rank r-k's buffer, send mine to rank r+k
    const std::size_t at = static_cast<std::size_t>((k - 1) % w);
    recvs[at] = t.irecv(slot(mod(r - k, n)), bytes, mod(r - k, n), direct_detail::tag);
    t.wait(sends[at]);
    sends[at] = t.isend(slot(r), bytes, mod(r + k, n), direct_detail::tag);
  };
  for (int k = 1; k <= w; ++k) post(k);
  for (int k = 1; k < n; ++k) {
    t.wait(recvs[static_cast<std::size_t>((k - 1) % w)]);
    if (k + w < n) post(k + w);
  }
  t.wait_all(sends);
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  t.copy(out, slot(0), bytes);
  for (int b = 1; b < n; ++b) t.reduce(out, out, slot(b), count, dt, combine);
  if (op == ReduceOp::avg) t.divide(out, count, dt, n);
}

// A level of a hierarchical schedule: direct where its largest block is at most `direct.max_bytes`, else
// the ring. Every member sees the same layout, so all choose alike.
template <class T, class Layout, class AfterBlock = NoHook>
void level_all_gather(T& t, void* buf, const Layout& layout, DataType dt, const RingParams& ring,
                      const DirectParams& direct, AfterBlock&& after_block = {}) {
  if (layout.max_count() * size_of(dt) <= direct.max_bytes)
    return direct_all_gather(t, buf, layout, dt, direct, after_block);
  ring_all_gather(t, buf, layout, dt, ring, after_block);
}

template <class T, class Layout, class BeforeBlock = NoHook>
void level_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                          const RingParams& ring, const DirectParams& direct, BeforeBlock&& before_block = {}) {
  if (layout.max_count() * size_of(dt) <= direct.max_bytes)
    return direct_reduce_scatter(t, in, out, layout, dt, op, direct, before_block);
  ring_reduce_scatter(t, in, out, layout, dt, op, ring, before_block);
}

// Reduce-scatter then all-gather of balanced blocks, each level_ as above. `out` may equal `in`.
template <class T>
void level_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op,
                      const RingParams& ring, const DirectParams& direct) {
  const BlockLayout layout = BlockLayout::balanced(t.size(), count);
  char* mine = static_cast<char*>(out) + layout.offset(t.rank()) * size_of(dt);
  level_reduce_scatter(t, in, mine, layout, dt, op, ring, direct);
  level_all_gather(t, out, layout, dt, ring, direct);
}

}  // namespace paro::algorithms
