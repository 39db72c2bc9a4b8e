// paro-micro: Google Benchmark micro-benchmarks of SEPARATE's pieces on one core.
//
//   OPENBLAS_NUM_THREADS=1 paro-micro
//
// Generate/*: the shared-seed generator's throughput (values per second).
// Projection/*: SEPARATE's projection P = H R with R generated in the same call, and its reconstruction
// H~ = P R^T / w likewise, each timed side by side in the same loop with the same arithmetic through BLAS
// (an sgemm per block) on a prepared matrix. Counter `vs_sgemm` = that time / SEPARATE time (1 = as fast as
// BLAS alone); `loops` = 1 where the shape goes through the loops instead of BLAS.

#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "paro/compression/projection.hpp"

namespace {

using paro::compression::Distribution;
using paro::compression::ProjectionShape;
using Clock = std::chrono::steady_clock;

void Generate(benchmark::State& state, Distribution d) {
  std::vector<float> out(std::size_t{1} << 20);
  std::uint32_t step = 0;
  for (auto _ : state) {
    paro::compression::fill(d, {7, step++, 0}, 0, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
}
BENCHMARK_CAPTURE(Generate, gaussian, Distribution::gaussian);
BENCHMARK_CAPTURE(Generate, rademacher, Distribution::rademacher);

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Args: rows, cols, ratio, reconstruct (0: projection, 1: reconstruction), block columns (0: the full
// projection).
void Projection(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0)), cols = static_cast<std::size_t>(state.range(1));
  const auto ratio = static_cast<std::size_t>(state.range(2));
  const bool back = state.range(3) == 1;
  const std::size_t b = state.range(4) == 0 ? cols : static_cast<std::size_t>(state.range(4));
  const ProjectionShape s{cols, b, (b + ratio - 1) / ratio};
  const std::size_t w = s.projected_cols();
  std::vector<float> h(rows * cols, 0.5f), p(rows * w, 0.25f), fixed(s.random_count(), 1.0f);
  paro::compression::RandomMatrix r;
  double separate_s = 0, blas_s = 0;
  std::uint32_t step = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    paro::compression::generate(Distribution::gaussian, {1, step++, 0}, s, r);
    if (back)
      paro::compression::reconstruct(s, r, p.data(), w, rows, 1.0f, h.data(), cols);
    else
      paro::compression::project(s, r, h.data(), cols, rows, p.data(), w);
    const auto t1 = Clock::now();
    // The same arithmetic through BLAS, what project() and reconstruct() do for wide blocks.
    if (back)
      paro::compression::projection_detail::reconstruct_by_blas(s, fixed.data(), p.data(), w, rows, 1.0f, h.data(),
                                                                cols);
    else
      paro::compression::projection_detail::project_by_blas(s, fixed.data(), h.data(), cols, rows, p.data(), w);
    const auto t2 = Clock::now();
    separate_s += seconds(t0, t1);
    blas_s += seconds(t1, t2);
    state.SetIterationTime(seconds(t0, t1));
    benchmark::DoNotOptimize(h.data());
    benchmark::DoNotOptimize(p.data());
  }
  const double flops = 2.0 * static_cast<double>(rows * s.random_count()) * static_cast<double>(state.iterations());
  state.counters["separate_GFLOPs"] = flops / separate_s / 1e9;
  state.counters["sgemm_GFLOPs"] = flops / blas_s / 1e9;
  state.counters["vs_sgemm"] = blas_s / separate_s;
  state.counters["loops"] = paro::compression::by_loops(s) ? 1 : 0;
}
BENCHMARK(Projection)
    ->ArgNames({"rows", "cols", "ratio", "reconstruct", "block"})
    ->Args({16384, 1024, 32, 0, 0})
    ->Args({16384, 1024, 32, 1, 0})
    ->Args({16384, 1024, 32, 0, 256})
    ->Args({16384, 1024, 32, 1, 256})
    ->Args({16384, 1024, 32, 0, 128})
    ->Args({16384, 1024, 32, 1, 128})
    ->Args({4096, 4096, 32, 0, 0})
    ->Args({4096, 4096, 32, 1, 0})
    ->Args({1024, 256, 16, 0, 0})
    ->Args({1024, 256, 16, 1, 0})
    ->Args({1024, 1024, 16, 0, 0})
    ->Args({1024, 1024, 64, 1, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
