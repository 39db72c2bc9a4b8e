#pragma once
// paro_seq: paro_cc's level schedules run one level after the other, with a barrier between phases, as
// the reference PaRO code does; the baseline that measures what paro_cc's overlap is worth.

#include "paro/algorithms/paro_cc.hpp"

namespace paro::algorithms {

// The descriptor (registry.hpp).
struct ParoSeq : ParoSchedules<false> {
  static constexpr Algorithm id = Algorithm::paro_seq;
  static constexpr const char* name = "paro_seq";
  static constexpr Family family = Family::hierarchical;
};

}  // namespace paro::algorithms
