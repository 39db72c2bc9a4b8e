#pragma once
// Measures the cost model's numbers on a communicator's backend and topology, and fits them
// (algorithms/cost/calibration_fit.hpp). First a starting point from direct measurements: per-step latency and
// bandwidth of flat rings inside groups (intra) and along rails (inter, every rail at once, so that a
// shared NIC is seen shared), local reduction and copy throughput with every rank busy, and the cost of
// starting lanes. Then every (collective, algorithm) at every 4x from 1 KiB to 16 MiB, in rounds that
// time every algorithm of a size once each, in an order that rotates from round to round, so that the
// machine's slow moments fall on all of them; the fit takes each point's median over the rounds. Where
// paro_cc's lanes may run on threads or inline, it is timed both ways at every size: the two schedules
// miss their formulas by different factors (inline has no pipeline), the lane start is fitted from the
// threads, and the model then chooses between them as measured. Otherwise paro_cc runs the schedule its
// model gives it (pipeline chunk, inline lanes together or not), so where the fitted model gives another
// schedule than the one a point was timed with, the point is timed again under the fit and the fit
// redone. The result's model is what a cost file holds (algorithms::to_json writes it; PARO_COST_FILE
// reads it back).
//
//   paro::algorithms::FitReport fit = paro::calibrate(comm);   // collective: every rank calls it
//   if (fit.better_than_before()) write(paro::algorithms::to_json(fit.model));

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "paro/algorithms/cost/calibration_fit.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/communicator/communicator.hpp"
#include "paro/core/clock.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/tools/over_ranks.hpp"

namespace paro {

// Collective; takes seconds (rounds: how many times each point is timed). Buffers are on the host, so
// comm's backend must be one over host memory. The timed calls run on the directly measured links (they
// decide pipeline chunks); afterwards comm has the fit where it predicts the timings better than comm's
// model before, else that model. The report says which.
template <class Transport, class Registry>
algorithms::FitReport calibrate(Communicator<Transport, Registry>& comm, int rounds = 5) {
  detail::require(rounds >= 1 && rounds <= 1000, "calibrate: rounds must be in [1, 1000], not ", rounds);
  const algorithms::CostModel in_use = comm.cost_model();
  algorithms::LinkModel m = in_use.links();
  // Time per run of fn back to back, averaged over ranks (us): in steady state, so that ranks leaving the
  // barrier at different moments do not hide a shared link's queue.
  auto timed = [&](int repeats, auto&& fn) {
    fn();  // warm-up
    comm.barrier();
    const double start = clock::now_us();
    for (int i = 0; i < repeats; ++i) fn();
    return mean_over_ranks(comm, clock::now_us() - start) / repeats;
  };
  // One step of a ring all-gather in scope s: {latency us, us per byte}.
  auto ring_step = [&](Scope s) {
    const int k = comm.transport(s).size();
    const std::size_t small = 4, big = std::size_t{2} << 20;
    std::vector<float> buf(big / 4 * static_cast<std::size_t>(k));
    auto step = [&](std::size_t bytes) {
      float* mine = buf.data() + bytes / 4 * static_cast<std::size_t>(comm.transport(s).rank());  // in place
      return timed(5, [&] { comm.all_gather(mine, buf.data(), bytes / 4, {Algorithm::ring, s}); }) / (k - 1);
    };
    const double a = step(small), b = step(big);
    return std::make_pair(a, std::max(1e-9, (b - a) / static_cast<double>(big - small)));
  };
  const bool intra = comm.transport(Scope::intra).size() > 1, inter = comm.transport(Scope::inter).size() > 1;
  std::pair<double, double> intra_fit{0, 0}, inter_fit{0, 0};
  if (intra) intra_fit = ring_step(Scope::intra);
  if (inter) inter_fit = ring_step(Scope::inter);
  if (intra) {
    m.step_us = std::max(0.0, intra_fit.first - m.intra.latency_us);
    m.intra.gbps = 8e-3 / intra_fit.second;
  }
  if (inter) {
    m.inter.latency_us = std::max(0.0, inter_fit.first - m.step_us);
    const double share = m.nic == NicModel::shared ? std::max(1.0, comm.shape(Scope::inter).ring_nic_flows) : 1.0;
    m.inter.gbps = 8e-3 * share / inter_fit.second;
  }
  const std::size_t bytes = std::size_t{8} << 20;
  std::vector<float> a(bytes / 4, 1.0f), b(bytes / 4, 2.0f), c(bytes / 4);
  m.reduce_gbps = bytes * 8e-3 /
                  timed(3, [&] { host_reduce(c.data(), a.data(), b.data(), a.size(), DataType::f32, ReduceOp::sum); });
  m.copy_gbps = bytes * 8e-3 / timed(3, [&] { std::memcpy(c.data(), a.data(), bytes); });
  constexpr int lane_calls = 20;
  m.lane_us = timed(3,
                    [&] {
                      for (int i = 0; i < lane_calls; ++i)
                        algorithms::run_lanes(
                            true, {}, [] {}, [] {});
                    }) /
              lane_calls;

  // Every (collective, algorithm) the model predicts at every 4x from 1 KiB to 16 MiB, timed per size in
  // rotating rounds. Small calls are repeated for about 20 ms (the same count on every rank), so that
  // they are not one scheduler tick's noise.
  struct Point {
    std::size_t timing;  // its entry in timings
    std::size_t count;
    std::vector<float> in, out;
    int repeats = 1;
  };
  const int n = comm.size();
  const algorithms::CostShape shape = comm.shape(Scope::global);  // a copy: set_lanes changes comm's
  const algorithms::LaneChoice tuned_lanes = comm.tuning().lanes;
  const bool both_lanes = shape.lanes == algorithms::LaneChoice::faster && shape.hierarchical();
  // The lanes a point runs on (only paro_cc's depend on them): where both are allowed, the point's own.
  auto lanes_of = [&](const algorithms::Timing& t) {
    if (!both_lanes || t.algorithm != Algorithm::paro_cc) return tuned_lanes;
    return t.schedule.lanes_inline ? algorithms::LaneChoice::inline_only : algorithms::LaneChoice::threads;
  };
  std::vector<algorithms::Timing> timings;
  std::vector<std::vector<Point>> by_size;
  for (std::size_t full_bytes = std::size_t{1} << 10; full_bytes <= (std::size_t{1} << 24); full_bytes *= 4) {
    by_size.emplace_back();
    for (Collective coll : Registry::Collectives::ids)
      for (Algorithm algo : Registry::ids) {
        if (Registry::family(algo) == algorithms::Family::native || !Registry::implements(algo, coll)) continue;
        using Collectives = typename Registry::Collectives;
        const std::size_t count = full_bytes / 4 / Collectives::blocks(coll, n);
        const BufferShape buffers = Collectives::shape(coll, count, n, comm.rank());
        const double measured_bytes = static_cast<double>(count * 4 * Collectives::blocks(coll, n));
        std::vector<bool> lanes_inline{shape.lanes == algorithms::LaneChoice::inline_only};
        // (paro_cc's all_to_all runs on the caller's thread whatever its lanes)
        if (both_lanes && algo == Algorithm::paro_cc && coll != Collective::all_to_all) lanes_inline = {false, true};
        for (bool on_caller : lanes_inline) {
          by_size.back().push_back(
              {timings.size(), count, std::vector<float>(buffers.in), std::vector<float>(buffers.out)});
          timings.push_back({coll, algo, measured_bytes, {}, {on_caller, {}}});
        }
      }
  }
  // Times the points `redo` picks under `links`, which decide their schedules (planned_schedule).
  auto time_points = [&](const algorithms::LinkModel& links, auto&& redo) {
    comm.set_cost_model(in_use.with_links(links));
    for (std::vector<Point>& points : by_size) {
      std::vector<Point*> todo;
      for (Point& p : points)
        if (redo(timings[p.timing])) todo.push_back(&p);
      auto call = [&](Point* p) {
        return [&, p] {
          const algorithms::Timing& t = timings[p->timing];
          comm.collective(t.collective, p->in.data(), p->out.data(), p->count, DataType::f32, ReduceOp::sum,
                          {t.algorithm});
        };
      };
      auto timed_on_its_lanes = [&](Point* p, int repeats) {
        comm.set_lanes(lanes_of(timings[p->timing]));
        return timed(repeats, call(p));
      };
      for (Point* p : todo) {
        p->repeats = static_cast<int>(std::clamp(20e3 / std::max(1.0, timed_on_its_lanes(p, 1)), 2.0, 200.0));
        timings[p->timing].runs_us.clear();
        timings[p->timing].schedule =
            algorithms::planned_schedule<Registry>(comm.cost_model(), shape, timings[p->timing]);
      }
      for (int round = 0; round < rounds; ++round)
        for (std::size_t k = 0; k < todo.size(); ++k) {
          Point* p = todo[(k + static_cast<std::size_t>(round) * 7) % todo.size()];
          timings[p->timing].runs_us.push_back(timed_on_its_lanes(p, p->repeats));
        }
    }
    comm.set_lanes(tuned_lanes);
  };
  time_points(m, [](const algorithms::Timing&) { return true; });
  algorithms::FitReport fit = algorithms::fit_cost_model<Registry>(m, in_use, shape, timings);
  // paro_cc's time depends on the schedule its model gives it (pipeline chunk, lanes on threads or inline;
  // with inline lanes, whether a level's shards go together): where the fit gives another than the calls
  // ran with, they are timed again under the fit, and the fit redone, three times at most. The last pass
  // keeps the links, so that no schedule moves after its calls were timed: a correction measured under
  // another chunk would describe another schedule (paro_cc's all-reduce at 256 KiB takes 1.7x as long
  // with 32 KiB chunks as with 128 KiB).
  for (int pass = 0; pass < 3; ++pass) {
    const algorithms::CostModel fitted = in_use.with_links(fit.model);
    auto moved = [&](const algorithms::Timing& t) {
      return algorithms::planned_schedule<Registry>(fitted, shape, t) != t.schedule;
    };
    if (std::none_of(timings.begin(), timings.end(), moved)) break;
    time_points(fit.model, moved);
    fit = algorithms::fit_cost_model<Registry>(fit.model, in_use, shape, timings, /*fit_links=*/pass < 2);
  }
  fit.model.source = "paro::calibrate";
  comm.set_cost_model(fit.better_than_before() ? in_use.with_links(fit.model) : in_use);
  return fit;
}

}  // namespace paro
