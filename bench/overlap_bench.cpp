// paro-overlap: how much of a nonblocking collective hides behind compute.
//
//   paro-overlap -t 8 --emulate nodes=2,ranks=4,intra_gbps=50,inter_gbps=5 --algo ring,paro_cc -b 1M -e 64M
//   mpirun -np 8 paro-overlap --backend mpi --compute spin
//
// For each size and algorithm, measured side by side (interleaved, iteration by iteration):
//   comm        the blocking collective alone
//   compute     T of compute alone: --compute-ms, or (0, the default) the measured comm time, the case where
//               overlap matters most (hiding all of it halves the step)
//   overlapped  start the nonblocking collective, compute T, wait
// and the overlapped time against max(comm, T) (perfect overlap) and comm + T (none). --compute sleep is
// compute on an accelerator (the CPU stays free for the progress thread); spin keeps this rank's CPU busy.
// Times are per iteration, the slowest rank's mean.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "paro/tools/over_ranks.hpp"
#include "paro/tools/report.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using Clock = std::chrono::steady_clock;

struct Settings {
  std::string backend = "threads";
  int thread_ranks = 8;
  std::string emulate, group;
  std::string coll = "all_reduce";
  std::string algos = "ring,paro_cc";
  std::string min_bytes = "1M", max_bytes = "64M";
  double factor = 4;
  double compute_ms = 0;
  std::string compute = "sleep";
  int iters = 10, warmup = 2;
  std::string json_path;
};

double elapsed_us(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

void compute_for(double us, bool spin) {
  const auto until = Clock::now() + std::chrono::duration<double, std::micro>(us);
  if (!spin) return std::this_thread::sleep_until(until);
  volatile double x = 1;
  while (Clock::now() < until)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
}

template <class Transport>
int run(paro::Communicator<Transport>& comm, const Settings& s, nlohmann::json& records) {
  const Collective coll = paro::parse_collective(s.coll);
  std::vector<Algorithm> algos;
  for (std::size_t at = 0; at <= s.algos.size();) {
    const std::size_t comma = std::min(s.algos.find(',', at), s.algos.size());
    algos.push_back(paro::parse_algorithm(s.algos.substr(at, comma - at)));
    at = comma + 1;
  }
  const bool spin = s.compute == "spin";
  const int n = comm.size();
  if (comm.rank() == 0) {
    std::printf("# paro-overlap %s backend %s nRanks %d compute %s %s iters %d\n", paro::name_of(coll), Transport::name,
                n, s.compute.c_str(), s.compute_ms > 0 ? (std::to_string(s.compute_ms) + " ms").c_str() : "= comm",
                s.iters);
    std::printf("# %10s  %9s  %10s  %11s  %11s  %11s  %11s  %11s  %8s\n", "size(B)", "algo", "comm(us)", "compute(us)",
                "overlap(us)", "max(us)", "sum(us)", "overlap/max", "hidden");
  }
  for (std::size_t bytes : paro::tools::size_sweep(paro::env::parse_bytes(s.min_bytes, "-b"),
                                                   paro::env::parse_bytes(s.max_bytes, "-e"), s.factor, 4 * n)) {
    for (Algorithm algo : algos) {
      const std::size_t count = bytes / 4 / paro::algorithms::BuiltinCollectives::blocks(coll, n);
      const paro::BufferShape shape = paro::buffer_shape(coll, count, n, comm.rank());
      auto send = comm.transport().allocate(shape.in * 4), recv = comm.transport().allocate(shape.out * 4);
      const paro::Options o{algo, paro::Scope::global};
      auto blocking = [&] {
        comm.collective(coll, send.data(), recv.data(), count, paro::DataType::f32, paro::ReduceOp::sum, o);
      };
      for (int i = 0; i < s.warmup; ++i) blocking();
      // The compute time: given, or the collective's own time measured now (the same on every rank).
      double compute_us = s.compute_ms * 1e3;
      if (compute_us <= 0) {
        comm.barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < s.iters; ++i) blocking();
        compute_us = paro::reduce_over_ranks(comm, elapsed_us(t0) / s.iters, paro::ReduceOp::max);
      }
      double comm_us = 0, alone_us = 0, overlapped_us = 0;
      for (int i = 0; i < s.iters; ++i) {
        comm.barrier();
        auto t0 = Clock::now();
        blocking();
        comm_us += elapsed_us(t0);
        comm.barrier();
        t0 = Clock::now();
        compute_for(compute_us, spin);
        alone_us += elapsed_us(t0);
        comm.barrier();
        t0 = Clock::now();
        paro::Request r =
            comm.icollective(coll, send.data(), recv.data(), count, paro::DataType::f32, paro::ReduceOp::sum, o);
        compute_for(compute_us, spin);
        r.wait();
        overlapped_us += elapsed_us(t0);
      }
      comm_us = paro::reduce_over_ranks(comm, comm_us / s.iters, paro::ReduceOp::max);
      alone_us = paro::reduce_over_ranks(comm, alone_us / s.iters, paro::ReduceOp::max);
      overlapped_us = paro::reduce_over_ranks(comm, overlapped_us / s.iters, paro::ReduceOp::max);
      const double best = std::max(comm_us, alone_us), none = comm_us + alone_us;
      // The share of the shorter of the two that the overlap hid: 1 = perfect, 0 = none.
      const double hidden = (none - overlapped_us) / std::min(comm_us, alone_us);
      if (comm.rank() == 0) {
        std::printf("  %10zu  %9s  %10.1f  %11.1f  %11.1f  %11.1f  %11.1f  %11.2f  %7.0f%%\n", bytes,
                    paro::name_of(algo), comm_us, alone_us, overlapped_us, best, none, overlapped_us / best,
                    100 * hidden);
        std::fflush(stdout);
      }
      records.push_back({{"coll", paro::name_of(coll)},
                         {"algo", paro::name_of(algo)},
                         {"backend", Transport::name},
                         {"ranks", n},
                         {"bytes", bytes},
                         {"compute", s.compute},
                         {"comm_us", comm_us},
                         {"compute_us", alone_us},
                         {"overlapped_us", overlapped_us},
                         {"max_us", best},
                         {"sum_us", none}});
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"paro-overlap: a nonblocking collective overlapped with compute, against max and sum"};
  app.add_option("--backend", s.backend, "threads, mpi or ucx (under paro-run)")->capture_default_str();
  app.add_option("-t,--nthreads", s.thread_ranks, "ranks of the threads backend")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--emulate", s.emulate, "emulated cluster (PARO_EMULATE form)");
  app.add_option("--group", s.group, "grouping: node, switch, pod or a size");
  app.add_option("--coll", s.coll, "all_reduce, all_gather or reduce_scatter")
      ->capture_default_str()
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter"}));
  app.add_option("--algo", s.algos, "algorithms, comma-separated")->capture_default_str();
  app.add_option("-b,--minbytes", s.min_bytes, "smallest size")->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--compute-ms", s.compute_ms, "compute per iteration (ms); 0: as long as the collective alone")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--compute", s.compute, "sleep (an accelerator computes) or spin (this rank's CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sleep", "spin"}));
  app.add_option("-n,--iters", s.iters, "timed iterations")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup_iters", s.warmup, "warm-up iterations")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", s.json_path, "write one JSON record per (size, algorithm) here");
  CLI11_PARSE(app, argc, argv);
  try {
    paro::tools::LaunchOptions o;
    o.backend = s.backend;
    o.thread_ranks = s.thread_ranks;
    o.emulate = s.emulate;
    if (!s.group.empty()) o.config.group = paro::GroupSpec::parse(s.group, o.config.group.allow_uneven);
    o.program = "paro-overlap";
    o.argc = &argc;
    o.argv = &argv;
    return paro::tools::launch_tool(o, s.json_path,
                                    [&](auto& comm, nlohmann::json& records) { return run(comm, s, records); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-overlap: %s\n", e.what());
    return 2;
  }
}
