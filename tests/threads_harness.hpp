#pragma once
// Runs a per-rank body on n thread ranks, or on the ranks of an emulated cluster, and gathers every
// rank's failure descriptions. Launcher picks the memory space: HostThreads (threads::run), or
// DeviceThreads in the GPU tests (threads::run_on_devices), so one body serves both.

#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "paro/paro.hpp"

namespace paro::testing {

struct HostThreads {
  template <class Fn>
  static void run(int n, Fn&& fn) {
    threads::run(n, std::forward<Fn>(fn));
  }
};

// Runs body(transport) on n ranks and gathers every rank's failure descriptions: for checks below the
// Communicator (the transport conformance suite), and the base of on_threads and on_cluster.
template <class Launcher = HostThreads, class Body>
std::vector<std::string> on_transports(int n, Body body) {
  std::mutex mutex;
  std::vector<std::string> failures;
  Launcher::run(n, [&](auto t) {
    std::vector<std::string> mine = body(std::move(t));
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  return failures;
}

template <class Launcher = HostThreads, class Body>
std::vector<std::string> on_threads(int n, Body body) {
  return on_transports<Launcher>(n, [&](auto t) {
    Communicator comm(std::move(t));
    return body(comm);
  });
}

template <class Launcher = HostThreads, class Body>
std::vector<std::string> on_cluster(const std::string& emulate, const std::string& group, Body body) {
  const int ranks = topology::EmulationSpec::parse(emulate).rank_count().value();
  return on_transports<Launcher>(ranks, [&](auto t) {
    CommunicatorConfig config;
    config.discovery.emulate = emulate;
    config.group = GroupSpec::parse(group, true);
    Communicator comm(std::move(t), config);
    return body(comm);
  });
}

// The message of the paro::Error that f throws, or "(no error)".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::string first_lines(const std::vector<std::string>& lines, std::size_t most = 8) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < most; ++i) out += lines[i] + "\n";
  if (lines.size() > most) out += "... and " + std::to_string(lines.size() - most) + " more\n";
  return out;
}

}  // namespace paro::testing
