#pragma once
// Names of the collectives and algorithms, and PARO_ALGO, which picks an algorithm per collective with
// NCCL_ALGO's grammar: "ring" for all, or "allreduce:ring;allgather:tree;reducescatter:native".

#include <array>
#include <cctype>
#include <string>
#include <string_view>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro {

enum class Collective { all_gather, reduce_scatter, all_reduce };

// ring and tree are flat; mics_hcs, paro_seq and paro_cc are hierarchical (they use the groups and rails
// of the topology, and fall back to ring on a scope without levels).
enum class Algorithm { automatic, ring, tree, native, mics_hcs, paro_seq, paro_cc };

inline constexpr Algorithm all_algorithms[] = {Algorithm::ring,     Algorithm::tree,     Algorithm::mics_hcs,
                                               Algorithm::paro_seq, Algorithm::paro_cc, Algorithm::native};

inline const char* name_of(Collective c) {
  switch (c) {
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
  }
  return "invalid";
}

inline const char* name_of(Algorithm a) {
  switch (a) {
    case Algorithm::automatic: return "automatic";
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::native: return "native";
    case Algorithm::mics_hcs: return "mics_hcs";
    case Algorithm::paro_seq: return "paro_seq";
    case Algorithm::paro_cc: return "paro_cc";
  }
  return "invalid";
}

namespace detail {

inline std::string lowercase_without_underscores(std::string_view s) {
  std::string out;
  for (char ch : s)
    if (ch != '_' && ch != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return out;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace detail

inline Algorithm parse_algorithm(std::string_view s) {
  const std::string key = detail::lowercase_without_underscores(detail::trim(s));
  if (key == "automatic" || key == "auto" || key == "default") return Algorithm::automatic;
  for (Algorithm a : all_algorithms)
    if (key == detail::lowercase_without_underscores(name_of(a))) return a;
  throw Error(detail::concat("unknown algorithm '", s, "'; allowed: automatic ring tree mics_hcs paro_seq paro_cc native"));
}

inline Collective parse_collective(std::string_view s) {
  const std::string key = detail::lowercase_without_underscores(detail::trim(s));
  if (key == "allgather") return Collective::all_gather;
  if (key == "reducescatter") return Collective::reduce_scatter;
  if (key == "allreduce") return Collective::all_reduce;
  throw Error(detail::concat("unknown collective '", s, "'; allowed: all_gather reduce_scatter all_reduce"));
}

// The algorithm forced per collective (automatic where nothing is forced).
class AlgorithmOverrides {
 public:
  AlgorithmOverrides() { forced_.fill(Algorithm::automatic); }

  // "ring" or "allreduce:ring;allgather:tree" (';' or ',' between entries).
  static AlgorithmOverrides parse(std::string_view text) {
    AlgorithmOverrides o;
    try {
      std::size_t start = 0;
      while (start <= text.size()) {
        std::size_t end = text.find_first_of(";,", start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view entry = detail::trim(text.substr(start, end - start));
        if (!entry.empty()) {
          const std::size_t colon = entry.find(':');
          if (colon == std::string_view::npos) {
            o.forced_.fill(parse_algorithm(entry));
          } else {
            o.forced_[index(parse_collective(entry.substr(0, colon)))] = parse_algorithm(entry.substr(colon + 1));
          }
        }
        start = end + 1;
      }
    } catch (const Error& e) {
      throw Error(detail::concat("PARO_ALGO='", text, "': ", e.what() + 6,
                                 " (form: 'ring' or 'allreduce:ring;allgather:tree')"));
    }
    return o;
  }

  static AlgorithmOverrides from_env() {
    auto v = env::get("PARO_ALGO");
    return v ? parse(*v) : AlgorithmOverrides();
  }

  Algorithm operator[](Collective c) const { return forced_[index(c)]; }

 private:
  std::array<Algorithm, 3> forced_{};
  static std::size_t index(Collective c) { return static_cast<std::size_t>(c); }
};

}  // namespace paro
