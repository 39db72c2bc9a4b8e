#pragma once
// PaRO-CC: hierarchical all-gather, reduce-scatter and all-reduce whose levels overlap (paro_cc), and the
// same steps run one level after the other with a barrier between phases, as the reference PaRO code
// does (paro_seq, whose descriptor is in paro_seq.hpp), so that the value of the overlap is measured
// rather than assumed.
//
// With g units of m members at the top of a Hierarchy (my unit i, my index j):
// - all-gather, outermost level first: the rail all-gathers the blocks (i', j) of every unit straight into
//   their final places; each unit's shard, as soon as it has arrived, is all-gathered inside my unit (the
//   unit's own hierarchy) while the rail carries the next one.
// - reduce-scatter, innermost level first: my unit reduce-scatters the blocks of unit i' just before the
//   rail ring needs my partial of block (i', j), in the order the ring consumes them.
// - all-reduce: intra reduce-scatter -> rail all-reduce of the 1/m piece -> intra all-gather, cut into
//   chunks that flow through the three lanes as a software pipeline.
// Lanes run on their own threads. Where the backend cannot drive two communicators at once, one thread
// overlaps the levels instead: my unit's steps for a shard run inside the rail's hooks, while the
// rail's messages of that step are in flight, or, where every level exchanges directly, each level's
// shards together, the blocks cut into pieces that flow through the levels at once (gather_together); the
// all-reduce is then this reduce-scatter and all-gather (the same messages, without the pipeline between
// its halves).
// Each level is a ring, or a direct exchange where its blocks are small (direct.hpp).
// Uneven units (groups of different sizes) run one flat level instead, and say so in the log.
//
// Costs are in cost/paro_cc_cost.hpp.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "paro/algorithms/all_to_all.hpp"
#include "paro/algorithms/cost/all_to_all_cost.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/cost/paro_cc_cost.hpp"
#include "paro/algorithms/direct.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/control.hpp"

namespace paro::algorithms {

struct HierarchicalParams {
  RingParams ring;                       // the ring steps inside each level
  DirectParams direct{0};                // levels whose blocks are at most direct.max_bytes exchange directly
  std::size_t pipeline_chunk_bytes = 0;  // paro_cc pipeline chunk (of the full buffer); 0: one chunk
  bool concurrent = true;                // the backend lets lanes drive their communicators at once
  bool together = false;                 // inline lanes: each level's shards in one exchange (gather_together)
  bool overlap = true;                   // paro_cc; false: paro_seq
  bool one_round = false;                // paro_cc's all-reduce: the rail in one round (direct_all_reduce)
};

namespace hierarchical_detail {

inline int before(int u, int k, int g) { return ((u - k) % g + g) % g; }

// Piece k of `pieces` of every block: the all-gather and reduce-scatter pipeline cuts every block alike,
// so that the rail can carry piece k while my unit works on piece k-1.
inline BlockList piece_of(const BlockList& blocks, std::size_t k, std::size_t pieces) {
  BlockList list;
  for (int b = 0; b < blocks.blocks(); ++b) {
    const BlockLayout split = BlockLayout::balanced(static_cast<int>(pieces), blocks.count(b));
    list.add(blocks.offset(b) + split.offset(static_cast<int>(k)), split.count(static_cast<int>(k)));
  }
  return list;
}

// How many pipeline pieces: the full buffer over the chunk size, at least one element per piece.
inline std::size_t piece_count(const BlockList& blocks, DataType dt, const HierarchicalParams& p) {
  if (p.pipeline_chunk_bytes == 0) return 1;
  const std::size_t wanted = (blocks.total() * size_of(dt) + p.pipeline_chunk_bytes - 1) / p.pipeline_chunk_bytes;
  return std::clamp<std::size_t>(wanted, 1, std::max<std::size_t>(1, blocks.max_count()));
}

// Whether paro_cc runs gather_together / scatter_together below: lanes inline, where the cost model
// predicts it faster than one shard at a time (cost/paro_cc_cost.hpp, inline_lanes).
inline bool runs_together(const HierarchicalParams& p) { return p.overlap && !p.concurrent && p.together; }

// The batches of gather_together / scatter_together over a rail of g units: unit numbers, in the order the
// rail's hooks come. The all-gather's start with my own unit's shard (mine, mine-1, ...), its first batch
// my own and the rail's first `batch` exchanges (direct.hpp); the reduce-scatter's end with it (mine-1,
// mine-2, ..., mine), its last batch the rail's last exchanges and my own; every other batch `batch`
// exchanges (rail_batch: a window, or half of one where the rail takes several). A rail of at most one
// batch is one. ParoCcCost::together prices them.
inline std::vector<std::vector<int>> rail_batches(int g, int mine, bool own_first, int batch) {
  batch = std::clamp(batch, 1, std::max(g - 1, 1));
  std::vector<std::vector<int>> batches(1);
  for (int k = 1; k <= g; ++k) {  // the k-th hook
    batches.back().push_back(before(mine, own_first ? k - 1 : k % g, g));
    const int exchanges = own_first ? k - 1 : k;  // of the rail's, among the first k hooks
    if (k < g && exchanges > 0 && exchanges % batch == 0 && (own_first || k < g - 1)) batches.emplace_back();
  }
  return batches;
}

// Inline lanes, every level direct (direct.hpp): gather_together and scatter_together below. The work is
// cut into items, level by level: the top level's items are the pieces of the blocks; a level's rail
// delivers an item's units' shards, a window of exchanges in flight, and my unit moves them in batches
// (rail_batches: a window, or half of one where the rail takes several), each batch one item of the level
// below, which carries every list of every shard of the batch in one exchange. Over several windows two
// batches fly while my unit moves the one before, so the rail's latencies overlap its transfers. An
// item's last batch waits for the level's next item: the all-gather moves it while that item's first
// batches fly, the reduce-scatter makes the next item's first batch while this item's last ones fly. So
// with several pieces every level's links work at once: the top's rail on piece k, the level below on
// piece k-1, and so on down. ParoCcCost::together plays the same items out.
struct TogetherItem {
  std::vector<BlockList> lists;   // one per shard, over the level's members
  std::vector<BlockList> rails;   // the rail's blocks: all-gather in the buffer, reduce-scatter in the scratch
  std::vector<std::size_t> outs;  // reduce-scatter below the top: where each list's block of mine goes (scratch)
};

template <class T>
struct TogetherLevel {
  Hierarchy<T>* h;
  std::vector<TogetherItem> items;        // in the order they run
  std::vector<std::vector<int>> batches;  // rail_batches of every item; none on the last level
  int window = 1;                         // exchanges in flight (the rail's; the last level's own), for every item
  std::size_t next = 0;                   // the next item to run
  std::size_t ready = 0;                  // all-gather: items whose shards have all arrived from the level above
  // The last level exchanges across all its members: a flat one, or units of different sizes.
  bool last() const { return h->flat() || !h->even(); }
};

// The exchanges in flight of a level's largest exchange (the rail's above the last level, the lists' on
// it), so that every item's windows follow the level's batches.
template <class T>
int level_window(const TogetherLevel<T>& level, DataType dt, const DirectParams& direct) {
  std::size_t largest = 0;
  for (const TogetherItem& item : level.items) {
    const std::vector<BlockList>& blocks = level.last() ? item.lists : item.rails;
    largest = std::max(largest, exchange_bytes(blocks.data(), blocks.size(), dt));
  }
  return direct.window(level.last() ? level.h->comm.size() : level.h->unit_count(), largest);
}

// The items of every level below `top`'s, top first, with their rails. A reduce-scatter's rails reduce
// from one scratch of `scratch_elements`, each list's partials packed in rail order.
template <class T>
std::vector<TogetherLevel<T>> together_levels(Hierarchy<T>& h, std::vector<TogetherItem> top, bool reduce, DataType dt,
                                              const DirectParams& direct, std::size_t& scratch_elements) {
  std::vector<TogetherLevel<T>> levels{{&h, std::move(top), {}}};
  scratch_elements = 0;
  for (std::size_t x = 0; !levels[x].last(); ++x) {
    Hierarchy<T>& level = *levels[x].h;
    for (TogetherItem& item : levels[x].items)
      for (const BlockList& l : item.lists) {
        BlockList rail = rail_blocks(level, l);
        if (reduce) {
          rail = packed(rail, scratch_elements);
          scratch_elements += rail.total();
        }
        item.rails.push_back(std::move(rail));
      }
    levels[x].window = level_window(levels[x], dt, direct);
    levels[x].batches = rail_batches(level.unit_count(), level.my_unit, /*own_first=*/!reduce,
                                     rail_batch(level.unit_count(), levels[x].window));
    TogetherLevel<T> below{level.unit.get(), {}, {}};
    for (const TogetherItem& item : levels[x].items)
      for (const std::vector<int>& batch : levels[x].batches) {
        TogetherItem shards;
        for (std::size_t l = 0; l < item.lists.size(); ++l)
          for (int u : batch) {
            shards.lists.push_back(unit_blocks(level, item.lists[l], u));
            if (reduce) shards.outs.push_back(item.rails[l].offset(u));
          }
        below.items.push_back(std::move(shards));
      }
    levels.push_back(std::move(below));
  }
  levels.back().window = level_window(levels.back(), dt, direct);
  return levels;
}

// Runs level x's next item: its rail, and my unit's batches of it (and the item before's last) in its hooks.
template <class T>
void run_gather(std::vector<TogetherLevel<T>>& levels, std::size_t x, char* buf, DataType dt) {
  TogetherLevel<T>& level = levels[x];
  const TogetherItem& item = level.items[level.next++];
  Hierarchy<T>& h = *level.h;
  if (level.last()) return direct_all_gather(h.comm, buf, item.lists.data(), item.lists.size(), dt, level.window);
  TogetherLevel<T>& below = levels[x + 1];
  auto unit = [&] {
    activity::LevelScope unit_level("the unit", h.unit_size());
    run_gather(levels, x + 1, buf, dt);
  };
  const auto& batches = level.batches;
  std::size_t landed = 0;
  bool first = true;
  activity::LevelScope rail_level("the rail", h.unit_count());
  direct_all_gather(h.rail, buf, item.rails.data(), item.rails.size(), dt, level.window, [&](int u) {
    if (std::exchange(first, false) && below.next < below.ready) unit();
    if (u != batches[landed].back()) return;
    ++below.ready;
    if (++landed < batches.size()) unit();
  });
}

template <class T>
void gather_together(Hierarchy<T>& h, char* buf, const BlockList& blocks, DataType dt, std::size_t pieces,
                     const DirectParams& direct) {
  std::vector<TogetherItem> top(pieces);
  for (std::size_t k = 0; k < pieces; ++k) top[k].lists = {piece_of(blocks, k, pieces)};
  std::size_t no_scratch = 0;
  auto levels = together_levels(h, std::move(top), /*reduce=*/false, dt, direct, no_scratch);
  for (std::size_t k = 0; k < pieces; ++k) run_gather(levels, 0, buf, dt);
  for (std::size_t x = 1; x < levels.size(); ++x)
    while (levels[x].next < levels[x].ready) run_gather(levels, x, buf, dt);
}

// Runs level x's next item, whose first batch my unit has made: the rest, and the level's next item's
// first batch, are made once the sends before them are on their way.
template <class T>
void run_scatter(std::vector<TogetherLevel<T>>& levels, std::size_t x, const char* in, char* scratch,
                 const std::vector<char*>& top_outs, DataType dt, ReduceOp op) {
  TogetherLevel<T>& level = levels[x];
  const TogetherItem& item = level.items[level.next];
  std::vector<char*> outs;
  if (x == 0) outs = {top_outs[level.next]};
  for (std::size_t at : item.outs) outs.push_back(scratch + at * size_of(dt));
  ++level.next;
  Hierarchy<T>& h = *level.h;
  if (level.last())
    return direct_reduce_scatter(h.comm, in, outs.data(), item.lists.data(), item.lists.size(), dt, op, level.window);
  TogetherLevel<T>& below = levels[x + 1];
  auto unit = [&] {
    activity::LevelScope unit_level("the unit", h.unit_size());
    run_scatter(levels, x + 1, in, scratch, top_outs, dt, op);
  };
  const int g = h.unit_count(), last_sent = before(h.my_unit, g - 1, g);
  const auto& batches = level.batches;
  std::size_t made = 1;
  activity::LevelScope rail_level("the rail", g);
  auto after_send = [&](int u) {
    if (made < batches.size()) {
      if (u == batches[made - 1].back()) ++made, unit();
    } else if (u == last_sent && below.next < below.items.size()) {
      unit();
    }
  };
  direct_reduce_scatter(h.rail, scratch, outs.data(), item.rails.data(), item.rails.size(), dt, op, level.window,
                        NoHook{}, after_send);
}

// Reduces the blocks of `in` (block r destined to comm rank r) and writes this rank's to `out`, which may
// be its own block of `in`. op is never avg here: the caller divides once.
template <class T>
void scatter_together(Hierarchy<T>& h, const char* in, const BlockList& blocks, char* out, DataType dt, ReduceOp op,
                      std::size_t pieces, const DirectParams& direct) {
  const BlockLayout my_pieces = BlockLayout::balanced(static_cast<int>(pieces), blocks.count(h.comm.rank()));
  std::vector<TogetherItem> top(pieces);
  std::vector<char*> top_outs;
  for (std::size_t k = 0; k < pieces; ++k) {
    top[k].lists = {piece_of(blocks, k, pieces)};
    top_outs.push_back(out + my_pieces.offset(static_cast<int>(k)) * size_of(dt));
  }
  std::size_t scratch_elements = 0;
  auto levels = together_levels(h, std::move(top), /*reduce=*/true, dt, direct, scratch_elements);
  auto scratch = h.comm.allocate(scratch_elements * size_of(dt));
  // Every level's first item's first batch before the level above starts (deepest first).
  for (std::size_t x = levels.size(); x-- > 1;) run_scatter(levels, x, in, scratch.data(), top_outs, dt, op);
  for (std::size_t k = 0; k < pieces; ++k) run_scatter(levels, 0, in, scratch.data(), top_outs, dt, op);
}

// The levels below the top of one pipelined call run each piece whole.
inline HierarchicalParams inner(HierarchicalParams p) {
  p.pipeline_chunk_bytes = 0;
  return p;
}

}  // namespace hierarchical_detail

// Fills every block of `buf` (block r of comm rank r at blocks.offset(r)); this rank's block is in place.
template <class T>
void paro_all_gather(Hierarchy<T>& h, char* buf, const BlockList& blocks, DataType dt, const HierarchicalParams& p) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "paro all_gather")) return level_all_gather(h.comm, buf, blocks, dt, p.ring, p.direct);
  if (hd::runs_together(p)) return hd::gather_together(h, buf, blocks, dt, hd::piece_count(blocks, dt, p), p.direct);
  const int g = h.unit_count(), mine = h.my_unit;
  const HierarchicalParams below = hd::inner(p);
  auto shard = [&](const BlockList& piece, int u) {
    activity::LevelScope level("the unit", h.unit_size());
    paro_all_gather(*h.unit, buf, hd::unit_blocks(h, piece, u), dt, below);
  };
  auto rail = [&](const BlockList& piece, auto&& after_block) {
    activity::LevelScope level("the rail", g);
    level_all_gather(h.rail, buf, hd::rail_blocks(h, piece), dt, p.ring, p.direct, after_block);
  };
  if (!p.overlap) {
    rail(blocks, NoHook{});
    control::barrier(h.comm);
    for (int k = 0; k < g; ++k) shard(blocks, hd::before(mine, k, g));
    control::barrier(h.comm);
    return;
  }
  // Rail block u is unit u's shard.
  if (!p.concurrent) return rail(blocks, [&](int u) { shard(blocks, u); });
  const std::size_t pieces = hd::piece_count(blocks, dt, p);
  Progress arrived;  // shards in place, piece by piece in the ring's order mine, mine-1, mine-2, ...
  run_lanes(
      /*concurrent=*/true, {&arrived},
      [&] {
        for (std::size_t k = 0; k < pieces; ++k) rail(hd::piece_of(blocks, k, pieces), [&](int) { arrived.advance(); });
      },
      [&] {
        for (std::size_t k = 0; k < pieces; ++k)
          for (int i = 0; i < g; ++i) {
            arrived.wait_for(k * static_cast<std::size_t>(g) + static_cast<std::size_t>(i) + 1);
            shard(hd::piece_of(blocks, k, pieces), hd::before(mine, i, g));
          }
      });
}

// Reduces the blocks of `in` (block r, destined to comm rank r, at blocks.offset(r)) and writes this rank's
// to `out`, which may be its own block of `in`. op is never avg here: the caller divides once at the end.
template <class T>
void paro_reduce_scatter(Hierarchy<T>& h, const char* in, const BlockList& blocks, char* out, DataType dt, ReduceOp op,
                         const HierarchicalParams& p) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "paro reduce_scatter"))
    return level_reduce_scatter(h.comm, in, out, blocks, dt, op, p.ring, p.direct);
  if (hd::runs_together(p))
    return hd::scatter_together(h, in, blocks, out, dt, op, hd::piece_count(blocks, dt, p), p.direct);
  const std::size_t esize = size_of(dt);
  const int g = h.unit_count(), mine = h.my_unit;
  const HierarchicalParams below = hd::inner(p);
  const BlockList partials = hd::packed(hd::rail_blocks(h, blocks));  // my unit's partial of (i', j), per i'
  auto scratch = h.comm.allocate(partials.total() * esize);
  char* partial = scratch.data();
  // The rail ring sends the partial of unit mine-1 first and ends with its own unit's (rail block u is
  // unit u's); my unit produces them in that order, piece by piece.
  auto shard = [&](std::size_t k, std::size_t pieces, int u) {
    const BlockList piece = hd::piece_of(blocks, k, pieces), target = hd::piece_of(partials, k, pieces);
    activity::LevelScope level("the unit", h.unit_size());
    paro_reduce_scatter(*h.unit, in, hd::unit_blocks(h, piece, u), partial + target.offset(u) * esize, dt, op, below);
  };
  auto rail = [&](std::size_t k, std::size_t pieces, auto&& before_block) {
    const BlockList target = hd::piece_of(partials, k, pieces);
    const std::size_t at =
        BlockLayout::balanced(static_cast<int>(pieces), partials.count(mine)).offset(static_cast<int>(k));
    activity::LevelScope level("the rail", g);
    level_reduce_scatter(h.rail, partial, out + at * esize, target, dt, op, p.ring, p.direct, before_block);
  };
  if (!p.overlap) {
    for (int i = 1; i <= g; ++i) shard(0, 1, hd::before(mine, i, g));
    control::barrier(h.comm);
    rail(0, 1, NoHook{});
    control::barrier(h.comm);
    return;
  }
  if (!p.concurrent) return rail(0, 1, [&](int u) { shard(0, 1, u); });
  const std::size_t pieces = hd::piece_count(blocks, dt, p);
  Progress produced;
  run_lanes(
      /*concurrent=*/true, {&produced},
      [&] {
        for (std::size_t k = 0; k < pieces; ++k)
          for (int i = 1; i <= g; ++i) {
            shard(k, pieces, hd::before(mine, i, g));
            produced.advance();
          }
      },
      [&] {
        std::size_t needed = 0;
        for (std::size_t k = 0; k < pieces; ++k) rail(k, pieces, [&](int) { produced.wait_for(++needed); });
      });
}

// `out` may equal `in`.
template <class T>
void paro_all_reduce(Hierarchy<T>& h, const char* in, char* out, std::size_t count, DataType dt, ReduceOp op,
                     const HierarchicalParams& p) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "paro all_reduce")) return level_all_reduce(h.comm, in, out, count, dt, op, p.ring, p.direct);
  const std::size_t esize = size_of(dt);
  const int m = h.unit_size(), j = h.my_index;
  const ReduceOp partial_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  // Chunks of at least one element per unit member.
  std::size_t chunks = 1;
  if (p.overlap && !p.one_round && p.pipeline_chunk_bytes > 0)
    chunks = std::clamp<std::size_t>((count * esize + p.pipeline_chunk_bytes - 1) / p.pipeline_chunk_bytes, 1,
                                     std::max<std::size_t>(1, count / static_cast<std::size_t>(m)));
  const BlockLayout chunk_layout = BlockLayout::balanced(static_cast<int>(chunks), count);
  auto pieces = [&](std::size_t k) {  // chunk k cut into one piece per unit member
    const BlockLayout split = BlockLayout::balanced(m, chunk_layout.count(static_cast<int>(k)));
    BlockList list;
    for (int b = 0; b < m; ++b) list.add(chunk_layout.offset(static_cast<int>(k)) + split.offset(b), split.count(b));
    return list;
  };
  const HierarchicalParams below = hd::inner(p);
  auto reduce_scatter = [&](std::size_t k) {
    activity::LevelScope level("the unit", m);
    const BlockList list = pieces(k);
    paro_reduce_scatter(*h.unit, in, list, out + list.offset(j) * esize, dt, partial_op, below);
  };
  auto combine = [&](std::size_t k) {  // the rail all-reduce of my piece
    const BlockList list = pieces(k);
    char* piece = out + list.offset(j) * esize;
    activity::LevelScope level("the rail", h.unit_count());
    level_all_reduce(h.rail, piece, piece, list.count(j), dt, partial_op, p.ring, p.direct);
    if (op == ReduceOp::avg) h.comm.divide(piece, list.count(j), dt, h.comm.size());
  };
  auto all_gather = [&](std::size_t k) {
    activity::LevelScope level("the unit", m);
    paro_all_gather(*h.unit_copy, out, pieces(k), dt, below);
  };
  if (!p.overlap) {
    reduce_scatter(0);
    control::barrier(h.comm);
    combine(0);
    control::barrier(h.comm);
    all_gather(0);
    return;
  }
  if (p.one_round) {  // small pieces: the rail's two latencies cost more than g-2 pieces more bytes
    reduce_scatter(0);
    const BlockList list = pieces(0);
    char* piece = out + list.offset(j) * esize;
    {
      activity::LevelScope level("the rail", h.unit_count());
      direct_all_reduce(h.rail, piece, piece, list.count(j), dt, partial_op, p.direct);
    }
    if (op == ReduceOp::avg) h.comm.divide(piece, list.count(j), dt, h.comm.size());
    return all_gather(0);
  }
  if (!p.concurrent) {
    // One thread cannot pipeline three lanes, but each half overlaps its levels through the rail's hooks:
    // the same messages as intra reduce-scatter -> rail all-reduce -> intra all-gather, in rank blocks.
    const BlockLayout even = BlockLayout::balanced(h.comm.size(), count);
    BlockList blocks;
    for (int r = 0; r < h.comm.size(); ++r) blocks.add(even.offset(r), even.count(r));
    char* mine = out + blocks.offset(h.comm.rank()) * esize;
    paro_reduce_scatter(h, in, blocks, mine, dt, partial_op, p);
    if (op == ReduceOp::avg) h.comm.divide(mine, blocks.count(h.comm.rank()), dt, h.comm.size());
    return paro_all_gather(h, out, blocks, dt, p);
  }
  Progress reduced, combined;
  run_lanes(
      /*concurrent=*/true, {&reduced, &combined},
      [&] {
        for (std::size_t k = 0; k < chunks; ++k) {
          reduce_scatter(k);
          reduced.advance();
        }
      },
      [&] {
        for (std::size_t k = 0; k < chunks; ++k) {
          reduced.wait_for(k + 1);
          combine(k);
          combined.advance();
        }
      },
      [&] {
        for (std::size_t k = 0; k < chunks; ++k) {
          combined.wait_for(k + 1);
          all_gather(k);
        }
      });
}

// The schedules of paro_cc (overlap) and paro_seq, for their descriptors, and their plan (ParoCcParams):
// PARO_ALGO's "paro_cc(chunk=1M,lanes=inline,together=1,nodes_only=0,direct=0,one_round=0)".
template <bool Overlap>
struct ParoSchedules {
  using Params = ParoCcParams;

  static ParoCcPrediction predict(const CostModel& m, Collective c, double N, const CostShape& s) {
    // The all-to-all's pieces are its blocks: of the plan it follows only the cut (nodes_only: never chosen).
    if (c == Collective::all_to_all) return {hierarchical_all_to_all_time(m, N, s, Overlap), {}};
    return ParoCcCost(m).paro(c, N, s, Overlap);
  }

  static void print(std::ostream& out, const Params& p) {
    out << "chunk=" << env::format_bytes(p.pipeline_chunk_bytes) << ",lanes=" << (p.lanes_inline ? "inline" : "threads")
        << ",together=" << p.together << ",nodes_only=" << p.nodes_only << ",direct=" << p.direct
        << ",one_round=" << p.one_round;
  }

  static void set(Params& p, std::string_view key, std::string_view value) {
    auto flag = [&](bool& field) {
      detail::require(value == "0" || value == "1", "paro_cc: ", key, "=", value, "; allowed: 0 or 1");
      field = value == "1";
    };
    if (key == "chunk") {
      p.pipeline_chunk_bytes = env::parse_bytes(value, "paro_cc: chunk");
    } else if (key == "lanes") {
      detail::require(value == "inline" || value == "threads", "paro_cc: lanes=", value,
                      "; allowed: inline or threads");
      p.lanes_inline = value == "inline";
    } else if (key == "together") {
      flag(p.together);
    } else if (key == "nodes_only") {
      flag(p.nodes_only);
    } else if (key == "direct") {
      flag(p.direct);
    } else if (key == "one_round") {
      flag(p.one_round);
    } else {
      throw UsageError(detail::concat("paro_cc: unknown parameter '", key,
                                      "'; allowed: chunk, lanes, together, nodes_only, direct, one_round"));
    }
  }

  // The plan's older environment variables, aliases of its pins (Tuning): PARO_CC_CHUNK=1M is chunk=1M
  // (0: the model's), PARO_CC_TOGETHER, PARO_CC_DIRECT and PARO_CC_NODES_ONLY (1 or 0) the switches
  // together, direct and nodes_only.
  static std::vector<std::pair<std::string, std::string>> pins_from_env() {
    std::vector<std::pair<std::string, std::string>> pins;
    if (const std::size_t chunk = env::bytes_or("PARO_CC_CHUNK", 0)) pins.emplace_back("chunk", std::to_string(chunk));
    for (const auto& [variable, key] :
         {std::pair{"PARO_CC_TOGETHER", "together"}, std::pair{"PARO_CC_DIRECT", "direct"},
          std::pair{"PARO_CC_NODES_ONLY", "nodes_only"}})
      if (env::get(variable)) pins.emplace_back(key, std::to_string(env::integer_or(variable, 0, 0, 1)));
    return pins;
  }

  // Last, after the model and the pins: lanes inline where the backend cannot drive them from threads of
  // their own, and the cut by nodes alone only where the scope has one.
  static void settle(Params& p, const CostShape& s, LaneChoice lanes) {
    p.lanes_inline = p.lanes_inline || lanes == LaneChoice::inline_only;
    p.nodes_only = p.nodes_only && s.node_cut != nullptr;
  }

  template <class Ctx>
  static void all_reduce(Ctx& x, const Call& c) {
    paro_all_reduce(levels(x), static_cast<const char*>(c.send), static_cast<char*>(c.recv), c.count, c.dt, c.op,
                    params(x));
  }
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    paro_all_gather(levels(x), static_cast<char*>(c.recv), blocks_of(x, c), c.dt, params(x));
  }
  template <class Ctx>
  static void reduce_scatter(Ctx& x, const Call& c) {
    reduce_scatter_dividing_last(x, c, [&](ReduceOp partial) {
      paro_reduce_scatter(levels(x), static_cast<const char*>(c.send), blocks_of(x, c), static_cast<char*>(c.recv),
                          c.dt, partial, params(x));
    });
  }
  template <class Ctx>
  static void all_to_all(Ctx& x, const Call& c) {
    hierarchical_all_to_all(levels(x), c, Overlap);
  }

 private:
  // The scope's levels, cut by its nodes alone where the plan says so.
  template <class Ctx>
  static auto& levels(Ctx& x) {
    return x.hierarchy(x.template params<Params>().nodes_only);
  }
  template <class Ctx>
  static HierarchicalParams params(Ctx& x) {
    const Params& plan = x.template params<Params>();
    HierarchicalParams p;
    p.ring = x.ring();
    p.direct = x.direct();
    if (plan.direct) p.direct.max_bytes = std::numeric_limits<std::size_t>::max();
    p.concurrent = !plan.lanes_inline;
    // Inline lanes pipeline only where their levels exchange their shards together (runs_together).
    p.pipeline_chunk_bytes = plan.pipeline_chunk_bytes;
    p.together = plan.together;
    p.overlap = Overlap;
    p.one_round = plan.one_round;
    return p;
  }
};

// The descriptor (registry.hpp).
struct ParoCC : ParoSchedules<true> {
  static constexpr Algorithm id = Algorithm::paro_cc;
  static constexpr const char* name = "paro_cc";
  static constexpr Family family = Family::hierarchical;
};

}  // namespace paro::algorithms
