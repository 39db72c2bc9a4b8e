#pragma once
// The MiCS hierarchical-communication baseline, after DeepSpeed MiCS's _hierarchical_all_gather_params:
// the rail (same local index across groups) all-gathers into a contiguous temporary, an explicit copy
// rearranges the shards into their places, then one intra-group all-gather per shard; phases strictly one
// after the other. Reduce-scatter and all-reduce are built the same sequential way. MiCS has two levels:
// below the top one, the unit's communicator is used flat.

#include <cstddef>
#include <vector>

#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/cost/mics_hcs_cost.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro::algorithms {

template <class T>
void mics_all_gather(Hierarchy<T>& h, char* buf, const BlockList& blocks, DataType dt, const RingParams& ring) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "mics_hcs all_gather")) return ring_all_gather(h.comm, buf, blocks, dt, ring);
  const std::size_t esize = size_of(dt);
  const int g = h.unit_count();
  const BlockList rail = hd::rail_blocks(h, blocks), temp_layout = hd::packed(rail);
  auto temp = h.comm.allocate(temp_layout.total() * esize);
  h.comm.copy(temp.data() + temp_layout.offset(h.my_unit) * esize, buf + rail.offset(h.my_unit) * esize,
              rail.count(h.my_unit) * esize);
  {
    activity::LevelScope level("the rail", g);
    ring_all_gather(h.rail, temp.data(), temp_layout, dt, ring);
  }
  activity::LevelScope level("the unit", h.unit_size());
  for (int u = 0; u < g; ++u)  // the rearrangement copy
    h.comm.copy(buf + rail.offset(u) * esize, temp.data() + temp_layout.offset(u) * esize, rail.count(u) * esize);
  for (int u = 0; u < g; ++u) ring_all_gather(h.unit->comm, buf, hd::unit_blocks(h, blocks, u), dt, ring);
}

template <class T>
void mics_reduce_scatter(Hierarchy<T>& h, const char* in, const BlockList& blocks, char* out, DataType dt, ReduceOp op,
                         const RingParams& ring) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "mics_hcs reduce_scatter")) return ring_reduce_scatter(h.comm, in, out, blocks, dt, op, ring);
  const std::size_t esize = size_of(dt);
  const int g = h.unit_count(), m = h.unit_size();
  // Rearranged input: the blocks of unit 0, then of unit 1, ... each unit's contiguous for its reduce-scatter.
  BlockList order;
  for (int u = 0; u < g; ++u)
    for (int r : h.units[static_cast<std::size_t>(u)]) order.add(blocks.offset(r), blocks.count(r));
  const BlockList arranged = hd::packed(order);
  auto staged = h.comm.allocate(arranged.total() * esize);
  for (int b = 0; b < order.blocks(); ++b)
    h.comm.copy(staged.data() + arranged.offset(b) * esize, in + order.offset(b) * esize, order.count(b) * esize);
  const BlockList partials = hd::packed(hd::rail_blocks(h, blocks));
  auto partial = h.comm.allocate(partials.total() * esize);
  activity::LevelScope unit_level("the unit", m);
  for (int u = 0; u < g; ++u) {
    BlockList unit;
    for (int k = 0; k < m; ++k) unit.add(arranged.offset(u * m + k), arranged.count(u * m + k));
    ring_reduce_scatter(h.unit->comm, staged.data(), partial.data() + partials.offset(u) * esize, unit, dt, op, ring);
  }
  activity::LevelScope rail_level("the rail", g);
  ring_reduce_scatter(h.rail, partial.data(), out, partials, dt, op, ring);
}

// `out` may equal `in`.
template <class T>
void mics_all_reduce(Hierarchy<T>& h, const char* in, char* out, std::size_t count, DataType dt, ReduceOp op,
                     const RingParams& ring) {
  namespace hd = hierarchical_detail;
  if (hd::flat_path(h, "mics_hcs all_reduce")) return ring_all_reduce(h.comm, in, out, count, dt, op, ring);
  const std::size_t esize = size_of(dt);
  const int m = h.unit_size(), j = h.my_index;
  const ReduceOp partial_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  const BlockList pieces = BlockList::from(BlockLayout::balanced(m, count));
  auto temp = h.comm.allocate(pieces.count(j) * esize);
  {
    activity::LevelScope level("the unit", m);
    ring_reduce_scatter(h.unit->comm, in, temp.data(), pieces, dt, partial_op, ring);
  }
  {
    activity::LevelScope level("the rail", h.unit_count());
    ring_all_reduce(h.rail, temp.data(), temp.data(), pieces.count(j), dt, partial_op, ring);
  }
  if (op == ReduceOp::avg) h.comm.divide(temp.data(), pieces.count(j), dt, h.comm.size());
  h.comm.copy(out + pieces.offset(j) * esize, temp.data(), pieces.count(j) * esize);
  activity::LevelScope level("the unit", m);
  ring_all_gather(h.unit->comm, out, pieces, dt, ring);
}

// The descriptor (registry.hpp).
struct MicsHcs {
  static constexpr Algorithm id = Algorithm::mics_hcs;
  static constexpr const char* name = "mics_hcs";
  static constexpr Family family = Family::hierarchical;
  static Prediction predict(const CostModel& m, Collective c, double N, const CostShape& s) {
    return {mics_hcs_time(m, c, N, s)};
  }
  template <class Ctx>
  static void all_reduce(Ctx& x, const Call& c) {
    mics_all_reduce(x.hierarchy(), static_cast<const char*>(c.send), static_cast<char*>(c.recv), c.count, c.dt, c.op,
                    x.ring());
  }
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    mics_all_gather(x.hierarchy(), static_cast<char*>(c.recv), blocks_of(x, c), c.dt, x.ring());
  }
  template <class Ctx>
  static void reduce_scatter(Ctx& x, const Call& c) {
    reduce_scatter_dividing_last(x, c, [&](ReduceOp partial) {
      mics_reduce_scatter(x.hierarchy(), static_cast<const char*>(c.send), blocks_of(x, c), static_cast<char*>(c.recv),
                          c.dt, partial, x.ring());
    });
  }
};

}  // namespace paro::algorithms
