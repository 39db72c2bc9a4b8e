#pragma once
// SEPARATE's checkpoint (Separate::save / load): seed, and per tensor its step, width, beta and error buffer,
// in a binary format of its own ("paro-separate-v1").

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <istream>
#include <ostream>
#include <utility>
#include <vector>

#include "paro/compression/separate_math.hpp"
#include "paro/compression/separate_options.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"

namespace paro::compression::separate_detail {

inline constexpr char magic[16] = {'p', 'a', 'r', 'o', '-', 's', 'e', 'p', 'a', 'r', 'a', 't', 'e', '-', 'v', '1'};

template <class V>
void put(std::ostream& out, V v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class V>
V get(std::istream& in) {
  V v{};
  in.read(reinterpret_cast<char*>(&v), sizeof v);
  detail::require(static_cast<bool>(in), "SEPARATE load: the checkpoint is truncated");
  return v;
}

inline void save_state(std::ostream& out, const SeparateOptions& o, const std::vector<SeparateTensor>& tensors) {
  out.write(magic, sizeof magic);
  put(out, o.seed);
  put(out, static_cast<std::uint32_t>(o.distribution));
  put(out, static_cast<std::uint64_t>(o.block_cols));
  put(out, static_cast<std::uint64_t>(tensors.size()));
  for (const SeparateTensor& t : tensors) {
    put(out, static_cast<std::uint64_t>(t.rows));
    put(out, static_cast<std::uint64_t>(t.cols));
    put(out, static_cast<std::uint32_t>(t.dtype));
    put(out, t.step);
    put(out, static_cast<std::uint64_t>(t.shape.width));
    put(out, t.beta);
    put(out, static_cast<std::uint64_t>(t.error.size()));
    out.write(reinterpret_cast<const char*>(t.error.data()),
              static_cast<std::streamsize>(t.error.size() * sizeof(float)));
  }
  detail::require(static_cast<bool>(out), "SEPARATE save: the stream failed while writing");
}

// Replaces the tensors' state with the checkpoint's, or throws and leaves it as it was; returns the
// checkpoint's seed.
inline std::uint64_t load_state(std::istream& in, const SeparateOptions& o, std::vector<SeparateTensor>& tensors) {
  char m[sizeof magic];
  in.read(m, sizeof m);
  detail::require(in && std::memcmp(m, magic, sizeof m) == 0, "SEPARATE load: not a SEPARATE checkpoint");
  const auto seed = get<std::uint64_t>(in);
  detail::require(
      get<std::uint32_t>(in) == static_cast<std::uint32_t>(o.distribution) && get<std::uint64_t>(in) == o.block_cols,
      "SEPARATE load: the checkpoint used another projection distribution or block size");
  const auto count = get<std::uint64_t>(in);
  detail::require(count == tensors.size(), "SEPARATE load: the checkpoint has ", count, " tensors, ", tensors.size(),
                  " are registered");
  std::vector<SeparateTensor> restored = tensors;
  for (SeparateTensor& t : restored) {
    const auto rows = get<std::uint64_t>(in), cols = get<std::uint64_t>(in);
    const auto dt = get<std::uint32_t>(in);
    detail::require(rows == t.rows && cols == t.cols && dt == static_cast<std::uint32_t>(t.dtype),
                    "SEPARATE load: tensor '", t.name, "' is ", t.rows, " x ", t.cols, " ", name_of(t.dtype),
                    " here but ", rows, " x ", cols, " in the checkpoint");
    t.step = get<std::uint32_t>(in);
    // G-SEPARATE moves the width within [min_width, max_width] and beta within [0, 1]; nothing else is a
    // state this tensor can have been saved in.
    const auto width = get<std::uint64_t>(in);
    const std::size_t lo = std::min(t.min_width, t.shape.width), hi = std::max(t.max_width, t.shape.width);
    detail::require(t.compressed ? width >= lo && width <= hi : width == t.shape.width, "SEPARATE load: tensor '",
                    t.name, "' has width ", width, " in the checkpoint; allowed here: ",
                    t.compressed ? detail::concat(lo, " .. ", hi) : detail::concat(t.shape.width, " (uncompressed)"));
    t.shape.width = static_cast<std::size_t>(width);
    t.beta = get<double>(in);
    detail::require(t.beta >= 0 && t.beta <= 1, "SEPARATE load: tensor '", t.name, "' has beta ", t.beta,
                    " in the checkpoint; allowed: [0, 1]");
    const auto errors = get<std::uint64_t>(in);
    detail::require(errors == t.error.size(), "SEPARATE load: tensor '", t.name, "' has ", errors,
                    " error values in the checkpoint, ", t.error.size(), " here (error feedback on both sides?)");
    in.read(reinterpret_cast<char*>(t.error.data()), static_cast<std::streamsize>(t.error.size() * sizeof(float)));
    detail::require(static_cast<bool>(in), "SEPARATE load: the checkpoint is truncated");
  }
  tensors = std::move(restored);
  return seed;
}

}  // namespace paro::compression::separate_detail
