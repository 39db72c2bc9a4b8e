#pragma once
// The backends paro can run a rank on, listed once: each one's name, whether this build has it (and what to
// do where it has not), and how a process joins a job on it. paro-bench's --backend, the launcher (launch.hpp),
// connect() below and the PyTorch package read this list, so a name, an "allowed:" message or a "not built" message is
// written here only.
//
//   paro::AnyCommunicator comm = paro::tools::connect("ucx");   // this process's rank, backend by name
//
// connect() is for backends with one rank per process (mpi, ucx, nccl); threads ranks are threads of one
// process: paro::threads::run(n, [](paro::threads::Transport t) { paro::AnyCommunicator comm(std::move(t)); });

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/from_env.hpp"
#include "paro/communicator/any_communicator.hpp"
#include "paro/communicator/options.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/threads.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/bootstrap/mpi.hpp"
#include "paro/transport/mpi.hpp"
#endif
#ifdef PARO_HAVE_UCX
#include "paro/transport/ucx.hpp"
#endif
#ifdef PARO_HAVE_CUDA
#include "paro/transport/nccl.hpp"
#endif

namespace paro::tools {

// Each descriptor: name; built (this build has it); why_not (what to do where it has not); per_process (one
// rank per process, joined by connect(), or threads of one).
struct ThreadsBackend {
  static constexpr const char* name = "threads";
  static constexpr bool built = true;
  static constexpr const char* why_not = "";
  static constexpr bool per_process = false;
};

struct MpiBackend {
  static constexpr const char* name = "mpi";
#ifdef PARO_HAVE_MPI
  static constexpr bool built = true;
  // MPI_COMM_WORLD; MPI must be initialised (paro::mpi::Environment).
  static AnyCommunicator connect(CommunicatorConfig config) {
    return AnyCommunicator(mpi::Transport::world(), std::move(config));
  }
#else
  static constexpr bool built = false;
#endif
  static constexpr const char* why_not = "built without MPI (configure with MPI installed)";
  static constexpr bool per_process = true;
};

struct UcxBackend {
  static constexpr const char* name = "ucx";
#ifdef PARO_HAVE_UCX
  static constexpr bool built = true;
  // Bootstrapped through the store the launcher's variables name (PARO_STORE, bootstrap/from_env.hpp).
  static AnyCommunicator connect(CommunicatorConfig config) {
    const std::unique_ptr<bootstrap::Bootstrap> boot = bootstrap::bootstrap_from_env();
    return AnyCommunicator(ucx::Transport(*boot), std::move(config));
  }
#else
  static constexpr bool built = false;
#endif
  static constexpr const char* why_not = "built without UCX (configure with libucx-dev installed)";
  static constexpr bool per_process = true;
};

struct NcclBackend {
  static constexpr const char* name = "nccl";
#ifdef PARO_HAVE_CUDA
  static constexpr bool built = true;
  // One GPU per process (nccl::local_device()); rank 0's ncclUniqueId reaches the others through the store
  // the launcher's variables name.
  static AnyCommunicator connect(CommunicatorConfig config) {
    const std::unique_ptr<bootstrap::Bootstrap> boot = bootstrap::bootstrap_from_env();
    const ncclUniqueId mine = boot->rank() == 0 ? nccl::Transport::unique_id() : ncclUniqueId{};
    const auto* bytes = reinterpret_cast<const unsigned char*>(&mine);
    const std::vector<bootstrap::Bytes> all = boot->all_gather(bootstrap::Bytes(bytes, bytes + sizeof mine));
    ncclUniqueId id{};
    std::copy(all.front().begin(), all.front().end(), reinterpret_cast<unsigned char*>(&id));
    return AnyCommunicator(nccl::Transport::join(id, boot->rank(), boot->size(), nccl::local_device()),
                           std::move(config));
  }
#else
  static constexpr bool built = false;
#endif
  static constexpr const char* why_not =
      "built without CUDA and NCCL (use the -cuda tools, or configure with the "
      "CUDA toolkit and NCCL)";
  static constexpr bool per_process = true;
};

template <class... Backends>
struct BackendList {
  // "threads mpi ucx nccl": every backend paro has, built here or not.
  static std::string names() {
    std::string out;
    ((out += (out.empty() ? "" : " ") + std::string(Backends::name)), ...);
    return out;
  }

  // Those this build has.
  static std::vector<std::string> built() {
    std::vector<std::string> out;
    ((Backends::built ? out.push_back(Backends::name) : void()), ...);
    return out;
  }

  // Calls f(D{}) with the descriptor named `name`; false where no backend has that name.
  template <class F>
  static bool visit(std::string_view name, F&& f) {
    return ((name == Backends::name ? (f(Backends{}), true) : false) || ...);
  }

  // paro::UsageError unless `name` is a backend this build has; what: the option, e.g. "--backend" (empty
  // where the caller names it itself).
  static void require_built(std::string_view name, std::string_view what) {
    const char* why_not = nullptr;
    const bool known = visit(name, [&](auto d) { why_not = decltype(d)::built ? nullptr : decltype(d)::why_not; });
    std::string here;
    for (const std::string& b : built()) here += (here.empty() ? "" : " ") + b;
    const std::string subject = what.empty() ? std::string(name) : detail::concat(what, " ", name);
    detail::require(known, subject, ": unknown backend; allowed: ", names(), " (built here: ", here, ")");
    detail::require(why_not == nullptr, subject, ": ", why_not, "; built here: ", here);
  }
};

using Backends = BackendList<ThreadsBackend, MpiBackend, UcxBackend, NcclBackend>;

// This process's rank of a job on the named backend (one with a rank per process: mpi, ucx, nccl), as a
// Communicator of that backend behind AnyCommunicator. Collective over the job's processes.
inline AnyCommunicator connect(std::string_view backend, CommunicatorConfig config = {}) {
  Backends::require_built(backend, "connect: backend");
  std::unique_ptr<AnyCommunicator> made;
  Backends::visit(backend, [&](auto d) {
    using D = decltype(d);
    if constexpr (D::per_process && D::built) made = std::make_unique<AnyCommunicator>(D::connect(std::move(config)));
  });
  detail::require(made != nullptr, "connect: backend ", backend,
                  ": its ranks are threads of one process; run them with paro::threads::run and make an "
                  "AnyCommunicator of each rank's transport");
  return std::move(*made);
}

}  // namespace paro::tools
