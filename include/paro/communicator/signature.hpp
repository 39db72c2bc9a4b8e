#pragma once
// PARO_CHECK=1: before a collective, the ranks of its scope compare what each is about to run (the
// collective, scope, algorithm, count, type, op and every setting that cuts messages), so that a rank
// calling something else is named in an error instead of a hang or wrong bytes (validation.hpp).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/communicator/validation.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

// The signature's collective field of a broadcast (not a Collective: one schedule, no algorithm); its op
// field holds the root.
inline constexpr std::int64_t broadcast_signature = -1;

// c: a Collective, or broadcast_signature (then op is the root); lanes: where paro_cc's lanes may run on
// t; name_of: the Communicator's algorithm names.
template <class Transport, class NameOf>
void check_call_agreement(Transport& t, const Tuning& tuning, algorithms::LaneChoice lanes, std::int64_t c, Scope s,
                          Algorithm a, std::size_t count, DataType dt, std::int64_t op, NameOf name_of) {
  using F = validation::Signature;
  auto pinned_value = [](const std::optional<bool>& pinned) -> std::int64_t { return pinned ? *pinned : -1; };
  F mine;
  mine.values = {c,
                 static_cast<std::int64_t>(s),
                 static_cast<std::int64_t>(a),
                 static_cast<std::int64_t>(count),
                 static_cast<std::int64_t>(dt),
                 op,
                 static_cast<std::int64_t>(tuning.ring.chunk_bytes),
                 static_cast<std::int64_t>(tuning.ring.window),
                 static_cast<std::int64_t>(tuning.pipeline_chunk_bytes),
                 static_cast<std::int64_t>(lanes),
                 static_cast<std::int64_t>(tuning.direct_max_bytes),
                 pinned_value(tuning.together),
                 pinned_value(tuning.nodes_only),
                 pinned_value(tuning.all_direct)};
  validation::check_agreement(t, mine, paro::name_of(s), [&name_of](const F& f) {
    const auto& v = f.values;
    auto setting = [](std::int64_t x) { return x < 0 ? "unset" : x ? "1" : "0"; };  // an optional switch
    if (v[F::collective] == broadcast_signature)
      return detail::concat("broadcast scope=", paro::name_of(static_cast<Scope>(v[F::scope])), " count=", v[F::count],
                            " ", paro::name_of(static_cast<DataType>(v[F::data_type])), " root=", v[F::op],
                            " (PARO_RING_CHUNK=", v[F::ring_chunk], " PARO_RING_WINDOW=", v[F::ring_window], ")");
    return detail::concat(paro::name_of(static_cast<Collective>(v[F::collective])),
                          " scope=", paro::name_of(static_cast<Scope>(v[F::scope])),
                          " algo=", name_of(static_cast<Algorithm>(v[F::algorithm])), " count=", v[F::count], " ",
                          paro::name_of(static_cast<DataType>(v[F::data_type])), " ",
                          paro::name_of(static_cast<ReduceOp>(v[F::op])), " (PARO_RING_CHUNK=", v[F::ring_chunk],
                          " PARO_RING_WINDOW=", v[F::ring_window], " PARO_CC_CHUNK=", v[F::pipeline_chunk],
                          " lanes=", algorithms::name_of(static_cast<algorithms::LaneChoice>(v[F::lanes])),
                          " PARO_DIRECT_MAX=", v[F::direct_max], " PARO_CC_TOGETHER=", setting(v[F::together]),
                          " PARO_CC_NODES_ONLY=", setting(v[F::nodes_only]),
                          " PARO_CC_DIRECT=", setting(v[F::all_direct]), ")");
  });
}

}  // namespace paro
