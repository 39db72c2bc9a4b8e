#pragma once
// Starting the ranks of a tool or test: picks the backend by name, makes the emulated cluster, puts the
// paced transport in between, builds a Communicator per rank and runs one generic body on every rank.
//
//   paro::tools::LaunchOptions o;            // backend threads, 8 ranks, nodes=2
//   auto run = paro::tools::launch(o, [&](auto& comm) { return measure(comm); });
//   if (run.rank_0) print(run.result);
//
// Thread ranks run in this process and rank 0's result comes back; under mpi (mpirun -np N) every process
// runs its own rank and gets its result. run_on_thread_ranks is the layer below, for callers that want
// every rank's result (the tests gather every rank's failures) or a memory space of their choice.

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/tools/backends.hpp"
#include "paro/topology/emulation.hpp"
#include "paro/transport/paced.hpp"
#include "paro/transport/recording.hpp"
#include "paro/transport/threads.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/transport/mpi.hpp"
#endif
#ifdef PARO_HAVE_UCX
#include <memory>

#include "paro/bootstrap/from_env.hpp"
#include "paro/transport/ucx.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/bootstrap/mpi.hpp"
#endif
#endif
#ifdef PARO_HAVE_CUDA
#include "paro/transport/nccl.hpp"
#include "paro/transport/threads_cuda.cuh"
#endif

namespace paro::tools {

// Thread launchers: run fn(Transport) on n thread ranks, buffers in one memory space.
struct HostThreads {
  using Transport = threads::Transport;
  template <class Fn>
  static void run(int n, Fn&& fn) {
    threads::run(n, std::forward<Fn>(fn));
  }
};

// Thread ranks under NCCL's message rules (transport/recording.hpp): the nccl backend's schedules on the CPU.
struct RecordedThreads {
  using Transport = recording::Transport<threads::Transport>;
  template <class Fn>
  static void run(int n, Fn&& fn) {
    threads::run(n, [&](threads::Transport t) { fn(Transport(std::move(t))); });
  }
};

#ifdef PARO_HAVE_CUDA
struct DeviceThreads {
  using Transport = threads::DeviceTransport;
  template <class Fn>
  static void run(int n, Fn&& fn) {
    threads::run_on_devices(n, std::forward<Fn>(fn));
  }
};
#endif

// The thread transport itself, for run_on_thread_ranks' make_transport.
struct AsIs {
  template <class T>
  T operator()(T& t) const {
    return std::move(t);
  }
};

// Runs body(its thread transport) on n thread ranks of Launcher's memory space and returns every rank's
// result, by rank.
template <class Launcher = HostThreads, class Body>
auto on_thread_ranks(int n, Body&& body) {
  using Thread = typename Launcher::Transport;
  using Result = std::decay_t<std::invoke_result_t<Body&, Thread&>>;
  // Each rank fills its own slot (optional: a vector<bool> would share bytes between ranks); run()
  // joins every thread before the slots are read.
  std::vector<std::optional<Result>> slots(static_cast<std::size_t>(n));
  Launcher::run(n, [&](Thread t) {
    const auto rank = static_cast<std::size_t>(t.rank());
    slots[rank].emplace(body(t));
  });
  std::vector<Result> results;
  results.reserve(slots.size());
  for (auto& slot : slots) results.push_back(std::move(*slot));
  return results;
}

// Runs body(Communicator&) on n thread ranks of Launcher's memory space, each rank's Communicator over
// make_transport(its thread transport) with config, and returns every rank's result, by rank.
template <class Launcher = HostThreads, class Body, class MakeTransport = AsIs>
auto run_on_thread_ranks(int n, const CommunicatorConfig& config, Body&& body, MakeTransport&& make_transport = {}) {
  using Made = std::decay_t<std::invoke_result_t<MakeTransport&, typename Launcher::Transport&>>;
  return on_thread_ranks<Launcher>(n, [&](auto& t) {
    Communicator<Made> comm(make_transport(t), config);
    return body(comm);
  });
}

struct LaunchOptions {
  std::string backend = ThreadsBackend::name;  // a name of backends.hpp's list that this build has
  std::string device = "host";                 // threads: buffers in host or (CUDA builds) cuda memory
  int thread_ranks = 8;                        // threads, and nccl without MPI: ranks in this process
  // The emulated cluster (PARO_EMULATE form); empty: PARO_EMULATE, else for threads with an even rank
  // count and no PARO_TOPO_FILE 2 nodes (nodes=2), else one node. With link keys in it, host backends' messages take
  // the emulated links' time (paced::Transport); without, they pass straight through.
  std::string emulate;
  bool trace = false;            // host backends: record every message (paced::TraceLog)
  CommunicatorConfig config;     // its discovery.emulate is set from emulate
  std::string program = "paro";  // the tool, for errors such as "this paro-bench was built without MPI"
  int* argc = nullptr;           // mpi: the command line for MPI_Init
  char*** argv = nullptr;
};

// What launch() returns: the result of the first rank this process ran and whether that is rank 0
// (it is, except in the other processes of an MPI job).
template <class Result>
struct Launched {
  Result result;
  bool rank_0 = true;
};

// The PARO_EMULATE given to discovery: the option's, else for threads with an even rank count and neither
// PARO_EMULATE nor PARO_TOPO_FILE nodes=2, else none (discovery then reads them itself; an emulation
// would override the file's cluster, keeping only its links).
inline std::string emulation_option(const LaunchOptions& o) {
  if (!o.emulate.empty()) return o.emulate;
  if (o.backend == ThreadsBackend::name && o.thread_ranks % 2 == 0 && !env::get("PARO_EMULATE") &&
      !env::get("PARO_TOPO_FILE"))
    return "nodes=2";
  return "";
}

// paro::Error unless the backend (backends.hpp) and the device are known and built here.
inline void check_launch_options(const LaunchOptions& o) {
  Backends::require_built(o.backend, "--backend");
  detail::require(o.device == "host" || o.device == "cuda", "--device ", o.device, ": allowed values are host, cuda");
#ifdef PARO_HAVE_CUDA
  detail::require(o.device == "host" || o.backend == ThreadsBackend::name, "--device cuda: only with --backend threads",
                  " (the nccl backend's buffers are on the GPU already)");
#else
  detail::require(o.device == "host", "--device cuda: this ", o.program, " was built without CUDA (use ", o.program,
                  "-cuda)");
#endif
}

#ifdef PARO_HAVE_UCX
// This process's rank of a job started by paro-run, torchrun or srun: its UCX world bootstrapped through
// the store PARO_STORE names (bootstrap/from_env.hpp), or over MPI under mpirun without PARO_STORE; over
// make_transport(world).
template <class Result, class Body, class MakeTransport>
Launched<Result> run_on_ucx_rank(const LaunchOptions& o, const CommunicatorConfig& config, Body& body,
                                 MakeTransport&& make_transport) {
  auto run_over = [&](bootstrap::Bootstrap& boot) {
    ucx::Transport world(boot);
    Communicator comm(make_transport(world), config);
    return Launched<Result>{body(comm), comm.rank() == 0};
  };
#ifdef PARO_HAVE_MPI
  if (!env::get("PARO_STORE")) {
    mpi::Environment environment(o.argc, o.argv);
    bootstrap::MpiBootstrap boot(MPI_COMM_WORLD);
    return run_over(boot);
  }
#else
  (void)o;
#endif
  const std::unique_ptr<bootstrap::Bootstrap> boot = bootstrap::bootstrap_from_env();
  return run_over(*boot);
}
#endif

#ifdef PARO_HAVE_MPI
// This process's rank of an MPI job (MPI initialised here unless it already is), over make_transport(world).
template <class Result, class Body, class MakeTransport>
Launched<Result> run_on_mpi_rank(const LaunchOptions& o, const CommunicatorConfig& config, Body& body,
                                 MakeTransport&& make_transport) {
  mpi::Environment environment(o.argc, o.argv);
  auto world = mpi::Transport::world();
  Communicator comm(make_transport(world), config);
  return {body(comm), comm.rank() == 0};
}
#endif

// Runs body(Communicator<T>&) on every rank of the chosen backend; body is generic (T is the backend's
// transport) and returns the same type on every backend. Errors: paro::Error naming the option.
template <class Body>
auto launch(const LaunchOptions& o, Body&& body) {
  using ThreadsPaced = paced::Transport<threads::Transport>;
  using Result = std::decay_t<std::invoke_result_t<Body&, Communicator<ThreadsPaced>&>>;
  auto rank_0_of = [](std::vector<Result> results) { return Launched<Result>{std::move(results.front()), true}; };
  check_launch_options(o);
  const std::string emulate = emulation_option(o);
  CommunicatorConfig config = o.config;
  if (!emulate.empty()) config.discovery.emulate = emulate;
#ifdef PARO_HAVE_CUDA
  // Device backends are not paced: the paced transport times host messages.
  if (o.backend == ThreadsBackend::name && o.device == "cuda")
    return rank_0_of(run_on_thread_ranks<DeviceThreads>(o.thread_ranks, config, body));
  if (o.backend == NcclBackend::name) {
#ifdef PARO_HAVE_MPI
    return run_on_mpi_rank<Result>(
        o, config, body, [](mpi::Transport& host) { return nccl::Transport::bootstrap(host, nccl::local_device()); });
#else  // one process: a GPU per thread rank
    return rank_0_of(run_on_thread_ranks(o.thread_ranks, config, body, [](threads::Transport& host) {
      return nccl::Transport::bootstrap(host, host.rank());
    }));
#endif
  }
#endif
  const topology::EmulationSpec spec =
      topology::EmulationSpec::parse(!emulate.empty() ? emulate : env::get("PARO_EMULATE").value_or("nodes=1"));
  auto paced_over = [&](auto& inner) {
    return paced::Transport<std::decay_t<decltype(inner)>>::wrap(std::move(inner), spec, o.trace);
  };
#ifdef PARO_HAVE_MPI
  if (o.backend == MpiBackend::name) return run_on_mpi_rank<Result>(o, config, body, paced_over);
#endif
#ifdef PARO_HAVE_UCX
  if (o.backend == UcxBackend::name) return run_on_ucx_rank<Result>(o, config, body, paced_over);
#endif
  return rank_0_of(run_on_thread_ranks(o.thread_ranks, config, body, paced_over));
}

}  // namespace paro::tools
