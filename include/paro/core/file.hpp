#pragma once
// A whole file as bytes, for the readers of outside input (topology and cost files, configs, checkpoints):
// each says in its own words which file could not be read.

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace paro::detail {

// The file's bytes, or nothing where it cannot be opened.
inline std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace paro::detail
