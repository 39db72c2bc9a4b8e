#pragma once
// paro_cc's and paro_seq's cost formulas (paro_cc.hpp runs the schedules; paro_seq is the same levels run
// one after the other), from the cost model's shared terms (cost_model.hpp): the levels' schedules played
// out, the pipeline's chunk, where the lanes run, and which cut of the scope. docs/algorithms.md, "paro_cc".

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"

namespace paro::algorithms {

// How paro_cc (and paro_seq) run one call: the plan its schedules follow, chosen by the formulas below or
// pinned (PARO_ALGO's `paro_cc(chunk=1M,lanes=inline,...)`, paro_cc.hpp's ParoCcParams::set).
struct ParoCcParams {
  std::size_t pipeline_chunk_bytes = 0;  // the pipeline's chunk of the full buffer; 0: one chunk
  bool lanes_inline = false;             // the levels' lanes on the caller's thread, with no pipeline
  bool together = false;                 // inline lanes: each level exchanges all its shards at once
  bool nodes_only = false;               // over the scope cut by its nodes alone (CostShape::node_cut)
  bool direct = false;                   // one shard at a time: every level direct, whatever its blocks
  bool one_round = false;                // all-reduce: unit reduce-scatter, the rail in one round, unit all-gather
  friend bool operator==(const ParoCcParams& a, const ParoCcParams& b) {
    return a.pipeline_chunk_bytes == b.pipeline_chunk_bytes && a.lanes_inline == b.lanes_inline &&
           a.together == b.together && a.nodes_only == b.nodes_only && a.direct == b.direct &&
           a.one_round == b.one_round;
  }
  friend bool operator!=(const ParoCcParams& a, const ParoCcParams& b) { return !(a == b); }
};
// paro_cc's lanes on threads and inline are two schedules, each with its own measured correction.
inline bool corrected_inline(const ParoCcParams& p) { return p.lanes_inline; }
using ParoCcPrediction = Predicted<ParoCcParams>;

// Over a model that must outlive it: ParoCcCost(model).paro(...).
class ParoCcCost {
 public:
  using Hop = CostModel::Hop;
  using Arrivals = CostModel::Arrivals;

  explicit ParoCcCost(const CostModel& model) : m_(model) {}

  // How paro_cc's levels run: one after the other (paro_seq), overlapped inline on the caller's thread, or
  // on lane threads of their own.
  enum class Overlap { none, inline_lanes, threads };
  double lane_start(Overlap o) const { return o == Overlap::threads ? m_.links().lane_us : 0; }

  // All-gather of `block` bytes per member of the level-`level` unit, each piece whole.
  double gather(const CostShape& s, std::size_t level, double block, Overlap o, bool all_direct = false) const {
    if (level == s.units.size())
      return m_.flat_level(Collective::all_gather, block * s.leaf(), s.leaf(), m_.leaf_hop(s), all_direct);
    const int g = s.units[level];
    const Arrivals rail = m_.arrivals(m_.rail_hop(s, level), block, g, all_direct);
    const double shard = gather(s, level + 1, block, o, all_direct);
    if (o == Overlap::none) return rail.at(g - 1) + g * shard + 2 * m_.barrier_us(s.members_below(level));
    double t = shard;  // my own unit's shard first, then each as the rail delivers it
    for (int k = 1; k < g; ++k) t = std::max(rail.at(k), t) + shard;
    return t + lane_start(o);
  }

  double scatter(const CostShape& s, std::size_t level, double block, Overlap o, bool all_direct = false) const {
    if (level == s.units.size())
      return m_.flat_level(Collective::reduce_scatter, block * s.leaf(), s.leaf(), m_.leaf_hop(s), all_direct);
    const int g = s.units[level];
    const Arrivals rail = m_.arrivals(m_.rail_hop(s, level), block, g, all_direct);
    const double shard = scatter(s, level + 1, block, o, all_direct);
    if (o == Overlap::none)
      return g * shard + rail.tail(g) + (g - 1) * (rail.step() + m_.reduce_us(block)) +
             2 * m_.barrier_us(s.members_below(level));
    double unit = 0;
    return rail_scatter(g, shard, rail, block, o, 0, unit) + lane_start(o);
  }

  // A reduce-scatter rail over g units from `start`, fed by my unit's shards (`shard` each; `unit`: when
  // my unit is free). A direct rail sends each partial as it is made, the shards back to back, and makes
  // my own last, once the others' have left, while theirs are in flight. A ring sends a partial once it
  // is made and the one from its left has arrived, and makes the next meanwhile: on lane threads my unit
  // makes them back to back; inline, the ring's hook makes each on the caller's thread after the ring's
  // last send, while the ring's messages (and the levels below's) are in flight. Returns when the rail
  // is done.
  double rail_scatter(int g, double shard, const Arrivals& rail, double block, Overlap o, double start,
                      double& unit) const {
    if (!rail.ring) {
      double sent = start;
      for (int k = 1; k < g; ++k) {
        unit += shard;
        sent = std::max(sent, unit) + rail.step() + m_.reduce_us(block);
      }
      unit += shard;
      return std::max(sent + rail.tail(g), unit);
    }
    const bool on_caller = o == Overlap::inline_lanes;
    unit = (on_caller ? start : unit) + shard;
    double sent = std::max(start, unit);
    for (int k = 1; k < g; ++k) {
      unit = (on_caller ? sent : unit) + shard;
      sent = std::max(unit, sent + rail.step()) + m_.reduce_us(block);
    }
    return sent;
  }

  // paro_cc all-gather / reduce-scatter with the blocks cut into P pieces: the two lanes (rail, my unit)
  // played out item by item; the best P. Inline lanes run no pipeline (one piece).
  ParoCcPrediction pipelined(Collective c, const CostShape& s, double block, Overlap o, bool all_direct = false) const {
    const int g = s.units[0];
    const Hop rail = m_.rail_hop(s, 0);
    ParoCcPrediction best{0, {0}};
    const double most_pieces = o == Overlap::threads ? 64 : 1;
    for (double pieces = 1; pieces <= most_pieces && (pieces == 1 || block / pieces >= 4096); pieces *= 2) {
      const double b = block / pieces;
      const Arrivals arrive = m_.arrivals(rail, b, g, all_direct);
      double rail_t = 0, unit_t = 0;
      if (c == Collective::all_gather) {
        const double shard = gather(s, 1, b, o, all_direct);
        for (int k = 0; k < pieces; ++k) {
          unit_t += shard;  // my own unit's shard needs nothing from the rail
          const double start = rail_t;
          for (int i = 1; i < g; ++i) unit_t = std::max(unit_t, start + arrive.at(i)) + shard;
          rail_t = start + arrive.at(g - 1);
        }
      } else {
        const double shard = scatter(s, 1, b, o, all_direct);
        for (int k = 0; k < pieces; ++k) rail_t = rail_scatter(g, shard, arrive, b, o, rail_t, unit_t);
      }
      const double t = std::max(rail_t, unit_t) + lane_start(o);
      if (best.time_us == 0 || t < best.time_us)
        best = {t, {static_cast<std::size_t>(std::ceil(block * s.ranks / pieces))}};
    }
    best.params.direct = all_direct;
    return best;
  }

  // paro_seq's all-reduce (Overlap::none), or paro_cc's three-lane pipeline on threads (Overlap::threads;
  // inline lanes run inline_lanes instead).
  ParoCcPrediction all_reduce(const CostShape& s, double N, Overlap o, bool all_direct = false) const {
    const int g = s.units[0], m = s.ranks / g;
    const Hop rail = m_.rail_hop(s, 0);
    auto stages = [&](double chunk, double& rs, double& ar, double& ag) {
      const double piece = chunk / m;
      rs = m > 1 ? scatter(s, 1, piece, o, all_direct) : 0;
      ar = m_.flat_level(Collective::all_reduce, piece, g, rail, all_direct);
      ag = m > 1 ? gather(s, 1, piece, o, all_direct) : 0;
    };
    double rs, ar, ag;
    if (o == Overlap::none) {
      stages(N, rs, ar, ag);
      return {rs + ar + ag + 2 * m_.barrier_us(s.ranks), {0}};
    }
    ParoCcPrediction best{0, {0}};
    for (double k = 1; k <= 1024 && N / k >= 4 * m; k *= 2) {
      stages(N / k, rs, ar, ag);
      const double t = rs + ar + ag + (k - 1) * std::max(rs + ag, ar) + m_.links().lane_us;
      if (best.time_us == 0 || t < best.time_us) best = {t, {static_cast<std::size_t>(std::ceil(N / k))}};
    }
    if (best.time_us == 0) {
      stages(N, rs, ar, ag);
      best = {rs + ar + ag + m_.links().lane_us, {static_cast<std::size_t>(N)}};
    }
    best.params.direct = all_direct;
    return best;
  }

  // The all-reduce with its rail in one round, on the caller's thread: my unit reduce-scatters the buffer
  // into pieces of N/m, the rail all-reduces my piece by sending it to every other unit at once
  // (direct_all_reduce: one latency, (g-1) pieces out and in), my unit all-gathers the pieces. Against the
  // rail's reduce-scatter and all-gather it saves a latency and the hooks' hand-overs for g-2 pieces
  // more bytes: the plan for small all-reduces over many units.
  double one_round_all_reduce(const CostShape& s, double N) const {
    const int g = s.units[0], m = s.ranks / g;
    const double piece = N / m;
    const double unit =
        m > 1 ? scatter(s, 1, piece, Overlap::inline_lanes) + gather(s, 1, piece, Overlap::inline_lanes) : 0;
    return unit + m_.direct_all_reduce(g, piece, m_.rail_hop(s, 0));
  }

  // paro_cc (overlap) and paro_seq: the levels' schedules, or one flat level where the scope has none.
  // paro_cc also runs over the scope cut by its nodes alone where that is predicted faster: a pod level
  // sends each block across the pods once, to be spread inside the pod by a second rail, whose latencies
  // small messages cannot hide; one rail over every node pays one latency (simulated, 128 ranks in 2
  // pods of 8 nodes of 8, a NIC per rank: the all-gather of 64 KiB in 7.0 us against 11.2 with the pod
  // level) but sends every block to each node of the other pods.
  ParoCcPrediction paro(Collective c, double N, const CostShape& s, bool overlap) const {
    const ParoCcPrediction by_levels = paro_cut(c, N, s, overlap, s.lanes);
    if (!overlap || !s.node_cut) return by_levels;
    ParoCcPrediction by_nodes = paro_cut(c, N, *s.node_cut, overlap, s.lanes);
    if (measured_paro_cc(c, N, by_nodes) >= measured_paro_cc(c, N, by_levels)) return by_levels;
    by_nodes.params.nodes_only = true;
    return by_nodes;
  }
  // paro_cc's lanes run on threads or inline as `lanes` allows; where it allows both, whichever is
  // predicted faster, each with its measured correction: inline pays no lane start and no hand-over
  // between threads, which small calls cannot hide, but it has no pipeline.
  ParoCcPrediction paro_cut(Collective c, double N, const CostShape& s, bool overlap, LaneChoice lanes) const {
    ParoCcPrediction best = paro_levels(c, N, s, overlap, lanes);
    // One round runs on the caller's thread: not where the lanes are held to threads of their own.
    if (c != Collective::all_reduce || !overlap || !s.hierarchical() || m_.direct_max_bytes() == 0 ||
        lanes == LaneChoice::threads)
      return best;
    ParoCcPrediction one{one_round_all_reduce(s, N), {0}};
    one.params.lanes_inline = one.params.one_round = true;
    return measured_paro_cc(c, N, one) < measured_paro_cc(c, N, best) ? one : best;
  }
  ParoCcPrediction paro_levels(Collective c, double N, const CostShape& s, bool overlap, LaneChoice lanes) const {
    if (!s.hierarchical()) return {m_.flat_level(c, N, s.ranks, m_.flat_link(s)), {0}};
    const double block = N / s.ranks;
    auto levels = [&](Overlap o, bool all_direct) {
      if (c == Collective::all_reduce) return all_reduce(s, N, o, all_direct);
      if (o == Overlap::none)
        return ParoCcPrediction{c == Collective::all_gather ? gather(s, 0, block, o) : scatter(s, 0, block, o), {0}};
      return pipelined(c, s, block, o, all_direct);
    };
    if (!overlap) return levels(Overlap::none, false);
    if (lanes == LaneChoice::inline_only) return inline_lanes(c, s, block);
    ParoCcPrediction threaded = levels(Overlap::threads, false);
    if (m_.direct_max_bytes() > 0)  // every level direct where that is faster (PARO_DIRECT_MAX=0: rings only)
      if (const ParoCcPrediction p = levels(Overlap::threads, true); p.time_us < threaded.time_us) threaded = p;
    if (lanes == LaneChoice::threads) return threaded;
    const ParoCcPrediction inline_prediction = inline_lanes(c, s, block);
    return measured_paro_cc(c, N, inline_prediction) < measured_paro_cc(c, N, threaded) ? inline_prediction : threaded;
  }
  // paro_cc's schedules are compared as measured: a calibration corrects its two lanes apart.
  double measured_paro_cc(Collective c, double N, const ParoCcPrediction& p) const {
    return p.time_us * m_.links().correction(c, Algorithm::paro_cc, N, p.params.lanes_inline);
  }

  // paro_cc on the caller's thread: each level exchanges all its shards at once (together), or the rail
  // delivers one shard at a time and my unit moves each as it arrives, through the rail's hooks, whichever
  // is predicted faster for the collective (the all-reduce: its reduce-scatter then its all-gather, both
  // alike). Together pays a level's latency once instead of once per shard, but the unit starts only when
  // the rail is done, unless the blocks are cut into pieces that flow through the levels at once (each
  // piece paying every level's latencies again); one shard at a time lets the unit work while the rail is
  // busy, and in a reduce-scatter over a NIC per rank it can win where together wins the all-gather (the
  // unit's exchange of a shard hides behind the rail's step for the next). One shard at a time, each
  // level exchanges directly where its blocks are at most PARO_DIRECT_MAX and in a ring above, or every
  // level directly where that is predicted faster (a ring's steady arrivals let my unit keep pace with
  // the rail, a direct window's come at once and the unit's work follows). PARO_DIRECT_MAX=0 (rings
  // only) rules out both together and every level direct.
  ParoCcPrediction inline_lanes(Collective c, const CostShape& s, double block) const {
    auto one_at_a_time = [&](bool all_direct) {
      auto time = [&](Collective k) { return pipelined(k, s, block, Overlap::inline_lanes, all_direct).time_us; };
      return c == Collective::all_reduce ? time(Collective::reduce_scatter) + time(Collective::all_gather) : time(c);
    };
    ParoCcPrediction one{one_at_a_time(false), {static_cast<std::size_t>(block * s.ranks), /*lanes_inline=*/true}};
    if (m_.direct_max_bytes() > 0) {
      if (const double t = one_at_a_time(true); t < one.time_us) {
        one.time_us = t;
        one.params.direct = true;
      }
      ParoCcPrediction p = together_pieces(c, s, block);
      if (p.time_us <= one.time_us) {
        p.params.lanes_inline = p.params.together = true;
        return p;
      }
    }
    return one;
  }

  // together with the number of pieces predicted fastest (a power of two, pieces of at least 4 KiB per
  // block), as a pipeline chunk of the full buffer; the all-reduce's reduce-scatter and all-gather alike.
  ParoCcPrediction together_pieces(Collective c, const CostShape& s, double block) const {
    auto time = [&](double pieces) {
      if (c != Collective::all_reduce) return together(c, s, block, pieces);
      return together(Collective::reduce_scatter, s, block, pieces) +
             together(Collective::all_gather, s, block, pieces);
    };
    ParoCcPrediction best{time(1), {static_cast<std::size_t>(block * s.ranks)}};
    for (double pieces = 2; pieces <= 64 && block / pieces >= 4096; pieces *= 2)
      if (const double t = time(pieces); t < best.time_us)
        best = {t, {static_cast<std::size_t>(std::ceil(block * s.ranks / pieces))}};
    return best;
  }

  // Inline lanes, every level direct (paro_cc.hpp, gather_together / scatter_together), whatever the
  // block size, the blocks cut into `pieces`: the schedule's items played out on the caller's clock. The
  // top level's items are the pieces; each level's rail moves an item's `lists` blocks per exchange, a
  // window of exchanges in flight, and my unit moves the units' shards in batches (rail_batch: a window,
  // or half of one where the rail takes several, so that two batches fly at once), each batch an item of
  // the level below (lists x shards blocks per exchange). The all-gather's unit moves a batch once it has
  // landed (the first with my own shard), the next flying meanwhile, and an item's last batch while the
  // level's next item's first flies; the reduce-scatter's makes each level's first item's first batch
  // before the level above starts, each next batch while the ones before fly, and the next item's first
  // batch while an item's last ones fly. A batch is posted once it is made and the batch a window before
  // it has landed; batches in flight together share my NIC (`lands`).
  double together(Collective c, const CostShape& s, double block, double pieces = 1) const {
    const std::size_t depth = s.units.size();
    const bool gather = c == Collective::all_gather;
    struct Level {
      int g, batch, batches, in_flight;
      Hop hop;
      double nic_beta;            // per byte through my NIC; 0: the level's messages stay in the node
      std::vector<double> items;  // lists per exchange, per item in the order they run
      std::size_t next = 0, ready = 0;
      int exchanges(int j) const { return j + 1 < batches ? batch : g - 1 - (batches - 1) * batch; }
    };
    const double nic_beta = m_.hop(true, s.nic_flows).beta;
    std::vector<Level> levels(depth + 1);
    levels[0].items.assign(static_cast<std::size_t>(pieces), 1.0);
    const double b = block / pieces;
    for (std::size_t x = 0; x < depth; ++x) {
      Level& l = levels[x];
      l.g = s.units[x];
      // One window for all the level's items, as the schedule sizes it: by its largest exchange.
      const int w = m_.direct_window(l.g, *std::max_element(l.items.begin(), l.items.end()) * b);
      l.batch = rail_batch(l.g, w);
      l.batches = (l.g - 2) / l.batch + 1;
      l.in_flight = l.batch < w ? 2 : 1;  // half-window batches: two in flight
      l.hop = m_.rail_hop(s, x);
      l.nic_beta = s.rail_inter[x] ? nic_beta : 0;
      for (double lists : l.items)
        for (int j = 0; j < l.batches; ++j)
          levels[x + 1].items.push_back(lists * (l.exchanges(j) + (gather ? j == 0 : j + 1 == l.batches)));
    }
    double now = 0;       // the caller's clock
    double nic_free = 0;  // when my NIC has carried what was posted so far
    // A flight through my NIC lands no sooner than the NIC has carried it after the flights posted before
    // it, and its last byte has crossed the link's latency: levels whose flights overlap, and a level's
    // batches in flight together, share its bandwidth (a pod uplink's share limits only the top's).
    auto lands = [&](double posted, double flight, double nic_us, double latency) {
      if (nic_us <= 0) return posted + flight;
      nic_free = std::max(nic_free, posted) + nic_us;
      return std::max(posted + flight, nic_free + latency);
    };
    auto run = [&](auto& self, std::size_t x) -> void {
      Level& l = levels[x];
      const double lists = l.items[l.next++];
      if (x == depth) {
        const int n = s.leaf();
        const Hop leaf = m_.leaf_hop(s);
        if (n > 1)
          now = lands(now, m_.direct(c, n, lists, b, leaf), s.leaf_inter ? (n - 1) * lists * b * nic_beta : 0,
                      leaf.alpha);
        return;
      }
      Level& below = levels[x + 1];
      // Batches [from, to) posted at `at`, in one flight: they share my NIC and land together.
      auto post = [&](int from, int to, double at) {
        int exchanges = 0;
        for (int j = from; j < to; ++j) exchanges += l.exchanges(j);
        return lands(at, m_.direct(c, exchanges + 1, lists, b, l.hop), exchanges * lists * b * l.nic_beta, l.hop.alpha);
      };
      std::vector<double> landed(static_cast<std::size_t>(l.batches));
      auto landed_at = [&](int j) -> double& { return landed[static_cast<std::size_t>(j)]; };
      if (gather) {
        const int first = std::min(l.in_flight, l.batches);  // leave together
        std::fill(landed.begin(), landed.begin() + first, post(0, first, now));
        if (below.next < below.ready) self(self, x + 1);  // the item before's last batch
        for (int j = 0; j < l.batches; ++j) {
          now = std::max(now, landed_at(j));
          ++below.ready;
          if (j + 1 == l.batches) break;
          if (j + l.in_flight < l.batches) landed_at(j + l.in_flight) = post(j + l.in_flight, j + l.in_flight + 1, now);
          self(self, x + 1);
        }
      } else {
        landed_at(0) = post(0, 1, now);
        for (int j = 1; j < l.batches; ++j) {
          self(self, x + 1);  // make batch j
          if (j >= l.in_flight) now = std::max(now, landed_at(j - l.in_flight));
          landed_at(j) = post(j, j + 1, now);
        }
        if (below.next < below.items.size()) self(self, x + 1);  // the next item's first batch
        now = std::max(now, *std::max_element(landed.begin(), landed.end()));
      }
    };
    if (gather) {
      for (double k = 0; k < pieces; ++k) run(run, 0);
      for (std::size_t x = 1; x <= depth; ++x)
        while (levels[x].next < levels[x].ready) run(run, x);
    } else {
      for (std::size_t x = depth; x >= 1; --x) run(run, x);
      for (double k = 0; k < pieces; ++k) run(run, 0);
    }
    return now;
  }

 private:
  const CostModel& m_;
};

}  // namespace paro::algorithms
