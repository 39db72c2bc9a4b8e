#pragma once
// SEPARATE's projection on the GPU by cuBLAS: the host's project()/reconstruct() (paro/compression/
// projection.hpp) on device memory, with R in the random stream's order (the R_j one after another, each
// b_j x width_j row-major). cuBLAS is column-major, so each row-major product is computed transposed:
//   project:      P_j^T = R_j^T H_j^T              (w x nrows)
//   reconstruct:  H~_j^T = scale / w  R_j P_j^T     (b x nrows)
// Equal blocks go as one strided batched GEMM, a narrower last block as one more. FP32 throughout: the
// handle keeps cuBLAS's default math mode (no TF32), so the estimate is the host's up to summation order.
// Link CUDA::cublas; needs nvcc.

#if !defined(__CUDACC__)
#error "paro/compression/gpu/projection.cuh is CUDA code: compile this file with nvcc (a .cu file or LANGUAGE CUDA)"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <limits>

#include "paro/compression/projection_shape.hpp"
#include "paro/core/error.hpp"
#include "paro/cuda/runtime.hpp"

namespace paro::compression::gpu {

// Throws paro::BackendError "<what> failed: <cuBLAS's name and text>" unless rc is CUBLAS_STATUS_SUCCESS.
inline void check_cublas(cublasStatus_t rc, const char* what) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    throw BackendError(
        paro::detail::concat(what, " failed: ", cublasGetStatusName(rc), ": ", cublasGetStatusString(rc)));
}

// A cuBLAS handle on the current device whose work goes to one stream.
class Blas {
 public:
  explicit Blas(cudaStream_t stream) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas() { cublasDestroy(handle_); }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

namespace projection_detail {

inline int as_int(std::size_t v, const char* what) {
  paro::detail::require(v <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "cuBLAS projection: ", what,
                        " ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

// Runs f(first_block, blocks, b, w) for the runs of equal blocks: all full blocks, then a narrower last one.
template <class F>
void for_equal_blocks(const ProjectionShape& s, F&& f) {
  const std::size_t blocks = s.blocks();
  const std::size_t last = blocks - 1;
  const bool narrow_last = s.block_size(last) != s.block_cols;
  const std::size_t full = narrow_last ? last : blocks;
  if (full > 0) f(std::size_t{0}, full, s.block_cols, s.width);
  if (narrow_last) f(last, std::size_t{1}, s.block_size(last), s.block_width(last));
}

}  // namespace projection_detail

// P (nrows x projected_cols, leading dimension ldp) from nrows rows of H (leading dimension ldh); r: R in
// the stream's order; all device memory, enqueued on the handle's stream.
inline void project(const Blas& blas, const ProjectionShape& s, const float* r, const float* h, std::size_t ldh,
                    std::size_t nrows, float* p, std::size_t ldp) {
  using projection_detail::as_int;
  if (nrows == 0) return;
  const float one = 1.0f, zero = 0.0f;
  projection_detail::for_equal_blocks(s, [&](std::size_t j0, std::size_t count, std::size_t b, std::size_t w) {
    const float* rj = r + j0 * s.block_cols * s.width;  // the full blocks before j0 hold block_cols x width each
    check_cublas(cublasSgemmStridedBatched(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, as_int(w, "width"),
                                           as_int(nrows, "rows"), as_int(b, "block"), &one, rj, as_int(w, "width"),
                                           static_cast<long long>(b * w), h + s.block_begin(j0), as_int(ldh, "ldh"),
                                           static_cast<long long>(s.block_cols), &zero, p + j0 * s.width,
                                           as_int(ldp, "ldp"), static_cast<long long>(w), as_int(count, "blocks")),
                 "cublasSgemmStridedBatched (projection)");
  });
}

// nrows rows of H~ = scale / w_j P_j R_j^T (leading dimension ldh) from P.
inline void reconstruct(const Blas& blas, const ProjectionShape& s, const float* r, const float* p, std::size_t ldp,
                        std::size_t nrows, float scale, float* h, std::size_t ldh) {
  using projection_detail::as_int;
  if (nrows == 0) return;
  const float zero = 0.0f;
  projection_detail::for_equal_blocks(s, [&](std::size_t j0, std::size_t count, std::size_t b, std::size_t w) {
    const float alpha = scale / static_cast<float>(w);
    const float* rj = r + j0 * s.block_cols * s.width;
    check_cublas(cublasSgemmStridedBatched(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, as_int(b, "block"),
                                           as_int(nrows, "rows"), as_int(w, "width"), &alpha, rj, as_int(w, "width"),
                                           static_cast<long long>(b * w), p + j0 * s.width, as_int(ldp, "ldp"),
                                           static_cast<long long>(w), &zero, h + s.block_begin(j0), as_int(ldh, "ldh"),
                                           static_cast<long long>(s.block_cols), as_int(count, "blocks")),
                 "cublasSgemmStridedBatched (reconstruction)");
  });
}

}  // namespace paro::compression::gpu
