#pragma once
// Measures the cost model's numbers on a communicator's backend and topology: per-step latency and
// bandwidth of flat rings inside groups (intra) and along rails (inter, every rail at once, so that a
// shared NIC is seen shared), local reduction and copy throughput with every rank busy, the cost of
// starting lanes, and per collective and algorithm the measured time over the formulas'. The result is
// what a cost file holds (algorithms::to_json writes it; PARO_COST_FILE reads it back).
//
//   paro::algorithms::LinkModel links = paro::calibrate(comm);   // collective: every rank calls it

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "paro/algorithms/cost_model.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/collectives.hpp"
#include "paro/communicator/collective_call.hpp"
#include "paro/communicator/over_ranks.hpp"
#include "paro/core/clock.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

// Collective; takes seconds. Buffers are on the host, so comm's backend must be one over host memory.
// From the link fit on, comm's cost model uses the fitted links (they decide pipeline chunks in the
// per-algorithm measurements, as they will where the cost file is used).
template <class Transport, class Registry>
algorithms::LinkModel calibrate(Communicator<Transport, Registry>& comm) {
  algorithms::LinkModel m = comm.cost_model().links();
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
  comm.set_cost_model(algorithms::CostModel(m, comm.cost_model().bound_links()));
  // Per collective and algorithm, measured time over the formulas' at every 4x from 1 KiB to 16 MiB. Small
  // calls are repeated for about 20 ms (the same count on every rank), so that they are not one
  // scheduler tick's noise.
  const algorithms::CostModel formulas(m, comm.cost_model().bound_links());
  const algorithms::CostShape& shape = comm.shape(Scope::global);
  const int n = comm.size();
  for (Collective coll : all_collectives)
    for (Algorithm algo : Registry::ids) {
      if (Registry::family(algo) == algorithms::Family::native || !Registry::implements(algo, coll)) continue;
      auto& points = m.corrections[{coll, algo}];
      for (std::size_t full_bytes = std::size_t{1} << 10; full_bytes <= (std::size_t{1} << 24); full_bytes *= 4) {
        const std::size_t count =
            coll == Collective::all_reduce ? full_bytes / 4 : full_bytes / 4 / static_cast<std::size_t>(n);
        const BufferShape buffers = buffer_shape(coll, count, n, comm.rank());
        std::vector<float> in(buffers.in), out(buffers.out);
        auto call = [&] {
          call_collective(comm, coll, in.data(), out.data(), count, DataType::f32, ReduceOp::sum, {algo});
        };
        const int repeats = static_cast<int>(std::clamp(20e3 / std::max(1.0, timed(1, call)), 2.0, 200.0));
        double runs[3];
        for (double& t : runs) t = timed(repeats, call);
        std::sort(runs, runs + 3);  // the median, against the noise of a shared machine
        const double measured_bytes = static_cast<double>(count * 4 * (coll == Collective::all_reduce ? 1 : n));
        const double predicted_us =
            Registry::formula(formulas, algo, coll, static_cast<std::size_t>(measured_bytes), shape).time_us;
        points.emplace_back(measured_bytes, runs[1] / std::max(1e-3, predicted_us));
      }
    }
  m.source = "paro::calibrate";
  return m;
}

}  // namespace paro
