#pragma once
// Turns timings of every (collective, algorithm, size) into a cost model that a noisy machine cannot fool
// (tools/calibration.hpp takes the timings; this file only computes, so tests feed it numbers):
//   1. each point is the median of its repeated runs, and its noise their relative median deviation;
//   2. the physical numbers (links, per-message step, lane start, reduce and copy throughput) are fitted
//      jointly to every point at once, minimising the mean |log(predicted / measured)|: an absolute error,
//      so that one 3x spike moves the fit no more than any other point does;
//   3. what the fitted formulas still miss becomes a correction per (collective, algorithm; paro_cc's
//      lanes on threads and inline apart) only where the data agree: a size more than 2x off the median
//      of three neighbouring sizes is a spike and takes that median (one odd size cannot make one; an end
//      is always taken against the line through its inner neighbours' medians, and no further from 1 than
//      its own measurement; an end as measured where faster than its formula), a residual
//      within the noise is 1, and corrections are bounded to [1/3, 3]; beyond the calibrated sizes the
//      nearest holds (LinkModel::correction);
//   4. the report says how well the model before, the fitted links, and the links with corrections
//      predict the measurements; the caller refuses a fit that predicts worse than the model before.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "paro/algorithms/cost/cost_model.hpp"

namespace paro::algorithms {

// The schedule a cost model gives a call: whether it is corrected as inline lanes (paro_cc's two schedules
// are corrected apart), and the algorithm's plan as printed (registry.hpp: for paro_cc its pipeline chunk,
// lanes, together, cut by nodes and direct levels).
struct Schedule {
  bool lanes_inline = false;
  std::string plan;
  friend bool operator==(const Schedule& a, const Schedule& b) {
    return a.lanes_inline == b.lanes_inline && a.plan == b.plan;
  }
  friend bool operator!=(const Schedule& a, const Schedule& b) { return !(a == b); }
};

// Repeated timings of one call (us), each run taken in a round that also timed every other algorithm at
// its size, so that a slow moment of the machine falls on all of them.
struct Timing {
  Collective collective;
  Algorithm algorithm;
  double bytes;  // the full buffer
  std::vector<double> runs_us;
  Schedule schedule;  // what the calls ran with (planned_schedule)
};

// The schedule that `model` gives a call of t's collective, algorithm and size on the lanes t ran on
// (a calibration times paro_cc on each where both are allowed): a timing describes the model it was
// taken under.
template <class Registry>
Schedule planned_schedule(const CostModel& model, CostShape shape, const Timing& t) {
  shape.lanes = t.schedule.lanes_inline ? LaneChoice::inline_only : LaneChoice::threads;
  const auto p = Registry::predict(model, t.algorithm, t.collective, static_cast<std::size_t>(t.bytes), shape);
  return {Registry::inline_lanes(p.params), Registry::print(t.algorithm, p.params)};
}

struct FittedPoint {
  Collective collective;
  Algorithm algorithm;
  double bytes;
  double measured_us;  // median of the runs
  double noise;        // median |run - median| / median
  double before_us;    // the model in use before the fit, corrections included
  double links_us;     // the fitted formulas
  double fitted_us;    // the fitted formulas with their corrections
  bool lanes_inline;   // paro_cc ran its lanes inline: predicted and corrected so, whatever a model would choose
};

struct FitReport {
  LinkModel model;  // fitted links, corrections and model_error
  std::vector<FittedPoint> points;
  // Mean |log(predicted / measured)| over the points; exp(e) - 1 is the typical relative error.
  double before_error = 0, links_error = 0, fitted_error = 0;
  double noise = 0;  // median of the points' noise
  bool better_than_before() const { return fitted_error <= before_error; }
};

namespace fit_detail {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// The fitted numbers, as pointers into a LinkModel, with their range: times (us) between 0.05 (a latency of
// exactly 0 could never grow by a factor) and 10 ms; throughputs within 64x of where they started, so that
// one no formula in the data depends on (copies, where no algorithm copies much) cannot wander off.
struct Parameter {
  double* value;
  double least, most;
};

inline std::array<Parameter, 8> parameters(LinkModel& m) {
  auto time = [](double& v) { return Parameter{&v, 0.05, 1e4}; };
  auto rate = [](double& v) { return Parameter{&v, v / 64, v * 64}; };
  return {{rate(m.intra.gbps), time(m.intra.latency_us), rate(m.inter.gbps), time(m.inter.latency_us), time(m.step_us),
           time(m.lane_us), rate(m.reduce_gbps), rate(m.copy_gbps)}};
}

}  // namespace fit_detail

// Corrections beyond this factor are not believed: the formula, not a correction, must be fixed there.
inline constexpr double max_correction = 3;
// Residuals within max(min_noise, noise_factor x a point's noise) are noise: no correction. A point's
// noise is its runs' median deviation, and the median of 5 runs is uncertain by about 0.8 of that, so
// 1.5 is about two of its standard errors. (At 2, mics_hcs's all-reduce of 256 KiB on the emulated 3-level
// cluster, measured 17% under its formula with 11.6% noise, was held at its formula and lost its pick
// to a tree 18% slower.)
inline constexpr double min_noise = 0.05;
inline constexpr double noise_factor = 1.5;
// A size whose residual is more than this factor off the median of it and its neighbours is a spike.
inline constexpr double spike_factor = 2;

// Fits a link model to the timings on a scope of `shape`, starting from whichever of `start` (direct
// measurements) and in_use's links (the model in use; the report compares against it) predicts them
// better. Registry gives the formulas (registry.hpp's AlgorithmList). Deterministic: every rank that
// feeds the same timings gets the same model, bit for bit. With fit_links false, start's links are kept
// as they are and only the corrections are derived.
template <class Registry>
FitReport fit_cost_model(const LinkModel& start, const CostModel& in_use, const CostShape& shape,
                         const std::vector<Timing>& timings, bool fit_links = true) {
  const LinkModel& before = in_use.links();
  using fit_detail::median;
  FitReport r;
  for (const Timing& t : timings) {
    detail::require(!t.runs_us.empty() && t.bytes > 0, "fit_cost_model: ", name_of(t.collective), " ",
                    Registry::name_of(t.algorithm), " at ", t.bytes, " bytes has no runs");
    const double m = std::max(1e-3, median(t.runs_us));
    std::vector<double> deviation;
    for (double x : t.runs_us) deviation.push_back(std::abs(x - m));
    r.points.push_back(
        {t.collective, t.algorithm, t.bytes, m, median(deviation) / m, 0, 0, 0, t.schedule.lanes_inline});
  }
  detail::require(!r.points.empty(), "fit_cost_model: no timings");
  // A point is predicted on the lanes it ran on: were the model free to choose, a lane start too dear to
  // be true would send every point inline and there fit as well as the true one.
  CostShape on_threads = shape, inline_lanes = shape;
  if (on_threads.lanes == LaneChoice::faster) on_threads.lanes = LaneChoice::threads;
  inline_lanes.lanes = LaneChoice::inline_only;
  auto formula = [&](const CostModel& model, const FittedPoint& p) {
    return Registry::formula(model, p.algorithm, p.collective, static_cast<std::size_t>(p.bytes),
                             p.lanes_inline ? inline_lanes : on_threads)
        .time_us;
  };
  auto error = [](double predicted, double measured) {
    return std::abs(std::log(std::max(1e-3, predicted) / measured));
  };
  auto mean_error = [&](const LinkModel& links) {  // the formulas alone
    const CostModel model = in_use.with_links(links);
    double sum = 0;
    for (const FittedPoint& p : r.points) sum += error(formula(model, p), p.measured_us);
    return sum / static_cast<double>(r.points.size());
  };

  // 2. Coordinate descent in log space: scale one number by f or 1/f while that helps, halve log f when
  // no number moves. Bounded, so a pathological input cannot make it spin.
  LinkModel links = start, uncorrected = before;
  links.corrections.clear();
  uncorrected.corrections.clear();
  double best = mean_error(links);
  if (const double e = mean_error(uncorrected); fit_links && e < best) {
    links = uncorrected;
    best = e;
  }
  int evaluations = 0;
  auto numbers = fit_detail::parameters(links);
  for (double f = 2; fit_links && f > 1.002 && evaluations < 4000;) {
    bool moved = false;
    for (const fit_detail::Parameter& p : numbers) {
      for (double step : {f, 1 / f}) {
        const double was = *p.value;
        *p.value = std::clamp(std::max(was, p.least) * step, p.least, p.most);
        const double e = mean_error(links);
        ++evaluations;
        if (e < best - 1e-12) {
          best = e;
          moved = true;
          break;
        }
        *p.value = was;
      }
    }
    if (!moved) f = std::sqrt(f);
  }

  // 3. Corrections: per (collective, algorithm, lanes), the residual log(measured / formula) by size, the
  // median of each size and its neighbours, zero within the noise, bounded.
  std::map<LinkModel::CorrectionKey, std::vector<const FittedPoint*>> series;
  const CostModel fitted_links = in_use.with_links(links);
  for (FittedPoint& p : r.points) {
    p.before_us = formula(in_use, p) * before.correction(p.collective, p.algorithm, p.bytes, p.lanes_inline);
    p.links_us = formula(fitted_links, p);
    series[{p.collective, p.algorithm, p.lanes_inline}].push_back(&p);
  }
  for (auto& [key, points] : series) {
    std::sort(points.begin(), points.end(),
              [](const FittedPoint* a, const FittedPoint* b) { return a->bytes < b->bytes; });
    std::vector<double> residual;
    for (const FittedPoint* p : points) residual.push_back(std::log(p->measured_us / std::max(1e-3, p->links_us)));
    const std::size_t n = residual.size();
    LinkModel::Correction k;
    bool any = false;
    // The median of a size and its two neighbours.
    auto inner = [&](std::size_t j) {
      return j == 0 || j + 1 == n ? residual[j] : median({residual[j - 1], residual[j], residual[j + 1]});
    };
    for (std::size_t i = 0; i < n; ++i) {
      double smooth = residual[i];
      if (n == 2) {
        smooth = (residual[0] + residual[1]) / 2;
      } else if (n >= 3 && i > 0 && i + 1 < n) {
        // A size inside keeps its own residual unless that is more than spike_factor off the median: the
        // rounds interleave the algorithms, so a busy moment slows them all alike, and one algorithm's
        // consistent step between two sizes is its own (tree's reduce-scatter on the emulated 3-level
        // cluster measured 2.0-2.3x its formula at 4 KiB and 1.5-1.9x at 16 KiB in four calibrations of
        // four; taken at the median it was picked at 4 KiB in three of them and ran 1.37-1.54x ring's time).
        if (std::abs(residual[i] - inner(i)) > std::log(spike_factor)) smooth = inner(i);
      } else if (n >= 3 && residual[i] >= 0) {
        // At an end, the missing neighbour is the line through the two inner sizes' medians, so that a
        // trend reaches the end and a lone deviation there does not, nor one next to it (which would point
        // the line). An end then goes no further from 1 than its own measurement: its correction holds for
        // every size beyond. An end faster than its formula keeps its own residual (smooth as set above): a
        // busy machine slows a call but cannot speed one up, so a fast point there is no spike. At the smallest
        // size it is the per-call overhead that the joint fit, driven by the larger sizes, misses (ring's
        // reduce-scatter at 1 KiB measured a third of its formula in every calibration here); at the largest,
        // where a link the fit got wrong from the smaller sizes takes over (on the emulated 3-level cluster
        // every paro algorithm at 16 MiB measured 0.59-0.91x its formula, after 1.1x at 4 MiB: held at 1,
        // ring was picked there at 1.5x paro_cc's time).
        const std::size_t a = i == 0 ? 1 : n - 2, b = i == 0 ? 2 : n - 3;
        smooth = std::clamp(median({residual[a], residual[i], 2 * inner(a) - inner(b)}), 0.0, residual[i]);
      }
      const double noise = std::max(min_noise, noise_factor * points[i]->noise);
      double c = std::abs(smooth) <= std::log1p(noise) ? 0 : smooth;
      c = std::clamp(c, -std::log(max_correction), std::log(max_correction));
      any = any || c != 0;
      k.emplace_back(points[i]->bytes, std::exp(c));
    }
    if (any) links.corrections[key] = k;
  }

  for (FittedPoint& p : r.points)
    p.fitted_us = p.links_us * links.correction(p.collective, p.algorithm, p.bytes, p.lanes_inline);
  std::vector<double> noises;
  double before_sum = 0, fitted_sum = 0;
  for (const FittedPoint& p : r.points) {
    noises.push_back(p.noise);
    before_sum += error(p.before_us, p.measured_us);
    fitted_sum += error(p.fitted_us, p.measured_us);
  }
  const double points = static_cast<double>(r.points.size());
  r.before_error = before_sum / points;
  r.links_error = best;
  r.fitted_error = fitted_sum / points;
  r.noise = median(noises);
  links.model_error = std::max(min_noise, std::expm1(r.fitted_error));
  r.model = links;
  return r;
}

}  // namespace paro::algorithms
