// paro-bench: nccl-tests-style bandwidth tables for paro's collectives and algorithms.
//
//   paro-bench --backend threads -t 8 --coll all_reduce --algo all -b 1K -e 64M -f 4
//   paro-bench -t 8 --emulate nodes=2,ranks=4,intra_gbps=20,inter_gbps=2 --coll all --algo all -b 64M -e 64M
//   mpirun -np 4 paro-bench --backend mpi --coll all_gather --algo ring,native
//   paro-run -n 8 -- paro-bench --backend ucx --algo ring,paro_cc -b 1M -e 64M
//   paro-bench -t 2 --emulate nodes=2,ranks=1,inter_gbps=1 --coll compressed_all_reduce --ratio 32 --shape 16384x1024
//   paro-bench-cuda --backend threads --device cuda -t 8 --emulate nodes=2,ranks=4 --algo all   (ranks share the GPUs)
//   mpirun -np 16 paro-bench-cuda --backend nccl --emulate ... --algo native,paro_cc           (one GPU per rank)
//
// paro-bench-cuda is this file compiled by nvcc (paro_bench_cuda.cu; PARO_HAVE_CUDA): it adds --backend
// nccl (bootstrapped over MPI where built with it, else over -t thread ranks) and --device cuda for the
// threads backend. Buffers live in the backend's memory space; inputs are filled and checked on the host
// and staged with cudaMemcpy. Device runs are not paced (no emulated link speeds, no --trace).
//
// Messages go through the paced transport (transport/paced.hpp): with link keys in --emulate they take
// the emulated links' time; --trace FILE writes every message of one call per (algorithm, size) as a
// Chrome trace. After the tables, each size's predicted lower bound, the algorithm automatic picks, and
// every algorithm's time over the bound. --calibrate FILE measures the cost model's numbers on this
// backend and topology, fits them and writes them for PARO_COST_FILE; --explain prints automatic's choice
// per size without measuring.
//
// Same flags and table as nccl-tests where they apply (-b -e -f -n -w -c -d -o), GB = 1e9, busbw factors
// 2(n-1)/n for all-reduce and (n-1)/n for all-gather and reduce-scatter, size = the full buffer (n blocks
// for all-gather and reduce-scatter). Time is the mean per iteration, averaged over ranks as nccl-tests
// does. #wrong counts wrong elements from an exact check (paro/testing/collective_check.hpp); the exit
// code is non-zero when any is wrong. compressed_all_reduce (SEPARATE) has its own table: see
// bench/compressed_bench.hpp.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "paro/algorithms/cost/link_sources.hpp"
#include "paro/core/clock.hpp"
#include "paro/paro.hpp"
#include "paro/testing/collective_check.hpp"
#include "paro/tools/calibration.hpp"
#include "paro/tools/launch.hpp"
#include "paro/tools/over_ranks.hpp"
#include "paro/tools/report.hpp"
#include "paro/transport/paced.hpp"

#include "median.hpp"
#if defined(PARO_HAVE_COMPRESSION) || defined(PARO_HAVE_CUDA_COMPRESSION)
#include "compressed_bench.hpp"
#endif

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::DataType;
using paro::ReduceOp;

struct Settings {
  std::string backend = "threads";
  std::string device = "host";  // threads backend: host or cuda
  int thread_ranks = 8;
  std::string coll = "all_reduce";
  std::string algos = "automatic";
  std::string min_bytes = "32M", max_bytes = "32M";
  double factor = 2;
  int iters = 20, warmup = 5, check = 1;
  std::string placement = "both";  // out (of place), in (place) or both
  std::string dtypes = "float", ops = "sum";
  std::string json_path;
  std::string emulate;  // PARO_EMULATE for this run; threads default: nodes=2 (2 x t/2) when t is even (launch.hpp)
  std::string group;    // PARO_GROUP for this run
  std::string scope = "global";
  std::string trace_path;      // --trace
  std::string calibrate_path;  // --calibrate
  bool explain = false;        // --explain
  // compressed_all_reduce
  int ratio = 32;
  std::string shape;             // ROWSxCOLS; else -b..-e as rows of 1024 columns
  std::string block_cols = "0";  // variants, comma-separated; 0 = the full projection
  std::string projection = "gaussian";
  bool no_error_feedback = false;
  std::string separate_chunk = "256K";  // SEPARATE's pipeline pieces; 0 = no overlap
  int rounds = 0;                       // --rounds; 0: 1 for the collectives, 3 for compressed_all_reduce
};

constexpr const char* compressed_name = "compressed_all_reduce";

struct Row {
  std::size_t bytes = 0, count = 0;
  DataType dt{};
  ReduceOp op{};
  double time_us[2] = {0, 0};  // out of place, in place; the median of round_us
  std::vector<double> round_us[2];
  std::size_t wrong[2] = {0, 0};
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::size_t min_bytes(const Settings& s) { return paro::env::parse_bytes(s.min_bytes, "-b"); }
std::size_t max_bytes(const Settings& s) { return paro::env::parse_bytes(s.max_bytes, "-e"); }

using Collectives = paro::algorithms::BuiltinCollectives;

// Everything one rank does; rank 0 prints. The same code runs on every backend.
template <class Transport>
class Bench {
 public:
  Bench(paro::Communicator<Transport>& comm, const Settings& s, Collective coll, std::vector<Algorithm> algos)
      : comm_(comm),
        s_(s),
        coll_(coll),
        algos_(std::move(algos)),
        scope_(paro::parse_scope(s.scope)),
        t_(comm.transport(scope_)) {}

  // Returns the number of wrong elements over all ranks, sizes and algorithms. Algorithms are measured
  // interleaved, size by size, so that drift on a shared machine hits them alike; the tables follow.
  std::size_t run(nlohmann::json& records) {
    if (comm_.rank() == 0) print_preamble();
    prime();
    std::vector<std::vector<Row>> rows(algos_.size());
    for (DataType dt : dtypes_)
      for (ReduceOp op : ops_)
        for (std::size_t bytes : sizes(dt)) {
          // Each round times every algorithm once, starting one further along each time; a row is its
          // algorithm's median round, with its values checked in the first.
          std::vector<Row> merged(algos_.size());
          for (int round = 0; round < std::max(1, s_.rounds); ++round)
            for (std::size_t i = 0; i < algos_.size(); ++i) {
              const std::size_t a = (i + static_cast<std::size_t>(round)) % algos_.size();
              Row row = measure(algos_[a], dt, op, bytes, round == 0);
              if (round == 0) merged[a] = row;
              for (int p : placements()) merged[a].round_us[p].push_back(row.time_us[p]);
            }
          for (std::size_t a = 0; a < algos_.size(); ++a) {
            for (int p : placements()) merged[a].time_us[p] = paro::bench::median(merged[a].round_us[p]);
            rows[a].push_back(std::move(merged[a]));
          }
        }
    std::size_t total_wrong = 0;
    double busbw_sum = 0;
    int busbw_count = 0;
    for (std::size_t a = 0; a < algos_.size(); ++a) {
      if (comm_.rank() == 0) {
        std::printf("#\n# Algorithm: %s\n", paro::name_of(algos_[a]));
        print_table_header();
      }
      for (const Row& row : rows[a]) {
        for (int p : placements()) {
          busbw_sum += busbw(row, p);
          ++busbw_count;
          total_wrong += row.wrong[p];
          records.push_back(record(algos_[a], row, p));
        }
        if (comm_.rank() == 0) print_row(row);
      }
    }
    if (comm_.rank() == 0) {
      print_ratios(rows);
      print_bounds(rows);
      std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
      std::printf("# Avg bus bandwidth    : %g \n#\n", busbw_count ? busbw_sum / busbw_count : 0.0);
      std::fflush(stdout);
    }
    return total_wrong;
  }

  // One call per (algorithm, size) with every message recorded, as Chrome trace events (rank 0 gathers).
  void trace(nlohmann::json& events, int& process) {
    const DataType dt = dtypes_.front();
    const ReduceOp op = ops_.front();
    for (std::size_t bytes : sizes(dt))
      for (Algorithm algo : algos_) {
        const paro::BufferShape shape = shape_for(dt, bytes);
        auto send = t_.allocate(shape.in * paro::size_of(dt)), recv = t_.allocate(shape.out * paro::size_of(dt));
        auto once = [&] {
          comm_.collective(coll_, send.data(), recv.data(), count_for(dt, bytes), dt, op, {algo, scope_});
        };
        once();  // warm-up: fresh buffers fault their pages in on first touch
        comm_.barrier();
        paro::paced::TraceLog::process().clear_rank(comm_.rank());
        comm_.barrier();
        const std::int64_t start = paro::paced::now_ns();
        once();
        comm_.barrier();
        std::vector<paro::paced::TraceEvent> mine = paro::paced::TraceLog::process().take_rank(comm_.rank());
        const std::vector<paro::paced::TraceEvent> all = gather_events(mine);
        if (comm_.rank() != 0) continue;
        // Time 0: rank 0's start, or the first message where another rank left the barrier earlier and
        // began sending (a bar before 0 would hide part of the call).
        std::int64_t zero = start;
        for (const auto& e : all) zero = std::min(zero, e.start_ns);
        const std::string label =
            paro::detail::concat(paro::name_of(coll_), " ", paro::name_of(algo), " ", bytes, " B");
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", process}, {"args", {{"name", label}}}});
        for (int r = 0; r < comm_.size(); ++r)
          for (int level = 0; level < 2; ++level)
            events.push_back({{"ph", "M"},
                              {"name", "thread_name"},
                              {"pid", process},
                              {"tid", 2 * r + level},
                              {"args", {{"name", paro::detail::concat("rank ", r, level ? " inter" : " intra")}}}});
        for (const auto& e : all)
          events.push_back({{"ph", "X"},
                            {"pid", process},
                            {"tid", 2 * e.rank + (e.inter ? 1 : 0)},
                            {"name", paro::detail::concat(e.inter ? "inter " : "intra ", e.bytes, " B to ", e.peer)},
                            {"ts", (e.start_ns - zero) / 1e3},
                            {"dur", (e.end_ns - e.start_ns) / 1e3},
                            {"args", {{"level", e.inter ? "inter" : "intra"}, {"peer", e.peer}, {"bytes", e.bytes}}}});
        ++process;
      }
  }

  void parse_lists() {
    for (const auto& d : split_list(s_.dtypes))
      if (d == "all")
        dtypes_.assign(std::begin(paro::all_data_types), std::end(paro::all_data_types));
      else
        dtypes_.push_back(paro::parse_data_type(d));
    if (!Collectives::reduces(coll_)) {
      ops_ = {ReduceOp::sum};
      return;
    }
    for (const auto& o : split_list(s_.ops))
      if (o == "all")
        ops_.assign(std::begin(paro::all_reduce_ops), std::end(paro::all_reduce_ops));
      else
        ops_.push_back(paro::parse_reduce_op(o));
  }

 private:
  paro::Communicator<Transport>& comm_;
  const Settings& s_;
  Collective coll_;
  std::vector<Algorithm> algos_;
  paro::Scope scope_;
  Transport& t_;  // the ranks of the chosen scope, which the sizes and busbw refer to
  std::vector<DataType> dtypes_;
  std::vector<ReduceOp> ops_;

  // Sizes from -b to -e by factor -f, each rounded down to a whole number of elements per rank.
  std::vector<std::size_t> sizes(DataType dt) const {
    const std::size_t unit = paro::size_of(dt) * Collectives::blocks(coll_, t_.size());
    return paro::tools::size_sweep(min_bytes(s_), max_bytes(s_), s_.factor, unit);
  }

  std::size_t count_for(DataType dt, std::size_t bytes) const {
    return bytes / paro::size_of(dt) / Collectives::blocks(coll_, t_.size());
  }
  paro::BufferShape shape_for(DataType dt, std::size_t bytes) const {
    return Collectives::shape(coll_, count_for(dt, bytes), t_.size(), t_.rank());
  }

  // Every rank's events at rank 0, as raw bytes over the global transport.
  std::vector<paro::paced::TraceEvent> gather_events(const std::vector<paro::paced::TraceEvent>& mine) {
    using Event = paro::paced::TraceEvent;
    Transport& t = comm_.transport();
    constexpr int tag = paro::tags::bench_trace;
    std::uint64_t count = mine.size();
    if (t.rank() != 0) {
      auto a = t.isend(&count, sizeof count, 0, tag);
      t.wait(a);
      auto b = t.isend(mine.data(), mine.size() * sizeof(Event), 0, tag);
      t.wait(b);
      return {};
    }
    std::vector<Event> all = mine;
    for (int r = 1; r < t.size(); ++r) {
      auto a = t.irecv(&count, sizeof count, r, tag);
      t.wait(a);
      std::vector<Event> theirs(count);
      auto b = t.irecv(theirs.data(), count * sizeof(Event), r, tag);
      t.wait(b);
      all.insert(all.end(), theirs.begin(), theirs.end());
    }
    return all;
  }

  Row measure(Algorithm algo, DataType dt, ReduceOp op, std::size_t bytes, bool check) {
    const int r = t_.rank();
    const std::size_t esize = paro::size_of(dt), total = bytes / esize;
    const std::size_t count = count_for(dt, bytes);
    const paro::BufferShape shape = shape_for(dt, bytes);
    Row row;
    row.bytes = bytes;
    row.count = total;
    row.dt = dt;
    row.op = op;
    // In the backend's memory space; inputs are made on the host and staged there. Under a simulator that
    // models only time, large buffers hold no data (transport.hpp).
    auto send = t_.allocate(shape.in * esize), recv = t_.allocate(shape.out * esize),
         shared = t_.allocate(shape.full * esize);
    const bool fill = !paro::detail::simulated_data(shape.in * esize);
    std::vector<char> inputs(fill ? shape.in * esize : 0);
    if (fill) {
      paro::testing::fill_inputs(inputs.data(), shape.in, dt, op, r, shape.first_input);
      t_.upload(send.data(), inputs.data(), inputs.size());
    }
    for (int placement : placements()) {
      const bool in_place = placement == 1;
      if (check && s_.check) {
        auto result = paro::testing::check_case(comm_, {coll_, algo, dt, op, count, in_place, scope_});
        row.wrong[placement] = paro::sum_over_ranks(comm_, result.wrong);
        if (result.wrong) std::fprintf(stderr, "%s\n", result.report.c_str());
      }
      char* in = in_place ? shared.data() + shape.send_at * esize : send.data();
      char* out = in_place ? shared.data() + shape.recv_at * esize : recv.data();
      if (in_place && fill) t_.upload(in, inputs.data(), inputs.size());
      auto once = [&] { comm_.collective(coll_, in, out, count, dt, op, {algo, scope_}); };
      for (int i = 0; i < s_.warmup; ++i) once();
      comm_.barrier();
      start_together();
      const double start = paro::clock::now_us();
      for (int i = 0; i < s_.iters; ++i) once();
      const double end = paro::clock::now_us();
      // With one clock for all ranks (a simulation), the makespan from the (common) start to the last end.
      // Otherwise nccl-tests' convention, the mean over ranks of their own times.
      const double us = paro::clock::is_global ? paro::reduce_over_ranks(comm_, end, ReduceOp::max) +
                                                     paro::reduce_over_ranks(comm_, -start, ReduceOp::max)
                                               : paro::mean_over_ranks(comm_, end - start);
      row.time_us[placement] = us / std::max(1, s_.iters);
    }
    return row;
  }

  // An algorithm makes its sub-communicators on its first call: one call of one element per rank each
  // first, so that no row pays for them (also with -w 0, as the simulations run).
  void prime() {
    const DataType dt = dtypes_.front();
    const std::size_t bytes = paro::size_of(dt) * static_cast<std::size_t>(t_.size());
    const paro::BufferShape shape = shape_for(dt, bytes);
    auto send = t_.allocate(shape.in * paro::size_of(dt)), recv = t_.allocate(shape.out * paro::size_of(dt));
    std::vector<char> zeros(shape.in * paro::size_of(dt), 0);
    t_.upload(send.data(), zeros.data(), zeros.size());
    for (Algorithm algo : algos_)
      comm_.collective(coll_, send.data(), recv.data(), count_for(dt, bytes), dt, ops_.front(), {algo, scope_});
  }

  // 0 = out of place, 1 = in place.
  std::vector<int> placements() const {
    if (s_.placement == "out") return {0};
    if (s_.placement == "in") return {1};
    return {0, 1};
  }

#ifdef PARO_SIMULATED_CLOCK
  // Ranks leave a barrier at different simulated moments, tens of microseconds apart at 128 ranks, which
  // a makespan would count and a small collective would be dominated by: every rank sleeps until one
  // moment, a margin after the last of them has left. A rank still late then is an error, not a number.
  void start_together() {
    constexpr double margin_us = 10000;
    const double at = paro::reduce_over_ranks(comm_, paro::clock::now_us(), ReduceOp::max) + margin_us;
    paro::clock::sleep_until_us(at);
    const double late_us = paro::clock::now_us() - at;
    if (late_us > 1)
      throw std::runtime_error("rank " + std::to_string(t_.rank()) + " started " + std::to_string(late_us) +
                               " us after the common start: raise start_together's margin");
  }
#else
  void start_together() {}
#endif

  double algbw(const Row& row, int p) const {
    return row.time_us[p] > 0 ? static_cast<double>(row.bytes) / row.time_us[p] / 1e3 : 0;
  }
  double busbw(const Row& row, int p) const { return algbw(row, p) * Collectives::bus_factor(coll_, t_.size()); }

  // Every algorithm's busbw over the reference's (native where measured, else the first), size by size.
  void print_ratios(const std::vector<std::vector<Row>>& rows) const {
    if (algos_.size() < 2) return;
    std::size_t ref = 0;
    for (std::size_t a = 0; a < algos_.size(); ++a)
      if (algos_[a] == Algorithm::native) ref = a;
    std::printf("#\n# busbw ratio to %s, measured side by side (out-of-place / in-place)\n# %10s  %8s  %6s",
                paro::name_of(algos_[ref]), "size", "type", "redop");
    for (std::size_t a = 0; a < algos_.size(); ++a)
      if (a != ref) std::printf("  %15s", paro::name_of(algos_[a]));
    std::printf("\n");
    for (std::size_t i = 0; i < rows[ref].size(); ++i) {
      const Row& base = rows[ref][i];
      std::printf("  %10zu  %8s  %6s", base.bytes, paro::name_of(base.dt),
                  !Collectives::reduces(coll_) ? "none" : paro::name_of(base.op));
      for (std::size_t a = 0; a < algos_.size(); ++a) {
        if (a == ref) continue;
        auto ratio = [&](int p) { return busbw(base, p) > 0 ? busbw(rows[a][i], p) / busbw(base, p) : 0.0; };
        std::printf("  %7.2f/%-7.2f", ratio(0), ratio(1));
      }
      std::printf("\n");
    }
  }

  // Per size: the lower bound, the automatic pick, and each algorithm's time over the bound.
  void print_bounds(const std::vector<std::vector<Row>>& rows) const {
    std::printf(
        "#\n# lower bound (links: %s) and automatic's pick (model: %s);\n# each algorithm's time / bound "
        "(out-of-place)\n# %10s  %8s  %6s  %10s  %9s",
        comm_.cost_model().bound_links().source.c_str(), comm_.cost_model().links().source.c_str(), "size", "type",
        "redop", "bound(us)", "auto_pick");
    for (Algorithm a : algos_) std::printf("  %9s", paro::name_of(a));
    std::printf("\n");
    for (std::size_t i = 0; i < rows[0].size(); ++i) {
      const Row& row = rows[0][i];
      const double bound = comm_.lower_bound_us(coll_, row.bytes, scope_);
      std::printf("  %10zu  %8s  %6s  %10.1f  %9s", row.bytes, paro::name_of(row.dt),
                  !Collectives::reduces(coll_) ? "none" : paro::name_of(row.op), bound,
                  paro::name_of(comm_.resolve(coll_, row.bytes, Algorithm::automatic, scope_)));
      for (std::size_t a = 0; a < algos_.size(); ++a)
        std::printf("  %9.2f", bound > 0 ? rows[a][i].time_us[0] / bound : 0.0);
      std::printf("\n");
    }
  }

  nlohmann::json record(Algorithm algo, const Row& row, int p) const {
    const bool in_place = p == 1;
    nlohmann::json j = {{"coll", paro::name_of(coll_)},
                        {"algo", paro::name_of(algo)},
                        {"backend", Transport::name},
                        {"ranks", t_.size()},
                        {"scope", paro::name_of(scope_)},
                        {"bytes", row.bytes},
                        {"count", row.count},
                        {"dtype", paro::name_of(row.dt)},
                        {"op", !Collectives::reduces(coll_) ? "none" : paro::name_of(row.op)},
                        {"inplace", in_place},
                        {"time_us", row.time_us[p]},
                        {"rounds_us", row.round_us[p]},
                        {"algbw_gbps", algbw(row, p)},
                        {"busbw_gbps", busbw(row, p)},
                        {"wrong", row.wrong[p]}};
    if (algo == Algorithm::automatic) j["picked"] = paro::name_of(comm_.resolve(coll_, row.bytes, algo, scope_));
    j["bound_us"] = comm_.lower_bound_us(coll_, row.bytes, scope_);
    j["auto_pick"] = paro::name_of(comm_.resolve(coll_, row.bytes, Algorithm::automatic, scope_));
    if (algo != Algorithm::native && algo != Algorithm::automatic)
      j["predicted_us"] = comm_.predict_us(algo, coll_, row.bytes, scope_);
    return j;
  }

  void print_preamble() const {
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    std::printf(
        "# paro-bench %s backend %s nRanks %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d "
        "iters: %d rounds: %d (median) validation: %d\n#\n# Using ranks\n",
        paro::name_of(coll_), Transport::name, t_.size(), min_bytes(s_), max_bytes(s_), s_.factor, s_.warmup, s_.iters,
        std::max(1, s_.rounds), s_.check);
    std::printf("#  Rank %2d Pid %6d on %10s backend %s (%d ranks)\n", 0, static_cast<int>(getpid()), host,
                Transport::name, comm_.size());
    const paro::Topology& topo = comm_.topology();
    std::printf("# Topology: %zu groups by %s (node from %s); scope %s: %d ranks per collective\n",
                comm_.groups().members.size(), comm_.grouping().describe().c_str(), topo.source("node").c_str(),
                paro::name_of(scope_), t_.size());
  }

  static void print_table_header() {
    std::printf("#%75s%35s\n", "out-of-place", "in-place");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }

  void print_row(const Row& row) const {
    std::printf("  %10zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, paro::name_of(row.dt),
                !Collectives::reduces(coll_) ? "none" : paro::name_of(row.op), -1);
    for (int p = 0; p < 2; ++p)
      std::printf("  %7s  %6.2f  %6.2f  %6zu", format_time(row.time_us[p]).c_str(), algbw(row, p), busbw(row, p),
                  row.wrong[p]);
    std::printf("\n");
    std::fflush(stdout);
  }

  static std::string format_time(double us) {
    char buf[32];
    if (us >= 1e6)
      std::snprintf(buf, sizeof buf, "%.2e", us);
    else if (us >= 1e4)
      std::snprintf(buf, sizeof buf, "%7.0f", us);
    else
      std::snprintf(buf, sizeof buf, "%7.2f", us);
    return buf;
  }
};

std::vector<Collective> collectives(const std::string& list) {
  std::vector<Collective> out;
  for (const auto& c : split_list(list))
    if (c == "all")
      out.insert(out.end(), std::begin(Collectives::ids), std::end(Collectives::ids));
    else if (c != compressed_name)
      out.push_back(Collectives::parse(c));
  return out;
}

template <class Transport>
std::vector<Algorithm> algorithms_of(paro::Communicator<Transport>& comm, const Settings& s, Collective coll) {
  std::vector<Algorithm> algos;
  for (const auto& a : split_list(s.algos)) {
    if (a == "all") {
      for (Algorithm x : paro::all_algorithms)
        if (comm.available(x, coll)) algos.push_back(x);  // native on backends with it; those that run coll
      algos.push_back(Algorithm::automatic);
    } else {
      const Algorithm x = paro::parse_algorithm(a);
      // A named algorithm without a schedule for this collective (mics_hcs's all_to_all) sits out its table;
      // automatic picks among those that have one.
      if (x != Algorithm::automatic && !paro::algorithms::BuiltinAlgorithms::implements(x, coll)) {
        if (comm.rank() == 0) std::printf("# %s has no %s schedule: not run\n", paro::name_of(x), paro::name_of(coll));
        continue;
      }
      algos.push_back(x);
      comm.resolve(coll, 0, x, paro::parse_scope(s.scope));  // rejects native where the backend has none
    }
  }
  return algos;
}

// --coll compressed_all_reduce: the gradient shapes and SEPARATE's options from the command line.
template <class Transport>
void run_compressed(paro::Communicator<Transport>& comm, const Settings& s, nlohmann::json& records) {
#if defined(PARO_HAVE_COMPRESSION) || defined(PARO_HAVE_CUDA_COMPRESSION)
  if constexpr (std::is_void_v<typename paro::bench::CompressorFor<Transport>::type>) {
    throw paro::UsageError(paro::detail::concat(
        "--coll compressed_all_reduce: this paro-bench has no SEPARATE compressor for the memory of backend ",
        Transport::name, " (host: the compression component, BLAS and Random123; GPU: cuBLAS and Random123)"));
  } else {
    paro::bench::CompressedRun run;
    if (!s.shape.empty()) {
      const auto x = s.shape.find('x');
      paro::detail::require(x != std::string::npos, "--shape '", s.shape, "': use ROWSxCOLS, e.g. 16384x1024");
      run.shapes.emplace_back(paro::env::parse_bytes(s.shape.substr(0, x), "--shape rows"),
                              paro::env::parse_bytes(s.shape.substr(x + 1), "--shape cols"));
      paro::detail::require(run.shapes.back().first > 0 && run.shapes.back().second > 0,
                            "--shape: rows and cols must be >= 1");
    } else {
      for (std::size_t bytes : paro::tools::size_sweep(min_bytes(s), max_bytes(s), s.factor))
        run.shapes.emplace_back(std::max<std::size_t>(1, bytes / 4096), 1024);
    }
    run.options.ratio = s.ratio;
    run.options.distribution = paro::compression::parse_distribution(s.projection);
    run.options.error_feedback = !s.no_error_feedback;
    run.options.pipeline_chunk_bytes = paro::env::parse_bytes(s.separate_chunk, "--separate-chunk");
    for (const auto& b : split_list(s.block_cols)) run.block_cols.push_back(paro::env::parse_bytes(b, "--block-cols"));
    run.scope = paro::parse_scope(s.scope);
    run.iters = s.iters;
    run.warmup = s.warmup;
    run.rounds = s.rounds > 0 ? s.rounds : 3;
    paro::bench::CompressedBench<Transport>(comm, run, algorithms_of(comm, s, Collective::all_reduce)).run(records);
  }
#else
  (void)comm, (void)s, (void)records;
  throw paro::UsageError(
      "--coll compressed_all_reduce: this paro-bench was built without a SEPARATE compressor (host: the "
      "compression component, BLAS and Random123; GPU: cuBLAS and Random123)");
#endif
}

template <class Transport>
std::size_t run_on(paro::Communicator<Transport>& comm, const Settings& s, nlohmann::json& records) {
  // Untimed: built at their first use, the sub-communicators' splits would fall into the first timed
  // call of a hierarchical algorithm (the simulated study times one call, no warm-up).
  comm.build_hierarchies();
  std::size_t wrong = 0;
  nlohmann::json trace_events = nlohmann::json::array();
  int trace_process = 0;
  for (Collective coll : collectives(s.coll)) {
    const std::vector<Algorithm> algos = algorithms_of(comm, s, coll);
    if (algos.empty()) continue;  // none of the named algorithms runs this collective
    Bench<Transport> bench(comm, s, coll, algos);
    bench.parse_lists();
    wrong += bench.run(records);
    if (!s.trace_path.empty()) bench.trace(trace_events, trace_process);
  }
  for (const auto& c : split_list(s.coll))
    if (c == compressed_name) run_compressed(comm, s, records);
  if (!s.trace_path.empty() && comm.rank() == 0) {
    std::ofstream out(s.trace_path);
    paro::detail::require(static_cast<bool>(out), "--trace: cannot write '", s.trace_path, "'");
    out << nlohmann::json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  }
  return wrong;
}

// --calibrate: the cost model's numbers measured and fitted here (paro/tools/calibration.hpp), with
// how well they predict the measurements; written for PARO_COST_FILE by rank 0 unless the fit predicts
// worse than the model in use (then nothing is written and the exit status is 1).
template <class Transport>
int calibrate(paro::Communicator<Transport>& comm, const std::string& path) {
  const std::string before = comm.cost_model().links().source;
  paro::algorithms::FitReport fit = paro::calibrate(comm);
  fit.model.source = "paro-bench --calibrate";
  if (comm.rank() != 0) return fit.better_than_before() ? 0 : 1;
  std::printf(
      "# calibration (%s backend, %d ranks): median of 5 interleaved rounds per point\n# %14s  %9s  %7s  %9s  "
      "%10s  %6s  %10s  %10s  %10s\n",
      Transport::name, comm.size(), "collective", "algorithm", "lanes", "size(B)", "measured", "noise", "before",
      "links", "fitted");
  for (const auto& p : fit.points)
    std::printf("  %14s  %9s  %7s  %9.0f  %10.1f  %5.1f%%  %10.1f  %10.1f  %10.1f\n", paro::name_of(p.collective),
                paro::name_of(p.algorithm),
                p.algorithm != paro::Algorithm::paro_cc ? ""
                : p.lanes_inline                        ? "inline"
                                                        : "threads",
                p.bytes, p.measured_us, 100 * p.noise, p.before_us, p.links_us, p.fitted_us);
  auto percent = [](double log_error) { return 100 * std::expm1(log_error); };
  std::printf(
      "# typical prediction error (geometric mean of predicted/measured, either way) over %zu points:\n"
      "#   before (%s): %.1f%%; fitted links: %.1f%%; with corrections: %.1f%%; median noise %.1f%%\n",
      fit.points.size(), before.c_str(), percent(fit.before_error), percent(fit.links_error), percent(fit.fitted_error),
      100 * fit.noise);
  if (!fit.better_than_before()) {
    std::printf("# not written: the fit predicts these measurements worse than the model in use\n");
    return 1;
  }
  std::ofstream out(path);
  paro::detail::require(static_cast<bool>(out), "--calibrate: cannot write '", path, "'");
  out << paro::algorithms::to_json(fit.model) << "\n";
  std::printf("# calibrated: %s\n# written to %s; use it with PARO_COST_FILE=%s\n",
              paro::algorithms::to_json(fit.model).c_str(), path.c_str(), path.c_str());
  return 0;
}

// ", inline, together, 8 pieces": what a plan does differently from the defaults, for --explain's lines.
std::string plan_summary(const paro::algorithms::BuiltinAlgorithms::Params& params, std::size_t bytes) {
  const auto* p = std::get_if<paro::algorithms::ParoCcParams>(&params);
  if (!p) return "";
  std::string out = std::string(p->lanes_inline ? ", inline" : "") + (p->together ? ", together" : "") +
                    (p->nodes_only ? ", nodes only" : "") + (p->direct ? ", direct" : "") +
                    (p->one_round ? ", one round" : "");
  const std::size_t chunk = p->pipeline_chunk_bytes;
  if (chunk > 0 && chunk < bytes) out += ", " + std::to_string((bytes + chunk - 1) / chunk) + " pieces";
  return out;
}

// --explain: per collective and size, every candidate's prediction and why automatic picks what it picks
// (AlgorithmList::decide); nothing is measured.
template <class Transport>
void explain(paro::Communicator<Transport>& comm, const Settings& s) {
  if (comm.rank() != 0) return;
  using Registry = paro::algorithms::BuiltinAlgorithms;
  const paro::Scope scope = paro::parse_scope(s.scope);
  const auto& model = comm.cost_model();
  std::printf("# automatic's choice, scope %s of %d ranks; model: %s (model error %.1f%%)\n", paro::name_of(scope),
              comm.transport(scope).size(), model.links().source.c_str(), 100 * model.links().model_error);
  std::printf(
      "# predicted us (correction) per candidate; *score: a near tie's sum over x/4, x, 4x (lowest wins);\n"
      "# inline: paro_cc's lanes on the caller's thread; together: each level's shards at once; pieces: of its\n"
      "# pipeline; nodes only: the scope cut by its nodes alone, not by its pods; direct: every level exchanges\n"
      "# directly, whatever its blocks' size; one round: the all-reduce's rail in one round (each unit's piece\n"
      "# to every other). pin: the PARO_ALGO entry that runs the pick's plan exactly\n");
  for (Collective coll : collectives(s.coll))
    for (std::size_t bytes : paro::tools::size_sweep(min_bytes(s), max_bytes(s), s.factor)) {
      const auto d = Registry::decide(model, coll, bytes, comm.shape(scope));
      std::printf("%s %zu (bound %.1f us):", paro::name_of(coll), bytes, comm.lower_bound_us(coll, bytes, scope));
      for (std::size_t i = 0; i < d.count; ++i) {
        const auto& k = d.candidates[i];
        std::printf("  %s %.1f (x%.2f%s)", paro::name_of(k.algorithm), k.prediction.time_us, k.correction,
                    plan_summary(k.prediction.params, bytes).c_str());
        if (k.score > 0) std::printf("*%.3f", k.score);  // scored: one of a near tie
      }
      const auto& pick = d.candidates[d.picked];
      std::size_t runner_up = d.picked == 0 ? 1 : 0;
      for (std::size_t i = 0; i < d.count; ++i)
        if (i != d.picked && d.candidates[i].prediction.time_us < d.candidates[runner_up].prediction.time_us)
          runner_up = i;
      if (const Algorithm runs = comm.resolve(coll, bytes, Algorithm::automatic, scope); runs != pick.algorithm)
        std::printf("  -> %s, forced by PARO_ALGO (the model picks %s)\n", paro::name_of(runs),
                    paro::name_of(pick.algorithm));
      else if (d.count < 2)
        std::printf("  -> %s, the only candidate\n", paro::name_of(pick.algorithm));
      else if (d.picked == d.fastest && !d.candidates[runner_up].near)
        std::printf("  -> %s, fastest by %.0f%% over %s\n", paro::name_of(pick.algorithm),
                    100 * (d.candidates[runner_up].prediction.time_us / pick.prediction.time_us - 1),
                    paro::name_of(d.candidates[runner_up].algorithm));
      else
        std::printf("  -> %s, lowest score among those within the model error\n", paro::name_of(pick.algorithm));
      std::printf("  pin: PARO_ALGO='%s'\n", Registry::pin(coll, pick.algorithm, pick.prediction.params).c_str());
    }
}

template <class Transport>
std::size_t run_or_calibrate(paro::Communicator<Transport>& comm, const Settings& s, nlohmann::json& records) {
  if (s.explain) {
    explain(comm, s);
    return 0;
  }
  if (s.calibrate_path.empty()) return run_on(comm, s, records);
  return calibrate(comm, s.calibrate_path) == 0 ? 0 : 1;
}

// Device backends measure without pacing, tracing or calibration (which work on host buffers).
void reject_host_only_options(const Settings& s) {
  const char* device_backend = s.backend == "nccl" ? "--backend nccl" : s.device == "cuda" ? "--device cuda" : nullptr;
  if (!device_backend) return;
  paro::detail::require(s.trace_path.empty() && s.calibrate_path.empty(), device_backend,
                        ": --trace and --calibrate work on host backends only");
}

// --backend's check: a backend this build has (tools/backends.hpp), else the list's message.
std::string backend_built(const std::string& name) {
  try {
    paro::tools::Backends::require_built(name, "");  // CLI11 names the option
    return {};
  } catch (const paro::Error& e) {
    return e.message();
  }
}

paro::tools::LaunchOptions launch_options(const Settings& s, int* argc, char*** argv) {
  paro::tools::LaunchOptions o;
  o.backend = s.backend;
  o.device = s.device;
  o.thread_ranks = s.thread_ranks;
  o.emulate = s.emulate;
  o.trace = !s.trace_path.empty();
  if (!s.group.empty()) o.config.group = paro::GroupSpec::parse(s.group, o.config.group.allow_uneven);
  o.program = "paro-bench";
  o.argc = argc;
  o.argv = argv;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"paro-bench: nccl-tests-style bandwidth tables for paro's collectives"};
  app.add_option("-b,--minbytes", s.min_bytes, "smallest size (bytes, K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "size multiplier between rows")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--iters", s.iters, "timed iterations")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-w,--warmup_iters", s.warmup, "warm-up iterations")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-c,--check", s.check, "check results exactly (0/1)")->capture_default_str()->check(CLI::Range(0, 1));
  app.add_option("--placement", s.placement, "out (of place), in (place) or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"out", "in", "both"}));
  app.add_option("-d,--datatype", s.dtypes, "types, comma-separated, or all")->capture_default_str();
  app.add_option("-o,--op", s.ops, "reduction ops, comma-separated, or all")->capture_default_str();
  app.add_option("-t,--nthreads", s.thread_ranks, "ranks of the threads backend")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--backend", s.backend, "threads, mpi, ucx (under paro-run) or nccl (paro-bench-cuda)")
      ->capture_default_str()
      ->check(backend_built);
#ifdef PARO_HAVE_CUDA
  app.add_option("--device", s.device, "threads backend: buffers in host or cuda (device) memory")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));
#endif
  app.add_option("--coll", s.coll,
                 "collectives, comma-separated (" + Collectives::names() + ", " + compressed_name +
                     "), or all (every one but " + compressed_name + ")")
      ->capture_default_str();
  app.add_option("--algo", s.algos,
                 "algorithms, comma-separated (" + paro::algorithms::BuiltinAlgorithms::names() + "), or all")
      ->capture_default_str();
  app.add_option("--trace", s.trace_path,
                 "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of one call per algorithm and size");
  app.add_option("--calibrate", s.calibrate_path,
                 "measure the cost model's numbers, write them here (for PARO_COST_FILE) and exit");
  app.add_flag("--explain", s.explain,
               "print, per collective and size (-b..-e), every algorithm's prediction and why automatic picks "
               "what it picks, and exit");
  app.add_option("--json", s.json_path, "write one JSON record per (algorithm, size, placement) here");
  app.add_option(
      "--emulate", s.emulate,
      "emulated cluster (PARO_EMULATE form); threads default nodes=2 when -t is even and neither PARO_EMULATE "
      "nor PARO_TOPO_FILE is set");
  app.add_option("--group", s.group, "grouping: node, switch, pod or a size (default: PARO_GROUP, else node)");
  app.add_option("--scope", s.scope, "global, intra (my group) or inter (my rail)")
      ->capture_default_str()
      ->check(CLI::IsMember({"global", "intra", "inter"}));
  app.add_option("--ratio", s.ratio, "compressed_all_reduce: SEPARATE's ratio (columns per projection vector)")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--shape", s.shape,
                 "compressed_all_reduce: the gradient as ROWSxCOLS (default: -b..-e as rows of 1024 columns)");
  app.add_option("--block-cols", s.block_cols,
                 "compressed_all_reduce: projection variants, comma-separated: 0 = full, B = block-diagonal with B "
                 "columns per block")
      ->capture_default_str();
  app.add_option("--projection", s.projection, "compressed_all_reduce: gaussian or rademacher")
      ->capture_default_str()
      ->check(CLI::IsMember({"gaussian", "rademacher"}));
  app.add_option(
         "--separate-chunk", s.separate_chunk,
         "compressed_all_reduce: bytes per all-reduce piece overlapped with the compute (0: one piece, no overlap)")
      ->capture_default_str();
  app.add_option("--rounds", s.rounds,
                 "rounds of -n calls of every algorithm (compressed_all_reduce: variant) back to back, each round "
                 "starting with the next one; the median round is reported (default 1, compressed_all_reduce 3)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--no-error-feedback", s.no_error_feedback, "compressed_all_reduce: without SEPARATE's error feedback");
  CLI11_PARSE(app, argc, argv);

  try {
    reject_host_only_options(s);
    paro::tools::size_sweep(min_bytes(s), max_bytes(s), s.factor);  // -b -e -f checked before any rank starts
    const paro::tools::LaunchOptions o = launch_options(s, &argc, &argv);
    return paro::tools::launch_tool(o, s.json_path, [&](auto& comm, nlohmann::json& records) {
      return run_or_calibrate(comm, s, records) == 0 ? 0 : 1;  // 1: wrong elements
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-bench: %s\n", e.what());
    return 2;
  }
}
