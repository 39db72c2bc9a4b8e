#pragma once
// The training text: Debian's `fortunes` package (/usr/share/games/fortunes, about 4 MB of quotations,
// jokes and verse in English), read once, mapped to a 96-symbol alphabet (printable ASCII and newline).
// Every rank reads the same files and draws its own samples deterministically from (step, micro-step,
// rank, sample), so every strategy sees the same data.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "paro/core/error.hpp"

namespace paro::train {

class Corpus {
 public:
  static constexpr int vocabulary = 96;  // ' ' .. '~' and '\n'

  // A file, or every text file of a folder (the fortune tool's .dat indexes and .u8 links skipped).
  explicit Corpus(const std::string& path) {
    namespace fs = std::filesystem;
    detail::require(fs::exists(path), "corpus '", path, "' not found; install Debian's `fortunes` package ",
                    "(apt-get install fortunes) or pass --corpus FILE");
    std::vector<fs::path> files;
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::directory_iterator(path))
        if (entry.is_regular_file() && entry.path().extension() != ".dat" && entry.path().extension() != ".u8")
          files.push_back(entry.path());
      std::sort(files.begin(), files.end());  // the same order on every rank
    } else {
      files.push_back(path);
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it) {
        const int symbol = encode(*it);
        if (symbol >= 0) text_.push_back(static_cast<std::uint8_t>(symbol));
      }
    }
    detail::require(text_.size() > 100000, "corpus '", path, "': only ", text_.size(),
                    " usable characters; need more than 100000");
    split_ = text_.size() / 20 * 19;  // the last 5% for validation
  }

  static int encode(char c) {
    if (c == '\n') return vocabulary - 1;
    if (c >= ' ' && c <= '~') return c - ' ';
    return -1;
  }

  std::size_t size() const { return text_.size(); }
  const std::uint8_t* data() const { return text_.data(); }

  // Where training sample `index` of context `context` starts (training part), deterministically.
  std::size_t training_start(std::uint64_t index, std::size_t context) const {
    std::uint64_t x = index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;  // splitmix64
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<std::size_t>(x % (split_ - context - 1));
  }
  // Validation windows: evenly spaced over the held-out part.
  std::size_t validation_start(std::size_t index, std::size_t count, std::size_t context) const {
    const std::size_t span = text_.size() - split_ - context - 1;
    return split_ + index * span / std::max<std::size_t>(1, count);
  }

 private:
  std::vector<std::uint8_t> text_;
  std::size_t split_ = 0;
};

}  // namespace paro::train
