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
#include "paro/algorithms/ring.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

struct Tuning {
  std::string algorithms;                // PARO_ALGO: "ring", "allreduce:ring;allgather:tree"; empty: automatic
  algorithms::RingParams ring;           // PARO_RING_CHUNK (bytes per ring message), PARO_RING_WINDOW (in flight)
  std::size_t pipeline_chunk_bytes = 0;  // PARO_CC_CHUNK: paro_cc's pipeline chunk; 0: the cost model's
  // PARO_LANES=auto (default), threads or inline: paro_cc's levels per call on threads of their own (where
  // the backend allows) or overlapped on the caller's thread, whichever the cost model predicts faster; or
  // always the one named.
  algorithms::LaneChoice lanes = algorithms::LaneChoice::faster;
  std::size_t direct_max_bytes =
      algorithms::CostModel::default_direct_max_bytes;  // PARO_DIRECT_MAX: level blocks
                                                        // up to this size are exchanged directly, not in a ring
  std::optional<bool> together;             // PARO_CC_TOGETHER=1/0: inline lanes always/never exchange a level's
                                            // shards at once (paro_cc); unset: the cost model's choice
  std::optional<bool> all_direct;           // PARO_CC_DIRECT=1/0: paro_cc one shard at a time always/never runs
                                            // every level direct (else PARO_DIRECT_MAX's rule); unset: the model's
  std::optional<bool> nodes_only;           // PARO_CC_NODES_ONLY=1/0: paro_cc always/never cuts a scope with a
                                            // level above the node by its nodes alone; unset: the model's choice
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
    t.pipeline_chunk_bytes = env::bytes_or("PARO_CC_CHUNK", 0);
    const std::string lanes = env::get("PARO_LANES").value_or("auto");
    const auto* const named =
        std::find_if(std::begin(algorithms::all_lane_choices), std::end(algorithms::all_lane_choices),
                     [&](algorithms::LaneChoice c) { return lanes == algorithms::name_of(c); });
    detail::require(named != std::end(algorithms::all_lane_choices), "PARO_LANES=", lanes,
                    ": allowed values are auto, threads and inline");
    t.lanes = *named;
    t.direct_max_bytes = env::bytes_or("PARO_DIRECT_MAX", t.direct_max_bytes);
    auto switch_of = [](const char* name) {  // 1 or 0 where set: pins one of paro_cc's choices
      return env::get(name) ? std::optional<bool>(env::integer_or(name, 0, 0, 1) == 1) : std::nullopt;
    };
    t.together = switch_of("PARO_CC_TOGETHER");
    t.all_direct = switch_of("PARO_CC_DIRECT");
    t.nodes_only = switch_of("PARO_CC_NODES_ONLY");
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
