#pragma once
// SEPARATE's shared-seed random numbers generated on the GPU: the host's Philox4x32-10 streams
// (paro/compression/random_stream.hpp), the same functions compiled for the device, so R never crosses the
// PCIe bus. The Philox bits are the host's; Gaussian values may differ from the host's in their last bits
// (the device's logf and sincospif), which is harmless as long as every rank generates R on a GPU.
// Needs nvcc.

#if !defined(__CUDACC__)
#error \
    "paro/compression/gpu/random.cuh contains CUDA kernels: compile this file with nvcc (a .cu file or LANGUAGE CUDA)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "paro/compression/random_stream.hpp"
#include "paro/core/error.hpp"
#include "paro/cuda/kernels.cuh"
#include "paro/cuda/runtime.hpp"

namespace paro::compression::gpu {

namespace kernels {

// One thread per block of the stream: elements [first, first + n) of it, written to out[0, n).
__global__ void fill_stream(Distribution d, StreamKey key, std::uint64_t first, float* out, std::size_t n) {
  const std::size_t per = stream_detail::values_per_block(d);
  const std::uint64_t first_block = first / per, end_block = (first + n + per - 1) / per;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float values[128];
  for (std::uint64_t block = first_block + static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       block < end_block; block += stride) {
    stream_detail::block_values(d, key, block, values);
    const std::uint64_t begin = block * per;
    for (std::size_t j = 0; j < per; ++j) {
      const std::uint64_t i = begin + j;
      if (i >= first && i < first + n) out[i - first] = values[j];
    }
  }
}

}  // namespace kernels

// Writes elements [first, first + n) of the stream (d, key) to device memory out, enqueued on stream s.
inline void fill_async(Distribution d, const StreamKey& key, std::size_t first, float* out, std::size_t n,
                       cudaStream_t s) {
  if (n == 0) return;
  paro::detail::require(out != nullptr, "cuda::fill_async: the output is null; it must hold ", n, " floats");
  const std::size_t blocks = n / stream_detail::values_per_block(d) + 2;
  kernels::fill_stream<<<paro::cuda::launch_detail::blocks_for(blocks), paro::cuda::launch_detail::threads_per_block, 0,
                         s>>>(d, key, first, out, n);
  paro::cuda::launch_detail::check_launch("random stream", DataType::f32, n);
}

}  // namespace paro::compression::gpu
