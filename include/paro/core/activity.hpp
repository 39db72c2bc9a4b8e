#pragma once
// What a thread is working on, for the errors raised far below the call that started it: the Communicator
// names its collective, a schedule names its phase and step, and a transport's timeout appends describe():
//   "...; during all_reduce paro_cc global count=6000 float sum, ring all-gather step 3 of 5"
// so that the first line of a hung job's log says what every rank was waiting in. Nothing is formatted
// until an error asks: a collective is a pointer and a function, a phase a string literal and two counts.
// A lane thread of a collective (algorithms/lanes.hpp) inherits its caller's collective.

#include <cstddef>
#include <string>

#include "paro/core/error.hpp"

namespace paro::activity {

struct Collective {
  const void* subject = nullptr;
  std::string (*describe)(const void*) = nullptr;
};

struct Phase {
  const char* name = nullptr;  // a string literal
  std::size_t step = 0, steps = 0;
};

// Where in a hierarchical schedule: the rail between units, or inside one unit, and its size.
struct Level {
  const char* name = nullptr;  // a string literal
  int ranks = 0;
};

struct State {
  Collective collective;
  Level level;
  Phase phase;
};

inline State& current() {
  thread_local State state;
  return state;
}

// For the life of the scope, this thread runs the collective that describe(subject) names.
class CollectiveScope {
 public:
  CollectiveScope(const void* subject, std::string (*describe)(const void*)) : saved_(current()) {
    current() = {{subject, describe}, {}, {}};
  }
  explicit CollectiveScope(const Collective& inherited) : saved_(current()) { current() = {inherited, {}, {}}; }
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
  ~CollectiveScope() { current() = saved_; }

 private:
  State saved_;
};

// For the life of the scope, this thread is in phase `name` (a string literal) of `steps` steps.
class PhaseScope {
 public:
  explicit PhaseScope(const char* name, std::size_t steps = 0) : saved_(current().phase) {
    current().phase = {name, 0, steps};
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;
  ~PhaseScope() { current().phase = saved_; }
  // Steps count from 1.
  void step(std::size_t s) { current().phase.step = s; }

 private:
  Phase saved_;
};

// For the life of the scope, this thread works on level `name` (a string literal) of `ranks` ranks.
class LevelScope {
 public:
  LevelScope(const char* name, int ranks) : saved_(current().level) { current().level = {name, ranks}; }
  LevelScope(const LevelScope&) = delete;
  LevelScope& operator=(const LevelScope&) = delete;
  ~LevelScope() { current().level = saved_; }

 private:
  Level saved_;
};

// "; during <collective>, <level> of k ranks, <phase> step s of n", or "" outside any collective.
inline std::string describe() {
  const State& s = current();
  if (!s.collective.describe) return "";
  std::string out = "; during " + s.collective.describe(s.collective.subject);
  if (s.level.name) out += detail::concat(", ", s.level.name, " of ", s.level.ranks, " ranks");
  if (s.phase.name) {
    out += detail::concat(", ", s.phase.name);
    if (s.phase.steps) out += detail::concat(" step ", s.phase.step, " of ", s.phase.steps);
  }
  return out;
}

}  // namespace paro::activity
