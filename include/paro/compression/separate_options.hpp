#pragma once
// SEPARATE's settings: the error rule (how the error buffer takes in the compression error, its names),
// SeparateOptions with the paper's presets and their validation.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "paro/communicator/options.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/core/error.hpp"

namespace paro::compression {

// How the error buffer takes in the newest compression error h - h~.
enum class ErrorRule {
  beta_on_residual,  // e <- (1 - beta) e + beta (h - h~): beta weighs the new residual, as the SEPARATE paper writes it
  smoothed,          // e <- beta e + (1 - beta) (h - h~): beta weighs the old error, a moving average
};

inline const char* name_of(ErrorRule r) { return r == ErrorRule::beta_on_residual ? "beta_on_residual" : "smoothed"; }

// "seed" is the rule's former name: still accepted, with a one-time note on stderr.
inline ErrorRule parse_error_rule(std::string_view s) {
  if (s == "beta_on_residual") return ErrorRule::beta_on_residual;
  if (s == "smoothed") return ErrorRule::smoothed;
  if (s == "seed") {
    static const bool noted = [] {
      std::fputs("paro: error rule 'seed' is deprecated, use its new name 'beta_on_residual'\n", stderr);
      return true;
    }();
    (void)noted;
    return ErrorRule::beta_on_residual;
  }
  throw UsageError(
      detail::concat("unknown error rule '", s, "'; allowed: smoothed beta_on_residual (seed: its former name)"));
}

struct SeparateOptions {
  int ratio = 32;              // w = ceil(block columns / ratio)
  std::size_t block_cols = 0;  // 0: the full projection; else block-diagonal with blocks of this many columns
  Distribution distribution = Distribution::gaussian;
  std::uint64_t seed = 0x5E9A2A7E5EEDull;
  bool error_feedback = true;
  double beta = 0.95;  // initial beta of the error rule
  // beta_on_residual grows the error by about beta sqrt(ratio) per step when the projection's variance
  // (about ratio ||h||^2) exceeds ||h||^2, as at ratio 32: training diverged (docs/compression.md). The
  // smoothed rule stays bounded while beta^2 + (1 - beta)^2 ratio < 1, so it is the default.
  ErrorRule error_rule = ErrorRule::smoothed;
  std::uint32_t reset_every = 0;    // T_e: e <- 0 when step % T_e == 0; 0: never
  bool adaptive = false;            // G-SEPARATE
  std::uint32_t adapt_every = 100;  // T_a
  int min_ratio = 0;                // adaptive clamp of w, as ratios; 0: ratio / 4 (at least 2) and ratio * 4
  int max_ratio = 0;
  double beta_min = 0.90;
  double beta_max = 0.99;
  std::size_t min_elements = 65536;               // smaller tensors go uncompressed
  std::size_t pipeline_chunk_bytes = 256 * 1024;  // all-reduce pieces overlapped with the compute; 0: one piece
  Options collective;  // algorithm and scope of the all-reduce (or reduce-scatter) of the projections

  // The ratios the paper recommends (16, 32, 64), everything else default.
  static SeparateOptions preset(int ratio) {
    detail::require(ratio == 16 || ratio == 32 || ratio == 64, "SEPARATE preset ", ratio,
                    ": allowed 16, 32, 64 (set SeparateOptions::ratio for any other ratio >= 2)");
    SeparateOptions o;
    o.ratio = ratio;
    return o;
  }

  int lowest_ratio() const { return min_ratio > 0 ? min_ratio : std::max(2, ratio / 4); }
  int highest_ratio() const { return max_ratio > 0 ? max_ratio : ratio * 4; }

  // How much the error buffer's expected squared norm is multiplied by per step, at the initial ratio and
  // beta: h - h~ carries about ratio ||h||^2 of zero-mean noise and h = g + e, so the smoothed rule gives
  // beta^2 + (1 - beta)^2 ratio, beta_on_residual (1 - beta)^2 + beta^2 ratio. At 1 or more the error, and
  // with it the noise of every later estimate, grows without bound (docs/compression.md). 0 without error
  // feedback.
  double error_growth() const {
    if (!error_feedback) return 0.0;
    const double kept = error_rule == ErrorRule::smoothed ? beta : 1.0 - beta;
    return kept * kept + (1.0 - kept) * (1.0 - kept) * ratio;
  }

  // Why these settings are known to diverge, with the way out; empty where they are not.
  std::string divergence_risk() const {
    const double growth = error_growth();
    if (growth < 1.0) return {};
    const double bound = static_cast<double>(ratio - 1) / (ratio + 1);
    return detail::concat("SEPARATE error feedback at ratio ", ratio, " with the ", name_of(error_rule),
                          " rule and beta ", beta, " multiplies the error's squared norm by about ", growth,
                          " per step, so it grows without bound and training diverges; use the smoothed rule "
                          "with beta > (ratio - 1) / (ratio + 1) = ",
                          bound, ", or no error feedback");
  }

  void validate() const {
    detail::require(ratio >= 2, "SEPARATE ratio ", ratio, ": must be >= 2 (columns per projection vector)");
    detail::require(beta > 0 && beta <= 1, "SEPARATE beta ", beta, ": must be in (0, 1]");
    detail::require(beta_min > 0 && beta_min <= beta_max && beta_max <= 1, "SEPARATE beta clamp [", beta_min, ", ",
                    beta_max, "]: need 0 < beta_min <= beta_max <= 1");
    detail::require(!adaptive || adapt_every >= 1, "SEPARATE adapt_every (T_a) must be >= 1 when adaptive");
    detail::require(lowest_ratio() >= 1 && lowest_ratio() <= ratio && ratio <= highest_ratio(),
                    "SEPARATE adaptive ratio range [", lowest_ratio(), ", ", highest_ratio(), "] must contain ratio ",
                    ratio);
    detail::require(distribution == Distribution::gaussian || distribution == Distribution::rademacher,
                    "SEPARATE distribution: allowed gaussian rademacher");
  }
};

}  // namespace paro::compression
