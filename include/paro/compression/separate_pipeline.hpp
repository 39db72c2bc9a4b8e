#pragma once
// SEPARATE's host compressor's pieces: this call's R and scratch rows (Workspace), the buffer cut into units
// (row blocks) and chunks (the pieces all-reduced one after another, overlapped with the projection and
// the reconstruction), a unit's projection and its reconstruction.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "paro/compression/projection.hpp"
#include "paro/compression/separate_math.hpp"
#include "paro/compression/separate_options.hpp"

namespace paro::compression::separate_detail {

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
inline std::vector<Unit> units_of(const std::vector<SeparateTensor>& tensors,
                                  const std::vector<SeparateGradient>& grads, std::size_t& total) {
  std::vector<Unit> units;
  total = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const SeparateTensor& t = tensors[grads[i].id];
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

// Chunks of about pipeline_chunk_bytes (0: one chunk).
inline std::vector<Chunk> chunks_of(const SeparateOptions& o, const std::vector<Unit>& units, std::size_t total) {
  const std::size_t target =
      o.pipeline_chunk_bytes == 0 ? total : std::max<std::size_t>(1, o.pipeline_chunk_bytes / sizeof(float));
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

// Steps 1-2 for one unit of the all-reduce: its part of the wire.
inline void project_unit(const std::vector<SeparateTensor>& tensors, Workspace& work,
                         const std::vector<SeparateGradient>& grads, const Unit& u, float* wire) {
  const SeparateGradient& g = grads[u.grad];
  const SeparateTensor& t = tensors[g.id];
  float* p = wire + u.wire;
  if (!t.compressed) {
    visit_grad(t, [&](auto g0) { to_f32(static_cast<const decltype(g0)*>(g.grad), t.rows * t.cols, p); });
    return;
  }
  compression::project(t.shape, work.randoms[u.grad], work.rows_of_h(t, g.grad, u.r0, u.rows), t.cols, u.rows, p,
                       t.shape.projected_cols());
}

// Steps 4-5 for one unit of the all-reduce: the estimate into out, the error update, the cosine's sums.
inline void finish_unit(const SeparateOptions& o, std::vector<SeparateTensor>& tensors, Workspace& work,
                        const std::vector<SeparateGradient>& grads, const Unit& u, const float* wire, int n,
                        Cosine& cosine) {
  const SeparateGradient& gr = grads[u.grad];
  SeparateTensor& t = tensors[gr.id];
  const float* p = wire + u.wire;
  visit_grad(t, [&](auto g0) {
    using T = decltype(g0);
    T* out = static_cast<T*>(gr.out);
    if (!t.compressed) return average(p, t.rows * t.cols, n, out);
    const std::size_t first = u.r0 * t.cols;
    work.emit_rows(o, t, work.randoms[u.grad], p, u.rows, n, static_cast<const T*>(gr.grad) + first, out + first,
                   t.error.empty() ? nullptr : t.error.data() + first, cosine);
  });
}

}  // namespace paro::compression::separate_detail
