#pragma once
// What every public verb checks before it communicates: its arguments, locally (validate_*), and, with
// PARO_CHECK=1, that every rank of the scope is making the same call (check_agreement).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/control.hpp"

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
                                 std::size_t big_bytes, const void* in_place_at) {
  if (small == in_place_at || small_bytes == 0 || big_bytes == 0) return;
  const auto s = reinterpret_cast<std::uintptr_t>(small), b = reinterpret_cast<std::uintptr_t>(big);
  detail::require(s + small_bytes <= b || b + big_bytes <= s, what,
                  ": send and recv buffers overlap without being in place; in place means ",
                  "send == recv for all_reduce, send == recv + rank*count for all_gather and ",
                  "recv == send + rank*count for reduce_scatter");
}

// A verb's call after its local checks: its buffers, its full size in bytes (what plans and predictions
// take) and whether it runs in place. rank and ranks: this rank's index in the scope and the scope's size.
struct CheckedCall {
  algorithms::Call call;
  std::size_t bytes;
  bool in_place;
};

inline CheckedCall all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
  const char* what = "all_reduce";
  data_type_and_op(what, dt, op);
  const std::size_t bytes = checked_bytes(what, count, dt, 1);
  buffers(what, send, bytes, recv, bytes);
  in_place_or_disjoint(what, send, bytes, recv, bytes, recv);
  return {{send, recv, count, dt, op}, bytes, send == recv};
}

inline CheckedCall all_gather(int rank, int ranks, const void* send, void* recv, std::size_t count, DataType dt) {
  const char* what = "all_gather";
  data_type_and_op(what, dt, ReduceOp::sum);
  const std::size_t block = checked_bytes(what, count, dt, 1);
  const std::size_t bytes = checked_bytes(what, count, dt, ranks);
  buffers(what, send, block, recv, bytes);
  const char* mine = static_cast<const char*>(recv) + static_cast<std::size_t>(rank) * block;
  in_place_or_disjoint(what, send, block, recv, bytes, mine);
  return {{send, recv, count, dt, ReduceOp::sum}, bytes, send == mine};
}

inline CheckedCall reduce_scatter(int rank, int ranks, const void* send, void* recv, std::size_t count, DataType dt,
                                  ReduceOp op) {
  const char* what = "reduce_scatter";
  data_type_and_op(what, dt, op);
  const std::size_t block = checked_bytes(what, count, dt, 1);
  const std::size_t bytes = checked_bytes(what, count, dt, ranks);
  buffers(what, send, bytes, recv, block);
  const char* mine = static_cast<const char*>(send) + static_cast<std::size_t>(rank) * block;
  in_place_or_disjoint(what, recv, block, send, bytes, mine);
  return {{send, recv, count, dt, op}, bytes, recv == mine};
}

// What a rank is about to do, as PARO_CHECK compares it: the call, and the settings that cut its messages
// (ranks must cut chunks alike).
struct Signature {
  enum Field {
    collective,
    scope,
    algorithm,
    count,
    data_type,
    op,
    ring_chunk,
    ring_window,
    lanes,
    direct_max,
    plan,  // a hash of the printed plan (registry.hpp's print): the algorithm's own choices
    fields
  };
  std::array<std::int64_t, fields> values{};
};

// PARO_CHECK=1: before a call, the ranks of its scope exchange their signatures, so that ranks calling
// different collectives, counts, types, ops or algorithms get one error each instead of a hang or
// garbage. Costs one small all-gather per call. describe(Signature) says what a rank calls.
template <class Transport, class Describe>
void check_agreement(Transport& t, const Signature& mine, const char* scope, Describe&& describe) {
  constexpr std::size_t fields = Signature::fields;
  std::vector<std::int64_t> all(fields * static_cast<std::size_t>(t.size()));
  std::copy(mine.values.begin(), mine.values.end(), all.begin() + static_cast<std::ptrdiff_t>(fields * t.rank()));
  control::bruck_all_gather_host(t, all.data(), fields, DataType::i64);
  auto of_rank = [&](int r) {
    Signature s;
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(fields * r), fields, s.values.begin());
    return s;
  };
  for (int r = 1; r < t.size(); ++r)
    detail::require(of_rank(r).values == of_rank(0).values, "PARO_CHECK: the ranks of this ", scope,
                    " call disagree: rank 0 calls ", describe(of_rank(0)), ", rank ", r, " calls ",
                    describe(of_rank(r)));
}

}  // namespace paro::validation
