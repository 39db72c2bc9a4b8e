#pragma once
// The ucx backend: a Transport over UCX's UCP tag API, for processes that share no MPI (any launcher that
// can hand out a Bootstrap: paro-run's TCP store, a FileStore, a c10d Store, MPI itself).
// Needs the paro::ucx CMake component (UCX found at configure time).
//
//   auto boot = paro::bootstrap::bootstrap_from_env();          // or StoreBootstrap over any Store
//   paro::Communicator comm(paro::ucx::Transport(*boot));       // collective over the bootstrap's ranks
//
// One UCP context and one worker per world Transport (the constructor), shared through a shared_ptr by its
// copies and splits and destroyed with the last of them. Every rank has an endpoint to every rank (itself
// included), created with peer error handling, so that a dead peer becomes a PeerFailure, not a hang.
//
// Tags. A UCX tag is 64 bits: [63..44] context id (20 bits) | [43..24] source rank in the communicator
// (20 bits) | [23..0] paro's tag (24 bits), the split Open MPI's pml/ucx uses. Receives match all 64 bits
// (no wildcards), so a message matches exactly one (communicator, source, tag). UCX matches tagged messages
// from one endpoint in the order they were sent (UCP's ordering rule: "tag matching - order guaranteed";
// Open MPI's pml/ucx relies on it for MPI's non-overtaking rule), which gives the concept's "one pair, one
// tag: matched in post order". Context 0 is the world, 1 this backend's own closing barrier; splits take
// the next ones (see split()).
//
// Peer failure. UCX 1.13 selects none of its shared-memory transports (sysv, posix, cma, not even `self`)
// for an endpoint with UCP_ERR_HANDLING_MODE_PEER: ranks on one host would talk TCP over the loopback, at a
// third of shared memory's bandwidth. So PARO_UCX_PEER_ERRORS picks per endpoint:
//   auto (default)  a peer on this host (same host name and PID namespace) gets an endpoint without UCX's
//                   error handling, so that UCX can use shared memory, and is watched by its process
//                   (kill(pid, 0) while a wait on it is idle: a process that is gone is a failed peer);
//                   a peer on another host gets UCP_ERR_HANDLING_MODE_PEER
//   ucx             UCP_ERR_HANDLING_MODE_PEER on every endpoint (TCP on one host)
//   off             no error handling: a dead peer is found only by PARO_TIMEOUT
// UCX reports a peer's failure to the endpoint's error callback (a TCP connection reset, or keepalive:
// UCX_KEEPALIVE_INTERVAL), which marks the peer, as the process watch does; sends to a marked peer fail,
// and a wait on it ends with PeerFailure once the worker is idle.
//
// Threads. The worker is created UCS_THREAD_MODE_MULTI where the UCX build supports it (UCX then locks the
// worker itself), and concurrent_use() is true exactly then: the lanes of paro_cc drive different splits
// from different threads at once, each wait progressing the one shared worker, whichever thread's request
// that completes. This file's own shared data are the failed-peer flags (atomics, written by UCX's error
// callback on whichever thread progresses), the context-id reservations (a mutex) and the endpoints (written
// once, in the constructor).

#include <signal.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/control.hpp"
#include "paro/transport/transport.hpp"

namespace paro::ucx {

namespace detail {

using Clock = std::chrono::steady_clock;

constexpr int tag_bits = 24;
constexpr int rank_bits = 20;
constexpr int context_bits = 20;
constexpr std::uint32_t max_context = (std::uint32_t{1} << context_bits) - 1;
constexpr int max_ranks = 1 << rank_bits;
constexpr int max_tag = (1 << tag_bits) - 1;
constexpr std::uint32_t world_context = 0;
constexpr std::uint32_t closing_context = 1;  // the closing barrier; never a communicator's
constexpr std::uint32_t first_split_context = 2;
constexpr ucp_tag_t full_mask = ~ucp_tag_t{0};

inline ucp_tag_t make_tag(std::uint32_t context, int source, int tag) {
  return (static_cast<ucp_tag_t>(context) << (rank_bits + tag_bits)) |
         (static_cast<ucp_tag_t>(static_cast<std::uint32_t>(source)) << tag_bits) |
         static_cast<ucp_tag_t>(static_cast<std::uint32_t>(tag));
}

inline void check(ucs_status_t status, const char* call) {
  if (status != UCS_OK) throw BackendError(paro::detail::concat(call, " failed: ", ucs_status_string(status)));
}

inline Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// The host name and this process's PID namespace: processes with the same identity can see each other's
// pids (containers with one host name may not).
inline std::string host_identity() {
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return host_name() + (n > 0 ? "|" + std::string(ns, static_cast<std::size_t>(n)) : std::string("|unknown"));
}

enum class PeerErrors { automatic, ucx, off };

inline PeerErrors peer_errors_from_env() {
  const auto v = env::get("PARO_UCX_PEER_ERRORS");
  if (!v || *v == "auto") return PeerErrors::automatic;
  if (*v == "ucx") return PeerErrors::ucx;
  if (*v == "off") return PeerErrors::off;
  throw UsageError("PARO_UCX_PEER_ERRORS='" + *v + "'; allowed: auto ucx off");
}

struct State;

// The argument of an endpoint's error callback: which peer failed (stable address, one per world rank).
struct PeerSlot {
  State* state = nullptr;
  int world_rank = 0;
};

inline void on_peer_error(void* arg, ucp_ep_h, ucs_status_t status);

// The per-process UCX objects of one world, shared by the world Transport's copies and splits.
struct State {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  bool multi_thread = false;
  PeerErrors peer_errors = PeerErrors::automatic;  // PARO_UCX_PEER_ERRORS
  std::vector<char> ucx_errors;                    // by world rank: its endpoint has UCX's error handling
  std::vector<pid_t> watched;                      // by world rank: its process, where it is watched; else 0
  int rank = 0;
  int size = 0;
  double timeout = 300.0;
  std::vector<ucp_ep_h> eps;                   // by world rank; written only while constructing
  std::vector<std::string> hosts;              // by world rank
  std::unique_ptr<PeerSlot[]> slots;           // by world rank
  std::unique_ptr<std::atomic<int>[]> failed;  // by world rank: UCS_OK, or the status UCX reported
  std::atomic<bool> broken{false};             // a wait failed: skip the closing barrier

  std::mutex context_mutex;
  std::uint32_t next_context = first_split_context;  // every id below is taken
  std::set<std::uint32_t> taken, reserved;           // ids at or above next_context

  explicit State(bootstrap::Bootstrap& boot)
      : peer_errors(peer_errors_from_env()), rank(boot.rank()), size(boot.size()), timeout(env::timeout_seconds()) {
    paro::detail::require(size <= max_ranks, "ucx::Transport: ", size, " ranks; the tag layout allows at most ",
                          max_ranks);
    try {
      open(boot);
    } catch (...) {
      close(false);
      throw;
    }
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() { close(!broken.load() && no_failed_peer()); }

  ucs_status_t failure_of(int world_rank) const {
    return static_cast<ucs_status_t>(failed[static_cast<std::size_t>(world_rank)].load(std::memory_order_acquire));
  }

  // A watched peer whose process is gone is marked failed (called while a wait on it is idle).
  void watch(int world_rank) {
    const pid_t pid = watched[static_cast<std::size_t>(world_rank)];
    if (pid != 0 && failure_of(world_rank) == UCS_OK && kill(pid, 0) != 0 && errno == ESRCH)
      failed[static_cast<std::size_t>(world_rank)].store(UCS_ERR_CONNECTION_RESET, std::memory_order_release);
  }

  bool no_failed_peer() const {
    for (int r = 0; r < size; ++r)
      if (failure_of(r) != UCS_OK) return false;
    return true;
  }

  // --- context ids (split) -------------------------------------------------------------------------------
  // The lowest id >= from that this process has neither taken nor reserved.
  std::uint32_t lowest_free(std::uint32_t from) {
    std::lock_guard<std::mutex> lock(context_mutex);
    std::uint32_t c = std::max(from, next_context);
    while (taken.count(c) || reserved.count(c)) ++c;
    return c;
  }
  // Reserves c for a split under way; false where another communicator of this process has it.
  bool reserve(std::uint32_t c) {
    std::lock_guard<std::mutex> lock(context_mutex);
    if (c < next_context || taken.count(c) || reserved.count(c)) return false;
    reserved.insert(c);
    return true;
  }
  void release(std::uint32_t c) {
    std::lock_guard<std::mutex> lock(context_mutex);
    reserved.erase(c);
  }
  void commit(std::uint32_t c) {
    std::lock_guard<std::mutex> lock(context_mutex);
    reserved.erase(c);
    taken.insert(c);
    while (taken.count(next_context)) taken.erase(next_context++);
  }

  // --- waiting ---------------------------------------------------------------------------------------------
  // Progresses the worker until `request` is no longer in progress, or until stop() says so (checked every
  // few idle rounds, and at least every 1024 rounds). Returns the request's status, UCS_INPROGRESS if stopped.
  template <class Stop>
  ucs_status_t progress_until(void* request, Stop&& stop) {
    for (unsigned spins = 1;; ++spins) {
      const ucs_status_t s = ucp_request_check_status(request);
      if (s != UCS_INPROGRESS) return s;
      const bool idle = ucp_worker_progress(worker) == 0;
      if ((idle && (spins & 63u) == 0) || (spins & 1023u) == 0) {
        if (stop(idle)) return UCS_INPROGRESS;
        // Oversubscribed machines (8 ranks on 2 cores) need the core given up now and then.
        std::this_thread::yield();
      }
    }
  }

  // Withdraws an unfinished request: cancels it (UCX cancels receives; a send is cancelled only when its
  // endpoint fails or closes) and progresses until UCX has released it, for at most `seconds`; a send still
  // pending then is left to UCX (released when it completes or its endpoint closes), and may still read its
  // buffer until then. The world is marked broken either way: a communicator with a withdrawn message is
  // unusable (core/error.hpp).
  void withdraw(void* request, double seconds) {
    broken.store(true);
    ucp_request_cancel(worker, request);
    const auto deadline = after(seconds);
    progress_until(request, [&](bool) { return Clock::now() > deadline; });
    ucp_request_free(request);
  }

 private:
  void open(bootstrap::Bootstrap& boot) {
    paro::detail::require(rank >= 0 && rank < size, "ucx::Transport: bootstrap rank ", rank, " of size ", size);
    failed.reset(new std::atomic<int>[static_cast<std::size_t>(size)]);
    slots.reset(new PeerSlot[static_cast<std::size_t>(size)]);
    for (int r = 0; r < size; ++r) {
      failed[static_cast<std::size_t>(r)].store(UCS_OK);
      slots[static_cast<std::size_t>(r)] = {this, r};
    }

    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = 0;  // one worker per context
    params.estimated_num_eps = static_cast<std::size_t>(size);
    const ucs_status_t init = ucp_init(&params, config, &context);
    ucp_config_release(config);
    check(init, "ucp_init");

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_MULTI;
    check(ucp_worker_create(context, &wparams, &worker), "ucp_worker_create");
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    check(ucp_worker_query(worker, &attr), "ucp_worker_query");
    multi_thread = attr.thread_mode == UCS_THREAD_MODE_MULTI;

    // Every rank's host identity, pid and worker address, over the bootstrap: "<host>\0<pid>\0<address>".
    ucp_address_t* address = nullptr;
    std::size_t address_length = 0;
    check(ucp_worker_get_address(worker, &address, &address_length), "ucp_worker_get_address");
    const std::string host = host_identity() + '\0' + std::to_string(getpid());
    bootstrap::Bytes mine(host.begin(), host.end());
    mine.push_back(0);
    const auto* a = reinterpret_cast<const std::uint8_t*>(address);
    mine.insert(mine.end(), a, a + address_length);
    ucp_worker_release_address(worker, address);
    const std::vector<bootstrap::Bytes> all = boot.all_gather(mine);
    paro::detail::require(static_cast<int>(all.size()) == size, "ucx::Transport: the bootstrap's all-gather gave ",
                          all.size(), " rows for ", size, " ranks");

    hosts.resize(static_cast<std::size_t>(size));
    ucx_errors.assign(static_cast<std::size_t>(size), 0);
    watched.assign(static_cast<std::size_t>(size), 0);
    eps.assign(static_cast<std::size_t>(size), nullptr);
    const std::string my_host = host_identity();
    for (int r = 0; r < size; ++r) {
      const bootstrap::Bytes& row = all[static_cast<std::size_t>(r)];
      const auto zero = std::find(row.begin(), row.end(), std::uint8_t{0});
      const auto pid_end = zero == row.end() ? row.end() : std::find(zero + 1, row.end(), std::uint8_t{0});
      if (pid_end == row.end() || pid_end + 1 == row.end())
        throw BackendError(
            paro::detail::concat("ucx::Transport: rank ", r, "'s bootstrap row is not a worker address"));
      const std::string host(row.begin(), zero);
      hosts[static_cast<std::size_t>(r)] = host.substr(0, host.find('|'));
      const pid_t pid = static_cast<pid_t>(std::strtol(std::string(zero + 1, pid_end).c_str(), nullptr, 10));
      const bool same_host = host == my_host;
      ucx_errors[static_cast<std::size_t>(r)] =
          peer_errors == PeerErrors::ucx || (peer_errors == PeerErrors::automatic && !same_host);
      if (peer_errors == PeerErrors::automatic && same_host && pid != getpid())
        watched[static_cast<std::size_t>(r)] = pid;
      ucp_ep_params_t ep{};
      ep.field_mask =
          UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(&*(pid_end + 1));
      ep.err_mode = ucx_errors[static_cast<std::size_t>(r)] ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
      ep.err_handler.cb = &on_peer_error;
      ep.err_handler.arg = &slots[static_cast<std::size_t>(r)];
      check(ucp_ep_create(worker, &ep, &eps[static_cast<std::size_t>(r)]), "ucp_ep_create");
    }
  }

  // A dissemination barrier of empty messages on the closing context, so that no rank closes its endpoints
  // while a peer may still need it to progress (a rendezvous' last acknowledgement). Best effort: gives up
  // quietly after min(PARO_TIMEOUT, 30 s) or on any error.
  void closing_barrier() {
    const auto deadline = after(std::min(timeout, 30.0));
    // Whether the request completed; gives up at the deadline or once `peer` failed (it left without us).
    auto done = [&](ucs_status_ptr_t p, int peer) {
      if (p == nullptr) return true;
      if (UCS_PTR_IS_ERR(p)) return false;
      const ucs_status_t s =
          progress_until(p, [&](bool) { return Clock::now() > deadline || failure_of(peer) != UCS_OK; });
      if (s == UCS_INPROGRESS)
        withdraw(p, 1.0);
      else
        ucp_request_free(p);
      return s == UCS_OK;
    };
    for (int k = 1; k < size; k *= 2) {
      ucp_request_param_t param{};
      const int from = (rank - k + size) % size, to = (rank + k) % size;
      ucs_status_ptr_t recv =
          ucp_tag_recv_nbx(worker, nullptr, 0, make_tag(closing_context, from, 0), full_mask, &param);
      ucs_status_ptr_t send =
          ucp_tag_send_nbx(eps[static_cast<std::size_t>(to)], nullptr, 0, make_tag(closing_context, rank, 0), &param);
      const bool sent = done(send, to);
      if (!done(recv, from) || !sent) return;
    }
  }

  // Closes the endpoints (flushing those of live peers, forcing those of failed ones), then the worker and
  // the context. Never throws: it runs in a destructor.
  void close(bool healthy) {
    if (worker) {
      if (healthy && !eps.empty() && eps[0] != nullptr) closing_barrier();
      std::vector<void*> closing;
      for (std::size_t r = 0; r < eps.size(); ++r) {
        if (!eps[r]) continue;
        ucp_request_param_t param{};
        // Forcing needs peer error handling on both sides (ucp.h); without it every close flushes.
        if (ucx_errors[r] && (!healthy || failure_of(static_cast<int>(r)) != UCS_OK)) {
          param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
          param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        }
        ucs_status_ptr_t p = ucp_ep_close_nbx(eps[r], &param);
        if (p != nullptr && !UCS_PTR_IS_ERR(p)) closing.push_back(p);
        eps[r] = nullptr;
      }
      const auto deadline = after(std::min(timeout, 10.0));
      for (void* p : closing) {
        progress_until(p, [&](bool) { return Clock::now() > deadline; });
        ucp_request_free(p);
      }
      ucp_worker_destroy(worker);
      worker = nullptr;
    }
    if (context) {
      ucp_cleanup(context);
      context = nullptr;
    }
  }
};

// Runs inside ucp_worker_progress, on whichever thread progresses: only marks the peer. Its endpoint is
// closed (forced) with the world; sends on it fail from now on, and waits for its messages check the mark.
inline void on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* slot = static_cast<PeerSlot*>(arg);
  slot->state->failed[static_cast<std::size_t>(slot->world_rank)].store(status == UCS_OK ? UCS_ERR_NO_MESSAGE : status,
                                                                        std::memory_order_release);
}

}  // namespace detail

class Transport : public HostMemory {
 public:
  static constexpr const char* name = "ucx";
  static constexpr bool has_native_collectives = false;

  // A posted message. Move-only; one dropped unfinished (an exception unwinding past it) is withdrawn.
  class Request {
   public:
    Request() = default;
    Request(Request&& o) noexcept { *this = std::move(o); }
    Request& operator=(Request&& o) noexcept {
      if (this != &o) {
        drop();
        state_ = std::move(o.state_);
        handle_ = std::exchange(o.handle_, nullptr);
        status_ = o.status_;
        bytes_ = o.bytes_;
        peer_ = o.peer_;
        world_peer_ = o.world_peer_;
        tag_ = o.tag_;
        is_send_ = o.is_send_;
      }
      return *this;
    }
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;
    ~Request() { drop(); }

   private:
    friend class Transport;
    std::shared_ptr<detail::State> state_;  // null once waited for (or for an empty request)
    void* handle_ = nullptr;                // UCX's request while in flight
    ucs_status_t status_ = UCS_OK;          // the outcome where known at post
    std::size_t bytes_ = 0;
    int peer_ = 0;
    int world_peer_ = 0;
    int tag_ = 0;
    bool is_send_ = false;

    void drop() {
      if (handle_) state_->withdraw(std::exchange(handle_, nullptr), 1.0);
      state_.reset();
    }
  };

  Transport() = default;

  // Collective over the bootstrap's ranks: creates this process's UCP context and worker, exchanges worker
  // addresses and host names over `boot` (one all-gather) and connects to every rank. `boot` is not kept.
  explicit Transport(bootstrap::Bootstrap& boot) : state_(std::make_shared<detail::State>(boot)) {
    rank_ = state_->rank;
    size_ = state_->size;
  }

  int rank() const { return rank_; }
  int size() const { return state_ ? size_ : 0; }
  // This rank's rank in the world Transport this one was split from.
  int world_rank() const { return world_of(rank_); }
  // See the top of this file: true where the UCX build gave the worker UCS_THREAD_MODE_MULTI.
  bool concurrent_use() const { return state_ && state_->multi_thread; }
  std::uint32_t context_id() const { return context_; }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    check_peer(peer, tag, "isend");
    Request r = start(bytes, peer, tag, true);
    if (r.status_ != UCS_OK) return r;
    ucp_request_param_t param{};
    ucs_status_ptr_t p = ucp_tag_send_nbx(state_->eps[static_cast<std::size_t>(r.world_peer_)], buf, bytes,
                                          detail::make_tag(context_, rank_, tag), &param);
    if (UCS_PTR_IS_ERR(p))
      r.status_ = UCS_PTR_STATUS(p);
    else
      r.handle_ = p;
    return r;
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    check_peer(peer, tag, "irecv");
    Request r = start(bytes, peer, tag, false);
    // Always a request, whose length wait() reads: UCX 1.13 may complete a receive of an unexpected message
    // at post without filling param.recv_info, which would hide a size mismatch.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    ucs_status_ptr_t p =
        ucp_tag_recv_nbx(state_->worker, buf, bytes, detail::make_tag(context_, peer, tag), detail::full_mask, &param);
    if (UCS_PTR_IS_ERR(p))
      r.status_ = UCS_PTR_STATUS(p);
    else
      r.handle_ = p;
    return r;
  }

  // Progresses the worker until r completes (any thread's wait progresses every request of the world).
  // Throws PeerFailure where r's peer failed, TimeoutError after PARO_TIMEOUT, UsageError on a size
  // mismatch; r is withdrawn first.
  void wait(Request& r) {
    if (!r.state_) return;
    const std::shared_ptr<detail::State> keep = r.state_;  // r lets go of it below
    detail::State& s = *keep;
    std::size_t received = 0;
    ucs_status_t status = r.status_;
    if (r.handle_) {
      const auto deadline = detail::after(s.timeout);
      bool peer_failed = false;
      status = s.progress_until(r.handle_, [&](bool idle) {
        // Only when idle: what a peer sent before it failed has been delivered by then. A send to a failed
        // peer without UCX's error handling (a watched one) would wait forever.
        if (idle) s.watch(r.world_peer_);
        peer_failed = idle && s.failure_of(r.world_peer_) != UCS_OK;
        return peer_failed || detail::Clock::now() > deadline;
      });
      if (status == UCS_INPROGRESS) {
        void* handle = std::exchange(r.handle_, nullptr);
        r.state_.reset();
        s.withdraw(handle, 1.0);
        if (peer_failed) throw peer_failure(s, r);
        throw TimeoutError(paro::detail::concat(
            "rank ", rank_, ": timed out after ", s.timeout, " s waiting for ",
            r.is_send_ ? "a send to" : "a message from", " rank ", r.peer_, " (", r.bytes_, " bytes, tag ", r.tag_, ")",
            tags::describe(r.tag_), ", world rank ", world_of(r.peer_), " on host ",
            s.hosts[static_cast<std::size_t>(world_of(r.peer_))], activity::describe(),
            "; a peer is stuck or did not enter the same collective (PARO_TIMEOUT sets the limit)"));
      }
      if (!r.is_send_ && status == UCS_OK) {
        ucp_tag_recv_info_t info{};
        ucp_tag_recv_request_test(r.handle_, &info);
        received = info.length;
      }
      ucp_request_free(std::exchange(r.handle_, nullptr));
    }
    r.state_.reset();
    if (status == UCS_ERR_MESSAGE_TRUNCATED || (status == UCS_OK && !r.is_send_ && received != r.bytes_)) {
      s.broken.store(true);
      throw UsageError(paro::detail::concat(
          "rank ", rank_, ": message size mismatch on tag ", r.tag_, ": rank ", r.peer_, " sent ",
          status == UCS_OK ? std::to_string(received) : "more than " + std::to_string(r.bytes_), " bytes, expected ",
          r.bytes_, " (do all ranks call the same collective with the same count and type?)"));
    }
    if (status != UCS_OK) {
      s.broken.store(true);
      if (s.failure_of(r.world_peer_) != UCS_OK || is_peer_status(status)) {
        if (s.failure_of(r.world_peer_) == UCS_OK) s.failed[static_cast<std::size_t>(r.world_peer_)].store(status);
        throw peer_failure(s, r);
      }
      throw BackendError(paro::detail::concat("rank ", rank_, ": ", r.is_send_ ? "send to" : "receive from", " rank ",
                                              r.peer_, " (", r.bytes_, " bytes, tag ", r.tag_,
                                              ") failed: ", ucs_status_string(status)));
    }
  }

  void wait_all(std::vector<Request>& requests) {
    for (auto& r : requests) wait(r);
    requests.clear();
  }

  // Whether wait(r) would return (or throw) without blocking: progresses the worker once.
  bool test(Request& r) {
    if (!r.state_ || !r.handle_) return true;
    if (ucp_request_check_status(r.handle_) != UCS_INPROGRESS) return true;
    ucp_worker_progress(r.state_->worker);
    return ucp_request_check_status(r.handle_) != UCS_INPROGRESS;
  }

  // The lowest rank of this communicator on this rank's host (by host name): a host identity for discovery.
  int shared_memory_id() const {
    paro::detail::require(state_ != nullptr, "shared_memory_id on an empty ucx communicator");
    const std::string& mine = state_->hosts[static_cast<std::size_t>(world_rank())];
    for (int r = 0; r < size_; ++r)
      if (state_->hosts[static_cast<std::size_t>(world_of(r))] == mine) return r;
    return rank_;
  }

  // Collective over this communicator. Members are ordered by (key, rank); a negative color gives an empty
  // Transport. The members all-gather (color, key) with control's all-gather on this communicator and agree
  // on a context id for the children: each proposes its lowest free id, the maximum is reserved by every
  // member where it is still free (another thread of the process may be splitting at the same time) and
  // taken when all could reserve it, else they try again above it. Children of one split share the id: a
  // process is in at most one of them, and a receive matches the source's rank in the child too.
  Transport split(int color, int key) {
    paro::detail::require(state_ != nullptr, "split on an empty ucx communicator (split with a negative color)");
    detail::State& s = *state_;
    const int n = size_;
    std::vector<std::int64_t> rows(3 * static_cast<std::size_t>(n));
    std::uint32_t proposal = s.lowest_free(detail::first_split_context);
    auto gather_own = [&](std::int64_t a, std::int64_t b, std::int64_t c) {
      const std::size_t me = 3 * static_cast<std::size_t>(rank_);
      rows[me] = a;
      rows[me + 1] = b;
      rows[me + 2] = c;
      control::bruck_all_gather(*this, rows.data(), 3, DataType::i64);
    };
    gather_own(color, key, proposal);
    std::vector<std::pair<int, int>> color_key(static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p)
      color_key[static_cast<std::size_t>(p)] = {static_cast<int>(rows[3 * static_cast<std::size_t>(p)]),
                                                static_cast<int>(rows[3 * static_cast<std::size_t>(p) + 1])};
    std::uint32_t context = 0;
    for (;;) {
      std::int64_t highest = 0;
      for (int p = 0; p < n; ++p) highest = std::max(highest, rows[3 * static_cast<std::size_t>(p) + 2]);
      if (highest > static_cast<std::int64_t>(detail::max_context))
        throw BackendError(
            paro::detail::concat("ucx split: out of context ids (", detail::max_context, " communicators per world)"));
      const auto candidate = static_cast<std::uint32_t>(highest);
      const bool mine = s.reserve(candidate);
      gather_own(mine, 0, 0);
      bool all = true;
      for (int p = 0; p < n; ++p) all = all && rows[3 * static_cast<std::size_t>(p)] != 0;
      if (all) {
        s.commit(candidate);
        context = candidate;
        break;
      }
      if (mine) s.release(candidate);
      gather_own(0, 0, s.lowest_free(candidate + 1));
    }
    Transport child;
    if (color < 0) return child;
    std::vector<std::pair<int, int>> members;  // (key, parent rank)
    for (int p = 0; p < n; ++p)
      if (color_key[static_cast<std::size_t>(p)].first == color)
        members.push_back({color_key[static_cast<std::size_t>(p)].second, p});
    std::sort(members.begin(), members.end());
    auto world = std::make_shared<std::vector<int>>();
    for (std::size_t i = 0; i < members.size(); ++i) {
      world->push_back(world_of(members[i].second));
      if (members[i].second == rank_) child.rank_ = static_cast<int>(i);
    }
    child.state_ = state_;
    child.size_ = static_cast<int>(members.size());
    child.context_ = context;
    child.world_ranks_ = std::move(world);
    return child;
  }

  // The transports UCX chose for the endpoint to `peer` (ucp_ep_print_info), for tests and debugging.
  std::string describe_endpoint(int peer) const {
    check_peer(peer, 0, "describe_endpoint");
    char* text = nullptr;
    std::size_t length = 0;
    FILE* stream = open_memstream(&text, &length);
    if (!stream) return {};
    ucp_ep_print_info(state_->eps[static_cast<std::size_t>(world_of(peer))], stream);
    std::fclose(stream);
    std::string out(text, length);
    std::free(text);
    return out;
  }

 private:
  std::shared_ptr<detail::State> state_;
  std::shared_ptr<const std::vector<int>> world_ranks_;  // by rank; null for the world itself
  int rank_ = 0;
  int size_ = 0;
  std::uint32_t context_ = detail::world_context;

  int world_of(int r) const { return world_ranks_ ? (*world_ranks_)[static_cast<std::size_t>(r)] : r; }

  void check_peer(int peer, int tag, const char* what) const {
    paro::detail::require(state_ != nullptr, what, " on an empty ucx communicator (split with a negative color)");
    paro::detail::require(peer >= 0 && peer < size_, what, ": peer ", peer, " is outside the communicator [0, ", size_,
                          ")");
    paro::detail::require(tag >= 0 && tag <= detail::max_tag, what, ": tag ", tag, " is outside [0, ", detail::max_tag,
                          "] (the UCX tag keeps 24 bits for it)");
  }

  // A request for a message to or from peer; already failed (status set) where the peer is known dead.
  Request start(std::size_t bytes, int peer, int tag, bool is_send) const {
    Request r;
    r.state_ = state_;
    r.bytes_ = bytes;
    r.peer_ = peer;
    r.world_peer_ = world_of(peer);
    r.tag_ = tag;
    r.is_send_ = is_send;
    if (is_send) r.status_ = state_->failure_of(r.world_peer_);
    return r;
  }

  static bool is_peer_status(ucs_status_t s) {
    return s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_UNREACHABLE ||
           s == UCS_ERR_REJECTED || s == UCS_ERR_CANCELED || s == UCS_ERR_IO_ERROR;
  }

  PeerFailure peer_failure(const detail::State& s, const Request& r) const {
    const pid_t pid = s.watched[static_cast<std::size_t>(r.world_peer_)];
    const std::string why = pid != 0 ? paro::detail::concat("its process ", pid, " on this host is gone")
                                     : paro::detail::concat("UCX: ", ucs_status_string(s.failure_of(r.world_peer_)));
    return PeerFailure(paro::detail::concat(
        "rank ", rank_, ": rank ", r.peer_, " (world rank ", r.world_peer_, ") failed (", why, ") during ",
        r.is_send_ ? "a send to it" : "a receive from it", " (", r.bytes_, " bytes, tag ", r.tag_, ")"));
  }
};

}  // namespace paro::ucx
