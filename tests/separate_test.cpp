// SEPARATE on the threads backend: the shared-seed generator, the projection's statistics, the compressor
// against a transcription of the seed's steps on every algorithm, scope, rank count and type, G-SEPARATE's
// agreement and clamps, checkpoints, and bad input.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "paro/compression/separate.hpp"
#include "paro/testing/separate_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::DataType;
using paro::Scope;
using paro::compression::Distribution;
using paro::compression::ProjectionShape;
using paro::compression::Separate;
using paro::compression::SeparateOptions;
using paro::compression::StreamKey;

// --- the generator ---------------------------------------------------------------------------------------

TEST(RandomStream, SameValuesHoweverTheWorkIsSplit) {
  for (Distribution d : {Distribution::gaussian, Distribution::rademacher}) {
    const StreamKey key{42, 7, 3};
    const std::size_t n = 10007;
    std::vector<float> whole(n);
    paro::compression::fill(d, key, 0, whole.data(), n);
    for (std::size_t threads : {2u, 3u, 7u}) {
      std::vector<float> parts(n);
      std::vector<std::thread> pool;
      for (std::size_t k = 0; k < threads; ++k)
        pool.emplace_back([&, k] {
          const std::size_t lo = n * k / threads, hi = n * (k + 1) / threads;
          paro::compression::fill(d, key, lo, parts.data() + lo, hi - lo);
        });
      for (auto& t : pool) t.join();
      EXPECT_EQ(std::memcmp(whole.data(), parts.data(), n * sizeof(float)), 0) << name_of(d) << " " << threads;
    }
  }
}

TEST(RandomStream, MomentsAndIndependentKeys) {
  const std::size_t n = 1 << 20;
  std::vector<float> g(n), other(n), signs(n);
  paro::compression::fill(Distribution::gaussian, {1, 0, 0}, 0, g.data(), n);
  double mean = 0, var = 0, fourth = 0;
  for (float v : g) mean += v;
  mean /= n;
  for (float v : g) {
    var += (v - mean) * (v - mean);
    fourth += std::pow(v - mean, 4);
  }
  var /= n;
  EXPECT_NEAR(mean, 0.0, 5e-3);
  EXPECT_NEAR(var, 1.0, 5e-3);
  EXPECT_NEAR(fourth / n, 3.0, 3e-2);  // Gaussian kurtosis
  // Another step, tensor or seed gives an uncorrelated stream.
  for (StreamKey k : {StreamKey{1, 1, 0}, StreamKey{1, 0, 1}, StreamKey{2, 0, 0}}) {
    paro::compression::fill(Distribution::gaussian, k, 0, other.data(), n);
    double dot = 0;
    for (std::size_t i = 0; i < n; ++i) dot += static_cast<double>(g[i]) * other[i];
    EXPECT_LT(std::fabs(dot / n), 5e-3);
  }
  paro::compression::fill(Distribution::rademacher, {1, 0, 0}, 0, signs.data(), n);
  double sum = 0;
  for (float v : signs) {
    ASSERT_TRUE(v == 1.0f || v == -1.0f);
    sum += v;
  }
  EXPECT_LT(std::fabs(sum / n), 5e-3);
}

// --- the projection's statistics -------------------------------------------------------------------------

// Over many fixed seeds: E[h~] = h, and E||h~ - h||^2 = sum over blocks of ((b + 1) / w) ||h_b||^2 for
// Gaussian vectors, ((b - 1) / w) ||h_b||^2 for Rademacher ones.
void check_statistics(Distribution d, std::size_t block_cols) {
  const std::size_t rows = 3, cols = 24, width = 4, samples = 20000;
  const ProjectionShape s{cols, block_cols, width};
  std::vector<float> h(rows * cols), p(rows * s.projected_cols()), back(rows * cols);
  paro::compression::RandomMatrix r;
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.9f * static_cast<float>(i)) + 0.3f;
  std::vector<double> mean(h.size(), 0.0);
  double sq = 0, predicted = 0;
  for (std::size_t j = 0; j < s.blocks(); ++j) {
    double norm = 0;
    for (std::size_t row = 0; row < rows; ++row)
      for (std::size_t k = 0; k < s.block_size(j); ++k) norm += std::pow(h[row * cols + s.block_begin(j) + k], 2);
    const double b = static_cast<double>(s.block_size(j));
    predicted += (d == Distribution::gaussian ? b + 1 : b - 1) / static_cast<double>(s.block_width(j)) * norm;
  }
  for (std::uint64_t seed = 1; seed <= samples; ++seed) {
    paro::compression::generate(d, {seed, 0, 0}, s, r);
    paro::compression::project(s, r, h.data(), cols, rows, p.data(), s.projected_cols());
    paro::compression::reconstruct(s, r, p.data(), s.projected_cols(), rows, 1.0f, back.data(), cols);
    for (std::size_t i = 0; i < h.size(); ++i) {
      mean[i] += back[i];
      sq += std::pow(static_cast<double>(back[i]) - h[i], 2);
    }
  }
  double bias = 0, norm = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    bias += std::pow(mean[i] / samples - h[i], 2);
    norm += std::pow(h[i], 2);
  }
  // The mean of `samples` estimates has expected squared error predicted / samples; allow 3x that.
  EXPECT_LT(bias, 3.0 * predicted / samples) << name_of(d) << " block_cols=" << block_cols;
  EXPECT_NEAR(sq / samples / predicted, 1.0, 0.05) << name_of(d) << " block_cols=" << block_cols;
  EXPECT_GT(predicted, norm);
}

TEST(Projection, UnbiasedWithTheVarianceOfTheFormula) {
  for (Distribution d : {Distribution::gaussian, Distribution::rademacher})
    for (std::size_t block_cols : {24u, 8u, 10u})  // full, three blocks, blocks of 10 + 10 + 4
      check_statistics(d, block_cols);
}

// Both kernels against the definition in double: narrow shapes (the loops) and wide ones (sgemm), with
// several blocks, a narrower last block and leading dimensions wider than the rows.
TEST(Projection, LoopsAndBlasComputeTheDefinition) {
  using paro::compression::by_loops;
  const std::vector<ProjectionShape> shapes = {{40, 40, 5}, {24, 10, 3},    {64, 64, 4},
                                               {30, 7, 1},  {200, 200, 20}, {100, 45, 17}};
  for (const ProjectionShape& s : shapes) {
    const std::size_t rows = 5, ldh = s.cols + 3, w = s.projected_cols(), ldp = w + 2;
    std::vector<float> h(rows * ldh), p(rows * ldp), back(rows * ldh);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::cos(0.37f * static_cast<float>(i)) - 0.1f;
    paro::compression::RandomMatrix r;
    paro::compression::generate(Distribution::gaussian, {9, 1, 2}, s, r);
    EXPECT_EQ(by_loops(s), s.width <= paro::compression::loop_max_width);
    EXPECT_EQ(r.by_vector.size(), by_loops(s) ? r.values.size() : 0u);
    paro::compression::project(s, r, h.data(), ldh, rows, p.data(), ldp);
    paro::compression::reconstruct(s, r, p.data(), ldp, rows, 0.5f, back.data(), ldh);
    const auto worst =
        paro::testing::projection_errors(s, r.values.data(), h.data(), ldh, rows, p.data(), ldp, back.data(), 0.5);
    EXPECT_LT(worst.projection, 1e-5) << "cols " << s.cols << " block " << s.block_cols << " width " << s.width;
    EXPECT_LT(worst.reconstruction, 1e-5) << "cols " << s.cols << " block " << s.block_cols << " width " << s.width;
  }
}

// --- the compressor on every algorithm, scope, rank count and type ----------------------------------------

using ClusterParam = std::tuple<const char*, Scope>;
class SeparateOnCluster : public ::testing::TestWithParam<ClusterParam> {};

TEST_P(SeparateOnCluster, EveryAlgorithmMatchesTheTranscription) {
  auto [emulate, scope] = GetParam();
  auto failures = paro::testing::on_cluster(emulate, "node", [&, scope = scope](auto& comm) {
    std::vector<std::string> f;
    for (Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::mics_hcs, Algorithm::paro_seq, Algorithm::paro_cc,
                        Algorithm::automatic})
      for (bool sharded : {false, true})
        for (auto& s :
             paro::testing::check_separate<paro::compression::Separate>(comm, {a, scope, DataType::f32, sharded}))
          f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, SeparateOnCluster,
                         ::testing::Combine(::testing::Values("nodes=2,ranks=4", "nodes=2,ranks=3:2",
                                                              "nodes=3,ranks=1"),
                                            ::testing::Values(Scope::global, Scope::intra, Scope::inter)));

class SeparateRankCounts : public ::testing::TestWithParam<int> {};

// f16 runs the all-reduce in one piece, the other types pipelined in many; both error rules.
TEST_P(SeparateRankCounts, TypesBlocksAndShards) {
  auto failures = paro::testing::on_threads(GetParam(), [](auto& comm) {
    std::vector<std::string> f;
    for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16})
      for (std::size_t block_cols : {0u, 16u})
        for (bool sharded : {false, true})
          for (auto rule : {paro::compression::ErrorRule::beta_on_residual, paro::compression::ErrorRule::smoothed})
            for (auto& s : paro::testing::check_separate<paro::compression::Separate>(
                     comm, {Algorithm::ring, Scope::global, dt, sharded, block_cols, dt == DataType::f16 ? 0u : 96u, 6,
                            rule}))
              f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(OneToSixteen, SeparateRankCounts, ::testing::Values(1, 2, 3, 5, 7, 8, 11, 16));

// A tall matrix: several row blocks per tensor, each its own pipelined piece.
TEST(Separate, ManyRowBlocksPipelined) {
  auto failures = paro::testing::on_threads(4, [](auto& comm) {
    std::vector<std::string> f;
    for (bool sharded : {false, true})
      for (auto& s : paro::testing::check_separate<paro::compression::Separate>(
               comm, {Algorithm::paro_cc, Scope::global, DataType::f32, sharded, 0, 4096, 1024}))
        f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// Sharded and all-reduced errors differ per rank but have the same mean over the ranks.
TEST(Separate, ShardedErrorsHaveTheAllReduceMean) {
  const int n = 4;
  std::vector<std::vector<float>> mean(2);
  std::mutex m;
  paro::threads::run(n, [&](paro::threads::Transport t) {
    paro::Communicator comm(std::move(t));
    SeparateOptions o;
    o.min_elements = 1;
    for (int sharded = 0; sharded < 2; ++sharded) {
      Separate sep(o);
      sep.add("w", 8, 64, DataType::f32);
      std::vector<float> g(8 * 64), out(sharded ? 2 * 64 : 8 * 64);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::cos(0.1f * static_cast<float>(i) * (comm.rank() + 1));
      if (sharded)
        sep.reduce_scatter(comm, {{0, g.data(), out.data()}});
      else
        sep.all_reduce(comm, 0, g.data(), out.data());
      std::vector<float> e = sep.tensor(0).error;
      comm.all_reduce(e.data(), e.data(), e.size(), paro::ReduceOp::avg);
      std::lock_guard<std::mutex> lock(m);
      mean[static_cast<std::size_t>(sharded)] = e;
    }
  });
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < mean[0].size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(mean[0][i]) - mean[1][i]));
    norm = std::max(norm, std::fabs(static_cast<double>(mean[0][i])));
  }
  EXPECT_GT(norm, 0.01);
  EXPECT_LT(diff, 1e-5 * (1 + norm));
}

// --- G-SEPARATE -------------------------------------------------------------------------------------------

TEST(Separate, AdaptiveWidthAndBetaAgreeFollowTheRuleAndStayClamped) {
  const int n = 4;
  auto failures = paro::testing::on_threads(n, [](auto& comm) {
    std::vector<std::string> f;
    SeparateOptions o;
    o.adaptive = true;
    o.adapt_every = 2;
    o.ratio = 16;
    o.min_elements = 1;
    Separate sep(o);
    sep.add("w", 16, 128, DataType::f32);
    std::vector<float> g(16 * 128), out(g.size());
    for (std::uint32_t step = 0; step < 20; ++step) {
      for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = std::sin(0.05f * static_cast<float>(i) + 0.3f * static_cast<float>(step)) +
               0.1f * static_cast<float>(comm.rank());
      const std::size_t width = sep.tensor(0).shape.width;
      const double beta = sep.tensor(0).beta;
      sep.all_reduce(comm, 0, g.data(), out.data());
      // The rule, transcribed: c = the ranks' mean cosine of (h~, g).
      double dot = 0, hh = 0, gg = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        dot += static_cast<double>(out[i]) * g[i];
        hh += static_cast<double>(out[i]) * out[i];
        gg += static_cast<double>(g[i]) * g[i];
      }
      double c = dot / std::sqrt(hh * gg);
      comm.all_reduce(&c, &c, 1, paro::ReduceOp::sum, {Algorithm::tree});
      c /= n;
      const auto& t = sep.tensor(0);
      std::size_t want_width = width;
      double want_beta = beta;
      if (step % o.adapt_every == 0) {
        want_width = std::clamp(static_cast<std::size_t>(1 + width * (1 + c)), t.min_width, t.max_width);
        want_beta = std::clamp(beta * (1 + c), o.beta_min, o.beta_max);
      }
      if (t.shape.width != want_width || t.beta != want_beta || t.shape.width < t.min_width ||
          t.shape.width > t.max_width || t.beta < o.beta_min || t.beta > o.beta_max)
        f.push_back(paro::detail::concat("rank ", comm.rank(), " step ", step, ": width ", t.shape.width, " beta ",
                                         t.beta, ", expected ", want_width, " ", want_beta));
      // Agreed on every rank.
      double mine[2] = {static_cast<double>(t.shape.width), t.beta}, lo[2], hi[2];
      comm.all_reduce(mine, lo, 2, paro::ReduceOp::min);
      comm.all_reduce(mine, hi, 2, paro::ReduceOp::max);
      if (lo[0] != hi[0] || lo[1] != hi[1]) f.push_back(paro::detail::concat("step ", step, ": ranks disagree"));
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// Without error feedback the estimate's cosine with the gradient stays near 1 / sqrt(1 + ratio) > 0, so
// width and beta grow until the clamps hold them.
TEST(Separate, AdaptiveGrowthStopsAtTheClamps) {
  auto failures = paro::testing::on_threads(2, [](auto& comm) {
    SeparateOptions o;
    o.adaptive = true;
    o.adapt_every = 1;
    o.error_feedback = false;
    o.ratio = 16;
    o.min_ratio = 8;
    o.min_elements = 1;
    Separate sep(o);
    sep.add("w", 16, 128, DataType::f32);
    std::vector<float> g(16 * 128), out(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.05f * static_cast<float>(i));
    for (int step = 0; step < 10; ++step) sep.all_reduce(comm, 0, g.data(), out.data());
    const auto& t = sep.tensor(0);
    std::vector<std::string> f;
    if (t.max_width != 16 || t.shape.width != 16 || t.beta != o.beta_max)
      f.push_back(
          paro::detail::concat("not clamped: width ", t.shape.width, " (max ", t.max_width, "), beta ", t.beta));
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// --- checkpoints ------------------------------------------------------------------------------------------

// A state no run can have saved (a width outside G-SEPARATE's range, beta outside [0, 1]) is refused, not
// taken into the projections.
TEST(Separate, CheckpointRejectsAnImpossibleState) {
  SeparateOptions o;
  o.min_elements = 1;
  Separate sep(o);
  sep.add("w", 12, 96, DataType::f32);
  std::stringstream saved;
  sep.save(saved);
  const std::string good = saved.str();
  // magic 16, seed 8, distribution 4, block columns 8, tensors 8; then rows 8, cols 8, type 4, step 4, width 8, beta 8
  constexpr std::size_t width_at = 16 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 4, beta_at = width_at + 8;
  auto load = [&](std::size_t at, auto value) {
    std::string bad = good;
    std::memcpy(&bad[at], &value, sizeof value);
    std::stringstream in(bad);
    Separate other(o);
    other.add("w", 12, 96, DataType::f32);
    return paro::testing::error_of([&] { other.load(in); });
  };
  EXPECT_EQ(load(width_at, std::uint64_t{3}), "(no error)");  // as saved: ceil(96 / 32)
  EXPECT_NE(load(width_at, std::uint64_t{1000}).find("tensor 'w' has width 1000 in the checkpoint; allowed here: "),
            std::string::npos);
  EXPECT_NE(load(width_at, std::uint64_t{0}).find("has width 0"), std::string::npos);
  EXPECT_NE(load(beta_at, std::nan("")).find("tensor 'w' has beta nan in the checkpoint; allowed: [0, 1]"),
            std::string::npos);
  EXPECT_NE(load(beta_at, 1.5).find("has beta 1.5"), std::string::npos);
}

TEST(Separate, CheckpointContinuesBitIdentically) {
  auto failures = paro::testing::on_threads(3, [](auto& comm) {
    SeparateOptions o;
    o.adaptive = true;
    o.adapt_every = 1;
    o.min_elements = 1;
    o.seed = 99;
    auto make = [&] {
      Separate sep(o);
      sep.add("w", 12, 96, DataType::bf16);
      sep.add("b", 1, 96, DataType::bf16);
      return sep;
    };
    auto step = [&](Separate& sep, std::uint32_t k) {
      std::vector<paro::bf16> g(12 * 96), b(96), out(g.size()), out_b(96);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = paro::bf16(std::sin(0.1f * i + comm.rank() + k));
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = paro::bf16(0.5f * comm.rank() + k);
      sep.all_reduce(comm, {{0, g.data(), out.data()}, {1, b.data(), out_b.data()}});
      out.insert(out.end(), out_b.begin(), out_b.end());
      return out;
    };
    Separate first = make();
    for (std::uint32_t k = 0; k < 3; ++k) step(first, k);
    std::stringstream saved;
    first.save(saved);
    Separate resumed = make();
    resumed.load(saved);
    std::vector<std::string> f;
    for (std::uint32_t k = 3; k < 6; ++k) {
      auto a = step(first, k), b = step(resumed, k);
      if (std::memcmp(a.data(), b.data(), a.size() * sizeof(paro::bf16)) != 0)
        f.push_back(paro::detail::concat("rank ", comm.rank(), " step ", k, ": resumed output differs"));
    }
    if (first.tensor(0).error != resumed.tensor(0).error ||
        first.tensor(0).shape.width != resumed.tensor(0).shape.width)
      f.push_back("resumed state differs");
    // A checkpoint of other tensors, or garbage, is refused with the reason.
    Separate other(o);
    other.add("w", 12, 95, DataType::bf16);
    other.add("b", 1, 96, DataType::bf16);
    std::stringstream again;
    first.save(again);
    try {
      other.load(again);
      f.push_back("a checkpoint of other shapes was accepted");
    } catch (const paro::Error& e) {
      if (std::string(e.what()).find("tensor 'w' is 12 x 95 bfloat16 here but 12 x 96") == std::string::npos)
        f.push_back(std::string("unexpected message: ") + e.what());
    }
    std::stringstream garbage("not a checkpoint at all");
    try {
      other.load(garbage);
      f.push_back("garbage was accepted");
    } catch (const paro::Error&) {
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// --- the step-wise form ------------------------------------------------------------------------------------

using paro::testing::error_of;

// project -> the caller's all-reduce -> reconstruct [-> the caller's sum of the cosines -> adapt] gives the
// all-reduce's bits: outputs, error buffers, widths and betas, over steps that reset and adapt, with a
// compressed f32 and bf16 tensor and a plain vector. The all-reduce runs in one piece, on the same ring.
TEST(Separate, StepwiseMatchesTheAllReduceBitwise) {
  auto failures = paro::testing::on_threads(3, [](auto& comm) {
    SeparateOptions o;
    o.adaptive = true;
    o.adapt_every = 2;
    o.reset_every = 3;
    o.min_elements = 1;
    o.pipeline_chunk_bytes = 0;
    o.collective = {Algorithm::ring};
    auto make = [&] {
      Separate sep(o);
      sep.add("w", 24, 64, DataType::f32);
      sep.add("v", 16, 40, DataType::bf16);
      sep.add("bias", 1, 64, DataType::f32);
      return sep;
    };
    Separate whole = make(), stepwise = make();
    std::vector<std::string> f;
    for (std::uint32_t k = 0; k < 7; ++k) {
      std::vector<float> w(24 * 64), bias(64);
      std::vector<paro::bf16> v(16 * 40);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.07f * i + comm.rank() + k);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = paro::bf16(std::cos(0.11f * i - comm.rank() + k));
      for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * comm.rank() + k;
      std::vector<float> w1(w.size()), bias1(bias.size());
      std::vector<paro::bf16> v1(v.size());
      whole.all_reduce(comm, {{0, w.data(), w1.data()}, {1, v.data(), v1.data()}, {2, bias.data(), bias1.data()}});
      // In place, as the DDP hook runs it.
      const std::vector<Separate::Gradient> grads{
          {0, w.data(), w.data()}, {1, v.data(), v.data()}, {2, bias.data(), bias.data()}};
      std::vector<float> wire(stepwise.wire_floats(grads));
      stepwise.project(grads, wire.data());
      comm.all_reduce(wire.data(), wire.data(), wire.size(), paro::ReduceOp::sum, {Algorithm::ring});
      std::vector<double> cosines = stepwise.reconstruct(grads, wire.data(), comm.size());
      if (cosines.empty() != (k % o.adapt_every != 0)) f.push_back(paro::detail::concat("step ", k, ": cosines?"));
      if (!cosines.empty()) {
        comm.all_reduce(cosines.data(), cosines.data(), cosines.size(), paro::ReduceOp::sum, {Algorithm::tree});
        stepwise.adapt(cosines);
      }
      if (w != w1 || bias != bias1 || std::memcmp(v.data(), v1.data(), v.size() * sizeof(paro::bf16)) != 0)
        f.push_back(paro::detail::concat("rank ", comm.rank(), " step ", k, ": outputs differ"));
      for (std::size_t id = 0; id < 3; ++id) {
        const auto &a = whole.tensor(id), &b = stepwise.tensor(id);
        if (a.error != b.error || a.shape.width != b.shape.width || a.beta != b.beta || a.step != b.step)
          f.push_back(paro::detail::concat("rank ", comm.rank(), " step ", k, ": tensor ", a.name, "'s state differs"));
      }
      if (whole.last_call().wire_bytes != stepwise.last_call().wire_bytes ||
          whole.last_call().dense_bytes != stepwise.last_call().dense_bytes)
        f.push_back("traffic differs");
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

TEST(Separate, StepwiseRefusesStepsOutOfOrder) {
  SeparateOptions o;
  o.min_elements = 1;
  o.adaptive = true;
  o.adapt_every = 1;
  Separate sep(o);
  sep.add("w", 8, 64, DataType::f32);
  sep.add("b", 1, 8, DataType::f32);
  std::vector<float> g(8 * 64, 1.0f), b(8, 1.0f);
  const std::vector<Separate::Gradient> grads{{0, g.data(), g.data()}, {1, b.data(), b.data()}};
  std::vector<float> wire(sep.wire_floats(grads));
  EXPECT_NE(error_of([&] { sep.reconstruct(grads, wire.data(), 1); }).find("no project() before it"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sep.adapt({1.0}); }).find("this step does not adapt"), std::string::npos);
  sep.project(grads, wire.data());
  EXPECT_NE(error_of([&] { sep.project(grads, wire.data()); }).find("a step-wise step is still open"),
            std::string::npos);
  std::stringstream out;
  EXPECT_NE(error_of([&] { sep.save(out); }).find("save between steps"), std::string::npos);
  EXPECT_NE(error_of([&] { sep.reconstruct({grads[0]}, wire.data(), 1); }).find("differ from the step's project()"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sep.reconstruct(grads, wire.data(), 0); }).find("ranks 0"), std::string::npos);
  const std::vector<double> cosines = sep.reconstruct(grads, wire.data(), 1);
  ASSERT_EQ(cosines.size(), 1u);  // the compressed tensor adapts; the plain vector does not
  EXPECT_NE(error_of([&] { sep.adapt({1.0, 2.0}); }).find("2 cosines for 1 adapting tensors"), std::string::npos);
  sep.adapt(cosines);
  EXPECT_EQ(sep.tensor(0).step, 1u);
  EXPECT_EQ(sep.tensor(1).step, 1u);
  EXPECT_EQ(error_of([&] { sep.save(out); }), "(no error)");
}

// --- bad input --------------------------------------------------------------------------------------------

TEST(Separate, RejectsBadInputWithTheReason) {
  SeparateOptions o;
  o.ratio = 1;
  EXPECT_NE(error_of([&] { Separate s(o); }).find("ratio 1: must be >= 2"), std::string::npos);
  EXPECT_NE(error_of([] { SeparateOptions::preset(20); }).find("allowed 16, 32, 64"), std::string::npos);
  Separate sep;
  EXPECT_NE(error_of([&] { sep.add("x", 4, 4, DataType::i32); }).find("allowed: f32 f16 bf16"), std::string::npos);
  EXPECT_NE(error_of([&] { sep.add("x", 0, 4, DataType::f32); }).find("has no elements"), std::string::npos);
  EXPECT_EQ(sep.tensor(sep.add("bias", 1, 4096, DataType::f32)).plain_reason, "a vector");
  EXPECT_EQ(sep.tensor(sep.add("small", 16, 16, DataType::f32)).plain_reason, "256 elements < min_elements 65536");
  EXPECT_TRUE(sep.tensor(sep.add("big", 256, 1024, DataType::f32)).compressed);
  EXPECT_NE(error_of([&] { paro::compression::parse_distribution("uniform"); }).find("allowed: gaussian rademacher"),
            std::string::npos);
  EXPECT_NE(error_of([&] { paro::compression::parse_error_rule("ema"); }).find("allowed: smoothed beta_on_residual"),
            std::string::npos);
  // The rule's former name stays accepted.
  EXPECT_EQ(paro::compression::parse_error_rule("seed"), paro::compression::ErrorRule::beta_on_residual);
  EXPECT_EQ(paro::compression::parse_error_rule(name_of(paro::compression::ErrorRule::beta_on_residual)),
            paro::compression::ErrorRule::beta_on_residual);
  // Error feedback's growth factor: the smoothed default contracts at ratio 32; the paper's rule, or a
  // beta at or below (ratio - 1) / (ratio + 1), does not, and says so.
  SeparateOptions settings;
  EXPECT_NEAR(settings.error_growth(), 0.95 * 0.95 + 0.05 * 0.05 * 32, 1e-12);
  EXPECT_EQ(settings.divergence_risk(), "");
  settings.error_rule = paro::compression::ErrorRule::beta_on_residual;
  EXPECT_NE(settings.divergence_risk().find("beta_on_residual rule and beta 0.95 multiplies the error's squared "
                                            "norm by about 28.88"),
            std::string::npos);
  settings.error_rule = paro::compression::ErrorRule::smoothed;
  settings.ratio = 64;
  EXPECT_NE(settings.divergence_risk().find("beta > (ratio - 1) / (ratio + 1) = 0.969"), std::string::npos);
  settings.beta = 0.98;
  EXPECT_EQ(settings.divergence_risk(), "");
  settings.error_feedback = false;
  settings.beta = 0.5;
  EXPECT_EQ(settings.error_growth(), 0.0);
  auto failures = paro::testing::on_threads(3, [&](auto& comm) {
    std::vector<std::string> f;
    std::vector<float> g(256 * 1024), out(g.size());
    auto expect = [&](const std::string& message, const std::string& part) {
      if (message.find(part) == std::string::npos) f.push_back("expected '" + part + "', got '" + message + "'");
    };
    Separate mine;
    const auto id = mine.add("big", 256, 1024, DataType::f32);
    expect(error_of([&] { mine.all_reduce(comm, 7, g.data(), out.data()); }), "tensor id 7 not registered");
    expect(error_of([&] { mine.all_reduce(comm, id, nullptr, out.data()); }), "null gradient or output");
    expect(error_of([&] {
             mine.all_reduce(comm, {{id, g.data(), out.data()}, {id, g.data(), out.data()}});
           }),
           "passed twice");
    expect(error_of([&] {
             mine.reduce_scatter(comm, {{id, g.data(), out.data()}});
           }),
           "has 256 rows, not divisible by the 3 ranks");
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

}  // namespace
