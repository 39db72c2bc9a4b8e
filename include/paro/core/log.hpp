#pragma once
// PARO_DEBUG=INFO|WARN: log lines on stderr, prefixed with the rank, e.g. "[paro 3] INFO ring all_reduce ...".
// Message arguments are only formatted when the level is enabled.

#include <cstdio>
#include <string>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro::log {

enum class Level { off = 0, warn = 1, info = 2 };

inline Level level_from_env() {
  auto v = env::get("PARO_DEBUG");
  if (!v) return Level::off;
  if (*v == "INFO" || *v == "info") return Level::info;
  if (*v == "WARN" || *v == "warn") return Level::warn;
  if (*v == "OFF" || *v == "off" || *v == "0") return Level::off;
  throw UsageError(detail::concat("PARO_DEBUG: '", *v, "' is not a log level; allowed: INFO WARN OFF"));
}

inline Level threshold() {
  static const Level level = level_from_env();
  return level;
}

inline bool enabled(Level l) { return l <= threshold(); }

template <class... Args>
void write(Level l, int rank, Args&&... args) {
  if (!enabled(l)) return;
  const std::string line =
      detail::concat("[paro ", rank, "] ", l == Level::info ? "INFO " : "WARN ", std::forward<Args>(args)..., '\n');
  std::fputs(line.c_str(), stderr);  // one call per line, so lines of concurrent ranks do not interleave
}

template <class... Args>
void info(int rank, Args&&... args) {
  write(Level::info, rank, std::forward<Args>(args)...);
}

template <class... Args>
void warn(int rank, Args&&... args) {
  write(Level::warn, rank, std::forward<Args>(args)...);
}

}  // namespace paro::log
