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

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "paro/algorithms/lanes.hpp"
#include "paro/collectives.hpp"
#include "paro/compression/projection.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"

namespace paro::compression {

// How the error buffer takes in the newest compression error h - h~.
enum class ErrorRule {
  beta_on_residual,  // e <- (1 - beta) e + beta (h - h~): beta weighs the new residual, as the SEPARATE paper writes it
  smoothed,          // e <- beta e + (1 - beta) (h - h~): beta weighs the old error, a moving average
};

inline const char* name_of(ErrorRule r) { return r == ErrorRule::beta_on_residual ? "beta_on_residual" : "smoothed"; }

// "seed" is the rule's former name: still accepted, with a one-time note on stderr.
inline ErrorRule parse_error_rule(std::string_view s) {
  if (s == "beta_on_residual") return ErrorRule::beta_on_residual;
  if (s == "smoothed") return ErrorRule::smoothed;
  if (s == "seed") {
    static const bool noted = [] {
      std::fputs("paro: error rule 'seed' is deprecated, use its new name 'beta_on_residual'\n", stderr);
      return true;
    }();
    (void)noted;
    return ErrorRule::beta_on_residual;
  }
  throw UsageError(
      detail::concat("unknown error rule '", s, "'; allowed: smoothed beta_on_residual (seed: its former name)"));
}

struct SeparateOptions {
  int ratio = 32;              // w = ceil(block columns / ratio)
  std::size_t block_cols = 0;  // 0: the full projection; else block-diagonal with blocks of this many columns
  Distribution distribution = Distribution::gaussian;
  std::uint64_t seed = 0x5E9A2A7E5EEDull;
  bool error_feedback = true;
  double beta = 0.95;  // initial beta of the error rule
  // beta_on_residual grows the error by about beta sqrt(ratio) per step when the projection's variance
  // (about ratio ||h||^2) exceeds ||h||^2, as at ratio 32: training diverged (docs/compression.md). The
  // smoothed rule stays bounded while beta^2 + (1 - beta)^2 ratio < 1, so it is the default.
  ErrorRule error_rule = ErrorRule::smoothed;
  std::uint32_t reset_every = 0;    // T_e: e <- 0 when step % T_e == 0; 0: never
  bool adaptive = false;            // G-SEPARATE
  std::uint32_t adapt_every = 100;  // T_a
  int min_ratio = 0;                // adaptive clamp of w, as ratios; 0: ratio / 4 (at least 2) and ratio * 4
  int max_ratio = 0;
  double beta_min = 0.90;
  double beta_max = 0.99;
  std::size_t min_elements = 65536;               // smaller tensors go uncompressed
  std::size_t pipeline_chunk_bytes = 256 * 1024;  // all-reduce pieces overlapped with the compute; 0: one piece
  Options collective;  // algorithm and scope of the all-reduce (or reduce-scatter) of the projections

  // The ratios the paper recommends (16, 32, 64), everything else default.
  static SeparateOptions preset(int ratio) {
    detail::require(ratio == 16 || ratio == 32 || ratio == 64, "SEPARATE preset ", ratio,
                    ": allowed 16, 32, 64 (set SeparateOptions::ratio for any other ratio >= 2)");
    SeparateOptions o;
    o.ratio = ratio;
    return o;
  }

  int lowest_ratio() const { return min_ratio > 0 ? min_ratio : std::max(2, ratio / 4); }
  int highest_ratio() const { return max_ratio > 0 ? max_ratio : ratio * 4; }

  void validate() const {
    detail::require(ratio >= 2, "SEPARATE ratio ", ratio, ": must be >= 2 (columns per projection vector)");
    detail::require(beta > 0 && beta <= 1, "SEPARATE beta ", beta, ": must be in (0, 1]");
    detail::require(beta_min > 0 && beta_min <= beta_max && beta_max <= 1, "SEPARATE beta clamp [", beta_min, ", ",
                    beta_max, "]: need 0 < beta_min <= beta_max <= 1");
    detail::require(!adaptive || adapt_every >= 1, "SEPARATE adapt_every (T_a) must be >= 1 when adaptive");
    detail::require(lowest_ratio() >= 1 && lowest_ratio() <= ratio && ratio <= highest_ratio(),
                    "SEPARATE adaptive ratio range [", lowest_ratio(), ", ", highest_ratio(), "] must contain ratio ",
                    ratio);
    detail::require(distribution == Distribution::gaussian || distribution == Distribution::rademacher,
                    "SEPARATE distribution: allowed gaussian rademacher");
  }
};

// What one call moved: the all-reduced payload and the gradients' own size.
struct Traffic {
  std::size_t wire_bytes = 0;
  std::size_t dense_bytes = 0;
};

class Separate {
 public:
  using TensorId = std::size_t;

  struct Tensor {
    std::string name;
    std::size_t rows = 0, cols = 0;
    DataType dtype = DataType::f32;
    bool compressed = false;
    std::string plain_reason;  // why it goes uncompressed
    ProjectionShape shape;     // width: the current w (adaptive)
    std::size_t min_width = 0, max_width = 0;
    std::uint32_t step = 0;
    double beta = 0;
    std::vector<float> error;  // rows * cols when compressed with error feedback
  };

  // One tensor's part of a call: out may equal grad. all_reduce: out holds rows x cols; reduce_scatter:
  // out holds this rank's rows / n rows.
  struct Gradient {
    TensorId id;
    const void* grad;
    void* out;
  };

  explicit Separate(SeparateOptions o = {}) : o_(o) { o_.validate(); }

  const SeparateOptions& options() const { return o_; }

  TensorId add(std::string name, std::size_t rows, std::size_t cols, DataType dt) {
    detail::require(rows >= 1 && cols >= 1, "SEPARATE tensor '", name, "': ", rows, " x ", cols,
                    " has no elements; rows and cols must be >= 1");
    detail::require(dt == DataType::f32 || dt == DataType::f16 || dt == DataType::bf16, "SEPARATE tensor '", name,
                    "': type ", name_of(dt), " not supported; allowed: f32 f16 bf16");
    Tensor t;
    t.name = std::move(name);
    t.rows = rows;
    t.cols = cols;
    t.dtype = dt;
    const std::size_t b = o_.block_cols == 0 ? cols : std::min(o_.block_cols, cols);
    t.shape = {cols, b, ceil_div(b, static_cast<std::size_t>(o_.ratio))};
    t.min_width = std::max<std::size_t>(1, ceil_div(b, static_cast<std::size_t>(o_.highest_ratio())));
    t.max_width = std::min(b - (b > 1 ? 1 : 0), ceil_div(b, static_cast<std::size_t>(o_.lowest_ratio())));
    t.beta = o_.beta;
    if (rows == 1)
      t.plain_reason = "a vector";
    else if (rows * cols < o_.min_elements)
      t.plain_reason = detail::concat(rows * cols, " elements < min_elements ", o_.min_elements);
    else if (t.shape.width >= b)
      t.plain_reason = detail::concat("blocks of ", b, " columns gain nothing at ratio ", o_.ratio);
    t.compressed = t.plain_reason.empty();
    if (t.compressed && o_.error_feedback) t.error.assign(rows * cols, 0.0f);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
  }

  const Tensor& tensor(TensorId id) const {
    detail::require(id < tensors_.size(), "SEPARATE tensor id ", id, ": only ", tensors_.size(), " registered");
    return tensors_[id];
  }
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
    validate(grads, "all_reduce", n, false);
    std::size_t total = 0;
    const std::vector<Unit> units = units_of(grads, total);
    const std::vector<Chunk> chunks = chunks_of(units, total);
    wire_.resize(total);  // every value is written before it is sent
    prepare(grads);
    std::vector<Cosine> cosines(grads.size());

    algorithms::Progress projected, reduced;
    auto project_lane = [&] {
      std::size_t u = 0;
      for (const Chunk& c : chunks) {
        for (; u < c.unit_end; ++u) project_unit(grads, units[u], wire_.data());
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
        for (; u < chunks[c].unit_end; ++u) finish_unit(grads, units[u], wire_.data(), n, cosines[units[u].grad]);
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
    validate(grads, "wire_floats", 1, false);
    std::size_t total = 0;
    units_of(grads, total);
    return total;
  }

  void project(const std::vector<Gradient>& grads, float* wire) {
    require_no_open_step("project");
    validate(grads, "project", 1, false);
    std::size_t total = 0;
    const std::vector<Unit> units = units_of(grads, total);
    detail::require(wire != nullptr || total == 0, "SEPARATE project: the wire is null; it must hold ", total,
                    " floats");
    prepare(grads);
    for (const Unit& u : units) project_unit(grads, u, wire);
    step_ = {Phase::projected, ids_of(grads), total, 0};
  }

  std::vector<double> reconstruct(const std::vector<Gradient>& grads, const float* summed_wire, int ranks) {
    detail::require(
        step_.phase == Phase::projected && step_.ids == ids_of(grads), "SEPARATE reconstruct: ",
        step_.phase == Phase::projected ? "the tensors differ from the step's project()" : "no project() before it");
    detail::require(ranks >= 1, "SEPARATE reconstruct: ranks ", ranks, "; the wire's sum over >= 1 ranks");
    detail::require(summed_wire != nullptr || step_.wire_floats == 0, "SEPARATE reconstruct: the summed wire is null");
    std::size_t total = 0;
    std::vector<Cosine> cosines(grads.size());
    for (const Unit& u : units_of(grads, total)) finish_unit(grads, u, summed_wire, ranks, cosines[u.grad]);
    std::vector<double> adapting = adapting_cosines(grads, cosines);
    step_.ranks = ranks;
    if (adapting.empty()) {
      complete_step(grads.size());
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
    complete_step(step_.ids.size());
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
    validate(grads, "reduce_scatter", n, true);
    // Rank j's section holds every tensor's part for j: rows/n rows of P, or elements/n plain values.
    std::vector<std::size_t> offset(grads.size());
    std::size_t section = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      offset[i] = section;
      section += payload(tensors_[grads[i].id]) / static_cast<std::size_t>(n);
    }
    wire_.resize(section * static_cast<std::size_t>(n));  // every value is written before it is sent
    shard_.resize(section);
    prepare(grads);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Tensor& t = tensors_[grads[i].id];
      if (!t.compressed) {
        const std::size_t part = t.rows * t.cols / static_cast<std::size_t>(n);
        visit_grad(t, [&](auto g0) {
          const auto* g = static_cast<const decltype(g0)*>(grads[i].grad);
          for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j)
            to_f32(g + j * part, part, wire_.data() + j * section + offset[i]);
        });
        continue;
      }
      const std::size_t w = t.shape.projected_cols(), shard_rows = t.rows / static_cast<std::size_t>(n);
      const bool reset = resets(t);
      for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
        float* p = wire_.data() + j * section + offset[i];
        for_row_blocks(t, j * shard_rows, shard_rows, [&](std::size_t r0, std::size_t nr) {
          const float* h = rows_of_h(t, grads[i].grad, r0, nr);
          float* pr = p + (r0 - j * shard_rows) * w;
          compression::project(t.shape, randoms_[i].data(), h, t.cols, nr, pr, w);
          if (t.error.empty()) return;
          compression::reconstruct(t.shape, randoms_[i].data(), pr, w, nr, 1.0f, estimate_.data(), t.cols);
          float* e = t.error.data() + r0 * t.cols;
          for (std::size_t k = 0; k < nr * t.cols; ++k)
            e[k] = reset ? 0.0f : next_error(e[k], h[k], estimate_[k], t.beta);
        });
      }
    }
    comm.reduce_scatter(wire_.data(), shard_.data(), section, DataType::f32, ReduceOp::sum, o_.collective);
    std::vector<Cosine> cosines(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Tensor& t = tensors_[grads[i].id];
      const float* p = shard_.data() + offset[i];
      visit_grad(t, [&](auto g0) {
        using T = decltype(g0);
        T* out = static_cast<T*>(grads[i].out);
        if (!t.compressed) return average(p, t.rows * t.cols / static_cast<std::size_t>(n), n, out);
        const std::size_t shard_rows = t.rows / static_cast<std::size_t>(n), w = t.shape.projected_cols();
        const T* g = static_cast<const T*>(grads[i].grad) + me * shard_rows * t.cols;
        for_row_blocks(t, 0, shard_rows, [&](std::size_t r0, std::size_t nr) {
          const std::size_t first = r0 * t.cols;  // the errors were updated before the communication
          emit_rows(t, randoms_[i].data(), p + r0 * w, nr, n, g + first, out + first, nullptr, cosines[i]);
        });
      });
    }
    finish(comm, grads, cosines, section * static_cast<std::size_t>(n));
  }

  // Checkpoint: seed, and per tensor its step, width, beta and error buffer. load() needs the same
  // tensors registered in the same order, the same projection distribution and block size.
  void save(std::ostream& out) const {
    detail::require(step_.phase == Phase::idle, "SEPARATE save: a step-wise step is still open; save between steps");
    out.write(magic, sizeof magic);
    put(out, o_.seed);
    put(out, static_cast<std::uint32_t>(o_.distribution));
    put(out, static_cast<std::uint64_t>(o_.block_cols));
    put(out, static_cast<std::uint64_t>(tensors_.size()));
    for (const Tensor& t : tensors_) {
      put(out, static_cast<std::uint64_t>(t.rows));
      put(out, static_cast<std::uint64_t>(t.cols));
      put(out, static_cast<std::uint32_t>(t.dtype));
      put(out, t.step);
      put(out, static_cast<std::uint64_t>(t.shape.width));
      put(out, t.beta);
      put(out, static_cast<std::uint64_t>(t.error.size()));
      out.write(reinterpret_cast<const char*>(t.error.data()),
                static_cast<std::streamsize>(t.error.size() * sizeof(float)));
    }
    detail::require(static_cast<bool>(out), "SEPARATE save: the stream failed while writing");
  }

  void load(std::istream& in) {
    char m[sizeof magic];
    in.read(m, sizeof m);
    detail::require(in && std::memcmp(m, magic, sizeof m) == 0, "SEPARATE load: not a SEPARATE checkpoint");
    const auto seed = get<std::uint64_t>(in);
    detail::require(get<std::uint32_t>(in) == static_cast<std::uint32_t>(o_.distribution) &&
                        get<std::uint64_t>(in) == o_.block_cols,
                    "SEPARATE load: the checkpoint used another projection distribution or block size");
    const auto count = get<std::uint64_t>(in);
    detail::require(count == tensors_.size(), "SEPARATE load: the checkpoint has ", count, " tensors, ",
                    tensors_.size(), " are registered");
    std::vector<Tensor> restored = tensors_;
    for (Tensor& t : restored) {
      const auto rows = get<std::uint64_t>(in), cols = get<std::uint64_t>(in);
      const auto dt = get<std::uint32_t>(in);
      detail::require(rows == t.rows && cols == t.cols && dt == static_cast<std::uint32_t>(t.dtype),
                      "SEPARATE load: tensor '", t.name, "' is ", t.rows, " x ", t.cols, " ", name_of(t.dtype),
                      " here but ", rows, " x ", cols, " in the checkpoint");
      t.step = get<std::uint32_t>(in);
      // G-SEPARATE moves the width within [min_width, max_width] and beta within [0, 1]; nothing else is a
      // state this tensor can have been saved in.
      const auto width = get<std::uint64_t>(in);
      const std::size_t lo = std::min(t.min_width, t.shape.width), hi = std::max(t.max_width, t.shape.width);
      detail::require(t.compressed ? width >= lo && width <= hi : width == t.shape.width, "SEPARATE load: tensor '",
                      t.name, "' has width ", width, " in the checkpoint; allowed here: ",
                      t.compressed ? detail::concat(lo, " .. ", hi) : detail::concat(t.shape.width, " (uncompressed)"));
      t.shape.width = static_cast<std::size_t>(width);
      t.beta = get<double>(in);
      detail::require(t.beta >= 0 && t.beta <= 1, "SEPARATE load: tensor '", t.name, "' has beta ", t.beta,
                      " in the checkpoint; allowed: [0, 1]");
      const auto errors = get<std::uint64_t>(in);
      detail::require(errors == t.error.size(), "SEPARATE load: tensor '", t.name, "' has ", errors,
                      " error values in the checkpoint, ", t.error.size(), " here (error feedback on both sides?)");
      in.read(reinterpret_cast<char*>(t.error.data()), static_cast<std::streamsize>(t.error.size() * sizeof(float)));
      detail::require(static_cast<bool>(in), "SEPARATE load: the checkpoint is truncated");
    }
    o_.seed = seed;
    tensors_ = std::move(restored);
  }

 private:
  static constexpr char magic[16] = {'p', 'a', 'r', 'o', '-', 's', 'e', 'p', 'a', 'r', 'a', 't', 'e', '-', 'v', '1'};

  // The partial sums of the cosine between the estimate and this rank's gradient.
  struct Cosine {
    double dot = 0, estimate = 0, grad = 0;
    void add(float h, float g) {
      dot += static_cast<double>(h) * g;
      estimate += static_cast<double>(h) * h;
      grad += static_cast<double>(g) * g;
    }
    double value() const { return estimate > 0 && grad > 0 ? dot / std::sqrt(estimate * grad) : 0.0; }
  };

  static std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

  // Step 5: the paper's e <- (1 - beta) e + beta (h - h~), or its smoothed reading.
  float next_error(float e, float h, float h_tilde, double beta) const {
    const float b = static_cast<float>(beta);
    return o_.error_rule == ErrorRule::beta_on_residual ? (1.0f - b) * e + b * (h - h_tilde)
                                                        : b * e + (1.0f - b) * (h - h_tilde);
  }

  bool resets(const Tensor& t) const { return o_.reset_every > 0 && t.step % o_.reset_every == 0; }
  // Whether this step of t updates its width and beta (G-SEPARATE's step 6).
  bool adapts(const Tensor& t) const { return o_.adaptive && t.compressed && t.step % o_.adapt_every == 0; }

  StreamKey key(TensorId id) const { return {o_.seed, tensors_[id].step, static_cast<std::uint32_t>(id)}; }

  static std::size_t payload(const Tensor& t) {
    return t.compressed ? t.rows * t.shape.projected_cols() : t.rows * t.cols;
  }

  template <class F>
  static void visit_grad(const Tensor& t, F&& f) {
    switch (t.dtype) {
      case DataType::f16: return f(f16{});
      case DataType::bf16: return f(bf16{});
      default: return f(float{});
    }
  }

  template <class T>
  static void to_f32(const T* in, std::size_t n, float* out) {
    for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<float>(in[k]);
  }

  template <class T>
  static void average(const float* sum, std::size_t count, int n, T* out) {
    for (std::size_t k = 0; k < count; ++k) out[k] = T(sum[k] / static_cast<float>(n));
  }

  // Rows go through the passes in blocks small enough to stay in cache between them.
  static std::size_t rows_per_block(const Tensor& t) { return std::max<std::size_t>(1, block_floats / t.cols); }

  template <class F>
  static void for_row_blocks(const Tensor& t, std::size_t first, std::size_t count, F&& f) {
    const std::size_t block = rows_per_block(t);
    for (std::size_t r = first; r < first + count; r += block) f(r, std::min(block, first + count - r));
  }

  // The all-reduce's work items: rows [r0, r0 + rows) of grads[grad] (a whole plain tensor is one), whose
  // values start at `wire` in the buffer; chunks end after a unit, at a buffer offset.
  struct Unit {
    std::size_t grad, r0, rows, wire;
  };
  struct Chunk {
    std::size_t unit_end, wire_end;
  };

  // One buffer: each tensor's P (rows x w) or its plain values, one after another, made of units (row blocks,
  // or a whole plain tensor); total becomes its length in floats.
  std::vector<Unit> units_of(const std::vector<Gradient>& grads, std::size_t& total) const {
    std::vector<Unit> units;
    total = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor& t = tensors_[grads[i].id];
      if (!t.compressed) {
        units.push_back({i, 0, t.rows, total});
        total += t.rows * t.cols;
        continue;
      }
      const std::size_t block = rows_per_block(t);
      for (std::size_t r = 0; r < t.rows; r += block)
        units.push_back({i, r, std::min(block, t.rows - r), total + r * t.shape.projected_cols()});
      total += t.rows * t.shape.projected_cols();
    }
    return units;
  }

  std::vector<Chunk> chunks_of(const std::vector<Unit>& units, std::size_t total) const {
    const std::size_t target =
        o_.pipeline_chunk_bytes == 0 ? total : std::max<std::size_t>(1, o_.pipeline_chunk_bytes / sizeof(float));
    std::vector<Chunk> chunks;
    std::size_t begin = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const std::size_t end = u + 1 < units.size() ? units[u + 1].wire : total;
      if (end - begin >= target || u + 1 == units.size()) {
        chunks.push_back({u + 1, end});
        begin = end;
      }
    }
    return chunks;
  }

  // This call's R per compressed tensor, and scratch rows for the largest block.
  void prepare(const std::vector<Gradient>& grads) {
    randoms_.resize(grads.size());
    std::size_t floats = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor& t = tensors_[grads[i].id];
      if (!t.compressed) continue;
      generate(o_.distribution, key(grads[i].id), t.shape, randoms_[i]);
      floats = std::max(floats, std::min(rows_per_block(t), t.rows) * t.cols);
    }
    scratch_.resize(floats);
    estimate_.resize(floats);
  }

  // Steps 1-2 for one unit of the all-reduce: its part of the wire.
  void project_unit(const std::vector<Gradient>& grads, const Unit& u, float* wire) {
    const Gradient& g = grads[u.grad];
    const Tensor& t = tensors_[g.id];
    float* p = wire + u.wire;
    if (!t.compressed) {
      visit_grad(t, [&](auto g0) { to_f32(static_cast<const decltype(g0)*>(g.grad), t.rows * t.cols, p); });
      return;
    }
    compression::project(t.shape, randoms_[u.grad].data(), rows_of_h(t, g.grad, u.r0, u.rows), t.cols, u.rows, p,
                         t.shape.projected_cols());
  }

  // Steps 4-5 for one unit of the all-reduce: the estimate into out, the error update, the cosine's sums.
  void finish_unit(const std::vector<Gradient>& grads, const Unit& u, const float* wire, int n, Cosine& cosine) {
    const Gradient& gr = grads[u.grad];
    Tensor& t = tensors_[gr.id];
    const float* p = wire + u.wire;
    visit_grad(t, [&](auto g0) {
      using T = decltype(g0);
      T* out = static_cast<T*>(gr.out);
      if (!t.compressed) return average(p, t.rows * t.cols, n, out);
      const std::size_t first = u.r0 * t.cols;
      emit_rows(t, randoms_[u.grad].data(), p, u.rows, n, static_cast<const T*>(gr.grad) + first, out + first,
                t.error.empty() ? nullptr : t.error.data() + first, cosine);
    });
  }

  // nrows rows of the estimate h~ = P R^T / (n w) from the summed P, written to out. With e (the same
  // rows of the error buffer, the all-reduce form) the error takes in h - h~, h = g + e; where this step
  // adapts, the cosine's sums take in (h~, g).
  template <class T>
  void emit_rows(const Tensor& t, const float* r, const float* p, std::size_t nrows, int n, const T* g, T* out,
                 float* e, Cosine& cosine) {
    compression::reconstruct(t.shape, r, p, t.shape.projected_cols(), nrows, 1.0f / static_cast<float>(n),
                             estimate_.data(), t.cols);
    const bool reset = resets(t), measure = adapts(t);
    for (std::size_t k = 0; k < nrows * t.cols; ++k) {
      const float hk = estimate_[k];
      if (e != nullptr || measure) {
        const float gk = static_cast<float>(g[k]);
        if (e != nullptr) e[k] = reset ? 0.0f : next_error(e[k], gk + e[k], hk, t.beta);
        if (measure) cosine.add(hk, gk);
      }
      out[k] = T(hk);
    }
  }

  // Rows of h = g + e as f32: the gradient itself where it is f32 and there is no error buffer.
  const float* rows_of_h(const Tensor& t, const void* grad, std::size_t r0, std::size_t nr) {
    const std::size_t first = r0 * t.cols, count = nr * t.cols;
    if (t.dtype == DataType::f32 && t.error.empty()) return static_cast<const float*>(grad) + first;
    visit_grad(t, [&](auto g0) { to_f32(static_cast<const decltype(g0)*>(grad) + first, count, scratch_.data()); });
    if (!t.error.empty())
      for (std::size_t k = 0; k < count; ++k) scratch_[k] += t.error[first + k];
    return scratch_.data();
  }

  // Where a step starts (all_reduce, reduce_scatter, project): no step-wise step may be open.
  void require_no_open_step(const char* what) const {
    detail::require(step_.phase == Phase::idle, "SEPARATE ", what, ": a step-wise step is still open (project() ",
                    "needs its reconstruct(), and adapt() where that returned cosines)");
  }

  void validate(const std::vector<Gradient>& grads, const char* what, int n, bool sharded) const {
    std::vector<bool> seen(tensors_.size(), false);
    for (const Gradient& g : grads) {
      detail::require(g.id < tensors_.size(), "SEPARATE ", what, ": tensor id ", g.id, " not registered (",
                      tensors_.size(), " tensors)");
      const Tensor& t = tensors_[g.id];
      detail::require(!seen[g.id], "SEPARATE ", what, ": tensor '", t.name, "' passed twice in one call");
      seen[g.id] = true;
      detail::require(g.grad != nullptr && g.out != nullptr, "SEPARATE ", what, ": tensor '", t.name,
                      "': null gradient or output buffer");
      if (!sharded) continue;
      const std::size_t units = t.compressed ? t.rows : t.rows * t.cols;
      detail::require(units % static_cast<std::size_t>(n) == 0, "SEPARATE reduce_scatter: tensor '", t.name, "' has ",
                      units, t.compressed ? " rows" : " elements", ", not divisible by the ", n,
                      " ranks of the scope; shard counts must be equal");
    }
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
    step_ = {Phase::idle, ids_of(grads), wire_floats, 0};
    complete_step(grads.size());
  }

  // The cosines of the tensors that adapt at this step (adapting_ says which), to be summed over the ranks.
  std::vector<double> adapting_cosines(const std::vector<Gradient>& grads, const std::vector<Cosine>& cosines) {
    adapting_.clear();
    std::vector<double> values;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!adapts(tensors_[grads[i].id])) continue;
      adapting_.push_back(grads[i].id);
      values.push_back(cosines[i].value());
    }
    return values;
  }

  void apply_adaptation(const std::vector<double>& summed_cosines, int ranks) {
    for (std::size_t k = 0; k < adapting_.size(); ++k) {
      Tensor& t = tensors_[adapting_[k]];
      const double c = summed_cosines[k] / ranks;
      const auto grown = static_cast<std::size_t>(1.0 + static_cast<double>(t.shape.width) * (1.0 + c));
      t.shape.width = std::clamp(grown, t.min_width, t.max_width);
      t.beta = std::clamp(t.beta * (1.0 + c), o_.beta_min, o_.beta_max);
    }
    adapting_.clear();
  }

  // The step of step_.ids is done: its traffic, and every tensor's next step.
  void complete_step(std::size_t tensors) {
    traffic_ = {step_.wire_floats * sizeof(float), 0};
    for (std::size_t k = 0; k < tensors; ++k) {
      Tensor& t = tensors_[step_.ids[k]];
      traffic_.dense_bytes += t.rows * t.cols * size_of(t.dtype);
      ++t.step;
    }
    step_.phase = Phase::idle;
  }

  static std::vector<TensorId> ids_of(const std::vector<Gradient>& grads) {
    std::vector<TensorId> ids;
    for (const Gradient& g : grads) ids.push_back(g.id);
    return ids;
  }

  template <class V>
  static void put(std::ostream& out, V v) {
    out.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <class V>
  static V get(std::istream& in) {
    V v{};
    in.read(reinterpret_cast<char*>(&v), sizeof v);
    detail::require(static_cast<bool>(in), "SEPARATE load: the checkpoint is truncated");
    return v;
  }

  static constexpr std::size_t block_floats = 64 * 1024;  // 256 KiB of f32 per row block

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
  std::vector<float> wire_, shard_, scratch_, estimate_;
  std::vector<std::vector<float>> randoms_;
};

}  // namespace paro::compression
