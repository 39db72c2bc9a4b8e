#pragma once
// Portable host storage types for IEEE binary16 (f16) and bfloat16 (bf16). Arithmetic goes through
// float; conversion from float rounds to nearest, ties to even, and turns every NaN into paro's canonical
// NaN (below). The same code runs in paro's CUDA kernels (PARO_HOST_DEVICE), so device reductions round
// exactly as host ones.

#include <cstdint>
#include <cstring>

#include "paro/core/host_device.hpp"

namespace paro {

namespace detail {

// The one NaN that paro's reductions and conversions produce, whatever the inputs' payloads and signs:
// positive, quiet, every payload bit set. It is CUDA's f32 NaN (x86 would keep an input's payload), and
// what cuda_fp16.h/cuda_bf16.h give for a NaN converted to f16/bf16.
inline constexpr std::uint32_t float_nan_bits = 0x7FFFFFFFu;
inline constexpr std::uint64_t double_nan_bits = 0x7FFFFFFFFFFFFFFFull;
inline constexpr std::uint16_t half_nan_bits = 0x7FFFu;
inline constexpr std::uint16_t bfloat_nan_bits = 0x7FFFu;

PARO_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

PARO_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

PARO_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return half_nan_bits;
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // infinite or rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // below half the smallest subnormal
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14..24 bits dropped
    const std::uint32_t kept = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    const std::uint32_t rounded = kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | rounded);
  }
  // Normal: rebias the exponent, then round the 13 dropped bits to nearest even.
  const std::uint32_t rebased = abs - 0x38000000u;
  const std::uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

PARO_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  // Subnormal half: normalise into a float.
  std::uint32_t e = 113u;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

PARO_HOST_DEVICE inline std::uint16_t float_to_bfloat_bits(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bfloat_nan_bits;
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

PARO_HOST_DEVICE inline float bfloat_bits_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

// IEEE 754 binary16.
struct f16 {
  std::uint16_t bits = 0;
  f16() = default;
  PARO_HOST_DEVICE explicit f16(float f) : bits(detail::float_to_half_bits(f)) {}
  PARO_HOST_DEVICE explicit operator float() const { return detail::half_bits_to_float(bits); }
  PARO_HOST_DEVICE static f16 from_bits(std::uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the upper half of an IEEE binary32.
struct bf16 {
  std::uint16_t bits = 0;
  bf16() = default;
  PARO_HOST_DEVICE explicit bf16(float f) : bits(detail::float_to_bfloat_bits(f)) {}
  PARO_HOST_DEVICE explicit operator float() const { return detail::bfloat_bits_to_float(bits); }
  PARO_HOST_DEVICE static bf16 from_bits(std::uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
};

}  // namespace paro
