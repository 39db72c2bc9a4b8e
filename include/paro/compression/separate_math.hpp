#pragma once
// SEPARATE's per-tensor math, without communication: a registered tensor's state, the rows h = g + e that
// are projected, the estimate's reconstruction with the error update and the cosine's sums, and G-SEPARATE's
// update of width and beta (the steps listed in separate.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "paro/compression/projection.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/compression/separate_options.hpp"
#include "paro/core/dtype.hpp"

namespace paro::compression {

// A registered gradient tensor and its state (Separate::Tensor).
struct SeparateTensor {
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

// One tensor's part of a call (Separate::Gradient): out may equal grad. all_reduce: out holds rows x cols;
// reduce_scatter: out holds this rank's rows / n rows.
struct SeparateGradient {
  std::size_t id;  // a Separate::TensorId
  const void* grad;
  void* out;
};

namespace separate_detail {

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

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Step 5: the paper's e <- (1 - beta) e + beta (h - h~), or its smoothed reading.
inline float next_error(ErrorRule rule, float e, float h, float h_tilde, double beta) {
  const float b = static_cast<float>(beta);
  return rule == ErrorRule::beta_on_residual ? (1.0f - b) * e + b * (h - h_tilde) : b * e + (1.0f - b) * (h - h_tilde);
}

inline bool resets(const SeparateOptions& o, const SeparateTensor& t) {
  return o.reset_every > 0 && t.step % o.reset_every == 0;
}
// Whether this step of t updates its width and beta (G-SEPARATE's step 6).
inline bool adapts(const SeparateOptions& o, const SeparateTensor& t) {
  return o.adaptive && t.compressed && t.step % o.adapt_every == 0;
}

// Step 6 for one tensor, c: the ranks' mean cosine.
inline void adapt(const SeparateOptions& o, SeparateTensor& t, double c) {
  const auto grown = static_cast<std::size_t>(1.0 + static_cast<double>(t.shape.width) * (1.0 + c));
  t.shape.width = std::clamp(grown, t.min_width, t.max_width);
  t.beta = std::clamp(t.beta * (1.0 + c), o.beta_min, o.beta_max);
}

// The stream of tensor `id`'s R at its current step.
inline StreamKey key(const SeparateOptions& o, const SeparateTensor& t, std::size_t id) {
  return {o.seed, t.step, static_cast<std::uint32_t>(id)};
}

inline std::size_t payload(const SeparateTensor& t) {
  return t.compressed ? t.rows * t.shape.projected_cols() : t.rows * t.cols;
}

template <class F>
void visit_grad(const SeparateTensor& t, F&& f) {
  switch (t.dtype) {
    case DataType::f16: return f(f16{});
    case DataType::bf16: return f(bf16{});
    default: return f(float{});
  }
}

template <class T>
void to_f32(const T* in, std::size_t n, float* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<float>(in[k]);
}

template <class T>
void average(const float* sum, std::size_t count, int n, T* out) {
  for (std::size_t k = 0; k < count; ++k) out[k] = T(sum[k] / static_cast<float>(n));
}

inline constexpr std::size_t block_floats = 64 * 1024;  // 256 KiB of f32 per row block

// Rows go through the passes in blocks small enough to stay in cache between them.
inline std::size_t rows_per_block(const SeparateTensor& t) { return std::max<std::size_t>(1, block_floats / t.cols); }

template <class F>
void for_row_blocks(const SeparateTensor& t, std::size_t first, std::size_t count, F&& f) {
  const std::size_t block = rows_per_block(t);
  for (std::size_t r = first; r < first + count; r += block) f(r, std::min(block, first + count - r));
}

// One call's R per gradient of the call (empty for a plain tensor) and the scratch rows of a row block.
struct Workspace {
  std::vector<RandomMatrix> randoms;
  std::vector<float> scratch, estimate;

  // This call's R per compressed tensor, and scratch rows for the largest block.
  void prepare(const SeparateOptions& o, const std::vector<SeparateTensor>& tensors,
               const std::vector<SeparateGradient>& grads) {
    randoms.resize(grads.size());
    std::size_t floats = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const SeparateTensor& t = tensors[grads[i].id];
      if (!t.compressed) continue;
      generate(o.distribution, key(o, t, grads[i].id), t.shape, randoms[i]);
      floats = std::max(floats, std::min(rows_per_block(t), t.rows) * t.cols);
    }
    scratch.resize(floats);
    estimate.resize(floats);
  }

  // nrows rows of the estimate h~ = P R^T / (n w) from the summed P, written to out. With e (the same
  // rows of the error buffer, the all-reduce form) the error takes in h - h~, h = g + e; where this step
  // adapts, the cosine's sums take in (h~, g).
  template <class T>
  void emit_rows(const SeparateOptions& o, const SeparateTensor& t, const RandomMatrix& r, const float* p,
                 std::size_t nrows, int n, const T* g, T* out, float* e, Cosine& cosine) {
    compression::reconstruct(t.shape, r, p, t.shape.projected_cols(), nrows, 1.0f / static_cast<float>(n),
                             estimate.data(), t.cols);
    const bool reset = resets(o, t), measure = adapts(o, t);
    for (std::size_t k = 0; k < nrows * t.cols; ++k) {
      const float hk = estimate[k];
      if (e != nullptr || measure) {
        const float gk = static_cast<float>(g[k]);
        if (e != nullptr) e[k] = reset ? 0.0f : next_error(o.error_rule, e[k], gk + e[k], hk, t.beta);
        if (measure) cosine.add(hk, gk);
      }
      out[k] = T(hk);
    }
  }

  // Rows of h = g + e as f32: the gradient itself where it is f32 and there is no error buffer.
  const float* rows_of_h(const SeparateTensor& t, const void* grad, std::size_t r0, std::size_t nr) {
    const std::size_t first = r0 * t.cols, count = nr * t.cols;
    if (t.dtype == DataType::f32 && t.error.empty()) return static_cast<const float*>(grad) + first;
    visit_grad(t, [&](auto g0) { to_f32(static_cast<const decltype(g0)*>(grad) + first, count, scratch.data()); });
    if (!t.error.empty())
      for (std::size_t k = 0; k < count; ++k) scratch[k] += t.error[first + k];
    return scratch.data();
  }
};

}  // namespace separate_detail
}  // namespace paro::compression
