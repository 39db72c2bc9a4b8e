#pragma once
// The threads backend: every rank is a thread of one process. A message is copied once, straight from
// the sender's buffer into the receiver's, by whichever of the two posts second; nothing is staged.
// It is the embedded default and what the multi-rank tests run on.
//
//   paro::threads::run(8, [](paro::threads::Transport t) { paro::Communicator comm(std::move(t)); ... });
//
// The memory space is a policy: Transport moves host memory (HostMemory); BasicTransport<Memory> with
// paro::cuda::DeviceMemory moves CUDA device memory, each rank on a GPU of its own or sharing one
// (paro/transport/threads_cuda.cuh). The policy copies the messages, allocates scratch and reduces.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "paro/core/activity.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::threads {

namespace detail {

using Clock = std::chrono::steady_clock;

inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Where a waiting rank sleeps; whoever completes one of its requests rings it.
struct Doorbell {
  std::mutex mutex;
  std::condition_variable cv;

  void ring() {
    { std::lock_guard<std::mutex> lock(mutex); }
    cv.notify_all();
  }
};

struct World {
  explicit World(int n) : doorbells(n), timeout(env::timeout_seconds()) {}

  std::vector<Doorbell> doorbells;
  const double timeout;
  std::atomic<bool> aborted{false};
  std::mutex abort_mutex;
  std::string abort_reason;
  int abort_origin = -1;  // world rank whose failure stopped the world

  void abort(int origin, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(abort_mutex);
      if (aborted.load()) return;
      abort_reason = reason;
      abort_origin = origin;
      aborted.store(true);
    }
    for (auto& d : doorbells) d.ring();
  }

  void throw_if_aborted(int world_rank) {
    if (!aborted.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(abort_mutex);
    throw PeerFailure(
        paro::detail::concat("rank ", world_rank, ": stopped because another rank failed: ", abort_reason));
  }
};

struct Mailbox;

struct RequestState {
  std::atomic<bool> done{false};
  Mailbox* queued_in = nullptr;  // where it waits for its match (under that mailbox's lock)
  std::uint64_t key = 0;
  std::string error;  // written before done is set
  int owner = 0;      // world rank that waits on it
  int peer = 0;       // communicator rank of the other side, for messages
  int tag = 0;
  std::size_t bytes = 0;
  bool is_send = false;
};

struct PendingSend {
  const void* buf;
  std::size_t bytes;
  std::shared_ptr<RequestState> state;
};

struct PendingRecv {
  void* buf;
  std::size_t bytes;
  std::shared_ptr<RequestState> state;
};

// Messages addressed to one rank of one communicator, keyed by (source, tag), each queue in posting order.
struct Mailbox {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::deque<PendingSend>> sends;
  std::unordered_map<std::uint64_t, std::deque<PendingRecv>> recvs;
};

inline std::uint64_t key_of(int source, int tag) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(source)) << 32) | static_cast<std::uint32_t>(tag);
}

// One communicator: a set of world ranks with their own mailboxes, so traffic of different
// communicators never matches.
struct Group;

struct SplitRound {
  std::vector<std::pair<int, int>> color_key;  // by communicator rank
  int arrived = 0;
  int departed = 0;
  bool ready = false;
  std::map<int, std::shared_ptr<Group>> groups;  // by color
};

struct Group {
  Group(std::shared_ptr<World> w, std::vector<int> ranks)
      : world(std::move(w)), world_ranks(std::move(ranks)), mailboxes(world_ranks.size()) {}

  std::shared_ptr<World> world;
  std::vector<int> world_ranks;
  std::vector<Mailbox> mailboxes;

  std::mutex split_mutex;
  std::condition_variable split_cv;
  std::map<std::uint64_t, SplitRound> split_rounds;  // by split sequence number

  int size() const { return static_cast<int>(world_ranks.size()); }
};

inline void complete(const std::shared_ptr<RequestState>& s, World& world, std::string error = {}) {
  s->error = std::move(error);
  s->done.store(true, std::memory_order_release);
  world.doorbells[s->owner].ring();
}

// Copies a matched message with copy(dst, src, bytes) (the memory space's) and completes both sides; a
// size mismatch or a failed copy fails both with one message.
template <class Copy>
void deliver(World& world, const void* src, std::size_t send_bytes, const std::shared_ptr<RequestState>& send,
             void* dst, std::size_t recv_bytes, const std::shared_ptr<RequestState>& recv, int sender, int receiver,
             Copy&& copy) {
  std::string error;
  if (send_bytes != recv_bytes) {
    error = paro::detail::concat("message size mismatch on tag ", send->tag, ": rank ", sender, " sent ", send_bytes,
                                 " bytes, rank ", receiver, " expected ", recv_bytes,
                                 " (do all ranks call the same collective with the same count and type?)");
  } else if (send_bytes != 0) {
    try {
      copy(dst, src, send_bytes);
    } catch (const std::exception& e) {
      error = paro::detail::concat("copying ", send_bytes, " bytes from rank ", sender, " to rank ", receiver,
                                   " on tag ", send->tag, ": ", e.what());
    }
  }
  complete(recv, world, error);
  complete(send, world, error);
}

}  // namespace detail

template <class Memory>
class BasicTransport : public Memory {
 public:
  static constexpr const char* name = "threads";
  static constexpr bool has_native_collectives = false;

  struct Request {
    std::shared_ptr<detail::RequestState> state;
  };

  BasicTransport() = default;
  BasicTransport(std::shared_ptr<detail::Group> group, int rank, Memory memory = {})
      : Memory(std::move(memory)), group_(std::move(group)), rank_(rank) {}

  int rank() const { return rank_; }
  int size() const { return group_ ? group_->size() : 0; }
  int world_rank() const { return group_->world_ranks[static_cast<std::size_t>(rank_)]; }
  // Different communicators of one rank may be driven from different threads at once.
  bool concurrent_use() const { return true; }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    check_peer(peer, tag, "isend");
    auto state = new_state(peer, tag, bytes, true);
    detail::Mailbox& box = group_->mailboxes[static_cast<std::size_t>(peer)];
    std::unique_lock<std::mutex> lock(box.mutex);
    auto it = box.recvs.find(detail::key_of(rank_, tag));
    if (it == box.recvs.end() || it->second.empty()) {
      state->queued_in = &box;
      state->key = detail::key_of(rank_, tag);
      box.sends[state->key].push_back({buf, bytes, state});
      track(state);
      return {state};
    }
    detail::PendingRecv recv = std::move(it->second.front());
    it->second.pop_front();
    lock.unlock();
    detail::deliver(*group_->world, buf, bytes, state, recv.buf, recv.bytes, recv.state, rank_, peer, copier());
    return {state};
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    check_peer(peer, tag, "irecv");
    auto state = new_state(peer, tag, bytes, false);
    detail::Mailbox& box = group_->mailboxes[static_cast<std::size_t>(rank_)];
    std::unique_lock<std::mutex> lock(box.mutex);
    auto it = box.sends.find(detail::key_of(peer, tag));
    if (it == box.sends.end() || it->second.empty()) {
      state->queued_in = &box;
      state->key = detail::key_of(peer, tag);
      box.recvs[state->key].push_back({buf, bytes, state});
      track(state);
      return {state};
    }
    detail::PendingSend send = std::move(it->second.front());
    it->second.pop_front();
    lock.unlock();
    detail::deliver(*group_->world, send.buf, send.bytes, send.state, buf, bytes, state, peer, rank_, copier());
    return {state};
  }

  // On failure (timeout, size mismatch, a failed peer) the whole world is stopped and this rank's other
  // requests are withdrawn before the error leaves, so no peer can later copy into buffers that the
  // unwinding frees.
  void wait(Request& r) {
    if (!r.state) return;
    detail::RequestState& s = *r.state;
    try {
      // Spin briefly: on an idle core the peer usually answers within microseconds.
      for (int i = 0; i < 64 && !s.done.load(std::memory_order_acquire); ++i) std::this_thread::yield();
      if (!s.done.load(std::memory_order_acquire)) block_until_done(s);
      std::string error = std::move(s.error);
      r.state.reset();
      if (!error.empty()) throw UsageError(paro::detail::concat("rank ", rank_, ": ", error));
    } catch (const Error& e) {
      group_->world->abort(world_rank(), paro::detail::concat("rank ", world_rank(), ": ", e.what()));
      withdraw_outstanding();
      throw;
    }
  }

  void wait_all(std::vector<Request>& requests) {
    for (auto& r : requests) wait(r);
    requests.clear();
  }

  // Whether wait(r) would return (or throw) without blocking.
  bool test(const Request& r) const { return !r.state || r.state->done.load(std::memory_order_acquire); }

  // A decorator's check failed (transport.hpp): the world stops as on a failed wait.
  void abandon(const std::string& why) {
    group_->world->abort(world_rank(), paro::detail::concat("rank ", world_rank(), ": ", why));
    withdraw_outstanding();
  }

  // Collective over this communicator. A negative color means "no new communicator" (an empty one).
  BasicTransport split(int color, int key) {
    detail::Group& g = *group_;
    const std::uint64_t round_id = split_count_++;
    std::unique_lock<std::mutex> lock(g.split_mutex);
    detail::SplitRound& round = g.split_rounds[round_id];
    if (round.color_key.empty()) round.color_key.resize(static_cast<std::size_t>(g.size()));
    round.color_key[static_cast<std::size_t>(rank_)] = {color, key};
    if (++round.arrived == g.size()) {
      build_split_groups(round);
      round.ready = true;
      g.split_cv.notify_all();
    }
    const auto deadline = detail::deadline_after(g.world->timeout);
    while (!round.ready) {
      g.world->throw_if_aborted(world_rank());
      if (detail::Clock::now() > deadline)
        throw TimeoutError(paro::detail::concat("rank ", rank_, ": timed out after ", g.world->timeout,
                                                " s in split(): not every rank of the communicator called it "
                                                "(PARO_TIMEOUT sets the limit)"));
      g.split_cv.wait_for(lock, std::chrono::milliseconds(20));
    }
    BasicTransport result;
    if (color >= 0) {
      auto group = round.groups.at(color);
      const auto& members = group->world_ranks;
      const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), world_rank()) - members.begin());
      result = BasicTransport(std::move(group), new_rank, this->for_split());
    }
    if (++round.departed == g.size()) g.split_rounds.erase(round_id);
    return result;
  }

 private:
  std::shared_ptr<detail::Group> group_;
  int rank_ = 0;
  std::uint64_t split_count_ = 0;
  std::vector<std::shared_ptr<detail::RequestState>> outstanding_;  // queued when posted, maybe done since

  // Messages are copied by whichever side matches second, with that side's memory space (its stream).
  auto copier() {
    return [this](void* dst, const void* src, std::size_t bytes) { this->copy(dst, src, bytes); };
  }

  void track(std::shared_ptr<detail::RequestState> s) {
    if (outstanding_.size() >= 256)  // keep the list short: forget what has completed
      outstanding_.erase(std::remove_if(outstanding_.begin(), outstanding_.end(),
                                        [](const auto& x) { return x->done.load(std::memory_order_acquire); }),
                         outstanding_.end());
    outstanding_.push_back(std::move(s));
  }

  // Removes this rank's unmatched requests from the mailboxes; waits out copies a peer has already begun.
  void withdraw_outstanding() {
    for (auto& s : outstanding_) {
      if (s->done.load(std::memory_order_acquire)) continue;
      bool removed = false;
      {
        std::lock_guard<std::mutex> lock(s->queued_in->mutex);
        auto erase_from = [&](auto& queues) {
          auto it = queues.find(s->key);
          if (it == queues.end()) return;
          auto& q = it->second;
          for (auto e = q.begin(); e != q.end(); ++e)
            if (e->state == s) {
              q.erase(e);
              removed = true;
              return;
            }
        };
        if (s->is_send)
          erase_from(s->queued_in->sends);
        else
          erase_from(s->queued_in->recvs);
      }
      while (!removed && !s->done.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    outstanding_.clear();
  }

  void check_peer(int peer, int tag, const char* what) const {
    paro::detail::require(group_ != nullptr, what, " on an empty threads communicator (split with a negative color)");
    paro::detail::require(peer >= 0 && peer < size(), what, ": peer ", peer, " is outside the communicator [0, ",
                          size(), ")");
    paro::detail::require(tag >= 0, what, ": tag ", tag, " is negative; tags are >= 0");
  }

  std::shared_ptr<detail::RequestState> new_state(int peer, int tag, std::size_t bytes, bool is_send) const {
    group_->world->throw_if_aborted(world_rank());
    auto s = std::make_shared<detail::RequestState>();
    s->owner = world_rank();
    s->peer = peer;
    s->tag = tag;
    s->bytes = bytes;
    s->is_send = is_send;
    return s;
  }

  void block_until_done(detail::RequestState& s) {
    detail::World& world = *group_->world;
    detail::Doorbell& bell = world.doorbells[static_cast<std::size_t>(world_rank())];
    const auto deadline = detail::deadline_after(world.timeout);
    std::unique_lock<std::mutex> lock(bell.mutex);
    while (!s.done.load(std::memory_order_acquire)) {
      world.throw_if_aborted(world_rank());
      if (detail::Clock::now() > deadline) {
        // On a split communicator its ranks are not the job's: both are named.
        const bool split = group_->size() != static_cast<int>(world.doorbells.size());
        auto in_world = [&](int r) {
          return split ? paro::detail::concat(" (world rank ", group_->world_ranks[static_cast<std::size_t>(r)], ")")
                       : std::string();
        };
        throw TimeoutError(paro::detail::concat(
            "rank ", rank_, in_world(rank_), ": timed out after ", world.timeout, " s waiting for ",
            s.is_send ? "rank " : "a message from rank ", s.peer, in_world(s.peer), s.is_send ? " to receive " : " (",
            s.bytes, " bytes", s.is_send ? "" : ")", " on tag ", s.tag, tags::describe(s.tag), activity::describe(),
            "; a peer is stuck or did not enter the same collective (PARO_TIMEOUT sets the limit)"));
      }
      bell.cv.wait_until(lock, std::min(deadline, detail::Clock::now() + std::chrono::milliseconds(100)));
    }
  }

  void build_split_groups(detail::SplitRound& round) const {
    std::map<int, std::vector<std::pair<int, int>>> members;  // color -> (key, old rank)
    for (int r = 0; r < group_->size(); ++r) {
      auto [c, k] = round.color_key[static_cast<std::size_t>(r)];
      if (c >= 0) members[c].push_back({k, r});
    }
    for (auto& [color, list] : members) {
      std::sort(list.begin(), list.end());
      std::vector<int> world_ranks;
      for (auto& kr : list) world_ranks.push_back(group_->world_ranks[static_cast<std::size_t>(kr.second)]);
      round.groups[color] = std::make_shared<detail::Group>(group_->world, std::move(world_ranks));
    }
  }
};

using Transport = BasicTransport<HostMemory>;

// Runs fn(BasicTransport<Memory>) on n threads, one per rank, with make_memory(rank) as each rank's memory
// space, and returns when all have returned. If a rank throws, the others are woken with an error instead
// of waiting for it, and the first exception is rethrown here.
template <class MakeMemory, class Fn>
void run_with(int n, MakeMemory&& make_memory, Fn&& fn) {
  using Memory = std::decay_t<decltype(make_memory(0))>;
  paro::detail::require(n >= 1, "threads::run: rank count ", n, " must be at least 1");
  std::vector<int> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
  auto world = std::make_shared<detail::World>(n);
  auto root = std::make_shared<detail::Group>(world, std::move(ranks));

  // The error reported is the one of the rank that stopped the world (the root cause), not the
  // "stopped because another rank failed" of the others.
  std::mutex errors_mutex;
  std::exception_ptr root_cause, any_error;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto record = [&](const std::string& reason) {
        world->abort(r, reason);  // no-op when the world already stopped
        std::lock_guard<std::mutex> lock(errors_mutex);
        std::lock_guard<std::mutex> abort_lock(world->abort_mutex);
        if (!any_error) any_error = std::current_exception();
        if (!root_cause && world->abort_origin == r) root_cause = std::current_exception();
      };
      try {
        fn(BasicTransport<Memory>(root, r, make_memory(r)));
      } catch (const std::exception& e) {
        record(paro::detail::concat("rank ", r, ": ", e.what()));
      } catch (...) {
        record(paro::detail::concat("rank ", r, " threw a non-standard exception"));
      }
    });
  }
  for (auto& t : threads) t.join();
  if (root_cause) std::rethrow_exception(root_cause);
  if (any_error) std::rethrow_exception(any_error);
}

// Runs fn(Transport) on n threads over host memory.
template <class Fn>
void run(int n, Fn&& fn) {
  run_with(
      n, [](int) { return HostMemory{}; }, std::forward<Fn>(fn));
}

}  // namespace paro::threads
