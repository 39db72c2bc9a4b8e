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

template <class Launcher = HostThreads, class Body>
std::vector<std::string> on_threads(int n, Body body) {
  std::mutex mutex;
  std::vector<std::string> failures;
  Launcher::run(n, [&](auto t) {
    Communicator comm(std::move(t));
    std::vector<std::string> mine = body(comm);
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  return failures;
}

template <class Launcher = HostThreads, class Body>
std::vector<std::string> on_cluster(const std::string& emulate, const std::string& group, Body body) {
  const int ranks = topology::EmulationSpec::parse(emulate).rank_count().value();
  std::vector<std::string> failures;
  std::mutex mutex;
  Launcher::run(ranks, [&](auto t) {
    CommunicatorConfig config;
    config.discovery.emulate = emulate;
    config.group = GroupSpec::parse(group, true);
    Communicator comm(std::move(t), config);
    std::vector<std::string> mine = body(comm);
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  return failures;
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
