#pragma once
// PARO_CHECK=1: before a collective, the ranks of its scope compare what each is about to run (the
// collective, scope, algorithm and its plan, count, type, op and every setting that cuts messages), so that
// a rank calling something else is named in an error instead of a hang or wrong bytes (validation.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/all_to_all.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/communicator/jobs.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/communicator/validation.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/control.hpp"

namespace paro {

// The signature's collective field of a broadcast, gather or scatter (not Collectives: one schedule, no
// algorithm): -1 - its Rooted kind; its op field holds the root.
inline std::int64_t rooted_signature(Rooted k) { return -1 - static_cast<std::int64_t>(k); }
// ... and of an all_to_allv (its count field is 0: each rank's blocks are its own; check_block_agreement
// compares them).
constexpr std::int64_t all_to_allv_signature = -64;
inline bool is_rooted_signature(std::int64_t c) { return c < 0 && c > all_to_allv_signature; }
inline Rooted rooted_of_signature(std::int64_t c) { return static_cast<Rooted>(-1 - c); }

// FNV-1a of a printed plan: equal plans give equal numbers on every rank.
inline std::int64_t plan_hash(const std::string& printed) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : printed) h = (h ^ ch) * 0x100000001b3ull;
  return static_cast<std::int64_t>(h);
}

// c: a Collective, rooted_signature (then op is the root) or all_to_allv_signature; plan: the call's plan as printed
// (registry.hpp's print; empty for a rooted call); lanes: where the lanes of hierarchical algorithms may run on
// t; name_of: the Communicator's names of algorithms and collectives.
template <class Transport, class NameOf>
void check_call_agreement(Transport& t, const Tuning& tuning, algorithms::LaneChoice lanes, std::int64_t c, Scope s,
                          Algorithm a, const std::string& plan, std::size_t count, DataType dt, std::int64_t op,
                          NameOf name_of) {
  using F = validation::Signature;
  F mine;
  mine.values = {c,
                 static_cast<std::int64_t>(s),
                 static_cast<std::int64_t>(a),
                 static_cast<std::int64_t>(count),
                 static_cast<std::int64_t>(dt),
                 op,
                 static_cast<std::int64_t>(tuning.ring.chunk_bytes),
                 static_cast<std::int64_t>(tuning.ring.window),
                 static_cast<std::int64_t>(lanes),
                 static_cast<std::int64_t>(tuning.direct.max_bytes),
                 static_cast<std::int64_t>(tuning.direct.window_bytes),
                 plan_hash(plan)};
  const std::int64_t my_plan = mine.values[F::plan];
  validation::check_agreement(t, mine, paro::name_of(s), [&name_of, &plan, my_plan](const F& f) {
    const auto& v = f.values;
    if (v[F::collective] == all_to_allv_signature)
      return detail::concat("all_to_allv scope=", paro::name_of(static_cast<Scope>(v[F::scope])), " ",
                            paro::name_of(static_cast<DataType>(v[F::data_type])));
    if (is_rooted_signature(v[F::collective]))
      return detail::concat(paro::name_of(rooted_of_signature(v[F::collective])),
                            " scope=", paro::name_of(static_cast<Scope>(v[F::scope])), " count=", v[F::count], " ",
                            paro::name_of(static_cast<DataType>(v[F::data_type])), " root=", v[F::op],
                            " (PARO_RING_CHUNK=", v[F::ring_chunk], " PARO_RING_WINDOW=", v[F::ring_window], ")");
    // This rank's plan by its text; another's by its hash, which is all that travelled.
    const std::string planned = v[F::plan] == my_plan ? plan : detail::concat("#", v[F::plan]);
    return detail::concat(
        name_of(static_cast<Collective>(v[F::collective])), " scope=", paro::name_of(static_cast<Scope>(v[F::scope])),
        " algo=", name_of(static_cast<Algorithm>(v[F::algorithm])), planned.empty() ? "" : "(" + planned + ")",
        " count=", v[F::count], " ", paro::name_of(static_cast<DataType>(v[F::data_type])), " ",
        paro::name_of(static_cast<ReduceOp>(v[F::op])), " (PARO_RING_CHUNK=", v[F::ring_chunk],
        " PARO_RING_WINDOW=", v[F::ring_window],
        " lanes=", algorithms::name_of(static_cast<algorithms::LaneChoice>(v[F::lanes])),
        " PARO_DIRECT_MAX=", v[F::direct_max], " PARO_DIRECT_WINDOW=", v[F::direct_window], ")");
  });
}

// PARO_CHECK=1 for an all_to_allv: every rank's send blocks against their receivers' recv blocks (the
// lengths, in bytes; an all-gather of n * n of them), so that a pair that disagrees is named on every rank
// instead of a hang (an empty block is not sent) or a size mismatch on one.
template <class Transport>
void check_block_agreement(Transport& t, const std::vector<algorithms::Extent>& sends,
                           const std::vector<algorithms::Extent>& recvs, DataType dt) {
  const int n = t.size(), r = t.rank();
  const auto un = static_cast<std::size_t>(n);
  // Row i: rank i's send lengths, then its receive lengths.
  std::vector<std::int64_t> all(2 * un * un);
  for (std::size_t j = 0; j < un; ++j) {
    all[2 * un * static_cast<std::size_t>(r) + j] = static_cast<std::int64_t>(sends[j].bytes);
    all[2 * un * static_cast<std::size_t>(r) + un + j] = static_cast<std::int64_t>(recvs[j].bytes);
  }
  control::bruck_all_gather_host(t, all.data(), 2 * un, DataType::i64);
  const auto element = static_cast<std::int64_t>(size_of(dt));
  for (std::size_t from = 0; from < un; ++from)
    for (std::size_t to = 0; to < un; ++to) {
      const std::int64_t sent = all[2 * un * from + to], taken = all[2 * un * to + un + from];
      detail::require(sent == taken, "PARO_CHECK: the ranks of this all_to_allv disagree: rank ", from, " sends ",
                      sent / element, " elements to rank ", to, " (send_blocks.counts[", to, "]), which takes ",
                      taken / element, " from it (recv_blocks.counts[", from, "])");
    }
}

}  // namespace paro
