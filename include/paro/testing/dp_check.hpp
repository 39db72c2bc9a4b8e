#pragma once
// Checking the PaRO-DP engine on any transport: every valid strategy trains a synthetic problem (a
// weighted quadratic per rank, coupled to frozen parameters, gradients accumulated over micro-steps)
// from the same start; each must end with the parameters of plain data parallelism written out here
// (one all-reduce of the gradients, Adam on every rank; relative difference max|p - q| / max|q| at most
// 1e-5), hold exactly the bytes of dp::footprint and send exactly dp::traffic's bytes per step.

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/dp/engine.hpp"
#include "paro/transport/paced.hpp"

namespace paro::testing {

struct DpCase {
  std::size_t trainable = 1003, frozen = 37;  // not multiples of the rank count: padding is exercised
  int steps = 50, accumulation = 2;
  double tolerance = 1e-5;
  bool overlap = false;  // Engine::set_overlap: gradient reduce-scatters overlap the next micro-step
};

// max|a - b| / max|b|
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The bytes world rank `rank` sent inside its node and across nodes since the last call, as the paced
// transport recorded them (it must trace: paced::Transport::wrap(..., trace = true)).
inline dp::Traffic take_traced_traffic(int rank) {
  dp::Traffic sent;
  for (const auto& e : paced::TraceLog::process().take_rank(rank))
    (e.inter ? sent.inter : sent.intra) += static_cast<double>(e.bytes);
  return sent;
}

// take_traffic(): this rank's bytes sent inside groups and along rails since the last call.
template <class Transport>
std::vector<std::string> check_strategies(Communicator<Transport>& comm, const DpCase& c,
                                          const std::function<dp::Traffic()>& take_traffic) {
  std::vector<float> trainable(c.trainable), frozen(c.frozen);
  for (std::size_t i = 0; i < trainable.size(); ++i) trainable[i] = std::cos(0.05f * static_cast<float>(i));
  for (std::size_t j = 0; j < frozen.size(); ++j) frozen[j] = std::sin(0.2f * static_cast<float>(j));
  const float r = static_cast<float>(comm.rank());
  auto add_gradient = [&](int k, int a, const float* theta, const float* fixed, float* g) {
    for (std::size_t i = 0; i < c.trainable; ++i) {
      const float target =
          std::sin(0.1f * static_cast<float>(i) + r + 0.3f * static_cast<float>(k) + 0.7f * static_cast<float>(a));
      g[i] += (1.0f + static_cast<float>(i % 7) / 7.0f) * (theta[i] - target) + 0.01f * fixed[i % c.frozen];
    }
  };
  const dp::Adam adam{1e-2f};
  // The reference: data parallelism as a user would write it with one global all-reduce.
  std::vector<float> reference = trainable, m(trainable.size(), 0.0f), v(trainable.size(), 0.0f), g(trainable.size());
  for (int k = 0; k < c.steps; ++k) {
    std::fill(g.begin(), g.end(), 0.0f);
    for (int a = 0; a < c.accumulation; ++a) add_gradient(k, a, reference.data(), frozen.data(), g.data());
    comm.all_reduce(g.data(), g.data(), g.size(), ReduceOp::sum);
    const float c1 = 1.0f - std::pow(adam.beta1, static_cast<float>(k + 1));
    const float c2 = 1.0f - std::pow(adam.beta2, static_cast<float>(k + 1));
    for (std::size_t i = 0; i < g.size(); ++i) {
      const float gi = g[i] / static_cast<float>(comm.size() * c.accumulation);
      m[i] = adam.beta1 * m[i] + (1.0f - adam.beta1) * gi;
      v[i] = adam.beta2 * v[i] + (1.0f - adam.beta2) * gi * gi;
      reference[i] -= adam.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + adam.eps);
    }
  }
  std::vector<std::string> failures;
  for (const dp::Strategy& s : dp::Strategy::all_valid()) {
    dp::Engine<Transport> e(comm, s, trainable, frozen, adam);
    e.set_overlap(c.overlap);
    take_traffic();
    dp::Traffic sent;
    for (int k = 0; k < c.steps; ++k) {
      for (int a = 0; a < c.accumulation; ++a) {
        e.begin_micro_step();
        add_gradient(k, a, e.trainable_params(), e.frozen_params(), e.gradients());
        e.end_micro_step();
      }
      e.step(c.accumulation);
      const dp::Traffic t = take_traffic();
      sent.intra += t.intra;
      sent.inter += t.inter;
    }
    const std::string where = detail::concat(s.name(), " rank ", comm.rank(), ": ");
    const dp::Traffic model = dp::traffic(s, e.sizes(), e.cluster(), c.accumulation);
    if (sent.intra != model.intra * c.steps || sent.inter != model.inter * c.steps)
      failures.push_back(detail::concat(where, "sent intra ", sent.intra, " inter ", sent.inter, " B in ", c.steps,
                                        " steps; the model says ", model.intra * c.steps, " and ",
                                        model.inter * c.steps));
    const dp::Footprint held = e.memory();
    dp::Footprint f = dp::footprint(s, e.sizes(), e.cluster());
    if (c.overlap) f.full_grads *= 2;  // the gradient being reduce-scattered and the one being computed
    if (held.params != f.params || held.grads != f.grads || held.optimizer != f.optimizer ||
        held.gathered_params != f.gathered_params || held.full_grads != f.full_grads)
      failures.push_back(detail::concat(where, "holds ", held.params, "/", held.grads, "/", held.optimizer, "/",
                                        held.gathered_params, "/", held.full_grads, " B; the model says ", f.params,
                                        "/", f.grads, "/", f.optimizer, "/", f.gathered_params, "/", f.full_grads));
    const std::vector<float> final_params = e.gather_trainable();
    take_traffic();
    const double d = relative_difference(final_params, reference);
    if (!(d <= c.tolerance)) failures.push_back(detail::concat(where, "differs from data parallelism by ", d));
  }
  return failures;
}

}  // namespace paro::testing
