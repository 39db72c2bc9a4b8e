#pragma once
// How a gradient matrix's columns are cut into blocks and how many random vectors project each block: the
// shape that the host projection (projection.hpp) and the GPU's (paro/compression/gpu/projection.cuh) share.

#include <algorithm>
#include <cstddef>

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

}  // namespace paro::compression
