#pragma once
// Random projection of a gradient matrix H (rows x cols, row-major f32) and its reconstruction, through
// BLAS sgemm.
//
// The columns are cut into blocks of block_cols (the last may be narrower); block j is projected onto its
// own width_j random vectors, R_j (b_j x width_j). With one block this is SEPARATE's projection P = H R;
// with several it is the block-diagonal variant, which stays unbiased with about the same variance
// (~ b/width per block) at cols/b times less arithmetic. The R_j lie one after another in one array.
//
//   project:      P[:, o_j : o_j + width_j] = H[:, block j] R_j
//   reconstruct:  H~[:, block j] = scale / width_j * P[:, o_j : o_j + width_j] R_j^T
// so that E[H~] = H when scale = 1 and P is one H's projection.

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "paro/compression/random_stream.hpp"
#include "paro/core/error.hpp"

namespace paro::compression {

// How the columns of a matrix are projected (the rows are the caller's: every function takes nrows).
struct ProjectionShape {
  std::size_t cols = 0;
  std::size_t block_cols = 0;  // == cols: the full projection
  std::size_t width = 0;       // random vectors per full block

  std::size_t blocks() const { return (cols + block_cols - 1) / block_cols; }
  std::size_t block_begin(std::size_t j) const { return j * block_cols; }
  std::size_t block_size(std::size_t j) const { return std::min(block_cols, cols - j * block_cols); }
  // A narrower last block keeps the same ratio: ceil(width * b / block_cols) vectors.
  std::size_t block_width(std::size_t j) const {
    const std::size_t b = block_size(j);
    return b == block_cols ? width : std::max<std::size_t>(1, (width * b + block_cols - 1) / block_cols);
  }
  // Columns of P, and how many random numbers the R_j hold together.
  std::size_t projected_cols() const {
    std::size_t w = 0;
    for (std::size_t j = 0; j < blocks(); ++j) w += block_width(j);
    return w;
  }
  std::size_t random_count() const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < blocks(); ++j) n += block_size(j) * block_width(j);
    return n;
  }
};

// Fills R (random_count() floats): the R_j, each b_j x width_j row-major.
inline void generate(Distribution d, const StreamKey& key, const ProjectionShape& s, std::vector<float>& r) {
  r.resize(s.random_count());
  fill(d, key, 0, r.data(), r.size());
}

// P (nrows x projected_cols, leading dimension ldp) from nrows rows of H (leading dimension ldh).
inline void project(const ProjectionShape& s, const float* r, const float* h, std::size_t ldh, std::size_t nrows,
                    float* p, std::size_t ldp) {
  if (nrows == 0) return;
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

// nrows rows of H~ (leading dimension ldh) from P.
inline void reconstruct(const ProjectionShape& s, const float* r, const float* p, std::size_t ldp, std::size_t nrows,
                        float scale, float* h, std::size_t ldh) {
  if (nrows == 0) return;
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

}  // namespace paro::compression
