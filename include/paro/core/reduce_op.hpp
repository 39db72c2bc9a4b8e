#pragma once
// Reduction operators and the host kernels that apply them elementwise.
//
// Semantics, the same on every backend and algorithm:
// - sum and prod on integers wrap modulo 2^bits (computed in the unsigned type, so never undefined);
// - f16 and bf16 combine two operands in float and round the result back to nearest even, so a reduction
//   over n ranks rounds n-1 times and its last bits depend on the algorithm's combining order;
// - avg is the sum divided once by the number of ranks at the end (integers truncate toward zero);
// - a NaN result of any float op (sum, prod, min, max, avg's divide) is the canonical quiet NaN, whatever
//   the inputs' payloads and signs: f32 0x7FFFFFFF, f64 0x7FFFFFFFFFFFFFFF, f16 and bf16 0x7FFF (half.hpp).
//   CUDA gives that NaN for every f32 op while x86 keeps an input's payload; one NaN makes host and device
//   results bit-identical.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/host_device.hpp"

namespace paro {

enum class ReduceOp { sum, prod, min, max, avg };

inline constexpr ReduceOp all_reduce_ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                              ReduceOp::avg};

inline const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "invalid";
}

inline ReduceOp parse_reduce_op(std::string_view s) {
  for (ReduceOp op : all_reduce_ops)
    if (s == name_of(op)) return op;
  throw UsageError(detail::concat("unknown reduction op '", s, "'; allowed: sum prod min max avg"));
}

inline void validate(ReduceOp op) {
  detail::require(op >= ReduceOp::sum && op <= ReduceOp::avg, "invalid ReduceOp value ", static_cast<int>(op),
                  "; allowed: sum prod min max avg");
}

inline void validate(DataType dt) {
  detail::require(dt >= DataType::f32 && dt <= DataType::u8, "invalid DataType value ", static_cast<int>(dt),
                  "; allowed: f32 f64 f16 bf16 i8 i32 i64 u8");
}

namespace detail {

// float_nan_bits or double_nan_bits (half.hpp) as a value.
template <class T>
PARO_HOST_DEVICE T canonical_nan() {
  if constexpr (std::is_same_v<T, float>) {
    return bits_float(float_nan_bits);
  } else {
    static_assert(std::is_same_v<T, double>);
    const std::uint64_t bits = double_nan_bits;  // a copy: device code may not take a host constant's address
    double nan;
    std::memcpy(&nan, &bits, sizeof nan);
    return nan;
  }
}

// NaN becomes the canonical NaN; a compare and a select, so host loops still vectorise.
template <class T>
PARO_HOST_DEVICE T canonical(T r) {
  return r != r ? canonical_nan<T>() : r;
}

// op on float or double with whatever NaN the CPU or GPU gives; combine and conversions canonicalise it.
template <class T>
PARO_HOST_DEVICE T arithmetic(ReduceOp op, T a, T b) {
  // min and max propagate NaN whichever operand holds it, so the result does not depend on rank order.
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return (b < a || b != b) ? b : a;
    case ReduceOp::max: return (b > a || b != b) ? b : a;
  }
  return a;
}

// The binary operator an op applies between partial results (avg combines as sum). The CUDA kernels
// (paro/cuda/kernels.cuh) call these same functions, hence PARO_HOST_DEVICE and no std::min/max.
template <class T>
PARO_HOST_DEVICE T combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return T(arithmetic(op, static_cast<float>(a), static_cast<float>(b)));  // the conversion canonicalises NaN
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::prod: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::min: return b < a ? b : a;
      case ReduceOp::max: return a < b ? b : a;
    }
    return a;
  } else {
    // min and max test the operands for NaN rather than the result: fewer vector instructions.
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return canonical(a + b);
      case ReduceOp::prod: return canonical(a * b);
      case ReduceOp::min: return (a != a || b != b) ? canonical_nan<T>() : (b < a ? b : a);
      case ReduceOp::max: return (a != a || b != b) ? canonical_nan<T>() : (b > a ? b : a);
    }
    return a;
  }
}

template <class T, class F>
void apply_binary(T* dst, const T* a, const T* b, std::size_t count, F f) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = f(a[i], b[i]);
}

template <class T>
void host_reduce_typed(T* dst, const T* a, const T* b, std::size_t count, ReduceOp op) {
  // One loop per op so the compiler can vectorise each; dst may alias a or b exactly.
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return apply_binary(dst, a, b, count, [](T x, T y) { return combine(ReduceOp::sum, x, y); });
    case ReduceOp::prod: return apply_binary(dst, a, b, count, [](T x, T y) { return combine(ReduceOp::prod, x, y); });
    case ReduceOp::min: return apply_binary(dst, a, b, count, [](T x, T y) { return combine(ReduceOp::min, x, y); });
    case ReduceOp::max: return apply_binary(dst, a, b, count, [](T x, T y) { return combine(ReduceOp::max, x, y); });
  }
}

template <class T>
PARO_HOST_DEVICE T divide(T value, int divisor) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return T(static_cast<float>(value) / static_cast<float>(divisor));
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::int64_t>(value) / divisor);
  } else {
    return canonical(value / static_cast<T>(divisor));
  }
}

}  // namespace detail

// dst[i] = a[i] op b[i] on host memory; dst may be a or b.
inline void host_reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
  visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    detail::host_reduce_typed(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count, op);
  });
}

// The last step of avg: buf[i] /= divisor, in the element type.
inline void host_divide(void* buf, std::size_t count, DataType dt, int divisor) {
  visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < count; ++i) p[i] = detail::divide(p[i], divisor);
  });
}

}  // namespace paro
