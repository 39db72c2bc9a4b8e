#pragma once
// paro's CUDA kernels: elementwise reduce (dst = a op b) and divide for every DataType and ReduceOp, and
// pack/unpack of strided shards. They apply the host's element functions (paro/core/reduce_op.hpp,
// half.hpp; marked PARO_HOST_DEVICE), so device results are bit for bit the host's: integers wrap,
// f16/bf16 combine in float and round to nearest even, min/max propagate NaN, every NaN is the canonical
// one, avg divides once at the end. reduce moves 16-byte vectors where the pointers allow.
// Every launch is checked (cudaGetLastError) and a failure becomes paro::Error naming the kernel.
// Needs nvcc (include from a .cu file or a source compiled as CUDA).

#if !defined(__CUDACC__)
#error "paro/cuda/kernels.cuh contains CUDA kernels: compile this file with nvcc (a .cu file or LANGUAGE CUDA)"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/cuda/runtime.hpp"

namespace paro::cuda {

namespace kernels {

// detail::combine, with f16/bf16 converted by cvt instructions instead of half.hpp's integer code (some
// 20 instructions a conversion, three conversions an element). They give the same bits: f16/bf16 -> float
// is exact, float -> f16/bf16 rounds to nearest even (cuda_fp16.h's and cuda_bf16.h's host versions match
// half.hpp on every float). Which NaN cvt gives is not documented, so a NaN is made canonical here.
template <ReduceOp Op, class T>
__device__ T element(T a, T b) {
  if constexpr (std::is_same_v<T, f16>) {
    const float r =
        paro::detail::arithmetic(Op, __half2float(__ushort_as_half(a.bits)), __half2float(__ushort_as_half(b.bits)));
    return f16::from_bits(r != r ? paro::detail::half_nan_bits : __half_as_ushort(__float2half_rn(r)));
  } else if constexpr (std::is_same_v<T, bf16>) {
    const float r = paro::detail::arithmetic(Op, __bfloat162float(__ushort_as_bfloat16(a.bits)),
                                             __bfloat162float(__ushort_as_bfloat16(b.bits)));
    return bf16::from_bits(r != r ? paro::detail::bfloat_nan_bits : __bfloat16_as_ushort(__float2bfloat16_rn(r)));
  } else {
    return paro::detail::combine(Op, a, b);
  }
}

// Grid-stride loops: a bounded grid covers any count, including more than 2^31 elements.
// Elements [head, head + vectors * 16 / sizeof(T)) go as 16-byte loads and stores (the launcher has made
// them 16-byte aligned in all three buffers), the others (the head and the tail) one by one.
template <class T, ReduceOp Op>
__global__ void reduce(T* dst, const T* a, const T* b, std::size_t count, std::size_t head, std::size_t vectors) {
  constexpr std::size_t per_vector = sizeof(uint4) / sizeof(T);
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* av = reinterpret_cast<const uint4*>(a + head);
  const auto* bv = reinterpret_cast<const uint4*>(b + head);
  auto* dv = reinterpret_cast<uint4*>(dst + head);
  for (std::size_t v = first; v < vectors; v += stride) {
    const uint4 x = av[v], y = bv[v];
    T xs[per_vector], ys[per_vector];
    std::memcpy(xs, &x, sizeof x);
    std::memcpy(ys, &y, sizeof y);
#pragma unroll
    for (std::size_t k = 0; k < per_vector; ++k) xs[k] = element<Op>(xs[k], ys[k]);
    uint4 r;
    std::memcpy(&r, xs, sizeof r);
    dv[v] = r;
  }
  const std::size_t body_end = head + vectors * per_vector, scalars = head + (count - body_end);
  for (std::size_t j = first; j < scalars; j += stride) {
    const std::size_t i = j < head ? j : body_end + (j - head);
    dst[i] = element<Op>(a[i], b[i]);
  }
}

template <class T>
__global__ void divide(T* buf, std::size_t count, int divisor) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    buf[i] = paro::detail::divide(buf[i], divisor);
}

// rows blocks of row_bytes each, `src_pitch` apart in the source and `dst_pitch` apart in the
// destination, copied in 4-byte words where everything is aligned, else bytewise.
template <class Word>
__global__ void copy_rows(char* dst, std::size_t dst_pitch, const char* src, std::size_t src_pitch,
                          std::size_t row_bytes, std::size_t rows) {
  const std::size_t words = row_bytes / sizeof(Word), total = words * rows;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::size_t row = i / words, word = i % words;
    reinterpret_cast<Word*>(dst + row * dst_pitch)[word] = reinterpret_cast<const Word*>(src + row * src_pitch)[word];
  }
}

}  // namespace kernels

namespace launch_detail {

constexpr unsigned threads_per_block = 256;

inline unsigned blocks_for(std::size_t work) {
  // Enough blocks to fill an H100/H200 several times over; the grid-stride loop does the rest.
  const std::size_t wanted = (work + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, 4096));
}

inline void check_launch(const char* kernel, DataType dt, std::size_t count) {
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    throw BackendError(paro::detail::concat("launching the ", kernel, " kernel (", name_of(dt), ", ", count,
                                            " elements) failed: ", cudaGetErrorName(rc), ": ", cudaGetErrorString(rc)));
}

template <class T>
void launch_reduce(T* dst, const T* a, const T* b, std::size_t count, ReduceOp op, cudaStream_t s) {
  // 16-byte vectors where the three pointers lie equally far from a 16-byte boundary (cudaMalloc'd buffers
  // at equal offsets): the elements before the boundary go one by one. Otherwise every element does.
  constexpr std::size_t per_vector = sizeof(uint4) / sizeof(T);
  const auto offset = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % sizeof(uint4); };
  const std::size_t gap = (sizeof(uint4) - offset(dst)) % sizeof(uint4);
  std::size_t head = count, vectors = 0;
  if (offset(a) == offset(dst) && offset(b) == offset(dst) && gap % sizeof(T) == 0) {
    head = std::min(count, gap / sizeof(T));
    vectors = (count - head) / per_vector;
  }
  const unsigned blocks = blocks_for(vectors + (count - vectors * per_vector));
  const auto run = [&](auto op_constant) {
    kernels::reduce<T, decltype(op_constant)::value>
        <<<blocks, threads_per_block, 0, s>>>(dst, a, b, count, head, vectors);
  };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return run(std::integral_constant<ReduceOp, ReduceOp::sum>{});
    case ReduceOp::prod: return run(std::integral_constant<ReduceOp, ReduceOp::prod>{});
    case ReduceOp::min: return run(std::integral_constant<ReduceOp, ReduceOp::min>{});
    case ReduceOp::max: return run(std::integral_constant<ReduceOp, ReduceOp::max>{});
  }
}

}  // namespace launch_detail

// dst[i] = a[i] op b[i] on device memory, enqueued on stream s; dst may be a or b (avg combines as sum).
inline void reduce_async(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op,
                         cudaStream_t s) {
  validate(dt);
  validate(op);
  if (count == 0) return;
  visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_detail::launch_reduce(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count, op,
                                 s);
  });
  launch_detail::check_launch("reduce", dt, count);
}

// buf[i] /= divisor in the element type (the last step of avg; integers truncate toward zero).
inline void divide_async(void* buf, std::size_t count, DataType dt, int divisor, cudaStream_t s) {
  validate(dt);
  paro::detail::require(divisor != 0, "divide: the divisor is 0");
  if (count == 0) return;
  visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::divide<T><<<launch_detail::blocks_for(count), launch_detail::threads_per_block, 0, s>>>(
        static_cast<T*>(buf), count, divisor);
  });
  launch_detail::check_launch("divide", dt, count);
}

// Gathers `shards` strided shards of shard_bytes (shard k at src + k * src_stride) into one contiguous
// buffer (pack), or scatters them back (unpack: dst_stride apart); the rearrangement copies of
// hierarchical schedules, one launch instead of one cudaMemcpy per shard.
inline void copy_strided_async(void* dst, std::size_t dst_stride, const void* src, std::size_t src_stride,
                               std::size_t shard_bytes, std::size_t shards, cudaStream_t s) {
  if (shard_bytes == 0 || shards == 0) return;
  auto* d = static_cast<char*>(dst);
  const auto* c = static_cast<const char*>(src);
  const auto aligned = [](std::uintptr_t x) { return x % 4 == 0; };
  if (aligned(reinterpret_cast<std::uintptr_t>(d)) && aligned(reinterpret_cast<std::uintptr_t>(c)) &&
      aligned(dst_stride) && aligned(src_stride) && aligned(shard_bytes)) {
    kernels::copy_rows<std::uint32_t>
        <<<launch_detail::blocks_for(shard_bytes / 4 * shards), launch_detail::threads_per_block, 0, s>>>(
            d, dst_stride, c, src_stride, shard_bytes, shards);
  } else {
    kernels::copy_rows<std::uint8_t>
        <<<launch_detail::blocks_for(shard_bytes * shards), launch_detail::threads_per_block, 0, s>>>(
            d, dst_stride, c, src_stride, shard_bytes, shards);
  }
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    throw BackendError(paro::detail::concat("launching the strided copy kernel (", shards, " shards of ", shard_bytes,
                                            " bytes) failed: ", cudaGetErrorName(rc), ": ", cudaGetErrorString(rc)));
}

inline void pack_async(void* dst, const void* src, std::size_t src_stride, std::size_t shard_bytes, std::size_t shards,
                       cudaStream_t s) {
  copy_strided_async(dst, shard_bytes, src, src_stride, shard_bytes, shards, s);
}

inline void unpack_async(void* dst, std::size_t dst_stride, const void* src, std::size_t shard_bytes,
                         std::size_t shards, cudaStream_t s) {
  copy_strided_async(dst, dst_stride, src, shard_bytes, shard_bytes, shards, s);
}

}  // namespace paro::cuda
