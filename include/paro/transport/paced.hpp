#pragma once
// A transport decorator that makes the links of an emulated cluster (PARO_EMULATE with link keys) cost
// wall-clock time on one machine: every message still moves its real bytes through the inner transport,
// but completes no sooner than the emulated link would have delivered it.
//
// Each message books the links it crosses: inside a node, the sender's and the receiver's intra port
// (intra_gbps per rank); between nodes, the sending and the receiving NIC (inter_gbps; one NIC per node
// with nic=shared, one per rank with nic=per_rank). A message needs bytes / bandwidth of time during which
// both its links are free; it takes the earliest such time from when it is posted (the sender books when
// it posts, as an eager NIC would), in one piece or several, and finishes at its last piece's end plus
// the latency. Pieces are packets: concurrent messages interleave on a link the way a real NIC's packets
// do, so a link idles only when no posted message could use it. (Booking each message whole after the
// last one, as before, left both of its links idle until the later of them was free: an all-to-all over
// four shared NICs took about twice its link time.)
// The booked intervals live in shared memory, so the ranks of a node share their NIC whether they are
// threads of one process or processes of one mpirun. The sender passes the finish time to the receiver in
// a small header message just before the payload (same peer and tag, so MPI's ordering keeps them paired).
//
// The memory space (allocate, copy, reduce, divide, staging), the stepwise trait and the host identity for
// topology discovery are the inner transport's. Native collectives pass through unpaced. With tracing on,
// every message's booked interval is recorded (Chrome trace events, written by paro-bench --trace).
//
//   auto t = paro::paced::Transport<paro::threads::Transport>::wrap(std::move(inner), spec);   // collective

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/core/error.hpp"
#include "paro/core/tags.hpp"
#include "paro/topology/emulation.hpp"
#include "paro/transport/forwarding.hpp"

namespace paro::paced {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sleeps until `until_ns` (steady clock). Linux lets a sleeping thread wake up to its timer slack late,
// 50 us by default: a paced link of a few microseconds would then cost tens more, and more for the
// algorithms with more messages. Each thread that waits asks for 1 ns slack once.
inline void sleep_until_ns(std::int64_t until_ns) {
#ifdef __linux__
  thread_local const bool tight = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)tight;
#endif
  const std::int64_t left = until_ns - now_ns();
  if (left > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left));
}

// One message as the links carried it.
struct TraceEvent {
  int rank, peer;  // world ranks
  bool inter;      // crossed nodes
  std::size_t bytes;
  std::int64_t start_ns, end_ns;
};

// The events of every rank of this process, when tracing is on.
class TraceLog {
 public:
  void record(const TraceEvent& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(e);
  }
  // Removes and returns the events that world rank `rank` sent.
  std::vector<TraceEvent> take_rank(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<TraceEvent> mine, rest;
    for (auto& e : events_) (e.rank == rank ? mine : rest).push_back(e);
    events_ = std::move(rest);
    return mine;
  }
  void clear_rank(int rank) { take_rank(rank); }
  static TraceLog& process() {
    static TraceLog log;
    return log;
  }

 private:
  std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

namespace detail {

// A busy stretch of a link, [from, to) in steady-clock ns.
struct Interval {
  std::int64_t from, to;
};

// One link's booked time: disjoint busy intervals, sorted. Past intervals are dropped at each booking;
// when the calendar is full, its shortest gap is booked as busy (a link that idles a little less than it
// could, never one carrying two messages at once).
struct Calendar {
  static constexpr int capacity = 64;
  int count;  // zero in a fresh (zero-filled) segment
  Interval busy[capacity];

  void drop_until(std::int64_t now) {
    int keep = 0;
    while (keep < count && busy[keep].to <= now) ++keep;
    std::copy(busy + keep, busy + count, busy);
    count -= keep;
  }
  void add(Interval added) {
    if (count == capacity) fill_shortest_gap();
    int i = 0;
    while (i < count && busy[i].to < added.from) ++i;  // the first interval that ends where the new one starts or later
    int j = i;
    while (j < count && busy[j].from <= added.to) ++j;  // [i, j) touch the new one: merged into it
    if (j > i) added = {std::min(added.from, busy[i].from), std::max(added.to, busy[j - 1].to)};
    const int shift = 1 - (j - i);  // entries after j move by this
    if (shift > 0) std::copy_backward(busy + j, busy + count, busy + count + shift);
    if (shift < 0) std::copy(busy + j, busy + count, busy + j + shift);
    count += shift;
    busy[i] = added;
  }

 private:
  void fill_shortest_gap() {
    int best = 0;
    for (int k = 1; k + 1 < count; ++k)
      if (busy[k + 1].from - busy[k].to < busy[best + 1].from - busy[best].to) best = k;
    busy[best].to = busy[best + 1].to;
    std::copy(busy + best + 2, busy + count, busy + best + 1);
    --count;
  }
};

// Books `busy_ns` of time when both `a` and `b` are free, from `now` on, in as many pieces as the gaps
// they share need; both calendars then hold the pieces. Returns the first piece's start and the last's end.
inline Interval book_both(Calendar& a, Calendar& b, std::int64_t now, std::int64_t busy_ns) {
  a.drop_until(now);
  b.drop_until(now);
  if (busy_ns <= 0) return {now, now};
  Interval pieces[2 * Calendar::capacity + 1];
  int count = 0, i = 0, j = 0;
  std::int64_t t = now, left = busy_ns;
  // Both links' busy intervals in order of start; each gap they leave from t on takes what it can.
  while (left > 0 && (i < a.count || j < b.count)) {
    const bool from_a = j >= b.count || (i < a.count && a.busy[i].from <= b.busy[j].from);
    const Interval next = from_a ? a.busy[i++] : b.busy[j++];
    if (next.from > t) {
      const std::int64_t take = std::min(left, next.from - t);
      pieces[count++] = {t, t + take};
      left -= take;
    }
    t = std::max(t, next.to);
  }
  if (left > 0) pieces[count++] = {t, t + left};  // the rest after both links' last interval
  for (int k = 0; k < count; ++k) {
    a.add(pieces[k]);
    b.add(pieces[k]);
  }
  return {pieces[0].from, pieces[count - 1].to};
}

// Every link's calendar, in a POSIX shared-memory segment mapped by every rank, behind one spin lock.
struct Clocks {
  std::atomic<int> lock;
  Calendar links[1];  // really `links` entries

  static std::size_t bytes_for(std::size_t links) { return sizeof(Clocks) + (links - 1) * sizeof(Calendar); }
};
static_assert(std::atomic<int>::is_always_lock_free, "paced transport: shared-memory clocks need a lock-free atomic");

class SharedClocks {
 public:
  SharedClocks(const std::string& name, std::size_t links, bool create) : bytes_(Clocks::bytes_for(links)) {
    const int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (fd < 0) throw BackendError(paro::detail::concat("paced transport: cannot open shared memory '", name, "'"));
    if (create && ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      close(fd);
      shm_unlink(name.c_str());
      throw BackendError(paro::detail::concat("paced transport: cannot size shared memory '", name, "'"));
    }
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
      throw BackendError(paro::detail::concat("paced transport: cannot map shared memory '", name, "'"));
    clocks_ = static_cast<Clocks*>(p);  // a fresh segment is zero-filled: unlocked, every calendar empty
  }
  SharedClocks(const SharedClocks&) = delete;
  SharedClocks& operator=(const SharedClocks&) = delete;
  ~SharedClocks() { munmap(clocks_, bytes_); }

  // Returns when the message's first piece starts and its last ends.
  Interval book(std::size_t a, std::size_t b, std::int64_t now, std::int64_t busy_ns) {
    while (clocks_->lock.exchange(1, std::memory_order_acquire) != 0) std::this_thread::yield();
    const Interval booked = book_both(clocks_->links[a], clocks_->links[b], now, busy_ns);
    clocks_->lock.store(0, std::memory_order_release);
    return booked;
  }

 private:
  std::size_t bytes_;
  Clocks* clocks_ = nullptr;
};

// What every rank of the emulated cluster shares: where each world rank sits and the link clocks.
struct Fabric {
  topology::EmulationSpec spec;
  std::vector<int> node_of;  // by world rank
  std::unique_ptr<SharedClocks> clocks;
  bool trace = false;

  int ranks() const { return static_cast<int>(node_of.size()); }
  // Links: intra tx and rx per rank, then NIC tx and rx per NIC.
  std::size_t link_count() const { return 4 * node_of.size(); }
  std::size_t intra_tx(int r) const { return 2 * static_cast<std::size_t>(r); }
  std::size_t intra_rx(int r) const { return 2 * static_cast<std::size_t>(r) + 1; }
  std::size_t nic(int r) const {
    return static_cast<std::size_t>(spec.nic == NicModel::shared ? node_of[static_cast<std::size_t>(r)] : r);
  }
  std::size_t nic_tx(int r) const { return 2 * node_of.size() + 2 * nic(r); }
  std::size_t nic_rx(int r) const { return 2 * node_of.size() + 2 * nic(r) + 1; }
};

constexpr int setup_tag = tags::paced_setup;

}  // namespace detail

template <class Inner>
class Transport : public Forwarding<Transport<Inner>, Inner> {
  using Base = Forwarding<Transport<Inner>, Inner>;
  using Base::inner_;

 public:
  // Everything but the messages is the inner transport's (forwarding.hpp): pacing delays messages and
  // leaves the bytes where they are; a schedule must not run ahead of a stepwise inner transport either.
  struct Request {
    typename Inner::Request header, payload;
    std::unique_ptr<std::int64_t> finish_ns;  // receives: arrives in the header
    std::int64_t sender_done_ns = 0;          // sends: when the last byte has left
    TraceEvent unpaced;                       // sends when only tracing: timed by wait
    bool traced_on_wait = false;
  };

  Transport() = default;

  // Collective over `inner` (every rank of the emulated cluster). Without link keys in the spec, messages
  // pass straight through (and are only traced, with PARO_TRACE=1).
  static Transport wrap(Inner inner, const topology::EmulationSpec& spec, bool trace = false) {
    auto fabric = std::make_shared<detail::Fabric>();
    fabric->spec = spec;
    fabric->trace = trace;
    const Topology placed = spec.place(inner.size());
    fabric->node_of = placed.ordinals(Level::node);
    std::vector<int> members(static_cast<std::size_t>(inner.size()));
    for (int r = 0; r < inner.size(); ++r) members[static_cast<std::size_t>(r)] = r;
    if (spec.paced()) share_clocks(inner, *fabric);
    return Transport(std::move(inner), std::move(fabric), std::move(members));
  }

  // The emulated links this transport books, to be shared by later communicators of the same processes
  // (joined): one cluster, one set of link clocks, whatever the communicator.
  using Links = std::shared_ptr<detail::Fabric>;
  const Links& links() const { return fabric_; }

  // inner's messages on `links` (another transport's, over the same world), inner's rank r being world rank
  // members[r]. Not collective: what split does for a communicator made some other way (a process group
  // connected on its own).
  static Transport joined(Inner inner, Links links, std::vector<int> members) {
    paro::detail::require(static_cast<int>(members.size()) == inner.size(),
                          "paced::Transport::joined: ", members.size(), " world ranks for a communicator of ",
                          inner.size());
    for (int m : members)
      paro::detail::require(m >= 0 && m < links->ranks(), "paced::Transport::joined: world rank ", m,
                            " outside the emulated cluster of ", links->ranks(), " ranks");
    return Transport(std::move(inner), std::move(links), std::move(members));
  }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    const int from = world(this->rank()), to = world(peer);
    if (!fabric_->clocks) {
      if (fabric_->trace) {
        r.unpaced = {from, to, inter(from, to), bytes, now_ns(), 0};
        r.traced_on_wait = true;
      }
      r.payload = inner_.isend(buf, bytes, peer, tag);
      return r;
    }
    const bool crosses = inter(from, to);
    const LinkSpec& link = crosses ? fabric_->spec.inter : fabric_->spec.intra;
    const std::int64_t busy =
        link.gbps > 0 ? static_cast<std::int64_t>(static_cast<double>(bytes) * 8.0 / link.gbps) : 0;
    const std::int64_t now = now_ns();
    const detail::Interval booked =
        crosses ? fabric_->clocks->book(fabric_->nic_tx(from), fabric_->nic_rx(to), now, busy)
                : fabric_->clocks->book(fabric_->intra_tx(from), fabric_->intra_rx(to), now, busy);
    r.sender_done_ns = booked.to;
    r.finish_ns = std::make_unique<std::int64_t>(booked.to + static_cast<std::int64_t>(link.latency_us * 1e3));
    if (fabric_->trace) TraceLog::process().record({from, to, crosses, bytes, booked.from, *r.finish_ns});
    r.header = inner_.isend(r.finish_ns.get(), sizeof(std::int64_t), peer, tag);
    r.payload = inner_.isend(buf, bytes, peer, tag);
    return r;
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    if (fabric_->clocks) {
      r.finish_ns = std::make_unique<std::int64_t>(0);
      r.header = inner_.irecv(r.finish_ns.get(), sizeof(std::int64_t), peer, tag);
    }
    r.payload = inner_.irecv(buf, bytes, peer, tag);
    return r;
  }

  void wait(Request& r) {
    inner_.wait(r.header);
    inner_.wait(r.payload);
    if (r.traced_on_wait) {
      r.unpaced.end_ns = now_ns();
      TraceLog::process().record(r.unpaced);
      r.traced_on_wait = false;
    }
    if (!r.finish_ns) return;
    sleep_until_ns(r.sender_done_ns ? r.sender_done_ns : *r.finish_ns);
    r.finish_ns.reset();
    r.sender_done_ns = 0;
  }

  // Whether wait(r) would return without blocking: both messages in and the emulated link done (where the
  // inner transport can tell).
  template <class I = Inner, class = std::enable_if_t<has_test_v<I>>>
  bool test(Request& r) {
    if (!inner_.test(r.header) || !inner_.test(r.payload)) return false;
    return !r.finish_ns || now_ns() >= (r.sender_done_ns ? r.sender_done_ns : *r.finish_ns);
  }

  // Collective. The new communicator learns its members' world ranks by passing them around a ring.
  Transport split(int color, int key) {
    Inner sub = inner_.split(color, key);
    if (sub.size() == 0) return Transport(std::move(sub), fabric_, {});
    const int n = sub.size(), r = sub.rank();
    std::vector<int> members(static_cast<std::size_t>(n));
    members[static_cast<std::size_t>(r)] = world(this->rank());
    for (int step = 0; step + 1 < n; ++step) {
      const int send_slot = ((r - step) % n + n) % n, recv_slot = ((r - step - 1) % n + n) % n;
      auto q =
          sub.irecv(&members[static_cast<std::size_t>(recv_slot)], sizeof(int), (r - 1 + n) % n, detail::setup_tag);
      auto s = sub.isend(&members[static_cast<std::size_t>(send_slot)], sizeof(int), (r + 1) % n, detail::setup_tag);
      sub.wait(q);
      sub.wait(s);
    }
    return Transport(std::move(sub), fabric_, std::move(members));
  }

 private:
  std::shared_ptr<detail::Fabric> fabric_;
  std::vector<int> world_of_;  // communicator rank -> world rank

  Transport(Inner inner, std::shared_ptr<detail::Fabric> fabric, std::vector<int> members)
      : Base(std::move(inner)), fabric_(std::move(fabric)), world_of_(std::move(members)) {}

  int world(int r) const { return world_of_[static_cast<std::size_t>(r)]; }
  bool inter(int a, int b) const {
    return fabric_->node_of[static_cast<std::size_t>(a)] != fabric_->node_of[static_cast<std::size_t>(b)];
  }

  // Rank 0 creates the segment under a fresh name and tells the others; once all have mapped it, the
  // name is removed, so nothing outlives the ranks.
  static void share_clocks(Inner& inner, detail::Fabric& fabric) {
    char name[64] = {};
    const int n = inner.size();
    if (inner.rank() == 0) {
      std::random_device entropy;
      const std::string text = paro::detail::concat("/paro-links-", getpid(), "-", entropy(), entropy());
      text.copy(name, sizeof(name) - 1);
      fabric.clocks = std::make_unique<detail::SharedClocks>(name, fabric.link_count(), true);
      std::vector<typename Inner::Request> sends;
      for (int r = 1; r < n; ++r) sends.push_back(inner.isend(name, sizeof(name), r, detail::setup_tag));
      inner.wait_all(sends);
      char ack = 0;
      for (int r = 1; r < n; ++r) {
        auto q = inner.irecv(&ack, 1, r, detail::setup_tag);
        inner.wait(q);
      }
      shm_unlink(name);
    } else {
      auto q = inner.irecv(name, sizeof(name), 0, detail::setup_tag);
      inner.wait(q);
      fabric.clocks = std::make_unique<detail::SharedClocks>(name, fabric.link_count(), false);
      char ack = 1;
      auto s = inner.isend(&ack, 1, 0, detail::setup_tag);
      inner.wait(s);
    }
  }
};

}  // namespace paro::paced
