// SEPARATE on the GPU (paro/compression/gpu/separate.cuh): the device random stream against the host's, the cuBLAS
// projection against its definition, and the compressor against the transcription of the seed's steps
// (paro/testing/separate_check.hpp, the body the host compressor's tests run) on the threads backend over
// device memory and on NCCL. Every test skips where no GPU is usable.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_harness.hpp"
#include "paro/compression/gpu/projection.cuh"
#include "paro/compression/gpu/random.cuh"
#include "paro/compression/gpu/separate.cuh"
#include "paro/testing/separate_check.hpp"
#include "paro/transport/threads_cuda.cuh"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::DataType;
using paro::Scope;
using paro::compression::Distribution;
using paro::compression::ProjectionShape;
using paro::tools::DeviceThreads;

std::vector<float> download(const paro::cuda::DeviceBuffer& b, std::size_t n) {
  std::vector<float> host(n);
  paro::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  paro::cuda::check(cudaMemcpy(host.data(), const_cast<paro::cuda::DeviceBuffer&>(b).data(), n * sizeof(float),
                               cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
  return host;
}

// The Philox bits are the host's: Rademacher signs are equal, Gaussians equal up to the device's logf and
// sincospif (a few ulp); any window of the stream, block boundaries inside or not.
TEST(CudaRandom, DeviceStreamIsTheHostStream) {
  PARO_REQUIRE_GPUS(1);
  paro::cuda::set_device(0);
  for (Distribution d : {Distribution::gaussian, Distribution::rademacher})
    for (std::size_t first : {0u, 1u, 5u, 130u})
      for (std::size_t n : {1u, 7u, 1000u, 100003u}) {
        const paro::compression::StreamKey key{0x5E9A2A7E5EEDull, 3, 11};
        std::vector<float> want(n);
        paro::compression::fill(d, key, first, want.data(), n);
        paro::cuda::DeviceBuffer out(0, n * sizeof(float));
        paro::compression::gpu::fill_async(d, key, first, reinterpret_cast<float*>(out.data()), n, nullptr);
        const std::vector<float> got = download(out, n);
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
        if (d == Distribution::rademacher)
          EXPECT_EQ(worst, 0.0) << "first " << first << " n " << n;
        else
          EXPECT_LT(worst, 2e-5) << "first " << first << " n " << n;
      }
}

// P = H R and H~ = scale / w P R^T per block, computed in double from the same R, for the full projection
// and for blocks with a narrower last one, with leading dimensions wider than the matrices.
TEST(CudaProjection, MatchesTheDefinition) {
  PARO_REQUIRE_GPUS(1);
  paro::cuda::set_device(0);
  paro::cuda::Stream stream(0);
  paro::compression::gpu::Blas blas(stream.get());
  const std::size_t rows = 37;
  for (ProjectionShape s : {ProjectionShape{96, 96, 3}, ProjectionShape{96, 96, 12}, ProjectionShape{100, 16, 2},
                            ProjectionShape{100, 32, 8}, ProjectionShape{7, 7, 1}}) {
    const std::size_t ldh = s.cols + 3, w_total = s.projected_cols(), ldp = w_total + 2;
    std::vector<float> h(rows * ldh);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.37f * static_cast<float>(i % 1013));
    paro::cuda::DeviceBuffer dh(0, h.size() * sizeof(float)), dr(0, s.random_count() * sizeof(float)),
        dp(0, rows * ldp * sizeof(float)), dback(0, rows * ldh * sizeof(float));
    paro::cuda::check(cudaMemcpy(dh.data(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    auto* r_dev = reinterpret_cast<float*>(dr.data());
    paro::compression::gpu::fill_async(Distribution::gaussian, {9, 1, 2}, 0, r_dev, s.random_count(), stream.get());
    paro::compression::gpu::project(blas, s, r_dev, reinterpret_cast<const float*>(dh.data()), ldh, rows,
                                    reinterpret_cast<float*>(dp.data()), ldp);
    paro::compression::gpu::reconstruct(blas, s, r_dev, reinterpret_cast<const float*>(dp.data()), ldp, rows, 0.5f,
                                        reinterpret_cast<float*>(dback.data()), ldh);
    paro::cuda::check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
    const std::vector<float> r = download(dr, s.random_count()), p = download(dp, rows * ldp),
                             back = download(dback, rows * ldh);
    const auto worst =
        paro::testing::projection_errors(s, r.data(), h.data(), ldh, rows, p.data(), ldp, back.data(), 0.5);
    EXPECT_LT(worst.projection, 1e-5) << "cols " << s.cols << " block " << s.block_cols << " width " << s.width;
    EXPECT_LT(worst.reconstruction, 1e-5) << "cols " << s.cols << " block " << s.block_cols << " width " << s.width;
  }
}

// The compressor against the transcription: every type, the full and the block-diagonal projection, both
// error rules, on emulated clusters (uneven groups included) and scopes.
using ClusterParam = std::tuple<const char*, Scope>;
class CudaSeparateOnCluster : public ::testing::TestWithParam<ClusterParam> {};

TEST_P(CudaSeparateOnCluster, MatchesTheTranscription) {
  PARO_REQUIRE_GPUS(1);
  auto [emulate, scope] = GetParam();
  auto failures = paro::testing::on_cluster<DeviceThreads>(emulate, "node", [&, scope = scope](auto& comm) {
    std::vector<std::string> f;
    for (Algorithm a : {Algorithm::ring, Algorithm::paro_cc, Algorithm::automatic})
      for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16})
        for (std::size_t block_cols : {0u, 16u})
          for (auto rule : {paro::compression::ErrorRule::beta_on_residual, paro::compression::ErrorRule::smoothed})
            for (auto& s : paro::testing::check_separate<paro::compression::gpu::Separate>(
                     comm, {a, scope, dt, false, block_cols, 0, 6, rule}))
              f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, CudaSeparateOnCluster,
                         ::testing::Combine(::testing::Values("nodes=2,ranks=4", "nodes=2,ranks=3:2",
                                                              "nodes=3,ranks=1"),
                                            ::testing::Values(Scope::global, Scope::inter)));

class CudaSeparateNccl : public ::testing::TestWithParam<int> {};

TEST_P(CudaSeparateNccl, MatchesTheTranscription) {
  const int n = GetParam();
  PARO_REQUIRE_GPUS(n);
  auto failures = paro::testing::on_nccl(n, n > 2 ? "nodes=2" : "nodes=1", [](auto& comm) {
    std::vector<std::string> f;
    for (Algorithm a : {Algorithm::native, Algorithm::ring, Algorithm::paro_cc})
      for (DataType dt : {DataType::f32, DataType::bf16})
        for (auto& s : paro::testing::check_separate<paro::compression::gpu::Separate>(comm, {a, Scope::global, dt}))
          f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(RankCounts, CudaSeparateNccl, ::testing::Values(1, 2, 4));

// G-SEPARATE adapting every step: every rank ends with the same width and beta, inside the clamps.
TEST(CudaSeparate, AdaptiveWidthAndBetaAgree) {
  PARO_REQUIRE_GPUS(1);
  auto failures = paro::testing::on_threads<DeviceThreads>(4, [](auto& comm) {
    std::vector<std::string> f;
    paro::compression::SeparateOptions o;
    o.ratio = 8;
    o.min_elements = 0;
    o.adaptive = true;
    o.adapt_every = 1;
    paro::compression::gpu::Separate sep(o);
    const std::size_t rows = 24, cols = 64, count = rows * cols;
    const auto id = sep.add("w", rows, cols, DataType::f32);
    auto& t = comm.transport();
    auto grad = t.allocate(count * sizeof(float));
    for (std::uint32_t step = 0; step < 4; ++step) {
      std::vector<float> g(count);
      for (std::size_t i = 0; i < count; ++i) g[i] = paro::testing::separate_input(t.rank(), 0, step, i);
      t.upload(grad.data(), g.data(), count * sizeof(float));
      sep.all_reduce(comm, {{id, grad.data(), grad.data()}});
    }
    const auto& info = sep.tensor(id);
    if (info.shape.width < info.min_width || info.shape.width > info.max_width)
      f.push_back(
          paro::detail::concat("width ", info.shape.width, " outside [", info.min_width, ", ", info.max_width, "]"));
    if (info.beta < o.beta_min || info.beta > o.beta_max) f.push_back(paro::detail::concat("beta ", info.beta));
    const double mine[2] = {static_cast<double>(info.shape.width), info.beta};
    auto buffer = t.allocate(sizeof mine);
    auto* at = reinterpret_cast<double*>(buffer.data());
    for (paro::ReduceOp op : {paro::ReduceOp::min, paro::ReduceOp::max}) {
      double got[2];
      t.upload(at, mine, sizeof mine);
      comm.all_reduce(at, at, 2, op);
      t.download(got, at, sizeof got);
      if (got[0] != mine[0] || got[1] != mine[1]) f.push_back("ranks disagree on width or beta");
    }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// Bad calls are errors before any GPU work: an unregistered tensor, a null buffer, a tensor passed twice.
TEST(CudaSeparate, RejectsBadInputWithTheReason) {
  PARO_REQUIRE_GPUS(1);
  auto failures = paro::testing::on_threads<DeviceThreads>(2, [](auto& comm) {
    std::vector<std::string> f;
    paro::compression::gpu::Separate sep;
    const auto id = sep.add("w", 512, 256, DataType::f32);
    auto buffer = comm.transport().allocate(512 * 256 * sizeof(float));
    void* d = buffer.data();
    auto expect_error = [&](const std::vector<paro::compression::SeparateGradient>& call, const std::string& words) {
      const std::string e = paro::testing::error_of([&] { sep.all_reduce(comm, call); });
      if (e.find(words) == std::string::npos) f.push_back("expected '" + words + "', got: " + e);
    };
    expect_error({{id + 1, d, d}}, "not registered");
    expect_error({{id, nullptr, d}}, "null gradient");
    expect_error({{id, d, d}, {id, d, d}}, "passed twice");
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

}  // namespace
