#pragma once
// torch's scalar types as paro's data types: one table for the backend and for SEPARATE.

#include <c10/core/ScalarType.h>

#include <optional>

#include "paro/core/dtype.hpp"

namespace paro::torch_backend {

// paro's type for t; none where paro has no such type (bool, complex, float8, ...).
inline std::optional<DataType> paro_type_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DataType::f32;
    case at::kDouble: return DataType::f64;
    case at::kHalf: return DataType::f16;
    case at::kBFloat16: return DataType::bf16;
    case at::kChar: return DataType::i8;
    case at::kInt: return DataType::i32;
    case at::kLong: return DataType::i64;
    case at::kByte: return DataType::u8;
    default: return std::nullopt;
  }
}

}  // namespace paro::torch_backend
