#pragma once
// Ring all-gather, reduce-scatter and all-reduce (= reduce-scatter + all-gather), in rank order.
//
// Large blocks are cut into chunks that flow around the ring as a pipeline: chunk c of step s+1 is sent
// as soon as chunk c of step s has arrived (and, for reductions, been reduced), while later chunks are
// still on the wire. At most `window` receives are outstanding per rank (a whole block's where a
// hierarchical schedule's hook runs between steps).
//
// Cost (n ranks, N bytes in the full buffer, per-message latency a, per-byte time b):
//   all-gather, reduce-scatter: (n-1) a + (n-1)/n N b;   all-reduce: 2(n-1) a + 2(n-1)/n N b.

#include <cstddef>
#include <type_traits>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/all_to_all.hpp"
#include "paro/algorithms/cost/all_to_all_cost.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/log.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::algorithms {

struct RingParams {
  std::size_t chunk_bytes = std::size_t{1} << 20;
  std::size_t window = CostModel::default_ring_window;
};

namespace ring_detail {
constexpr int tag = tags::ring;
}  // namespace ring_detail

// Hooks let a hierarchical schedule overlap another level with the ring: the reduce-scatter calls
// before_block(b) before it first reads block b of its input (in the order r-1, r-2, ..., r), the
// all-gather calls after_block(b) once block b is in place (in the order r, r-1, r-2, ...). Both are
// called while the ring's messages of the current step are in flight: before waiting for a step's first
// receive, and after forwarding a block, so work done in a hook on the same thread overlaps them.
struct NoHook {
  void operator()(int) const {}
};

// Whether a ring was given a hook (NoHook: none).
template <class Hook>
inline constexpr bool is_hook_v = !std::is_same_v<std::decay_t<Hook>, NoHook>;

// Runs a hook while the step's messages are in flight; a transport that only records messages until a
// wait (NCCL's groups) is told to start them first, or the hook's work would not overlap them.
template <class T, class Hook>
void run_hook(T& t, Hook& hook, int block) {
  if constexpr (is_hook_v<Hook>) issue_posted(t);
  hook(block);
}

// Receives a ring keeps posted. A hook holds the ring up for as long as it runs (another level's work on
// this thread, or a wait for it); with a whole block's receives posted, the next block arrives meanwhile,
// not only `window` chunks of it (up to 64 chunks: a long queue of posted receives slows every match).
template <class Hook>
std::size_t receive_window(const RingParams& params, std::size_t chunks, std::size_t items) {
  constexpr std::size_t most_for_a_hook = 64;
  return std::min(is_hook_v<Hook> ? std::max(params.window, std::min(chunks, most_for_a_hook)) : params.window, items);
}

// Reduces `in` (block b, at layout.offset(b), destined to rank b) over all ranks and writes this rank's
// block to `out` (layout.count(rank) elements), divided by n for avg. `out` may be the rank's own block of
// `in`. Layout: BlockLayout or BlockList.
template <class T, class Layout, class BeforeBlock = NoHook>
void ring_reduce_scatter(T& t, const void* in, void* out, const Layout& layout, DataType dt, ReduceOp op,
                         const RingParams& params, BeforeBlock&& before_block = {}) {
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt);
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);
  if (n == 1) {
    before_block(0);
    t.copy(output, input + layout.offset(0) * esize, layout.count(0) * esize);
    return;
  }
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const ChunkPlan plan = ChunkPlan::for_layout(layout, esize, params.chunk_bytes);
  const std::size_t items = static_cast<std::size_t>(n - 1) * plan.chunks;
  const std::size_t window = receive_window<BeforeBlock>(params, plan.chunks, items);
  // A received chunk is reduced in its slot and sent on from there. The right neighbour takes it only
  // once it has worked through `chunks` more items, so a slot may be refilled no sooner: waiting earlier
  // for the send would deadlock whenever chunks >= window. Another `window` slots keep as many sends in
  // flight as receives where a send completes only once its receiver has it (MPI above its eager limit):
  // with fewer, every refill waited for the send before last, and a slow hop ran two messages at a time.
  const std::size_t slot_count = std::min(items, 2 * window + plan.chunks);
  const std::size_t slot_bytes = plan.max_piece(layout.max_count()) * esize;
  auto slots = t.allocate(slot_count * slot_bytes);
  auto slot = [&](std::size_t item) { return slots.data() + (item % slot_count) * slot_bytes; };
  // At step s a rank sends block r-s-1 and receives block r-s-2, adding its own contribution.
  auto recv_block = [&](std::size_t item) { return mod(r - static_cast<int>(item / plan.chunks) - 2, n); };
  auto chunk_of = [&](int block, std::size_t item) { return plan.piece(layout.count(block), item % plan.chunks); };

  std::vector<typename T::Request> first_sends;
  const int first_block = mod(r - 1, n);
  before_block(first_block);
  for (std::size_t c = 0; c < plan.chunks; ++c) {
    auto [off, len] = plan.piece(layout.count(first_block), c);
    first_sends.push_back(
        t.isend(input + (layout.offset(first_block) + off) * esize, len * esize, right, ring_detail::tag));
  }
  std::vector<typename T::Request> recvs(window), sends(slot_count);
  auto post_recv = [&](std::size_t item) {
    t.wait(sends[item % slot_count]);  // the slot's previous chunk has been taken by the right neighbour
    recvs[item % window] = t.irecv(slot(item), chunk_of(recv_block(item), item).second * esize, left, ring_detail::tag);
  };
  for (std::size_t item = 0; item < window; ++item) post_recv(item);

  activity::PhaseScope phase("ring reduce-scatter", static_cast<std::size_t>(n - 1));
  const std::size_t last_step_start = items - plan.chunks;
  for (std::size_t item = 0; item < items; ++item) {
    phase.step(item / plan.chunks + 1);
    const int block = recv_block(item);
    if (item % plan.chunks == 0) run_hook(t, before_block, block);
    t.wait(recvs[item % window]);
    auto [off, len] = chunk_of(block, item);
    const char* mine = input + (layout.offset(block) + off) * esize;
    if (item < last_step_start) {
      t.reduce(slot(item), slot(item), mine, len, dt, op);
      sends[item % slot_count] = t.isend(slot(item), len * esize, right, ring_detail::tag);
    } else {
      t.reduce(output + off * esize, slot(item), mine, len, dt, op);
    }
    if (item + window < items) post_recv(item + window);
  }
  t.wait_all(sends);
  t.wait_all(first_sends);
  if (op == ReduceOp::avg) t.divide(output, layout.count(r), dt, n);
}

// Fills every block of `buf` from its owner; this rank's block must already be in place.
template <class T, class Layout, class AfterBlock = NoHook>
void ring_all_gather(T& t, void* buf, const Layout& layout, DataType dt, const RingParams& params,
                     AfterBlock&& after_block = {}) {
  const int n = t.size(), r = t.rank();
  if (n == 1) return after_block(0);
  const std::size_t esize = size_of(dt);
  char* data = static_cast<char*>(buf);
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const ChunkPlan plan = ChunkPlan::for_layout(layout, esize, params.chunk_bytes);
  const std::size_t items = static_cast<std::size_t>(n - 1) * plan.chunks;
  const std::size_t window = receive_window<AfterBlock>(params, plan.chunks, items);
  // At step s a rank sends block r-s and receives block r-s-1, which it forwards at step s+1.
  auto region = [&](int block, std::size_t c) {
    auto [off, len] = plan.piece(layout.count(block), c);
    return std::make_pair(data + (layout.offset(block) + off) * esize, len * esize);
  };
  auto recv_block = [&](std::size_t item) { return mod(r - static_cast<int>(item / plan.chunks) - 1, n); };

  // Sends complete in order; at most `in_flight` are outstanding: a long list of pending requests costs
  // MPI libraries (and SimGrid, linearly) time at every completion.
  const std::size_t in_flight = window + plan.chunks;
  std::vector<typename T::Request> sends(in_flight);
  std::size_t sent = 0;
  auto send = [&](std::pair<char*, std::size_t> piece) {
    typename T::Request& oldest = sends[sent++ % in_flight];
    t.wait(oldest);
    oldest = t.isend(piece.first, piece.second, right, ring_detail::tag);
  };
  for (std::size_t c = 0; c < plan.chunks; ++c) send(region(r, c));
  std::vector<typename T::Request> recvs(window);
  auto post_recv = [&](std::size_t item) {
    auto [ptr, bytes] = region(recv_block(item), item % plan.chunks);
    recvs[item % window] = t.irecv(ptr, bytes, left, ring_detail::tag);
  };
  for (std::size_t item = 0; item < window; ++item) post_recv(item);
  run_hook(t, after_block, r);
  activity::PhaseScope phase("ring all-gather", static_cast<std::size_t>(n - 1));
  const std::size_t last_step_start = items - plan.chunks;
  for (std::size_t item = 0; item < items; ++item) {
    phase.step(item / plan.chunks + 1);
    t.wait(recvs[item % window]);
    if (item < last_step_start) send(region(recv_block(item), item % plan.chunks));
    if (item + window < items) post_recv(item + window);
    if (item % plan.chunks == plan.chunks - 1) run_hook(t, after_block, recv_block(item));
  }
  t.wait_all(sends);
}

template <class T>
void ring_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op,
                     const RingParams& params) {
  const BlockLayout layout = BlockLayout::balanced(t.size(), count);
  const std::size_t esize = size_of(dt);
  char* mine = static_cast<char*>(out) + layout.offset(t.rank()) * esize;
  ring_reduce_scatter(t, in, mine, layout, dt, op, params);
  ring_all_gather(t, out, layout, dt, params);
}

// The descriptor (registry.hpp): a ring of n-1 steps per phase, on any scope; its all_to_all is the
// pairwise exchange in ring order (all_to_all.hpp).
struct Ring {
  static constexpr Algorithm id = Algorithm::ring;
  static constexpr const char* name = "ring";
  static constexpr Family family = Family::flat;
  static Prediction predict(const CostModel& m, Collective c, double N, const CostShape& s) {
    if (c == Collective::all_to_all) return {pairwise_all_to_all_time(m, N, s)};
    return {m.flat_ring(c, N, s.ranks, m.ring_link(s))};
  }
  template <class Ctx>
  static void all_reduce(Ctx& x, const Call& c) {
    ring_all_reduce(x.comm(), c.send, c.recv, c.count, c.dt, c.op, x.ring());
  }
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    ring_all_gather(x.comm(), c.recv, BlockLayout::uniform(x.comm().size(), c.count), c.dt, x.ring());
  }
  template <class Ctx>
  static void reduce_scatter(Ctx& x, const Call& c) {
    ring_reduce_scatter(x.comm(), c.send, c.recv, BlockLayout::uniform(x.comm().size(), c.count), c.dt, c.op, x.ring());
  }
  template <class Ctx>
  static void all_to_all(Ctx& x, const Call& c) {
    pairwise_all_to_all(x.comm(), c);
  }
};

}  // namespace paro::algorithms
