#pragma once
// Environment configuration. Every variable paro reads is listed in docs/user-guide.md; a malformed value
// is an error that names the variable and the allowed form, never silently ignored.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "paro/core/error.hpp"

namespace paro::env {

inline std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// "4096", "64K", "16M", "1G" (powers of 1024, as nccl-tests reads -b/-e).
inline std::size_t parse_bytes(std::string_view text, std::string_view what) {
  std::size_t pos = 0;
  std::uint64_t value = 0;
  bool overflow = false;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    overflow |= value > (UINT64_MAX - 9) / 10;
    value = value * 10 + static_cast<std::uint64_t>(text[pos] - '0');
    ++pos;
  }
  std::uint64_t scale = 1;
  if (pos < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[pos]))) {
      case 'K': scale = 1ull << 10; break;
      case 'M': scale = 1ull << 20; break;
      case 'G': scale = 1ull << 30; break;
      default: pos = text.size() + 1;  // not a suffix: reject below
    }
    ++pos;
  }
  detail::require(pos > 0 && pos == text.size() && !text.empty() && std::isdigit(static_cast<unsigned char>(text[0])),
                  what, ": '", text, "' is not a size; use a number with an optional K, M or G suffix (e.g. 64K)");
  detail::require(!overflow && value <= SIZE_MAX / scale, what, ": '", text, "' is too large");
  return static_cast<std::size_t>(value * scale);
}

inline long parse_integer(std::string_view text, std::string_view what, long lo, long hi) {
  std::string s(text);
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  detail::require(!s.empty() && end == s.c_str() + s.size() && v >= lo && v <= hi, what, ": '", text,
                  "' is not an integer in [", lo, ", ", hi, "]");
  return v;
}

// A finite decimal number in [lo, hi].
inline double parse_number(std::string_view text, std::string_view what, double lo = 0, double hi = 1e9) {
  std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  detail::require(!s.empty() && end == s.c_str() + s.size() && v >= lo && v <= hi, what, ": '", text,
                  "' is not a number in [", lo, ", ", hi, "]");
  return v;
}

inline double parse_seconds(std::string_view text, std::string_view what) {
  const double v = parse_number(text, what, 0, 1e9);
  detail::require(v > 0, what, ": '", text, "' is not a number of seconds in (0, 1e9]");
  return v;
}

// The shortest form parse_bytes reads back exactly: "1M" for 1048576, "1536" for 1536.
inline std::string format_bytes(std::size_t bytes) {
  for (const auto& [shift, suffix] : {std::pair{30, 'G'}, std::pair{20, 'M'}, std::pair{10, 'K'}})
    if (bytes != 0 && bytes % (std::size_t{1} << shift) == 0) return std::to_string(bytes >> shift) + suffix;
  return std::to_string(bytes);
}

inline std::size_t bytes_or(const char* name, std::size_t fallback) {
  auto v = get(name);
  return v ? parse_bytes(*v, name) : fallback;
}

inline long integer_or(const char* name, long fallback, long lo, long hi) {
  auto v = get(name);
  return v ? parse_integer(*v, name, lo, hi) : fallback;
}

// PARO_TIMEOUT: seconds a rank waits on one peer before the wait becomes an error (default 300).
inline double timeout_seconds() {
  auto v = get("PARO_TIMEOUT");
  return v ? parse_seconds(*v, "PARO_TIMEOUT") : 300.0;
}

}  // namespace paro::env
