#pragma once
// Random projection of a gradient matrix H (rows x cols, row-major f32) and its reconstruction.
//
// The columns are cut into blocks of block_cols (the last may be narrower); block j is projected onto its
// own width_j random vectors, R_j (b_j x width_j). With one block this is SEPARATE's projection P = H R;
// with several it is the block-diagonal variant, which stays unbiased with about the same variance
// (~ b/width per block) at cols/b times less arithmetic.
//
//   project:      P[:, o_j : o_j + width_j] = H[:, block j] R_j
//   reconstruct:  H~[:, block j] = scale / width_j * P[:, o_j : o_j + width_j] R_j^T
// so that E[H~] = H when scale = 1 and P is one H's projection.
//
// Wide blocks go through BLAS sgemm. Narrow ones (at most loop_max_width vectors) go through plain loops
// over R stored vector by vector: for them BLAS spends more time packing its operands than multiplying
// (docs/compression.md, "Cost"), while the loops read each row once, from cache.

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "paro/compression/projection_shape.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/core/error.hpp"

namespace paro::compression {

// Blocks of at most this many vectors are projected by the loops, wider ones by sgemm.
inline constexpr std::size_t loop_max_width = 4;

inline bool by_loops(const ProjectionShape& s) { return s.width <= loop_max_width; }

// One call's R: the R_j one after another, each b_j x width_j row-major (the random stream's order), and,
// for shapes the loops project, the same values vector by vector (each R_j^T, width_j x b_j).
struct RandomMatrix {
  std::vector<float> values;
  std::vector<float> by_vector;
};

inline void generate(Distribution d, const StreamKey& key, const ProjectionShape& s, RandomMatrix& r) {
  r.values.resize(s.random_count());
  fill(d, key, 0, r.values.data(), r.values.size());
  if (!by_loops(s)) {
    r.by_vector.clear();
    return;
  }
  r.by_vector.resize(r.values.size());
  std::size_t at = 0;
  for (std::size_t j = 0; j < s.blocks(); ++j) {
    const std::size_t b = s.block_size(j), w = s.block_width(j);
    for (std::size_t c = 0; c < b; ++c)
      for (std::size_t k = 0; k < w; ++k) r.by_vector[at + k * b + c] = r.values[at + c * w + k];
    at += b * w;
  }
}

namespace projection_detail {

// Eight independent partial sums, which compilers keep in SIMD lanes.
inline float dot(const float* a, const float* b, std::size_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
  float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

inline void project_by_loops(const ProjectionShape& s, const float* r, const float* h, std::size_t ldh,
                             std::size_t nrows, float* p, std::size_t ldp) {
  for (std::size_t row = 0; row < nrows; ++row) {
    const float* v = r;
    std::size_t p_col = 0;
    for (std::size_t j = 0; j < s.blocks(); ++j) {
      const std::size_t b = s.block_size(j), w = s.block_width(j);
      const float* hj = h + row * ldh + s.block_begin(j);
      for (std::size_t k = 0; k < w; ++k) p[row * ldp + p_col + k] = dot(hj, v + k * b, b);
      v += b * w;
      p_col += w;
    }
  }
}

inline void reconstruct_by_loops(const ProjectionShape& s, const float* r, const float* p, std::size_t ldp,
                                 std::size_t nrows, float scale, float* h, std::size_t ldh) {
  for (std::size_t row = 0; row < nrows; ++row) {
    const float* v = r;
    std::size_t p_col = 0;
    for (std::size_t j = 0; j < s.blocks(); ++j) {
      const std::size_t b = s.block_size(j), w = s.block_width(j);
      const float f = scale / static_cast<float>(w);
      float* out = h + row * ldh + s.block_begin(j);
      const float* pj = p + row * ldp + p_col;
      const float p0 = pj[0] * f;
      for (std::size_t c = 0; c < b; ++c) out[c] = p0 * v[c];
      for (std::size_t k = 1; k < w; ++k) {
        const float pk = pj[k] * f;
        const float* vk = v + k * b;
        for (std::size_t c = 0; c < b; ++c) out[c] += pk * vk[c];
      }
      v += b * w;
      p_col += w;
    }
  }
}

// The same arithmetic through BLAS, one sgemm per block, on R in the stream's order (RandomMatrix::values).
inline void project_by_blas(const ProjectionShape& s, const float* r, const float* h, std::size_t ldh,
                            std::size_t nrows, float* p, std::size_t ldp) {
  std::size_t p_col = 0;
  for (std::size_t j = 0; j < s.blocks(); ++j) {
    const std::size_t b = s.block_size(j), w = s.block_width(j);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nrows), static_cast<int>(w),
                static_cast<int>(b), 1.0f, h + s.block_begin(j), static_cast<int>(ldh), r, static_cast<int>(w), 0.0f,
                p + p_col, static_cast<int>(ldp));
    r += b * w;
    p_col += w;
  }
}

inline void reconstruct_by_blas(const ProjectionShape& s, const float* r, const float* p, std::size_t ldp,
                                std::size_t nrows, float scale, float* h, std::size_t ldh) {
  std::size_t p_col = 0;
  for (std::size_t j = 0; j < s.blocks(); ++j) {
    const std::size_t b = s.block_size(j), w = s.block_width(j);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nrows), static_cast<int>(b),
                static_cast<int>(w), scale / static_cast<float>(w), p + p_col, static_cast<int>(ldp), r,
                static_cast<int>(w), 0.0f, h + s.block_begin(j), static_cast<int>(ldh));
    r += b * w;
    p_col += w;
  }
}

}  // namespace projection_detail

// P (nrows x projected_cols, leading dimension ldp) from nrows rows of H (leading dimension ldh).
inline void project(const ProjectionShape& s, const RandomMatrix& rm, const float* h, std::size_t ldh,
                    std::size_t nrows, float* p, std::size_t ldp) {
  if (nrows == 0) return;
  if (by_loops(s)) return projection_detail::project_by_loops(s, rm.by_vector.data(), h, ldh, nrows, p, ldp);
  projection_detail::project_by_blas(s, rm.values.data(), h, ldh, nrows, p, ldp);
}

// nrows rows of H~ (leading dimension ldh) from P.
inline void reconstruct(const ProjectionShape& s, const RandomMatrix& rm, const float* p, std::size_t ldp,
                        std::size_t nrows, float scale, float* h, std::size_t ldh) {
  if (nrows == 0) return;
  if (by_loops(s)) return projection_detail::reconstruct_by_loops(s, rm.by_vector.data(), p, ldp, nrows, scale, h, ldh);
  projection_detail::reconstruct_by_blas(s, rm.values.data(), p, ldp, nrows, scale, h, ldh);
}

}  // namespace paro::compression
