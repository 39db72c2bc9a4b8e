#pragma once
// Runs a per-rank body on n thread ranks, or on the ranks of an emulated cluster, and gathers every
// rank's failure descriptions. Launcher picks the memory space: HostThreads (threads::run), or
// DeviceThreads in the GPU tests (threads::run_on_devices), so one body serves both.

#include <string>
#include <vector>

#include "paro/paro.hpp"
#include "paro/tools/launch.hpp"

namespace paro::testing {

// The launcher of the multi-rank test bodies: thread ranks, or, compiled with PARO_TEST_RECORDED (the
// paro-tests-recorded binary), thread ranks under NCCL's message rules, so one body serves both.
#ifdef PARO_TEST_RECORDED
using TestLauncher = tools::RecordedThreads;
#else
using TestLauncher = tools::HostThreads;
#endif

// Every rank's failures, rank by rank.
inline std::vector<std::string> joined(const std::vector<std::vector<std::string>>& per_rank) {
  std::vector<std::string> all;
  for (const auto& mine : per_rank) all.insert(all.end(), mine.begin(), mine.end());
  return all;
}

// Runs body(transport) on n ranks and gathers every rank's failure descriptions: for checks below the
// Communicator (the transport conformance suite).
template <class Launcher = TestLauncher, class Body>
std::vector<std::string> on_transports(int n, Body body) {
  return joined(tools::on_thread_ranks<Launcher>(n, [&](auto& t) { return body(std::move(t)); }));
}

template <class Launcher = TestLauncher, class Body>
std::vector<std::string> on_threads(int n, Body body) {
  return joined(tools::run_on_thread_ranks<Launcher>(n, CommunicatorConfig{}, body));
}

template <class Launcher = TestLauncher, class Body>
std::vector<std::string> on_cluster(const std::string& emulate, const std::string& group, Body body) {
  CommunicatorConfig config;
  config.discovery.emulate = emulate;
  config.group = GroupSpec::parse(group, true);
  const int ranks = topology::EmulationSpec::parse(emulate).rank_count().value();
  return joined(tools::run_on_thread_ranks<Launcher>(ranks, config, body));
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
