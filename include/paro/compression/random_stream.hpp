#pragma once
// Shared-seed random numbers: every rank derives the same projection matrices from (seed, step, tensor)
// with Philox4x32-10 (Random123), a counter-based generator, so no random number is ever sent. Element i
// of a stream is a pure function of the key and i, so any split of the work over threads or ranks gives
// bit-identical values.
//
// The same functions run in CUDA kernels (paro/compression/gpu/random.cuh): the bits are the same there, the Gaussian
// values may differ in their last bits (the device's logf and sincospif are not glibc's).
//
// Counter layout: {i / per_block (low, high 32 bits), tensor, step}; key: the 64-bit seed. A Gaussian
// block of 4 words gives 4 normals (two Box-Muller pairs); a Rademacher block gives 128 signs.

#include <Random123/philox.h>
#include <Random123/boxmuller.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "paro/core/error.hpp"
#include "paro/core/host_device.hpp"

namespace paro::compression {

enum class Distribution { gaussian, rademacher };

inline const char* name_of(Distribution d) { return d == Distribution::gaussian ? "gaussian" : "rademacher"; }

inline Distribution parse_distribution(std::string_view s) {
  if (s == "gaussian") return Distribution::gaussian;
  if (s == "rademacher") return Distribution::rademacher;
  throw UsageError(detail::concat("unknown projection distribution '", s, "'; allowed: gaussian rademacher"));
}

struct StreamKey {
  std::uint64_t seed = 0;
  std::uint32_t step = 0;
  std::uint32_t tensor = 0;
};

namespace stream_detail {

using Philox = r123::Philox4x32_R<10>;

PARO_HOST_DEVICE inline Philox::ctr_type block_bits(const StreamKey& k, std::uint64_t block) {
  const Philox::ctr_type counter = {
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), k.tensor, k.step}};
  const Philox::key_type key = {{static_cast<std::uint32_t>(k.seed), static_cast<std::uint32_t>(k.seed >> 32)}};
  return Philox()(counter, key);
}

PARO_HOST_DEVICE inline constexpr std::size_t values_per_block(Distribution d) {
  return d == Distribution::gaussian ? 4 : 128;
}

// All values of one block.
PARO_HOST_DEVICE inline void block_values(Distribution d, const StreamKey& k, std::uint64_t block, float* out) {
  const auto bits = block_bits(k, block);
  if (d == Distribution::gaussian) {
    const r123::float2 a = r123::boxmuller(bits[0], bits[1]);
    const r123::float2 b = r123::boxmuller(bits[2], bits[3]);
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
    return;
  }
  for (std::size_t w = 0; w < 4; ++w)
    for (std::size_t bit = 0; bit < 32; ++bit) out[w * 32 + bit] = (bits[w] >> bit) & 1u ? 1.0f : -1.0f;
}

}  // namespace stream_detail

// Writes elements [first, first + n) of the stream (seed, step, tensor) to out.
inline void fill(Distribution d, const StreamKey& key, std::size_t first, float* out, std::size_t n) {
  const std::size_t per = stream_detail::values_per_block(d);
  float values[128];
  std::size_t i = first;
  const std::size_t end = first + n;
  while (i < end) {
    const std::size_t block = i / per;
    const std::size_t offset = i % per;
    const std::size_t take = (per - offset) < (end - i) ? per - offset : end - i;
    if (offset == 0 && take == per) {
      stream_detail::block_values(d, key, block, out + (i - first));  // whole block: straight into place
    } else {
      stream_detail::block_values(d, key, block, values);
      for (std::size_t j = 0; j < take; ++j) out[i - first + j] = values[offset + j];
    }
    i += take;
  }
}

}  // namespace paro::compression
