#pragma once
// The checks a collective's arguments get before anything is sent (each collective's validate,
// collective.hpp): data type and op, sizes that fit size_t, buffers that exist, and buffers that are either
// exactly in place or disjoint.

#include <cstddef>
#include <cstdint>
#include <limits>

#include "paro/algorithms/algorithm.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro::validation {

inline void data_type_and_op(const char* what, DataType dt, ReduceOp op) {
  try {
    validate(dt);
    validate(op);
  } catch (const Error& e) {
    rethrow_with_context(e, detail::concat(what, ": "));
  }
}

// count elements in each of `blocks` blocks, in bytes; an error where that overflows size_t.
inline std::size_t checked_bytes(const char* what, std::size_t count, DataType dt, int blocks) {
  const std::size_t limit = std::numeric_limits<std::size_t>::max() / size_of(dt) / static_cast<std::size_t>(blocks);
  detail::require(count <= limit, what, ": count ", count, " of ", name_of(dt), " over ", blocks,
                  " rank(s) overflows the addressable size");
  return count * size_of(dt) * static_cast<std::size_t>(blocks);
}

inline void buffers(const char* what, const void* send, std::size_t send_bytes, const void* recv,
                    std::size_t recv_bytes) {
  detail::require(send != nullptr || send_bytes == 0, what, ": send buffer is null but ", send_bytes,
                  " bytes are to be sent; pass a valid buffer or count 0");
  detail::require(recv != nullptr || recv_bytes == 0, what, ": recv buffer is null but ", recv_bytes,
                  " bytes are to be received; pass a valid buffer or count 0");
}

// `small` must either sit exactly at `in_place_at` inside `big`, or not overlap it at all.
inline void in_place_or_disjoint(const char* what, const void* small, std::size_t small_bytes, const void* big,
                                 std::size_t big_bytes, const void* in_place_at, const char* in_place_rule) {
  if (small == in_place_at || small_bytes == 0 || big_bytes == 0) return;
  const auto s = reinterpret_cast<std::uintptr_t>(small), b = reinterpret_cast<std::uintptr_t>(big);
  detail::require(s + small_bytes <= b || b + big_bytes <= s, what,
                  ": send and recv buffers overlap without being in place; in place means ", in_place_rule);
}

// A verb's call after its local checks: its buffers, its full size in bytes (what plans and predictions
// take) and whether it runs in place. rank and ranks: this rank's index in the scope and the scope's size.
struct CheckedCall {
  algorithms::Call call;
  std::size_t bytes;
  bool in_place;
};

}  // namespace paro::validation
