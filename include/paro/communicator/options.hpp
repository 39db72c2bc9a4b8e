#pragma once
// What a verb's call may choose (Options) and how a Communicator is set up (CommunicatorConfig).

#include <functional>
#include <optional>

#include "paro/algorithms/algorithm.hpp"
#include "paro/communicator/discovery.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology.hpp"

namespace paro {

struct Options {
  Options(Algorithm a = Algorithm::automatic, Scope s = Scope::global) : algorithm(a), scope(s) {}
  Algorithm algorithm;
  Scope scope;
  // Called on the thread that runs the collective before it touches the buffers; for inputs still being
  // produced asynchronously, e.g. by GPU work on the caller's stream: paro::cuda::after_stream(stream).
  std::function<void()> inputs_ready;
};

// How a Communicator learns its topology, forms its groups and tunes its algorithms; the defaults read
// the environment.
struct CommunicatorConfig {
  std::optional<Topology> topology;  // given: no discovery
  topology::DiscoveryOptions discovery = topology::DiscoveryOptions::from_env();
  GroupSpec group = GroupSpec::from_env();
  Tuning tuning = Tuning::from_env();
};

}  // namespace paro
