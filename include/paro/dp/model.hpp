#pragma once
// What a PaRO-DP strategy costs per rank: bytes held (persistent state and the transient full buffers of
// a step) and bytes sent per step on each link class, for a model of Ψ parameters of which Ψ' are
// trainable, n ranks in groups of m, and A accumulation micro-steps. The formulas describe exactly what
// dp/engine.hpp does (ring collectives inside the group and along the rail, in place), so the trainer's
// measured bytes must equal them; with per-level bandwidths and compute speed they predict a step's time
// T = max(t_comm, t_comp) (the paper's guideline) and rank the strategies.
//
// Layout: the trainable and the frozen parameters are two flat vectors, each padded to a multiple of n.
// Shard of a vector of length L: I: L/m elements at local index i; G: L/n elements, the piece of the
// I shard at the rank's group index (so a G shard lies inside the rank's I shard).
//
// Per micro-step:  p = I: intra all-gather of the parameters; p = G: rail then intra all-gather.
//                  g = I: intra reduce-scatter of the gradients; g = G: intra then rail reduce-scatter.
// At the boundary: bring the gradients to os's partition (N -> N: intra RS, rail AR, intra AG; N -> I:
//                  intra RS, rail AR; N -> G: intra RS, rail RS; I -> I: rail AR; I -> G: rail RS),
//                  step the optimizer on the os shard, then rebuild the trainable parameters at p's
//                  partition (I -> N: intra AG; G -> N: rail AG, intra AG; G -> I: rail AG).
// A ring over k ranks sends (k-1)/k of the buffer per rank for an all-gather or reduce-scatter, twice
// that for an all-reduce.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "paro/core/error.hpp"
#include "paro/dp/strategy.hpp"

namespace paro::dp {

struct Sizes {
  std::size_t params = 0;     // Ψ
  std::size_t trainable = 0;  // Ψ' <= Ψ
};

struct Cluster {
  int ranks = 1;  // n
  int group = 1;  // m, divides n

  int groups() const { return ranks / group; }
  void validate() const {
    detail::require(ranks >= 1 && group >= 1 && ranks % group == 0, "cluster of ", ranks, " ranks in groups of ", group,
                    ": the group size must divide the rank count");
  }
};

// Bytes per element. The trainer: fp32 parameters and gradients, Adam's m and v (8). Mixed precision as
// in the PaRO paper (arXiv:2310.06003): 2-byte parameters and gradients, 12 bytes of fp32 master copy, m and v.
struct ElementBytes {
  double param = 4, grad = 4, os = 8;
  static ElementBytes mixed_precision() { return {2, 2, 12}; }
};

inline std::size_t padded(std::size_t count, int ranks) {
  const auto n = static_cast<std::size_t>(ranks);
  return (count + n - 1) / n * n;
}

inline std::size_t parts(Partition p, const Cluster& c) {
  return static_cast<std::size_t>(p == Partition::N ? 1 : p == Partition::I ? c.group : c.ranks);
}

// Per-rank bytes.
struct Footprint {
  double params = 0, grads = 0, optimizer = 0;  // held between steps
  double gathered_params = 0, full_grads = 0;   // transient, during a micro-step
  double persistent() const { return params + grads + optimizer; }
  double peak() const { return persistent() + gathered_params + full_grads; }
};

inline Footprint footprint(const Strategy& s, const Sizes& z, const Cluster& c, const ElementBytes& b = {}) {
  c.validate();
  const double trainable = static_cast<double>(padded(z.trainable, c.ranks));
  const double all = trainable + static_cast<double>(padded(z.params - z.trainable, c.ranks));
  Footprint f;
  f.params = all / static_cast<double>(parts(s.p, c)) * b.param;
  f.grads = trainable / static_cast<double>(parts(s.g, c)) * b.grad;
  f.optimizer = trainable / static_cast<double>(parts(s.os, c)) * b.os;
  if (s.p != Partition::N) f.gathered_params = all * b.param;
  if (s.g != Partition::N) f.full_grads = trainable * b.grad;
  return f;
}

// Per-rank bytes sent in one step (A micro-steps and the boundary), inside groups and along rails.
struct Traffic {
  double intra = 0, inter = 0;
  double total() const { return intra + inter; }
};

inline Traffic traffic(const Strategy& s, const Sizes& z, const Cluster& c, int accumulation,
                       const ElementBytes& b = {}) {
  c.validate();
  detail::require(accumulation >= 1, "accumulation steps ", accumulation, ": must be >= 1");
  const double m = c.group, k = c.groups();
  const double trainable = static_cast<double>(padded(z.trainable, c.ranks));
  const double all = trainable + static_cast<double>(padded(z.params - z.trainable, c.ranks));
  // One ring collective's bytes per rank: gather/scatter over k ranks of a buffer of `elements` (a
  // multiple of k, so the division is exact).
  auto spread = [](double ranks, double elements) { return elements / ranks * (ranks - 1); };
  Traffic t;
  const double micro = accumulation;
  if (s.p == Partition::I) t.intra += micro * spread(m, all) * b.param;
  if (s.p == Partition::G) {
    t.inter += micro * spread(k, all / m) * b.param;
    t.intra += micro * spread(m, all) * b.param;
  }
  if (s.g != Partition::N) t.intra += micro * spread(m, trainable) * b.grad;
  if (s.g == Partition::G) t.inter += micro * spread(k, trainable / m) * b.grad;
  // The boundary.
  const double intra_rs = spread(m, trainable) * b.grad, rail_rs = spread(k, trainable / m) * b.grad;
  if (s.g == Partition::N) {
    t.intra += intra_rs;
    if (s.os == Partition::G)
      t.inter += rail_rs;
    else
      t.inter += 2 * rail_rs;
    if (s.os == Partition::N) t.intra += intra_rs;
  } else if (s.g == Partition::I) {
    t.inter += s.os == Partition::G ? rail_rs : 2 * rail_rs;
  }
  // The rebuild of the trainable parameters.
  const double intra_ag = spread(m, trainable) * b.param, rail_ag = spread(k, trainable / m) * b.param;
  if (s.os == Partition::I && s.p == Partition::N) t.intra += intra_ag;
  if (s.os == Partition::G && s.p == Partition::N) t.intra += intra_ag, t.inter += rail_ag;
  if (s.os == Partition::G && s.p == Partition::I) t.inter += rail_ag;
  return t;
}

// The advisor's inputs: the machine and the work of one step.
struct Machine {
  double memory_bytes = 80e9;         // per GPU
  double intra_bytes_per_s = 150e9;   // per rank, inside the group (NVLink class)
  double inter_bytes_per_s = 12.5e9;  // per rank, between groups (a 100 Gbit/s NIC share)
  double flops = 150e12;              // sustained per GPU
  double tokens = 8192;               // per GPU per micro-step
  double activation_bytes = 0;        // per GPU, besides the model state
};

struct Advice {
  Strategy strategy;
  Footprint memory;
  Traffic bytes;
  double comm_s = 0, comp_s = 0, step_s = 0;
  bool fits = false;
};

// Every valid strategy, those that fit first, fastest first (then least communication): t_comp = 6 Ψ' tokens A / flops
// (forward and backward; frozen layers' forward only: 2 (Ψ - Ψ') tokens A / flops), t_comm = bytes / bandwidth per link
// class, T = max(t_comm, t_comp).
inline std::vector<Advice> advise(const Sizes& z, const Cluster& c, int accumulation, const Machine& mc,
                                  const ElementBytes& b = ElementBytes::mixed_precision()) {
  detail::require(z.trainable <= z.params && z.params > 0, "model of ", z.params, " parameters with ", z.trainable,
                  " trainable: need 0 < trainable <= parameters");
  std::vector<Advice> out;
  for (const Strategy& s : Strategy::all_valid()) {
    Advice a{s, footprint(s, z, c, b), traffic(s, z, c, accumulation, b)};
    a.comm_s = a.bytes.intra / mc.intra_bytes_per_s + a.bytes.inter / mc.inter_bytes_per_s;
    const double flop = (6.0 * static_cast<double>(z.trainable) + 2.0 * static_cast<double>(z.params - z.trainable)) *
                        mc.tokens * accumulation;
    a.comp_s = flop / mc.flops;
    a.step_s = std::max(a.comm_s, a.comp_s);
    a.fits = a.memory.peak() + mc.activation_bytes <= mc.memory_bytes;
    out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(), [](const Advice& x, const Advice& y) {
    if (x.fits != y.fits) return x.fits;
    if (x.step_s != y.step_s) return x.step_s < y.step_s;
    return x.comm_s < y.comm_s;  // equal when compute-bound: less traffic leaves more headroom
  });
  return out;
}

}  // namespace paro::dp
