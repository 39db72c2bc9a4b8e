#pragma once
// What every fuzz target shares: the input as text, and the one way a parser may refuse it. A paro::Error
// (naming the source and the field) is the documented refusal; any other exception escapes the target and
// libFuzzer reports it as a crash, as it does a signal or a sanitizer finding.

#include <cstddef>
#include <cstdint>
#include <string>

#include "paro/core/error.hpp"

namespace paro::fuzz {

template <class Body>
int refusing_only_with_paro_errors(const std::uint8_t* data, std::size_t size, Body body) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    body(text);
  } catch (const paro::Error&) {
  }
  return 0;
}

}  // namespace paro::fuzz
