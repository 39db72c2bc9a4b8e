#pragma once
// Planning a call: which algorithm runs it (an explicit request, else PARO_ALGO, else the cost model's
// fastest, algorithms/registry.hpp) and, for paro_cc, how (its pipeline chunk, lanes, together, nodes only,
// direct), with the Tuning's pins applied last. Everything a plan depends on is the same on every rank
// (the model, the size, the scope's shape, the settings), so the ranks plan alike without talking.

#include <cstddef>
#include <limits>
#include <string>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/core/error.hpp"

namespace paro {

// What a call runs: the algorithm and, for paro_cc, its pipeline chunk, whether its lanes run inline,
// whether inline lanes exchange a level's shards together, whether the scope is cut by its nodes alone
// and whether every level exchanges directly; predicted once per call.
struct Plan {
  Algorithm algorithm;
  std::size_t pipeline_chunk_bytes = 0;
  bool lanes_inline = false;
  bool together = false;
  bool nodes_only = false;
  bool direct = false;
};

// Registry: the algorithms a Communicator can run; Transport: its backend.
template <class Registry, class Transport>
struct Planner {
  // Native algorithms need the backend's own collectives; every other runs on any transport.
  static bool on_this_backend(Algorithm a) {
    return Registry::family(a) != algorithms::Family::native || Transport::has_native_collectives;
  }

  static bool available(Algorithm a, Collective c) {
    return Registry::contains(a) && Registry::implements(a, c) && on_this_backend(a);
  }

  static const char* name_of(Algorithm a) {
    const char* name = Registry::name_of(a);
    return name ? name : "unregistered";
  }

  // The algorithms a call of c may request here.
  static std::string allowed_for(Collective c) {
    std::string out = "automatic";
    for (Algorithm a : Registry::ids)
      if (available(a, c)) out += std::string(" ") + name_of(a);
    return out;
  }

  // requested: the call's Options::algorithm; forced: PARO_ALGO's choice for c; lanes: where paro_cc's
  // lanes may run on this communicator.
  static Plan plan(Collective c, std::size_t full_bytes, Algorithm requested, Algorithm forced,
                   const algorithms::CostModel& cost, const algorithms::CostShape& shape, const Tuning& tuning,
                   algorithms::LaneChoice lanes) {
    Plan p{requested != Algorithm::automatic ? requested : forced};
    if (p.algorithm == Algorithm::automatic) {
      const auto best = Registry::best(cost, c, full_bytes, shape);
      p = {best.algorithm,           best.prediction.pipeline_chunk_bytes, best.prediction.lanes_inline,
           best.prediction.together, best.prediction.nodes_only,           best.prediction.direct};
    } else {
      detail::require(Registry::contains(p.algorithm), paro::name_of(c), ": algorithm ", static_cast<int>(p.algorithm),
                      " is not registered; allowed: ", Registry::names());
      detail::require(Registry::implements(p.algorithm, c), paro::name_of(c), ": algorithm ", name_of(p.algorithm),
                      " has no ", paro::name_of(c), " schedule; allowed: ", allowed_for(c));
      detail::require(on_this_backend(p.algorithm), paro::name_of(c), ": algorithm ", name_of(p.algorithm),
                      " is not available on the ", Transport::name, " backend; allowed here: ", allowed_for(c));
      // Only hierarchical schedules pipeline; flat ones skip the prediction on their (small-message) path.
      if (Registry::family(p.algorithm) == algorithms::Family::hierarchical) {
        const algorithms::Prediction predicted = Registry::predict(cost, p.algorithm, c, full_bytes, shape);
        p.pipeline_chunk_bytes = predicted.pipeline_chunk_bytes;
        p.lanes_inline = predicted.lanes_inline;
        p.together = predicted.together;
        p.nodes_only = predicted.nodes_only;
        p.direct = predicted.direct;
      }
    }
    if (tuning.pipeline_chunk_bytes) p.pipeline_chunk_bytes = tuning.pipeline_chunk_bytes;
    if (tuning.together) p.together = *tuning.together;
    if (tuning.all_direct && p.algorithm == Algorithm::paro_cc) p.direct = *tuning.all_direct;
    if (tuning.nodes_only && p.algorithm == Algorithm::paro_cc) p.nodes_only = *tuning.nodes_only && shape.nodes_only;
    // Decided here, not when the call runs: set_lanes may change it for later calls meanwhile.
    p.lanes_inline = p.lanes_inline || lanes == algorithms::LaneChoice::inline_only;
    return p;
  }
};

}  // namespace paro
