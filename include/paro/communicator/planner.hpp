#pragma once
// Planning a call: which algorithm runs it (an explicit request, else PARO_ALGO, else the cost model's
// fastest, algorithms/registry.hpp) and how (the algorithm's plan: predicted, then PARO_ALGO's pins and
// their older environment aliases, then what the scope and the backend allow). Everything a plan depends on is the same
// on every rank (the model, the size, the scope's shape, the settings), so the ranks plan alike without talking.

#include <cstddef>
#include <string>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/lanes.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/core/error.hpp"

namespace paro {

// What a call runs: the algorithm and its plan (the descriptor's Params, registry.hpp: for paro_cc its
// pipeline chunk, lanes, together, cut by nodes and direct levels), decided once per call.
template <class Registry>
struct BasicPlan {
  Algorithm algorithm;
  typename Registry::Params params;
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

  using Plan = BasicPlan<Registry>;

  // requested: the call's Options::algorithm; forced and pins: PARO_ALGO's choice for c and its pinned
  // choices; lanes: where the lanes of hierarchical algorithms may run on this communicator.
  static Plan plan(Collective c, std::size_t full_bytes, Algorithm requested, Algorithm forced,
                   const AlgorithmOverrides::Pins& pins, const algorithms::CostModel& cost,
                   const algorithms::CostShape& shape, const Tuning& tuning, algorithms::LaneChoice lanes) {
    Plan p{requested != Algorithm::automatic ? requested : forced, {}};
    if (p.algorithm == Algorithm::automatic) {
      const auto best = Registry::best(cost, c, full_bytes, shape);
      p = {best.algorithm, best.prediction.params};
    } else {
      // Each message built only on failure: every call with an explicit algorithm passes here.
      const char* what = Registry::Collectives::name_of(c);
      if (!Registry::contains(p.algorithm))
        throw UsageError(detail::concat(what, ": algorithm ", static_cast<int>(p.algorithm),
                                        " is not registered; allowed: ", Registry::names()));
      if (!Registry::implements(p.algorithm, c))
        throw UsageError(detail::concat(what, ": algorithm ", name_of(p.algorithm), " has no ", what,
                                        " schedule; allowed: ", allowed_for(c)));
      if (!on_this_backend(p.algorithm))
        throw UsageError(detail::concat(what, ": algorithm ", name_of(p.algorithm), " is not available on the ",
                                        Transport::name, " backend; allowed here: ", allowed_for(c)));
      // Only hierarchical schedules have choices to predict; flat ones skip the model on their (small-message)
      // path.
      p.params = Registry::family(p.algorithm) == algorithms::Family::hierarchical
                     ? Registry::predict(cost, p.algorithm, c, full_bytes, shape).params
                     : Registry::params_of(p.algorithm);
      // PARO_ALGO's pins are its forced algorithm's, not one a call requests itself.
      if (requested == Algorithm::automatic) Registry::apply(p.algorithm, p.params, pins);
    }
    if (p.algorithm == Algorithm::paro_cc) Registry::apply(p.algorithm, p.params, tuning.paro_cc_pins);
    // Decided here, not when the call runs: set_lanes may change the lanes for later calls meanwhile.
    Registry::settle(p.algorithm, p.params, shape, lanes);
    return p;
  }
};

}  // namespace paro
