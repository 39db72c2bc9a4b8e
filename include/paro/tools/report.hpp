#pragma once
// What paro's benchmarks and examples share beyond launching ranks: the nccl-tests size sweep, the
// --json file of records, and launching a tool whose rank 0 writes it.

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "paro/core/error.hpp"
#include "paro/tools/launch.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#endif

namespace paro::tools {

// Sizes from min_bytes to max_bytes, each `factor` times the last (nccl-tests' -b -e -f), rounded down to
// a multiple of unit (whole elements on every rank); a size the rounding repeats is listed once, and a
// factor of 1 gives min_bytes alone. Throws UsageError for min_bytes > max_bytes or a factor below 1 (or NaN).
inline std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, double factor,
                                           std::size_t unit = 1) {
  detail::require(min_bytes <= max_bytes, "sizes: the smallest (-b, ", min_bytes,
                  " bytes) is larger than the largest (-e, ", max_bytes, " bytes)");
  detail::require(factor >= 1, "sizes: the factor (-f) is ", factor, "; allowed: >= 1 (1: the smallest size alone)");
  std::vector<std::size_t> out;
  for (double b = static_cast<double>(min_bytes); b <= static_cast<double>(max_bytes); b *= factor) {
    const std::size_t rounded = static_cast<std::size_t>(b) / unit * unit;
    if (out.empty() || out.back() != rounded) out.push_back(rounded);
    if (factor == 1) break;
  }
  return out;
}

#if __has_include(<nlohmann/json.hpp>)
// Writes records (a JSON array) to path, the --json option's file; nothing when path is empty.
inline void write_json_records(const std::string& path, const nlohmann::json& records) {
  if (path.empty()) return;
  std::ofstream out(path);
  detail::require(static_cast<bool>(out), "--json: cannot write '", path, "'");
  out << records.dump(1) << "\n";
}

// launch() for a tool: body(comm, records) fills the records for --json and returns the exit status; rank
// 0's records go to json_path. Returns this process's exit status (under mpi, its own rank's).
template <class Body>
int launch_tool(const LaunchOptions& o, const std::string& json_path, Body&& body) {
  struct Result {
    nlohmann::json records = nlohmann::json::array();
    int exit_status = 0;
  };
  const auto run = launch(o, [&](auto& comm) {
    Result mine;
    mine.exit_status = body(comm, mine.records);
    return mine;
  });
  if (run.rank_0) write_json_records(json_path, run.result.records);
  return run.result.exit_status;
}
#endif

}  // namespace paro::tools
