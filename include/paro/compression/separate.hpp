#pragma once
// SEPARATE: compressed gradient synchronisation by shared-seed random projection with moving-average error
// feedback, and its adaptive form G-SEPARATE (docs/compression.md has the formulas and their sources).
//
// Per registered gradient tensor, viewed as a rows x cols matrix (flatten trailing dimensions), one call
//   1. h = g + e                                  (e: this rank's error buffer, f32)
//   2. P = h R, R of width w drawn from (seed, step, tensor) on every rank alike (random_stream.hpp)
//   3. all-reduces (sums) every tensor's P in one buffer with any algorithm and scope of the library
//   4. h~ = P R^T / (n w)                        (the estimate of the ranks' mean h; written to out)
//   5. e <- (1 - beta) e + beta (h - h~) (or the smoothed beta e + (1 - beta) (h - h~)), or e <- 0 when
//      step % T_e == 0
//   6. adaptive, when step % T_a == 0: c = the ranks' mean cosine of (h~, g);
//      w <- int(1 + w (1 + c)) clamped, beta <- clamp(beta (1 + c), beta_min, beta_max)
// Tensors too small to gain (vectors such as biases, or fewer than min_elements) are summed uncompressed
// in the same buffer and averaged exactly.
//
// Collective: every rank of the scope registers the same tensors in the same order and passes the same
// tensors to each call; the widths stay equal on all ranks because the cosine is agreed by a tiny
// all-reduce. Not thread-safe: one Separate per rank.
//
// The pieces: separate_options.hpp (settings), separate_math.hpp (the per-tensor math), separate_pipeline.hpp
// (the units overlapped with the all-reduce), separate_state.hpp (checkpoints); this file, the driver.

#include <algorithm>
#include <cstddef>
#include <istream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "paro/algorithms/lanes.hpp"
#include "paro/communicator/communicator.hpp"
#include "paro/compression/projection.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/compression/separate_math.hpp"
#include "paro/compression/separate_options.hpp"
#include "paro/compression/separate_pipeline.hpp"
#include "paro/compression/separate_state.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"

namespace paro::compression {

class Separate {
 public:
  using TensorId = std::size_t;

  using Tensor = SeparateTensor;
  using Gradient = SeparateGradient;

  explicit Separate(SeparateOptions o = {}) : o_(o) { o_.validate(); }

  const SeparateOptions& options() const { return o_; }

  TensorId add(std::string name, std::size_t rows, std::size_t cols, DataType dt) {
    Tensor t = separate_detail::make_tensor(o_, std::move(name), rows, cols, dt);
    if (t.compressed && o_.error_feedback) t.error.assign(rows * cols, 0.0f);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
  }

  const Tensor& tensor(TensorId id) const { return separate_detail::tensor_at(tensors_, id); }
  // This rank's error buffer of a tensor (rows x cols; empty without error feedback or compression).
  const std::vector<float>& error(TensorId id) const { return tensor(id).error; }
  const Traffic& last_call() const { return traffic_; }

  template <class Transport>
  void all_reduce(Communicator<Transport>& comm, TensorId id, const void* grad, void* out) {
    all_reduce(comm, std::vector<Gradient>{{id, grad, out}});
  }

  // Every rank's out becomes the same estimate of the ranks' mean gradient. The buffer is all-reduced in
  // pieces of about pipeline_chunk_bytes, so that the projection of later rows, the all-reduce of earlier
  // ones and the reconstruction of the earliest overlap (three lanes, as paro_cc's levels do).
  template <class Transport>
  void all_reduce(Communicator<Transport>& comm, const std::vector<Gradient>& grads) {
    Transport& scoped = comm.transport(o_.collective.scope);
    const int n = scoped.size();
    require_no_open_step("all_reduce");
    separate_detail::validate_gradients(tensors_, grads, "all_reduce", n, false);
    std::size_t total = 0;
    const std::vector<Unit> units = separate_detail::units_of(tensors_, grads, total);
    const std::vector<Chunk> chunks = separate_detail::chunks_of(o_, units, total);
    wire_.resize(total);  // every value is written before it is sent
    work_.prepare(o_, tensors_, grads);
    std::vector<Cosine> cosines(grads.size());

    algorithms::Progress projected, reduced;
    auto project_lane = [&] {
      std::size_t u = 0;
      for (const Chunk& c : chunks) {
        for (; u < c.unit_end; ++u) separate_detail::project_unit(tensors_, work_, grads, units[u], wire_.data());
        projected.advance();
      }
    };
    auto reduce_lane = [&] {
      std::size_t begin = 0;
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        projected.wait_for(c + 1);
        comm.all_reduce(wire_.data() + begin, wire_.data() + begin, chunks[c].wire_end - begin, DataType::f32,
                        ReduceOp::sum, o_.collective);
        begin = chunks[c].wire_end;
        reduced.advance();
      }
    };
    auto reconstruct_lane = [&] {
      std::size_t u = 0;
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        reduced.wait_for(c + 1);
        for (; u < chunks[c].unit_end; ++u)
          separate_detail::finish_unit(o_, tensors_, work_, grads, units[u], wire_.data(), n, cosines[units[u].grad]);
      }
    };
    algorithms::run_lanes(chunks.size() > 1 && scoped.concurrent_use(), {&projected, &reduced}, project_lane,
                          reduce_lane, reconstruct_lane);
    finish(comm, grads, cosines, total);
  }

  // The all-reduce in steps, for an all-reduce that the caller runs (torch.distributed's, say), with the
  // same results: project() writes the projections (and the plain tensors' values) into a wire of
  // wire_floats(grads) floats; the caller sums the wires over the ranks; reconstruct() writes the estimate
  // of the ranks' mean into each out. Where this step adapts (G-SEPARATE), reconstruct() returns every
  // adapting tensor's cosine, which the caller sums over the ranks (every rank must get the same bits) and
  // hands to adapt(); otherwise it returns none and the step is complete. One step at a time: grads must
  // hold the same gradients from project() to reconstruct().
  std::size_t wire_floats(const std::vector<Gradient>& grads) const {
    separate_detail::validate_gradients(tensors_, grads, "wire_floats", 1, false);
    std::size_t total = 0;
    separate_detail::units_of(tensors_, grads, total);
    return total;
  }

  void project(const std::vector<Gradient>& grads, float* wire) {
    require_no_open_step("project");
    separate_detail::validate_gradients(tensors_, grads, "project", 1, false);
    std::size_t total = 0;
    const std::vector<Unit> units = separate_detail::units_of(tensors_, grads, total);
    detail::require(wire != nullptr || total == 0, "SEPARATE project: the wire is null; it must hold ", total,
                    " floats");
    work_.prepare(o_, tensors_, grads);
    for (const Unit& u : units) separate_detail::project_unit(tensors_, work_, grads, u, wire);
    step_ = {Phase::projected, separate_detail::ids_of(grads), total, 0};
  }

  std::vector<double> reconstruct(const std::vector<Gradient>& grads, const float* summed_wire, int ranks) {
    detail::require(
        step_.phase == Phase::projected && step_.ids == separate_detail::ids_of(grads), "SEPARATE reconstruct: ",
        step_.phase == Phase::projected ? "the tensors differ from the step's project()" : "no project() before it");
    detail::require(ranks >= 1, "SEPARATE reconstruct: ranks ", ranks, "; the wire's sum over >= 1 ranks");
    detail::require(summed_wire != nullptr || step_.wire_floats == 0, "SEPARATE reconstruct: the summed wire is null");
    std::size_t total = 0;
    std::vector<Cosine> cosines(grads.size());
    for (const Unit& u : separate_detail::units_of(tensors_, grads, total))
      separate_detail::finish_unit(o_, tensors_, work_, grads, u, summed_wire, ranks, cosines[u.grad]);
    std::vector<double> adapting = adapting_cosines(grads, cosines);
    step_.ranks = ranks;
    if (adapting.empty()) {
      complete_step();
    } else {
      step_.phase = Phase::adapting;
    }
    return adapting;
  }

  // G-SEPARATE's step 6 from the adapting tensors' cosines summed over the ranks; completes the step.
  void adapt(const std::vector<double>& summed_cosines) {
    detail::require(step_.phase == Phase::adapting, "SEPARATE adapt: this step does not adapt (reconstruct() ",
                    "returned no cosines)");
    detail::require(summed_cosines.size() == adapting_.size(), "SEPARATE adapt: ", summed_cosines.size(),
                    " cosines for ", adapting_.size(), " adapting tensors");
    apply_adaptation(summed_cosines, step_.ranks);
    complete_step();
  }

  // Sharded gradients (ZeRO / PaRO-DP): rank j of the scope receives rows [j rows/n, (j+1) rows/n) of the
  // estimate of the ranks' mean. Each rank's error is its own compression error h - P R^T / w, which
  // summed over ranks equals the all-reduce's h - h~, so the mean of the errors, the only part that
  // reaches the next estimate, evolves exactly as there. Needs rows (plain tensors: elements) divisible by n.
  template <class Transport>
  void reduce_scatter(Communicator<Transport>& comm, const std::vector<Gradient>& grads) {
    Transport& scoped = comm.transport(o_.collective.scope);
    const int n = scoped.size();
    const std::size_t me = static_cast<std::size_t>(scoped.rank());
    require_no_open_step("reduce_scatter");
    separate_detail::validate_gradients(tensors_, grads, "reduce_scatter", n, true);
    // Rank j's section holds every tensor's part for j: rows/n rows of P, or elements/n plain values.
    std::vector<std::size_t> offset(grads.size());
    std::size_t section = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      offset[i] = section;
      section += separate_detail::payload(tensors_[grads[i].id]) / static_cast<std::size_t>(n);
    }
    wire_.resize(section * static_cast<std::size_t>(n));  // every value is written before it is sent
    shard_.resize(section);
    work_.prepare(o_, tensors_, grads);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Tensor& t = tensors_[grads[i].id];
      if (!t.compressed) {
        const std::size_t part = t.rows * t.cols / static_cast<std::size_t>(n);
        separate_detail::visit_grad(t, [&](auto g0) {
          const auto* g = static_cast<const decltype(g0)*>(grads[i].grad);
          for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j)
            separate_detail::to_f32(g + j * part, part, wire_.data() + j * section + offset[i]);
        });
        continue;
      }
      const std::size_t w = t.shape.projected_cols(), shard_rows = t.rows / static_cast<std::size_t>(n);
      const bool reset = separate_detail::resets(o_, t);
      for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
        float* p = wire_.data() + j * section + offset[i];
        separate_detail::for_row_blocks(t, j * shard_rows, shard_rows, [&](std::size_t r0, std::size_t nr) {
          const float* h = work_.rows_of_h(t, grads[i].grad, r0, nr);
          float* pr = p + (r0 - j * shard_rows) * w;
          compression::project(t.shape, work_.randoms[i], h, t.cols, nr, pr, w);
          if (t.error.empty()) return;
          compression::reconstruct(t.shape, work_.randoms[i], pr, w, nr, 1.0f, work_.estimate.data(), t.cols);
          float* e = t.error.data() + r0 * t.cols;
          for (std::size_t k = 0; k < nr * t.cols; ++k)
            e[k] = reset ? 0.0f : separate_detail::next_error(o_.error_rule, e[k], h[k], work_.estimate[k], t.beta);
        });
      }
    }
    comm.reduce_scatter(wire_.data(), shard_.data(), section, DataType::f32, ReduceOp::sum, o_.collective);
    std::vector<Cosine> cosines(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Tensor& t = tensors_[grads[i].id];
      const float* p = shard_.data() + offset[i];
      separate_detail::visit_grad(t, [&](auto g0) {
        using T = decltype(g0);
        T* out = static_cast<T*>(grads[i].out);
        if (!t.compressed) return separate_detail::average(p, t.rows * t.cols / static_cast<std::size_t>(n), n, out);
        const std::size_t shard_rows = t.rows / static_cast<std::size_t>(n), w = t.shape.projected_cols();
        const T* g = static_cast<const T*>(grads[i].grad) + me * shard_rows * t.cols;
        separate_detail::for_row_blocks(t, 0, shard_rows, [&](std::size_t r0, std::size_t nr) {
          const std::size_t first = r0 * t.cols;  // the errors were updated before the communication
          work_.emit_rows(o_, t, work_.randoms[i], p + r0 * w, nr, n, g + first, out + first, nullptr, cosines[i]);
        });
      });
    }
    finish(comm, grads, cosines, section * static_cast<std::size_t>(n));
  }

  // Checkpoint: seed, and per tensor its step, width, beta and error buffer. load() needs the same
  // tensors registered in the same order, the same projection distribution and block size.
  void save(std::ostream& out) const {
    detail::require(step_.phase == Phase::idle, "SEPARATE save: a step-wise step is still open; save between steps");
    separate_detail::save_state(out, o_, tensors_);
  }

  void load(std::istream& in) { o_.seed = separate_detail::load_state(in, o_, tensors_); }

 private:
  using Cosine = separate_detail::Cosine;
  using Unit = separate_detail::Unit;
  using Chunk = separate_detail::Chunk;

  // Where a step starts (all_reduce, reduce_scatter, project): no step-wise step may be open.
  void require_no_open_step(const char* what) const {
    detail::require(step_.phase == Phase::idle, "SEPARATE ", what, ": a step-wise step is still open (project() ",
                    "needs its reconstruct(), and adapt() where that returned cosines)");
  }

  // Step 6 and the step count; the traffic of the call. G-SEPARATE: the ranks' mean cosine, summed by a
  // tree all-reduce (whose result is bit-identical on every rank), drives the same width and beta everywhere.
  template <class Transport>
  void finish(Communicator<Transport>& comm, const std::vector<Gradient>& grads, const std::vector<Cosine>& cosines,
              std::size_t wire_floats) {
    std::vector<double> sums = adapting_cosines(grads, cosines);
    if (!sums.empty()) {
      comm.all_reduce(sums.data(), sums.data(), sums.size(), DataType::f64, ReduceOp::sum,
                      {Algorithm::tree, o_.collective.scope});
      apply_adaptation(sums, comm.transport(o_.collective.scope).size());
    }
    step_ = {Phase::idle, separate_detail::ids_of(grads), wire_floats, 0};
    complete_step();
  }

  // The cosines of the tensors that adapt at this step (adapting_ says which), to be summed over the ranks.
  std::vector<double> adapting_cosines(const std::vector<Gradient>& grads, const std::vector<Cosine>& cosines) {
    adapting_.clear();
    std::vector<double> values;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!separate_detail::adapts(o_, tensors_[grads[i].id])) continue;
      adapting_.push_back(grads[i].id);
      values.push_back(cosines[i].value());
    }
    return values;
  }

  void apply_adaptation(const std::vector<double>& summed_cosines, int ranks) {
    separate_detail::adapt_all(o_, tensors_, adapting_, summed_cosines, ranks);
    adapting_.clear();
  }

  // The step of step_.ids is done: its traffic, and every tensor's next step.
  void complete_step() {
    traffic_ = separate_detail::complete_step(tensors_, step_.ids, step_.wire_floats);
    step_.phase = Phase::idle;
  }

  // Where the step-wise form is (project -> reconstruct [-> adapt]); the all-reduce and reduce-scatter
  // refuse to start in the middle of one.
  enum class Phase { idle, projected, adapting };
  struct Step {
    Phase phase = Phase::idle;
    std::vector<TensorId> ids;  // the step's tensors, in the call's order
    std::size_t wire_floats = 0;
    int ranks = 0;
  };

  SeparateOptions o_;
  std::vector<Tensor> tensors_;
  Traffic traffic_;
  Step step_;
  std::vector<TensorId> adapting_;  // the tensors whose cosines the step's adaptation takes, in order
  std::vector<float> wire_, shard_;
  separate_detail::Workspace work_;  // this call's R and scratch rows
};

}  // namespace paro::compression
