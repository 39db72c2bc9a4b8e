// paro-micro: Google Benchmark micro-benchmarks of SEPARATE's pieces on one core.
//
//   OPENBLAS_NUM_THREADS=1 paro-micro
//
// Generate/*: the shared-seed generator's throughput (values per second).
// Projection/*: SEPARATE's projection P = H R with R generated in the same call, and its reconstruction
// H~ = P R^T / w likewise, each timed side by side in the same loop with a plain sgemm of the same shape
// on a prepared matrix. Counter `vs_sgemm` = sgemm time / SEPARATE time (1 = as fast as BLAS alone).

#include <benchmark/benchmark.h>
#include <cblas.h>

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

// Args: rows, cols, ratio, reconstruct (0: projection, 1: reconstruction).
void Projection(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0)), cols = static_cast<std::size_t>(state.range(1));
  const auto ratio = static_cast<std::size_t>(state.range(2));
  const bool back = state.range(3) == 1;
  const ProjectionShape s{cols, cols, (cols + ratio - 1) / ratio};
  const std::size_t w = s.width;
  std::vector<float> h(rows * cols, 0.5f), p(rows * w, 0.25f), r, fixed(cols * w, 1.0f);
  const int m = static_cast<int>(rows), n = static_cast<int>(cols), k = static_cast<int>(w);
  double separate_s = 0, sgemm_s = 0;
  std::uint32_t step = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    paro::compression::generate(Distribution::gaussian, {1, step++, 0}, s, r);
    if (back)
      paro::compression::reconstruct(s, r.data(), p.data(), w, rows, 1.0f, h.data(), cols);
    else
      paro::compression::project(s, r.data(), h.data(), cols, rows, p.data(), w);
    const auto t1 = Clock::now();
    if (back)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, p.data(), k, fixed.data(), k, 0.0f, h.data(),
                  n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, h.data(), n, fixed.data(), k, 0.0f,
                  p.data(), k);
    const auto t2 = Clock::now();
    separate_s += seconds(t0, t1);
    sgemm_s += seconds(t1, t2);
    state.SetIterationTime(seconds(t0, t1));
    benchmark::DoNotOptimize(h.data());
    benchmark::DoNotOptimize(p.data());
  }
  const double flops = 2.0 * static_cast<double>(rows * cols * w) * static_cast<double>(state.iterations());
  state.counters["separate_GFLOPs"] = flops / separate_s / 1e9;
  state.counters["sgemm_GFLOPs"] = flops / sgemm_s / 1e9;
  state.counters["vs_sgemm"] = sgemm_s / separate_s;
}
BENCHMARK(Projection)
    ->ArgNames({"rows", "cols", "ratio", "reconstruct"})
    ->Args({16384, 1024, 32, 0})
    ->Args({16384, 1024, 32, 1})
    ->Args({4096, 4096, 32, 0})
    ->Args({4096, 4096, 32, 1})
    ->Args({1024, 1024, 16, 0})
    ->Args({1024, 1024, 64, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
