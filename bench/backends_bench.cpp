// paro-backends: paro's ring all-reduce on the ucx backend against the same on the mpi backend and against
// MPI_Allreduce, side by side in one job (the ucx transport is bootstrapped over MPI here, so one mpirun
// starts both), size by size and iteration block by iteration block, so that drift hits all alike.
//
//   mpirun -np 8 paro-backends -b 1M -e 256M -f 4
//
// busbw as nccl-tests: 2(n-1)/n bytes/time, GB = 1e9; time per call is the slowest rank's mean.

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "paro/bootstrap/mpi.hpp"
#include "paro/communicator/communicator.hpp"
#include "paro/tools/report.hpp"
#include "paro/transport/mpi.hpp"
#include "paro/transport/ucx.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  std::string min_bytes = "1M", max_bytes = "256M";
  double factor = 4;
  int iters = 10, warmup = 2, rounds = 3;
  std::string json_path;
};

// Seconds per call of `call`, the slowest rank's mean over iters.
template <class Call>
double seconds_per_call(int iters, Call&& call) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) call();
  double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int run(const Settings& s) {
  paro::mpi::Transport mpi_world = paro::mpi::Transport::world();
  paro::bootstrap::MpiBootstrap boot(MPI_COMM_WORLD);
  paro::ucx::Transport ucx_world(boot);
  paro::CommunicatorConfig config;
  config.discovery.emulate = "nodes=1";  // one host: the flat ring either way
  paro::Communicator<paro::mpi::Transport> on_mpi(mpi_world, config);
  paro::Communicator<paro::ucx::Transport> on_ucx(ucx_world, config);
  const int n = on_mpi.size(), rank = on_mpi.rank();
  const paro::Options ring{paro::Algorithm::ring};
  nlohmann::json records = nlohmann::json::array();
  if (rank == 0) {
    std::printf("# paro-backends: all_reduce float sum, %d processes, %d rounds of %d iterations (median)\n", n,
                s.rounds, s.iters);
    std::printf("# %10s  %13s  %13s  %13s  %10s  %10s\n", "size(B)", "ucx ring", "mpi ring", "MPI_Allreduce", "ucx/mpi",
                "ucx/MPI");
    std::printf("# %10s  %13s  %13s  %13s  %10s  %10s\n", "", "busbw(GB/s)", "busbw(GB/s)", "busbw(GB/s)", "ring",
                "Allreduce");
  }
  for (std::size_t bytes : paro::tools::size_sweep(paro::env::parse_bytes(s.min_bytes, "-b"),
                                                   paro::env::parse_bytes(s.max_bytes, "-e"), s.factor, 4)) {
    const std::size_t count = bytes / 4;
    std::vector<float> a(count, 1.0f), b(count);
    auto ucx_ring = [&] { on_ucx.all_reduce(a.data(), b.data(), count, paro::ReduceOp::sum, ring); };
    auto mpi_ring = [&] { on_mpi.all_reduce(a.data(), b.data(), count, paro::ReduceOp::sum, ring); };
    auto mpi_native = [&] {
      MPI_Allreduce(a.data(), b.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    for (int i = 0; i < s.warmup; ++i) ucx_ring(), mpi_ring(), mpi_native();
    std::vector<double> t[3];
    for (int round = 0; round < s.rounds; ++round) {
      t[0].push_back(seconds_per_call(s.iters, ucx_ring));
      t[1].push_back(seconds_per_call(s.iters, mpi_ring));
      t[2].push_back(seconds_per_call(s.iters, mpi_native));
    }
    double busbw[3];
    for (int k = 0; k < 3; ++k) {
      std::sort(t[k].begin(), t[k].end());
      busbw[k] = static_cast<double>(bytes) * 2.0 * (n - 1) / n / t[k][t[k].size() / 2] / 1e9;
    }
    const bool exact = std::all_of(b.begin(), b.end(), [n](float x) { return x == static_cast<float>(n); });
    if (rank == 0) {
      std::printf("  %10zu  %13.2f  %13.2f  %13.2f  %10.2f  %10.2f%s\n", bytes, busbw[0], busbw[1], busbw[2],
                  busbw[0] / busbw[1], busbw[0] / busbw[2], exact ? "" : "  WRONG RESULT");
      std::fflush(stdout);
    }
    records.push_back({{"bytes", bytes},
                       {"ranks", n},
                       {"ucx_ring_busbw_gbps", busbw[0]},
                       {"mpi_ring_busbw_gbps", busbw[1]},
                       {"mpi_allreduce_busbw_gbps", busbw[2]}});
    if (!exact) return 1;
  }
  if (rank == 0) paro::tools::write_json_records(s.json_path, records);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"paro-backends: paro's ring all-reduce on ucx and mpi against MPI_Allreduce, side by side"};
  app.add_option("-b,--minbytes", s.min_bytes, "smallest size")->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--iters", s.iters, "iterations per timed block")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup_iters", s.warmup, "warm-up iterations")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", s.rounds, "timed blocks per backend, interleaved; the median is reported")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--json", s.json_path, "write one JSON record per size here");
  CLI11_PARSE(app, argc, argv);
  paro::mpi::Environment environment(&argc, &argv);
  try {
    return run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-backends: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
