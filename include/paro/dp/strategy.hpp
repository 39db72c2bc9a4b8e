#pragma once
// PaRO-DP sharding strategies: three letters for how parameters (p), gradients (g) and optimizer states
// (os) are partitioned, each N (replicated), I (sharded within the group, replicated across groups) or G
// (sharded over all ranks). NNN is plain data parallelism, NNG / NGG / GGG are ZeRO stages 1 / 2 / 3,
// III is close to MiCS / FSDP hybrid sharding. A strategy is valid when os is partitioned at least as
// finely as p and g (the optimizer updates a piece of the parameters from a piece of the gradients that
// the rank holds): 14 of the 27 combinations.

#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "paro/core/error.hpp"

namespace paro::dp {

enum class Partition { N = 0, I = 1, G = 2 };  // coarse to fine

inline char letter(Partition p) { return "NIG"[static_cast<int>(p)]; }

inline const char* describe(Partition p) {
  switch (p) {
    case Partition::N: return "replicated";
    case Partition::I: return "sharded within the group";
    case Partition::G: return "sharded over all ranks";
  }
  return "invalid";
}

struct Strategy {
  Partition p = Partition::N, g = Partition::N, os = Partition::N;

  std::string name() const { return {letter(p), letter(g), letter(os)}; }
  bool operator==(const Strategy& o) const { return p == o.p && g == o.g && os == o.os; }
  bool operator!=(const Strategy& o) const { return !(*this == o); }

  // Empty when valid; else why not.
  std::string invalid_reason() const {
    std::string why;
    auto finer = [](Partition a, Partition b) { return static_cast<int>(a) > static_cast<int>(b); };
    if (finer(p, os))
      why = detail::concat("parameters are ", describe(p), " but optimizer states only ", describe(os),
                           ": a rank would update parameters it does not hold");
    if (finer(g, os))
      why += detail::concat(why.empty() ? "" : "; ", "gradients are ", describe(g), " but optimizer states only ",
                            describe(os), ": a rank would update states from gradients it does not hold");
    return why;
  }
  bool valid() const { return invalid_reason().empty(); }

  // "NIG", case-insensitive, or a ZeRO stage alias: "0" .. "3" / "zero1" .. "zero3" / "ddp".
  static Strategy parse(std::string_view text) {
    std::string s;
    for (char c : text) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (s == "0" || s == "DDP" || s == "ZERO0") return parse("NNN");
    if (s == "1" || s == "ZERO1") return parse("NNG");
    if (s == "2" || s == "ZERO2") return parse("NGG");
    if (s == "3" || s == "ZERO3") return parse("GGG");
    auto part = [&](char c) {
      switch (c) {
        case 'N': return Partition::N;
        case 'I': return Partition::I;
        case 'G': return Partition::G;
      }
      throw UsageError(detail::concat("strategy '", text, "': letter '", c, "' is not N, I or G"));
    };
    detail::require(s.size() == 3, "strategy '", text,
                    "': use three letters p g os, each N (replicated), I (within the group) or G (global), e.g. "
                    "NIG; or a ZeRO stage 0-3");
    Strategy st{part(s[0]), part(s[1]), part(s[2])};
    detail::require(st.valid(), "strategy ", st.name(), " is not valid: ", st.invalid_reason());
    return st;
  }

  // Every combination, valid or not, in NNN .. GGG order.
  static std::vector<Strategy> every() {
    std::vector<Strategy> out;
    for (int p = 0; p < 3; ++p)
      for (int g = 0; g < 3; ++g)
        for (int os = 0; os < 3; ++os) out.push_back({Partition(p), Partition(g), Partition(os)});
    return out;
  }
  static std::vector<Strategy> all_valid() {
    std::vector<Strategy> out;
    for (const Strategy& s : every())
      if (s.valid()) out.push_back(s);
    return out;
  }
};

// The ZeRO stage a DeepSpeed config names: 0..3 -> NNN, NNG, NGG, GGG.
inline Strategy zero_stage(int stage) {
  detail::require(stage >= 0 && stage <= 3, "zero_optimization.stage ", stage, ": allowed 0, 1, 2, 3");
  return Strategy::parse(std::to_string(stage));
}

}  // namespace paro::dp
