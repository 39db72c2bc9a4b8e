#pragma once
// What an algorithm is to the rest of paro: the collectives' and an algorithm's identities, its family,
// and the call its schedules receive. Each algorithm is described once, by a descriptor in its own file, and
// registered once, in registry.hpp, which also gives the names, the parsing of PARO_ALGO and the choice.

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

// The built-in collectives' identities, each described in collective.hpp. The set is open: a collective
// described outside paro takes an unused value, e.g. Collective{100}.
enum class Collective : int { all_gather = 0, reduce_scatter, all_reduce, all_to_all };

// The built-in algorithms' identities. The set is open: an algorithm registered outside paro (see
// registry.hpp) takes an unused value, e.g. Algorithm{100}.
enum class Algorithm : int { automatic = 0, ring, tree, native, mics_hcs, paro_seq, paro_cc };

namespace detail {

inline std::string lowercase_without_underscores(std::string_view s) {
  std::string out;
  for (char ch : s)
    if (ch != '_' && ch != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return out;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace detail

namespace algorithms {

// flat: runs on any scope as one ring/tree/...; hierarchical: walks the scope's levels (falls back to a
// flat schedule where the scope has none, and is an automatic candidate only where it has); native: the
// backend's own collective, never predicted, so never picked by automatic.
enum class Family { flat, hierarchical, native };

// One collective call as a schedule receives it, after validation (NCCL's buffer conventions,
// communicator/communicator.hpp). For all_gather, this rank's block is already in place in `recv` unless the
// algorithm's family is native.
struct Call {
  const void* send;
  void* recv;
  std::size_t count;  // elements per rank (all_gather, reduce_scatter) or per peer (all_to_all) or in the
                      // buffer (all_reduce)
  DataType dt;
  ReduceOp op;  // sum for all_gather
};

}  // namespace algorithms
}  // namespace paro
