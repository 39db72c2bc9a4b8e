#pragma once
// The recording transport: NCCL's message rules on any host transport, so that the schedules the nccl
// backend runs (stepwise rings, tree, Bruck, direct exchanges, barrier, split, paro_cc's one-thread overlap)
// run in the CPU test suite, and a schedule that would hang under NCCL hangs here too and times out
// (PARO_TIMEOUT) instead of passing.
//
// The rules, as nccl.hpp meets them (NCCL user guide: group calls, point-to-point, thread safety):
// - isend/irecv only record. Any wait, or issue(), posts everything recorded since as one group.
//   A message of a group that has not been issued is invisible to its peer.
// - A group completes as a whole: waiting for any of its messages waits for all of them, and for every
//   group issued before it on this communicator (one stream runs them in order).
// - No tags: a pair's messages match in the order they were issued (tags are dropped; a schedule that
//   counts on them to reorder messages receives the wrong bytes or fails on a size mismatch).
// - Local steps (copy, reduce, divide) run on the communicator's stream after its messages: they issue what
//   is recorded and wait for every group first. Staging (upload, download) is a synchronous copy outside the
//   stream, which any thread may do.
// - One thread at a time: the communicators of one rank (the world and its splits) must not be driven from
//   two threads at once (concurrent_use() is false); a second thread that enters is a UsageError.
// - split waits for the communicator's messages first (ncclCommSplit must not have work outstanding).
// Where it is looser than a GPU: a group's messages are posted to the inner transport at once, so they can
// match before the groups issued ahead of them on the stream have finished; only their completion waits.
//
//   threads::run(n, [](threads::Transport t) { Communicator
//   comm(recording::Transport<threads::Transport>(std::move(t))); });

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/forwarding.hpp"

namespace paro::recording {

namespace detail {

// Which thread is inside a call on one rank's communicators; shared by the world and its splits.
class Driver {
 public:
  // Marks the calling thread as the driver for the scope; a second thread is a UsageError.
  class Scope {
   public:
    explicit Scope(Driver& d) : driver_(d) {
      const auto me = std::this_thread::get_id();
      std::thread::id idle{};
      if (!driver_.owner_.compare_exchange_strong(idle, me) && idle != me)
        throw UsageError(
            "recording transport: two threads drove one rank's communicators at once; NCCL allows one "
            "thread per GPU (the transport's concurrent_use() is false)");
      ++driver_.depth_;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (--driver_.depth_ == 0) driver_.owner_.store(std::thread::id{});
    }

   private:
    Driver& driver_;
  };

 private:
  std::atomic<std::thread::id> owner_{};
  int depth_ = 0;  // only the owner touches it
};

template <class InnerRequest>
struct Group {
  std::vector<InnerRequest> requests;
  bool done = false;
};

template <class InnerRequest>
struct Message {
  void* buf;
  std::size_t bytes;
  int peer;
  bool is_send;
  std::shared_ptr<Group<InnerRequest>> group;  // null until issued
};

}  // namespace detail

template <class Inner>
class Transport : public Forwarding<Transport<Inner>, Inner> {
  using Base = Forwarding<Transport<Inner>, Inner>;
  using Base::inner_;
  using Group = detail::Group<typename Inner::Request>;
  using Message = detail::Message<typename Inner::Request>;

 public:
  // NCCL's rules whatever the inner transport's: no native collectives (the schedules are what is tested),
  // stepwise, one thread at a time. The rest is the inner transport's (forwarding.hpp): rank, size,
  // allocate, bind_thread, abandon, and staging, a plain synchronous copy as nccl's (any thread may stage
  // while another drives the rank).
  static constexpr const char* name = "recording";
  static constexpr bool has_native_collectives = false;
  static constexpr bool stepwise = true;

  struct Request {
    std::shared_ptr<Message> message;
  };

  Transport() = default;
  // Wraps one rank's world communicator (each rank wraps its own).
  explicit Transport(Inner inner) : Transport(std::move(inner), std::make_shared<detail::Driver>()) {}

  bool concurrent_use() const { return false; }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    return post(const_cast<void*>(buf), bytes, peer, tag, true);
  }
  Request irecv(void* buf, std::size_t bytes, int peer, int tag) { return post(buf, bytes, peer, tag, false); }

  void wait(Request& r) {
    detail::Driver::Scope scope(*driver_);
    if (!r.message) return;
    issue();  // all that is recorded, not only r: a peer may need those messages to get to r's
    complete_through(r.message->group.get());
    r.message.reset();
  }

  // Posts everything recorded as one group (nccl: ncclGroupStart, the sends and receives, ncclGroupEnd).
  void issue() {
    detail::Driver::Scope scope(*driver_);
    if (recorded_.empty()) return;
    auto group = std::make_shared<Group>();
    for (auto& m : recorded_) {
      group->requests.push_back(m->is_send ? inner_.isend(m->buf, m->bytes, m->peer, untagged)
                                           : inner_.irecv(m->buf, m->bytes, m->peer, untagged));
      m->group = group;
    }
    recorded_.clear();
    issued_.push_back(std::move(group));
  }

  Transport split(int color, int key) {
    detail::Driver::Scope scope(*driver_);
    drain();
    Inner sub = inner_.split(color, key);
    if (sub.size() == 0) return Transport();
    return Transport(std::move(sub), driver_);
  }

  void copy(void* dst, const void* src, std::size_t bytes) {
    local([&] { inner_.copy(dst, src, bytes); });
  }
  void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    local([&] { inner_.reduce(dst, a, b, count, dt, op); });
  }
  void divide(void* buf, std::size_t count, DataType dt, int divisor) {
    local([&] { inner_.divide(buf, count, dt, divisor); });
  }

 private:
  static constexpr int untagged = 0;

  std::shared_ptr<detail::Driver> driver_;
  std::vector<std::shared_ptr<Message>> recorded_;  // posted, not yet issued
  std::deque<std::shared_ptr<Group>> issued_;       // issued, not yet complete, in stream order

  Transport(Inner inner, std::shared_ptr<detail::Driver> driver) : Base(std::move(inner)), driver_(std::move(driver)) {}

  Request post(void* buf, std::size_t bytes, int peer, int tag, bool is_send) {
    detail::Driver::Scope scope(*driver_);
    const char* what = is_send ? "isend" : "irecv";
    paro::detail::require(this->size() > 0, what, " on an empty recording communicator (split with a negative color)");
    paro::detail::require(peer >= 0 && peer < this->size(), what, ": peer ", peer, " is outside the communicator [0, ",
                          this->size(), ")");
    paro::detail::require(tag >= 0, what, ": tag ", tag, " is negative; tags are >= 0");
    auto message = std::make_shared<Message>(Message{buf, bytes, peer, is_send, nullptr});
    recorded_.push_back(message);
    return {std::move(message)};
  }

  // Completes the issued groups in order, up to and including `last` (all of them when null).
  void complete_through(const Group* last) {
    if (last && last->done) return;
    while (!issued_.empty()) {
      std::shared_ptr<Group> front = issued_.front();
      if (!front->done) {
        inner_.wait_all(front->requests);
        front->done = true;
      }
      issued_.pop_front();
      if (front.get() == last) return;
    }
  }

  void drain() {
    issue();
    complete_through(nullptr);
  }

  template <class Step>
  void local(Step&& step) {
    detail::Driver::Scope scope(*driver_);
    drain();
    step();
  }
};

}  // namespace paro::recording
