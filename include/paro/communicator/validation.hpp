#pragma once
// PARO_CHECK=1: that every rank of the scope is making the same call (check_agreement). The arguments'
// local checks are each collective's own (algorithms/collective.hpp, over algorithms/arguments.hpp).

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/control.hpp"

namespace paro::validation {

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
    direct_window,
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
