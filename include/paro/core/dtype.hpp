#pragma once
// Element types of the collectives, their names and sizes, and the C++ type behind each.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "paro/core/error.hpp"
#include "paro/core/half.hpp"

namespace paro {

enum class DataType { f32, f64, f16, bf16, i8, i32, i64, u8 };

inline constexpr DataType all_data_types[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                                              DataType::i8,  DataType::i32, DataType::i64, DataType::u8};

// The C++ element type of a DataType, and back.
template <DataType D>
struct data_type_traits;
template <>
struct data_type_traits<DataType::f32> {
  using type = float;
};
template <>
struct data_type_traits<DataType::f64> {
  using type = double;
};
template <>
struct data_type_traits<DataType::f16> {
  using type = f16;
};
template <>
struct data_type_traits<DataType::bf16> {
  using type = bf16;
};
template <>
struct data_type_traits<DataType::i8> {
  using type = std::int8_t;
};
template <>
struct data_type_traits<DataType::i32> {
  using type = std::int32_t;
};
template <>
struct data_type_traits<DataType::i64> {
  using type = std::int64_t;
};
template <>
struct data_type_traits<DataType::u8> {
  using type = std::uint8_t;
};

template <class T>
struct data_type_of {
  static_assert(sizeof(T) == 0,
                "paro: unsupported element type; use float, double, paro::f16, paro::bf16, int8_t, int32_t, "
                "int64_t or uint8_t");
};
template <>
struct data_type_of<float> {
  static constexpr DataType value = DataType::f32;
};
template <>
struct data_type_of<double> {
  static constexpr DataType value = DataType::f64;
};
template <>
struct data_type_of<f16> {
  static constexpr DataType value = DataType::f16;
};
template <>
struct data_type_of<bf16> {
  static constexpr DataType value = DataType::bf16;
};
template <>
struct data_type_of<std::int8_t> {
  static constexpr DataType value = DataType::i8;
};
template <>
struct data_type_of<std::int32_t> {
  static constexpr DataType value = DataType::i32;
};
template <>
struct data_type_of<std::int64_t> {
  static constexpr DataType value = DataType::i64;
};
template <>
struct data_type_of<std::uint8_t> {
  static constexpr DataType value = DataType::u8;
};

template <class T>
inline constexpr DataType data_type_v = data_type_of<std::remove_cv_t<T>>::value;

// Calls f(T{}) with the C++ element type of dt, so one generic lambda serves every type.
template <class F>
decltype(auto) visit_data_type(DataType dt, F&& f) {
  switch (dt) {
    case DataType::f32: return f(float{});
    case DataType::f64: return f(double{});
    case DataType::f16: return f(f16{});
    case DataType::bf16: return f(bf16{});
    case DataType::i8: return f(std::int8_t{});
    case DataType::i32: return f(std::int32_t{});
    case DataType::i64: return f(std::int64_t{});
    case DataType::u8: return f(std::uint8_t{});
  }
  throw UsageError(detail::concat("invalid DataType value ", static_cast<int>(dt)));
}

inline std::size_t size_of(DataType dt) {
  return visit_data_type(dt, [](auto v) { return sizeof(v); });
}

// Names as nccl-tests prints them, so tables compare line by line.
inline const char* name_of(DataType dt) {
  switch (dt) {
    case DataType::f32: return "float";
    case DataType::f64: return "double";
    case DataType::f16: return "half";
    case DataType::bf16: return "bfloat16";
    case DataType::i8: return "int8";
    case DataType::i32: return "int32";
    case DataType::i64: return "int64";
    case DataType::u8: return "uint8";
  }
  return "invalid";
}

// Accepts the short names (f32, bf16, i8, ...) and the nccl-tests names (float, half, int8, ...).
inline DataType parse_data_type(std::string_view s) {
  struct Alias {
    std::string_view name;
    DataType dt;
  };
  static constexpr Alias aliases[] = {
      {"f32", DataType::f32},     {"float", DataType::f32},   {"float32", DataType::f32},   {"f64", DataType::f64},
      {"double", DataType::f64},  {"float64", DataType::f64}, {"f16", DataType::f16},       {"half", DataType::f16},
      {"float16", DataType::f16}, {"bf16", DataType::bf16},   {"bfloat16", DataType::bf16}, {"i8", DataType::i8},
      {"int8", DataType::i8},     {"i32", DataType::i32},     {"int32", DataType::i32},     {"int", DataType::i32},
      {"i64", DataType::i64},     {"int64", DataType::i64},   {"u8", DataType::u8},         {"uint8", DataType::u8}};
  for (const auto& a : aliases)
    if (a.name == s) return a.dt;
  throw UsageError(detail::concat("unknown data type '", s, "'; allowed: f32 f64 f16 bf16 i8 i32 i64 u8 ",
                                  "(or float double half bfloat16 int8 int32 int64 uint8)"));
}

inline bool is_floating(DataType dt) {
  return dt == DataType::f32 || dt == DataType::f64 || dt == DataType::f16 || dt == DataType::bf16;
}

}  // namespace paro
