#pragma once
// Tuning: every setting that changes how a Communicator runs its collectives, in one place, read from the
// environment by from_env() (the variables are listed in docs/user-guide.md). Ranks must agree on all of
// them (PARO_CHECK=1 verifies those that cut messages). Where the topology and the groups come from is
// DiscoveryOptions and GroupSpec, beside it in CommunicatorConfig.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/paro_cc.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

struct Tuning {
  std::string algorithms;       // PARO_ALGO: "ring", "allreduce:ring;allgather:tree"; empty: automatic
  algorithms::RingParams ring;  // PARO_RING_CHUNK (bytes per ring message), PARO_RING_WINDOW (in flight)
  // PARO_LANES=auto (default), threads or inline: paro_cc's levels per call on threads of their own (where
  // the backend allows) or overlapped on the caller's thread, whichever the cost model predicts faster; or
  // always the one named.
  algorithms::LaneChoice lanes = algorithms::LaneChoice::faster;
  // PARO_DIRECT_MAX: level blocks up to this size are exchanged directly, not in a ring; PARO_DIRECT_WINDOW:
  // the bytes such an exchange keeps in flight (at least 16 exchanges).
  algorithms::DirectParams direct;
  // PARO_CC_CHUNK, PARO_CC_TOGETHER, PARO_CC_DIRECT, PARO_CC_NODES_ONLY: aliases of paro_cc's pins
  // (PARO_ALGO's paro_cc(chunk=...,...)), applied whenever paro_cc runs, whichever way it was chosen.
  AlgorithmOverrides::Pins paro_cc_pins;
  bool check_signatures = false;            // PARO_CHECK=1: ranks compare each call's signature first
  std::optional<std::string> cost_file;     // PARO_COST_FILE: measured numbers for the cost model
  std::optional<std::string> links_preset;  // PARO_LINKS: the cost model's link preset

  static Tuning from_env() {
    Tuning t;
    t.algorithms = env::get("PARO_ALGO").value_or("");
    t.ring.chunk_bytes = env::bytes_or("PARO_RING_CHUNK", t.ring.chunk_bytes);
    detail::require(t.ring.chunk_bytes > 0, "PARO_RING_CHUNK must be positive");
    t.ring.window =
        static_cast<std::size_t>(env::integer_or("PARO_RING_WINDOW", static_cast<long>(t.ring.window), 1, 1024));
    const std::string lanes = env::get("PARO_LANES").value_or("auto");
    const auto* const named =
        std::find_if(std::begin(algorithms::all_lane_choices), std::end(algorithms::all_lane_choices),
                     [&](algorithms::LaneChoice c) { return lanes == algorithms::name_of(c); });
    detail::require(named != std::end(algorithms::all_lane_choices), "PARO_LANES=", lanes,
                    ": allowed values are auto, threads and inline");
    t.lanes = *named;
    t.direct.max_bytes = env::bytes_or("PARO_DIRECT_MAX", t.direct.max_bytes);
    t.direct.window_bytes = env::bytes_or("PARO_DIRECT_WINDOW", t.direct.window_bytes);
    t.paro_cc_pins = algorithms::ParoCC::pins_from_env();
    t.check_signatures = env::integer_or("PARO_CHECK", 0, 0, 1) == 1;
    t.cost_file = env::get("PARO_COST_FILE");
    t.links_preset = env::get("PARO_LINKS");
    return t;
  }
};

// A stepwise transport (NCCL's grouped send/recv) must not have receives posted ahead of the current
// step: rings run one whole block and one receive at a time there.
template <class Transport>
Tuning tuned_for(Tuning t) {
  if constexpr (is_stepwise_v<Transport>) {
    t.ring.window = 1;
    t.ring.chunk_bytes = std::numeric_limits<std::size_t>::max();
  }
  return t;
}

}  // namespace paro
