#pragma once
// SEPARATE's per-tensor state and math, without communication and without a projection: a registered
// tensor (its shape, width, beta, step), the checks of a call's gradients, the error rule, the cosine's sums
// and G-SEPARATE's update of width and beta (the steps listed in separate.hpp). The host compressor
// (separate.hpp) and the GPU's (paro/compression/gpu/separate.cuh) share it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "paro/compression/projection_shape.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/compression/separate_options.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/host_device.hpp"

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
  std::vector<float> error;  // rows * cols when compressed with error feedback (the GPU's: in device memory)
};

// One tensor's part of a call (Separate::Gradient): out may equal grad. all_reduce: out holds rows x cols;
// reduce_scatter: out holds this rank's rows / n rows.
struct SeparateGradient {
  std::size_t id;  // a Separate::TensorId
  const void* grad;
  void* out;
};

// What one call moved: the all-reduced payload and the gradients' own size.
struct Traffic {
  std::size_t wire_bytes = 0;
  std::size_t dense_bytes = 0;
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
PARO_HOST_DEVICE inline float next_error(ErrorRule rule, float e, float h, float h_tilde, double beta) {
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

// A tensor as add() registers it: its projection at the options' ratio and block size, the clamps of an
// adaptive width, and why it goes uncompressed (a vector, too small, or no gain at this ratio). The error
// buffer is the caller's to allocate (host or device memory).
inline SeparateTensor make_tensor(const SeparateOptions& o, std::string name, std::size_t rows, std::size_t cols,
                                  DataType dt) {
  detail::require(rows >= 1 && cols >= 1, "SEPARATE tensor '", name, "': ", rows, " x ", cols,
                  " has no elements; rows and cols must be >= 1");
  detail::require(dt == DataType::f32 || dt == DataType::f16 || dt == DataType::bf16, "SEPARATE tensor '", name,
                  "': type ", name_of(dt), " not supported; allowed: f32 f16 bf16");
  SeparateTensor t;
  t.name = std::move(name);
  t.rows = rows;
  t.cols = cols;
  t.dtype = dt;
  const std::size_t b = o.block_cols == 0 ? cols : std::min(o.block_cols, cols);
  t.shape = {cols, b, ceil_div(b, static_cast<std::size_t>(o.ratio))};
  t.min_width = std::max<std::size_t>(1, ceil_div(b, static_cast<std::size_t>(o.highest_ratio())));
  t.max_width = std::min(b - (b > 1 ? 1 : 0), ceil_div(b, static_cast<std::size_t>(o.lowest_ratio())));
  t.beta = o.beta;
  if (rows == 1)
    t.plain_reason = "a vector";
  else if (rows * cols < o.min_elements)
    t.plain_reason = detail::concat(rows * cols, " elements < min_elements ", o.min_elements);
  else if (t.shape.width >= b)
    t.plain_reason = detail::concat("blocks of ", b, " columns gain nothing at ratio ", o.ratio);
  t.compressed = t.plain_reason.empty();
  return t;
}

// A call's gradients: registered ids, each at most once, no null buffer; sharded (reduce-scatter): shard
// counts that the scope's n ranks divide.
inline void validate_gradients(const std::vector<SeparateTensor>& tensors, const std::vector<SeparateGradient>& grads,
                               const char* what, int n, bool sharded) {
  std::vector<bool> seen(tensors.size(), false);
  for (const SeparateGradient& g : grads) {
    detail::require(g.id < tensors.size(), "SEPARATE ", what, ": tensor id ", g.id, " not registered (", tensors.size(),
                    " tensors)");
    const SeparateTensor& t = tensors[g.id];
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

// A registered tensor by id, or an error naming how many there are.
inline const SeparateTensor& tensor_at(const std::vector<SeparateTensor>& tensors, std::size_t id) {
  detail::require(id < tensors.size(), "SEPARATE tensor id ", id, ": only ", tensors.size(), " registered");
  return tensors[id];
}

// The tensors a call passes, in its order.
inline std::vector<std::size_t> ids_of(const std::vector<SeparateGradient>& grads) {
  std::vector<std::size_t> ids;
  for (const SeparateGradient& g : grads) ids.push_back(g.id);
  return ids;
}

// Step 6 for the tensors `ids` that adapt at this step, from their cosines summed over `ranks` ranks (the
// same bits on every rank, so every rank takes the same width and beta).
inline void adapt_all(const SeparateOptions& o, std::vector<SeparateTensor>& tensors,
                      const std::vector<std::size_t>& ids, const std::vector<double>& summed_cosines, int ranks) {
  for (std::size_t k = 0; k < ids.size(); ++k) adapt(o, tensors[ids[k]], summed_cosines[k] / ranks);
}

// A call over the tensors `ids` is done: each moves to its next step; returns what the call moved.
inline Traffic complete_step(std::vector<SeparateTensor>& tensors, const std::vector<std::size_t>& ids,
                             std::size_t wire_floats) {
  Traffic traffic{wire_floats * sizeof(float), 0};
  for (std::size_t id : ids) {
    SeparateTensor& t = tensors[id];
    traffic.dense_bytes += t.rows * t.cols * size_of(t.dtype);
    ++t.step;
  }
  return traffic;
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

}  // namespace separate_detail
}  // namespace paro::compression
