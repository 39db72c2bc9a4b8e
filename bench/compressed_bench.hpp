#pragma once
// paro-bench --coll compressed_all_reduce: SEPARATE's compressed all-reduce of one f32 gradient matrix next
// to the plain all-reduce of the same gradient, per algorithm, measured side by side in one run.
//
// Per algorithm and shape: the plain all-reduce; the plain all-reduce of the compressed payload alone
// (the communication part); and each SEPARATE variant (full projection, or block-diagonal with blocks of
// b columns) with every cost included: generation, projection, all-reduce, reconstruction, error update.
// rel_error = ||h~ - mean h|| / ||mean h|| of a fresh compressor's first call (its expectation is
// sqrt(sum over blocks of (b + 1) / w ||h_b||^2) / ||h||, about sqrt(ratio)); speedup = the best plain
// algorithm's time over this one's. On a transport that moves device memory (paro-bench-cuda's nccl and
// --device cuda) the gradient lives on the GPU and the compressor is the GPU's (paro/compression/gpu/separate.cuh).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <type_traits>

#ifdef PARO_HAVE_COMPRESSION
#include "paro/compression/separate.hpp"
#endif
#ifdef PARO_HAVE_CUDA_COMPRESSION
#include "paro/compression/gpu/separate.cuh"
#endif
#include "paro/core/clock.hpp"
#include "paro/core/env.hpp"
#include "paro/testing/separate_check.hpp"
#include "paro/tools/over_ranks.hpp"

#include "median.hpp"

namespace paro::bench {

struct CompressedRun {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;  // rows x cols
  compression::SeparateOptions options;                     // ratio, distribution, error feedback
  std::vector<std::size_t> block_cols;                      // variants; 0 = the full projection
  Scope scope = Scope::global;
  int iters = 5, warmup = 1;
  int rounds = 3;  // of every variant back to back; the median round is reported
};

// The compressor for a transport's memory: the GPU's where it moves device memory, else the host's; void
// where this build has none.
template <class Transport, class = void>
struct CompressorFor {
#ifdef PARO_HAVE_COMPRESSION
  using type = compression::Separate;
#else
  using type = void;
#endif
};
#ifdef PARO_HAVE_CUDA_COMPRESSION
template <class Transport>
struct CompressorFor<Transport,
                     std::enable_if_t<std::is_same_v<decltype(std::declval<const Transport&>().allocate(std::size_t{})),
                                                     cuda::DeviceBuffer>>> {
  using type = compression::gpu::Separate;
};
#endif

template <class Transport>
class CompressedBench {
  using Compressor = typename CompressorFor<Transport>::type;

 public:
  CompressedBench(Communicator<Transport>& comm, const CompressedRun& run, std::vector<Algorithm> algos)
      : comm_(comm), run_(run), algos_(std::move(algos)) {}

  void run(nlohmann::json& records) {
    for (const auto& [rows, cols] : run_.shapes) run_shape(rows, cols, records);
  }

 private:
  struct Result {
    Algorithm algo = Algorithm::automatic;
    std::string variant;
    std::size_t block_cols = 0;
    double time_us = 0, comm_us = 0, rel_error = 0;  // medians over rounds
    std::size_t wire_bytes = 0;
    std::vector<double> rounds_us, comm_rounds_us;
  };

  Communicator<Transport>& comm_;
  const CompressedRun& run_;
  std::vector<Algorithm> algos_;

  template <class F>
  double timed(F&& call) {
    for (int i = 0; i < run_.warmup; ++i) call();
    comm_.barrier();
    const double start = clock::now_us();
    for (int i = 0; i < run_.iters; ++i) call();
    return mean_over_ranks(comm_, (clock::now_us() - start) / std::max(1, run_.iters));
  }

  compression::SeparateOptions options_for(Algorithm a, std::size_t block_cols) const {
    compression::SeparateOptions o = run_.options;
    o.block_cols = block_cols;
    o.min_elements = 0;  // the benchmark's gradient is compressed whatever its size, unless it is a vector
    o.collective = {a, run_.scope};
    return o;
  }

  void run_shape(std::size_t rows, std::size_t cols, nlohmann::json& records) {
    const std::size_t count = rows * cols, bytes = count * sizeof(float);
    const int me = comm_.transport(run_.scope).rank();
    auto& memory = comm_.transport();
    std::vector<float> host(count), mean(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = testing::separate_input(me, 0, 0, i);
    auto grad_buffer = memory.allocate(bytes), out_buffer = memory.allocate(bytes);
    auto* grad = reinterpret_cast<float*>(grad_buffer.data());
    auto* out = reinterpret_cast<float*>(out_buffer.data());
    memory.upload(grad, host.data(), bytes);
    comm_.all_reduce(grad, out, count, ReduceOp::avg, {Algorithm::ring, run_.scope});
    memory.download(mean.data(), out, bytes);
    double mean_norm = 0;
    for (float v : mean) mean_norm += static_cast<double>(v) * v;
    mean_norm = std::sqrt(mean_norm);

    // The variants, each with its compressor and first-call error; then rounds of every variant back to
    // back, so that the drift of a shared machine hits them alike; each reports its median round.
    std::vector<Result> results;
    std::vector<std::unique_ptr<Compressor>> compressors;
    for (Algorithm a : algos_) {
      Result plain;
      plain.algo = a;
      plain.variant = "plain";
      plain.wire_bytes = bytes;
      results.push_back(plain);
      compressors.emplace_back();
      for (std::size_t b : run_.block_cols) {
        auto sep = std::make_unique<Compressor>(options_for(a, b));
        sep->add("gradient", rows, cols, DataType::f32);
        Result r;
        r.algo = a;
        r.variant = b == 0 ? "separate" : "separate b=" + std::to_string(b);
        r.block_cols = b;
        sep->all_reduce(comm_, {{0, grad, out}});
        memory.download(host.data(), out, bytes);
        double diff = 0;
        for (std::size_t i = 0; i < count; ++i) diff += std::pow(static_cast<double>(host[i]) - mean[i], 2);
        r.rel_error = mean_norm > 0 ? std::sqrt(diff) / mean_norm : 0;
        r.wire_bytes = sep->last_call().wire_bytes;
        results.push_back(r);
        compressors.push_back(std::move(sep));
      }
    }
    for (int round = 0; round < run_.rounds; ++round)
      for (std::size_t k = 0; k < results.size(); ++k) {
        Result& r = results[k];
        const Options plain{r.algo, run_.scope};
        if (!compressors[k]) {
          r.rounds_us.push_back(
              timed([&] { comm_.all_reduce(grad, out, count, DataType::f32, ReduceOp::sum, plain); }));
          continue;
        }
        auto payload = memory.allocate(r.wire_bytes);
        r.comm_rounds_us.push_back(timed([&] {
          comm_.all_reduce(payload.data(), payload.data(), r.wire_bytes / sizeof(float), DataType::f32, ReduceOp::sum,
                           plain);
        }));
        r.rounds_us.push_back(timed([&] { compressors[k]->all_reduce(comm_, {{0, grad, out}}); }));
      }
    for (Result& r : results) {
      r.time_us = median(r.rounds_us);
      r.comm_us = median(r.comm_rounds_us);
    }
    double best_plain = 0;
    Algorithm best_algo = algos_.front();
    for (const Result& r : results)
      if (r.variant == "plain" && (best_plain == 0 || r.time_us < best_plain))
        best_plain = r.time_us, best_algo = r.algo;
    for (const Result& r : results) records.push_back(record(r, rows, cols, best_plain));
    if (comm_.rank() != 0) return;
    const auto blas_threads = env::get("OPENBLAS_NUM_THREADS");
    std::printf(
        "#\n# compressed_all_reduce: %zu x %zu float (%zu B), ratio %d, %s, error feedback %s, %d ranks "
        "(scope %s), OPENBLAS_NUM_THREADS=%s\n",
        rows, cols, bytes, run_.options.ratio, name_of(run_.options.distribution),
        run_.options.error_feedback ? name_of(run_.options.error_rule) : "off", comm_.transport(run_.scope).size(),
        name_of(run_.scope), blas_threads ? blas_threads->c_str() : "unset");
    std::printf("# %10s  %-16s  %12s  %23s  %12s  %11s  %12s  %9s  %8s\n", "algo", "variant", "time(us)",
                "rounds min..max (us)", "wire(B)", "algbw(GB/s)", "comm(us)", "rel_error", "speedup");
    for (const Result& r : results)
      std::printf("  %10s  %-16s  %12.1f  %11.1f..%-11.1f  %12zu  %11.3f  %12.1f  %9.3f  %7.2fx\n", name_of(r.algo),
                  r.variant.c_str(), r.time_us, *std::min_element(r.rounds_us.begin(), r.rounds_us.end()),
                  *std::max_element(r.rounds_us.begin(), r.rounds_us.end()), r.wire_bytes, algbw(bytes, r.time_us),
                  r.comm_us, r.rel_error, r.time_us > 0 ? best_plain / r.time_us : 0.0);
    std::printf(
        "# time: the median of %d rounds of %d calls; speedup: the best plain all-reduce (%s, %.1f us) over "
        "each row; comm: the all-reduce of the compressed payload alone\n",
        run_.rounds, run_.iters, name_of(best_algo), best_plain);
    std::fflush(stdout);
  }

  static double algbw(std::size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0; }

  nlohmann::json record(const Result& r, std::size_t rows, std::size_t cols, double best_plain) const {
    const std::size_t bytes = rows * cols * sizeof(float);
    const bool plain = r.variant == "plain";
    nlohmann::json j = {{"coll", plain ? "all_reduce" : "compressed_all_reduce"},
                        {"algo", name_of(r.algo)},
                        {"backend", Transport::name},
                        {"ranks", comm_.transport(run_.scope).size()},
                        {"scope", name_of(run_.scope)},
                        {"bytes", bytes},
                        {"count", rows * cols},
                        {"dtype", "float"},
                        {"op", plain ? "sum" : "avg"},
                        {"inplace", false},
                        {"time_us", r.time_us},
                        {"algbw_gbps", algbw(bytes, r.time_us)},
                        {"rows", rows},
                        {"cols", cols},
                        {"wire_bytes", r.wire_bytes},
                        {"rel_error", r.rel_error},
                        {"speedup_vs_best_plain", r.time_us > 0 ? best_plain / r.time_us : 0.0}};
    if (!plain) {
      j["ratio"] = run_.options.ratio;
      j["block_cols"] = r.block_cols;
      j["projection"] = name_of(run_.options.distribution);
      j["error_feedback"] = run_.options.error_feedback;
      j["error_rule"] = name_of(run_.options.error_rule);
      j["comm_us"] = r.comm_us;
    }
    return j;
  }
};

}  // namespace paro::bench
