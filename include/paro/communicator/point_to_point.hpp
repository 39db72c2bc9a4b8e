#pragma once
// Point-to-point messages with a user tag: what a Communicator's send / recv / isend / irecv run.
//
// They travel on a communicator of their own (split off the Communicator's at construction), so a user tag
// can never match a collective's message, and they are driven by a thread of their own, so that a receive
// posted after a send on the same rank (a pipeline's ring: send to the next stage, receive from the
// previous) never waits for the send to finish first, and collectives issued meanwhile are not held up.
// The thread posts each message in issue order (so messages between one pair with one tag match in that
// order, as MPI's) and completes them as the transport reports them done (Transport::test).
//
// Every message is an 8-byte header (its length) followed by its payload, on two transport tags. A receive
// posts its payload's receive only once the header has come: into the caller's buffer when the lengths
// agree, else into scratch that is dropped, and the receive fails naming the sender and both lengths. The
// ranks stay in step either way, so a wrong length is an error of that call alone.
//
// Needs a transport with test() that may be driven from two threads at once (threads, ucx, mpi under
// MPI_THREAD_MULTIPLE); elsewhere every call fails with a UsageError that says so.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/communicator/progress.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

template <class Transport>
class PointToPoint {
 public:
  // User tags are 0 .. max_tag: each takes two transport tags, and MPI promises tags up to 32767.
  static constexpr int max_tag = 16383;

  // Collective over world (a split) where the transport can carry point-to-point messages.
  explicit PointToPoint(Transport& world) {
    if constexpr (has_test_v<Transport>) {
      if (world.concurrent_use()) t_.emplace(world.split(0, world.rank()));
    }
  }
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // Waits for every message posted (each ends, at the latest, by the transport's timeout).
  ~PointToPoint() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  bool available() const { return t_.has_value(); }
  // Why not, for the verbs' UsageError.
  std::string why_unavailable() const {
    return detail::concat("point-to-point messages need a backend whose communicators can be tested without ",
                          "blocking and driven from two threads at once (threads, ucx, mpi under ",
                          "MPI_THREAD_MULTIPLE); the ", Transport::name, " backend here cannot");
  }

  // peer: a rank of the split communicator (= the Communicator's global rank); errors name the ranks as the
  // caller's scope numbers them (scope_rank, scope_peer). The arguments are checked by the caller; buf
  // belongs to the message until the Request completes.
  Request post(bool is_send, void* buf, std::size_t bytes, int peer, int tag, int scope_rank, int scope_peer) {
    auto op = std::make_unique<Op>();
    op->is_send = is_send;
    op->buf = static_cast<char*>(buf);
    op->bytes = bytes;
    op->peer = peer;
    op->tag = tag;
    op->scope_rank = scope_rank;
    op->scope_peer = scope_peer;
    op->header = bytes;
    op->state = std::make_shared<detail::RequestState>();
    Request r(op->state);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // (Only a transport with test() gets here: available() is false elsewhere.)
      if constexpr (has_test_v<Transport>)
        if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
      incoming_.push_back(std::move(op));
    }
    changed_.notify_all();
    return r;
  }

 private:
  using TransportRequest = typename Transport::Request;
  enum class Stage { queued, header, payload };

  struct Op {
    bool is_send = false;
    char* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0;
    int tag = 0;
    int scope_rank = 0, scope_peer = 0;
    std::uint64_t header = 0;  // a send's length; a receive's, once its header has come
    Stage stage = Stage::queued;
    std::optional<TransportRequest> header_request, payload_request;
    std::shared_ptr<void> scratch;  // a receive's drain for a message of another length
    std::string mismatch;
    std::chrono::steady_clock::time_point since;
    std::shared_ptr<detail::RequestState> state;
  };

  std::optional<Transport> t_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Op>> incoming_;  // issued, not yet taken by the worker
  bool stopping_ = false;
  std::vector<std::shared_ptr<detail::RequestState>> failed_;  // the worker's: requests that failed
  std::thread worker_;

  static int header_tag(int tag) { return 2 * tag; }
  static int payload_tag(int tag) { return 2 * tag + 1; }

  void work() {
    std::list<std::unique_ptr<Op>> pending;  // the worker's alone: posted or about to be, in issue order
    std::chrono::microseconds pause{0};
    const auto timeout = std::chrono::duration<double>(env::timeout_seconds());
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (pending.empty())
          changed_.wait(lock, [&] { return !incoming_.empty() || stopping_; });
        else if (pause.count() > 0)
          changed_.wait_for(lock, pause, [&] { return !incoming_.empty(); });
        while (!incoming_.empty()) {
          pending.push_back(std::move(incoming_.front()));
          incoming_.pop_front();
        }
        if (pending.empty() && stopping_) return;
      }
      const bool progressed = advance(pending, timeout);
      // Idle: give the cores back, up to a millisecond between polls.
      pause = progressed ? std::chrono::microseconds{0}
                         : std::min(std::chrono::microseconds{1000}, pause * 2 + std::chrono::microseconds{1});
    }
  }

  // One pass over the pending messages in issue order: posts what is queued, moves on what has completed.
  // A receive's payload is posted only after those of every earlier receive with its peer and tag, so that
  // payloads match in issue order like their headers.
  template <class Duration>
  bool advance(std::list<std::unique_ptr<Op>>& pending, Duration timeout) {
    bool progressed = false;
    std::vector<std::pair<int, int>> held;  // (peer, tag) of receives still waiting for their header
    for (auto it = pending.begin(); it != pending.end();) {
      Op& op = **it;
      std::exception_ptr error;
      bool done = false;
      try {
        const bool in_order = std::find(held.begin(), held.end(), std::make_pair(op.peer, op.tag)) == held.end();
        done = step(op, in_order, timeout, progressed);
        if (!op.is_send && op.stage != Stage::payload) held.emplace_back(op.peer, op.tag);
      } catch (...) {
        error = std::current_exception();
        done = true;
      }
      if (!done) {
        ++it;
        continue;
      }
      if (!error && !op.mismatch.empty()) error = std::make_exception_ptr(UsageError(op.mismatch));
      // The caller may reuse the buffer from here on. A failed request is kept until the worker has stopped,
      // so that its error is never destroyed here while the caller may still be reading it.
      const bool failed = error != nullptr;
      op.state->finish(std::move(error));
      if (failed) failed_.push_back(std::move(op.state));
      it = pending.erase(it);
      progressed = true;
    }
    return progressed;
  }

  // Moves op on as far as it can go now; true once it has completed.
  template <class Duration>
  bool step(Op& op, bool in_order, Duration timeout, bool& progressed) {
    Transport& t = *t_;
    if (op.stage == Stage::queued) {
      op.since = std::chrono::steady_clock::now();
      if (op.is_send) {
        op.header_request.emplace(t.isend(&op.header, sizeof op.header, op.peer, header_tag(op.tag)));
        op.payload_request.emplace(t.isend(op.buf, op.bytes, op.peer, payload_tag(op.tag)));
        op.stage = Stage::payload;
      } else {
        op.header_request.emplace(t.irecv(&op.header, sizeof op.header, op.peer, header_tag(op.tag)));
        op.stage = Stage::header;
      }
      progressed = true;
    }
    if (op.stage == Stage::header) {
      if (!in_order || !finished(t, op.header_request, op, timeout)) return false;
      void* into = op.buf;
      if (op.header != op.bytes) {
        op.mismatch =
            detail::concat("rank ", op.scope_rank, ": recv from rank ", op.scope_peer, " with tag ", op.tag, ": rank ",
                           op.scope_peer, " sent ", op.header, " bytes, this receive takes ", op.bytes);
        auto drain = std::make_shared<decltype(t.allocate(0))>(t.allocate(static_cast<std::size_t>(op.header)));
        into = drain->data();
        op.scratch = drain;
      }
      op.payload_request.emplace(t.irecv(into, static_cast<std::size_t>(op.header), op.peer, payload_tag(op.tag)));
      op.stage = Stage::payload;
      progressed = true;
    }
    if (op.is_send && op.header_request && !finished(t, op.header_request, op, timeout)) return false;
    return finished(t, op.payload_request, op, timeout);
  }

  // Whether r has completed (then it is finished with wait, which throws its error, and reset). Past the
  // timeout, wait itself reports where the message is stuck.
  template <class Duration>
  static bool finished(Transport& t, std::optional<TransportRequest>& r, const Op& op, Duration timeout) {
    if (!r) return true;
    if (!t.test(*r) && std::chrono::steady_clock::now() - op.since < timeout) return false;
    TransportRequest done = std::move(*r);
    r.reset();
    t.wait(done);
    return true;
  }
};

}  // namespace paro
