#pragma once
// The transport conformance suite: one body that checks, with exact values, what paro/transport/transport.hpp
// promises, run on every rank of any Transport (Gloo's pattern: one body, instantiated per backend).
//
//   shape          rank() and size() are sane
//   messages       to every peer (itself included) with 0, 13 and 1 MiB bytes
//   order          several messages of one pair and tag match in posting order, sends posted before the
//                  receives and receives before the sends
//   tags           messages with different tags do not mix (not on stepwise transports, which may ignore tags)
//   split          members ordered by (key, rank): natural, reversed with ties, a color that leaves ranks alone
//                  or empty, a split of a split; messages on a split never match the parent's
//   concurrent     where concurrent_use(): two communicators driven from two threads at once
//   memory         allocate, copy, reduce (every data type and op, against host_reduce byte for byte), divide,
//                  upload and download in the transport's memory space
//
// Every buffer lives in the transport's memory space and is staged through upload/download, so device
// transports run the same body. On stepwise transports (NCCL) every exchange posts its sends and their
// matching receives and then waits, and no rank waits for a peer that has not posted its side yet.
//
//   auto failures = paro::testing::check_transport_conformance(t);   // collective over t; this rank's failures

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/transport.hpp"

namespace paro::testing {

namespace transport_check {

// This rank's failures, each naming the backend, the communicator and the section.
class Report {
 public:
  Report(const char* backend, int size, int rank)
      : prefix_(detail::concat(backend, " ranks=", size, " rank ", rank, ": ")) {}

  void section(std::string name) { section_ = std::move(name); }

  template <class... Args>
  void fail(Args&&... args) {
    failures_.push_back(detail::concat(prefix_, section_, ": ", std::forward<Args>(args)...));
  }
  template <class... Args>
  void expect(bool ok, Args&&... args) {
    if (!ok) fail(std::forward<Args>(args)...);
  }
  // The same prefix and section, no failures yet: for a thread of its own.
  Report blank_copy() const {
    Report copy = *this;
    copy.failures_.clear();
    return copy;
  }
  void merge(const Report& other) { failures_.insert(failures_.end(), other.failures_.begin(), other.failures_.end()); }

  std::vector<std::string>& failures() { return failures_; }

 private:
  std::string prefix_, section_;
  std::vector<std::string> failures_;
};

// The byte at offset i of message `id` from rank `from` to rank `to`: a message delivered to the wrong
// receive, or shifted, shows.
inline unsigned char message_byte(int from, int to, int id, std::size_t i) {
  return static_cast<unsigned char>(from * 131 + to * 71 + id * 29 + static_cast<int>(i % 251) * 7 + 1);
}

// A buffer in T's memory space, filled from and read back to the host.
template <class T>
class Staged {
 public:
  Staged(T& t, std::size_t bytes) : t_(&t), buffer_(t.allocate(bytes)), bytes_(bytes) {}

  void* data() { return buffer_.data(); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host) { t_->upload(data(), host, bytes_); }
  std::vector<unsigned char> download() {
    std::vector<unsigned char> host(bytes_);
    t_->download(host.data(), data(), bytes_);
    return host;
  }

 private:
  T* t_;
  decltype(std::declval<T&>().allocate(std::size_t{})) buffer_;
  std::size_t bytes_;
};

// The messages of one step on one communicator: posted in the order the caller chooses, then waited for
// together (wait_all), and every receive checked against what its sender wrote.
template <class T>
class Exchange {
 public:
  Exchange(T& t, Report& report) : t_(t), report_(report) {}

  void send(int to, int tag, std::size_t bytes, int id) {
    std::vector<unsigned char> host(bytes);
    for (std::size_t i = 0; i < bytes; ++i) host[i] = message_byte(t_.rank(), to, id, i);
    Staged<T>& buffer = buffers_.emplace_back(t_, bytes);
    buffer.upload(host.data());
    requests_.push_back(t_.isend(buffer.data(), bytes, to, tag));
  }

  void receive(int from, int tag, std::size_t bytes, int id) {
    Staged<T>& buffer = buffers_.emplace_back(t_, bytes);
    buffer.upload(std::vector<unsigned char>(bytes, 0xEE).data());  // not what any sender writes first
    requests_.push_back(t_.irecv(buffer.data(), bytes, from, tag));
    receives_.push_back({&buffer, from, tag, id});
  }

  void finish() {
    t_.wait_all(requests_);
    report_.expect(requests_.empty(), "wait_all left ", requests_.size(), " requests in the vector");
    for (const Receive& r : receives_) {
      const std::vector<unsigned char> got = r.buffer->download();
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != message_byte(r.from, t_.rank(), r.id, i)) {
          report_.fail("message ", r.id, " from rank ", r.from, " on tag ", r.tag, " (", got.size(), " bytes): byte ",
                       i, " is ", int{got[i]}, ", want ", int{message_byte(r.from, t_.rank(), r.id, i)},
                       " (another message's bytes?)");
          break;
        }
    }
    receives_.clear();
    buffers_.clear();
  }

 private:
  struct Receive {
    Staged<T>* buffer;
    int from, tag, id;
  };
  T& t_;
  Report& report_;
  std::vector<typename T::Request> requests_;
  std::deque<Staged<T>> buffers_;  // a deque: posted buffers must not move
  std::vector<Receive> receives_;
};

constexpr int data_tag = 3;
constexpr int token_tag = 4;  // handshakes; never the data's

// Returns once rank `from` has posted every message it posted before its own handshake with us: ordering
// between ranks, for the checks that must post receives after (or before) the peer's sends. Only where
// receives may run ahead of a step (not stepwise): a stepwise transport would wait for the step instead.
template <class T>
void handshake(T& t, int to, int from) {
  auto sent = t.isend(nullptr, 0, to, token_tag);
  auto received = t.irecv(nullptr, 0, from, token_tag);
  t.wait(received);
  t.wait(sent);
}

template <class T>
void check_shape(T& t, Report& report) {
  report.expect(t.size() >= 1, "size() is ", t.size(), ", want at least 1");
  report.expect(t.rank() >= 0 && t.rank() < t.size(), "rank() is ", t.rank(), ", want it in [0, ", t.size(), ")");
  report.expect(T::name != nullptr && *T::name != '\0', "name is empty");
}

// A ring shift by every distance (0: to itself), one step each: every rank sends to rank + d and receives
// from rank - d.
template <class T>
void check_messages(T& t, Report& report) {
  const int n = t.size(), r = t.rank();
  for (std::size_t bytes : {std::size_t{0}, std::size_t{13}, std::size_t{1} << 20})
    for (int d = 0; d < n; ++d) {
      Exchange<T> step(t, report);
      step.receive((r - d + n) % n, data_tag, bytes, d);
      step.send((r + d) % n, data_tag, bytes, d);
      step.finish();
    }
}

// Four messages to the next rank on one tag must arrive in posting order, whichever side posts first.
template <class T>
void check_order(T& t, Report& report) {
  constexpr int messages = 4;
  constexpr std::size_t bytes = 64;
  const int n = t.size(), r = t.rank(), next = (r + 1) % n, prev = (r - 1 + n) % n;
  {
    report.section("order, sends posted first");
    Exchange<T> step(t, report);
    for (int id = 0; id < messages; ++id) step.send(next, data_tag, bytes, id);
    if constexpr (!is_stepwise_v<T>) handshake(t, next, prev);  // prev's sends are posted
    for (int id = 0; id < messages; ++id) step.receive(prev, data_tag, bytes, id);
    step.finish();
  }
  {
    report.section("order, receives posted first");
    Exchange<T> step(t, report);
    for (int id = 0; id < messages; ++id) step.receive(prev, data_tag, bytes, id);
    if constexpr (!is_stepwise_v<T>) handshake(t, prev, next);  // next's receives are posted
    for (int id = 0; id < messages; ++id) step.send(next, data_tag, bytes, id);
    step.finish();
  }
}

// Receives posted in the reverse order of the sends' tags still get their own tag's message.
template <class T>
void check_tags(T& t, Report& report) {
  const int n = t.size(), r = t.rank();
  const int tags[] = {7, 8, 9};
  Exchange<T> step(t, report);
  for (auto tag = std::rbegin(tags); tag != std::rend(tags); ++tag) step.receive((r - 1 + n) % n, *tag, 32, *tag);
  for (int tag : tags) step.send((r + 1) % n, tag, 32, tag);
  step.finish();
}

// Every member's id, by rank of t: an all-to-all of one int, in one step.
template <class T>
std::vector<int> gather_ids(T& t, int id) {
  const int n = t.size();
  Staged<T> mine(t, sizeof(int)), all(t, sizeof(int) * static_cast<std::size_t>(n));
  mine.upload(&id);
  std::vector<typename T::Request> requests;
  for (int p = 0; p < n; ++p)
    requests.push_back(
        t.irecv(static_cast<char*>(all.data()) + sizeof(int) * static_cast<std::size_t>(p), sizeof(int), p, data_tag));
  for (int p = 0; p < n; ++p) requests.push_back(t.isend(mine.data(), sizeof(int), p, data_tag));
  t.wait_all(requests);
  const std::vector<unsigned char> bytes = all.download();
  std::vector<int> ids(static_cast<std::size_t>(n));
  std::memcpy(ids.data(), bytes.data(), bytes.size());
  return ids;
}

inline std::string listed(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return "[" + text + "]";
}

// A communicator split off and its members' ids (ranks of the outermost communicator), by rank.
template <class T>
struct Split {
  T t;
  std::vector<int> ids;
};

// Splits `parent` (members `parent_ids`) with color_of(rank) and key_of(rank), checks the members and
// their order against (key, parent rank), and sends one message around the new communicator. Empty for a
// negative color.
template <class T, class Color, class Key>
Split<T> check_split(T& parent, const std::vector<int>& parent_ids, Color color_of, Key key_of, Report& report) {
  const int n = parent.size(), r = parent.rank();
  std::vector<std::pair<int, int>> key_and_rank;
  for (int p = 0; p < n; ++p)
    if (color_of(p) >= 0 && color_of(p) == color_of(r)) key_and_rank.push_back({key_of(p), p});
  std::sort(key_and_rank.begin(), key_and_rank.end());
  std::vector<int> want;
  for (auto [key, p] : key_and_rank) want.push_back(parent_ids[static_cast<std::size_t>(p)]);

  T sub = parent.split(color_of(r), key_of(r));
  if (color_of(r) < 0) {
    report.expect(sub.size() == 0, "a negative color gave a communicator of ", sub.size(), " ranks, want 0");
    return {std::move(sub), {}};
  }
  std::vector<int> got = gather_ids(sub, parent_ids[static_cast<std::size_t>(r)]);
  if (got != want) {
    report.fail("members by rank are ", listed(got), ", want ", listed(want));
    return {std::move(sub), std::move(got)};
  }
  const int m = sub.size(), s = sub.rank();
  Exchange<T> step(sub, report);
  step.receive((s - 1 + m) % m, data_tag, 100, 1);
  step.send((s + 1) % m, data_tag, 100, 1);
  step.finish();
  return {std::move(sub), std::move(got)};
}

template <class T>
void check_splits(T& t, Report& report) {
  const int n = t.size();
  std::vector<int> ranks(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) ranks[static_cast<std::size_t>(p)] = p;
  report.section("split by parity");
  check_split(
      t, ranks, [](int p) { return p % 2; }, [](int p) { return p; }, report);
  report.section("split with reversed keys and ties");
  Split<T> reversed = check_split(
      t, ranks, [](int) { return 0; }, [n](int p) { return (n - p) / 2; }, report);
  report.section("split leaving ranks alone (color r % 3, none for r % 3 == 2)");
  check_split(
      t, ranks, [](int p) { return p % 3 == 2 ? -1 : p % 3; }, [](int p) { return -p; }, report);
  report.section("split of a split");
  check_split(
      reversed.t, reversed.ids, [](int p) { return p % 2; }, [](int p) { return -p; }, report);
}

// A split with the parent's members: the same peers and tag on both, posted crosswise (the split's
// receive first, the parent's send first), so that a transport that mixed them would swap the bytes.
template <class T>
void check_split_isolation(T& t, Report& report) {
  const int n = t.size(), r = t.rank();
  T twin = t.split(0, r);
  Exchange<T> on_twin(twin, report), on_parent(t, report);
  on_twin.receive((r - 1 + n) % n, data_tag, 48, 2);
  on_parent.receive((r - 1 + n) % n, data_tag, 48, 1);
  on_parent.send((r + 1) % n, data_tag, 48, 1);
  on_twin.send((r + 1) % n, data_tag, 48, 2);
  on_parent.finish();
  on_twin.finish();
}

// Two communicators of this rank, each driven around a ring by its own thread at the same time.
template <class T>
void check_concurrent(T& t, Report& report) {
  if (!t.concurrent_use()) return;
  const int n = t.size(), r = t.rank();
  T lanes[] = {t.split(0, r), t.split(0, r)};
  Report lane_reports[] = {report.blank_copy(), report.blank_copy()};
  auto drive = [&](int lane) {
    try {
      for (int round = 0; round < 20; ++round) {
        Exchange<T> step(lanes[lane], lane_reports[lane]);
        step.receive((r - 1 + n) % n, data_tag, 256, 100 * lane + round);  // lanes never share an id
        step.send((r + 1) % n, data_tag, 256, 100 * lane + round);
        step.finish();
      }
    } catch (const std::exception& e) {
      lane_reports[lane].fail("lane ", lane, " threw: ", e.what());
    }
  };
  std::thread other(drive, 1);
  drive(0);
  other.join();
  report.merge(lane_reports[0]);
  report.merge(lane_reports[1]);
}

// Small integers, so that every op is exact in every type and the reference does not depend on rounding.
template <class E>
E small_value(DataType dt, int operand, std::size_t i) {
  const int v = static_cast<int>((i * 7 + static_cast<std::size_t>(operand) * 3) % 11);
  return E(static_cast<float>(dt == DataType::u8 ? v : v - 5));
}

template <class T>
void check_memory(T& t, Report& report) {
  constexpr std::size_t count = 1001;  // not a multiple of any vector width
  for (DataType dt : all_data_types) {
    const std::size_t bytes = count * size_of(dt);
    std::vector<unsigned char> a(bytes), b(bytes), want(bytes);
    visit_data_type(dt, [&](auto tag) {
      using E = decltype(tag);
      for (std::size_t i = 0; i < count; ++i) {
        reinterpret_cast<E*>(a.data())[i] = small_value<E>(dt, 0, i);
        reinterpret_cast<E*>(b.data())[i] = small_value<E>(dt, 1, i);
      }
    });
    auto expect_bytes = [&](Staged<T>& buffer, const std::vector<unsigned char>& expected, const std::string& what) {
      const std::vector<unsigned char> got = buffer.download();
      report.expect(got == expected, what, " ", name_of(dt), ": the ", count, " elements differ from the host's");
    };
    Staged<T> x(t, bytes), y(t, bytes), z(t, bytes);
    x.upload(a.data());
    y.upload(b.data());
    t.copy(z.data(), x.data(), bytes);
    expect_bytes(z, a, "copy");
    t.copy(z.data(), y.data(), 0);
    expect_bytes(z, a, "copy of 0 bytes");
    for (ReduceOp op : all_reduce_ops) {
      host_reduce(want.data(), a.data(), b.data(), count, dt, op);
      t.reduce(z.data(), x.data(), y.data(), count, dt, op);
      expect_bytes(z, want, detail::concat("reduce ", name_of(op)));
      t.copy(z.data(), x.data(), bytes);
      t.reduce(z.data(), z.data(), y.data(), count, dt, op);
      expect_bytes(z, want, detail::concat("in-place reduce ", name_of(op)));
    }
    expect_bytes(x, a, "reduce's first operand, after every op,");
    want = a;
    host_divide(want.data(), count, dt, 3);
    t.copy(z.data(), x.data(), bytes);
    t.divide(z.data(), count, dt, 3);
    expect_bytes(z, want, "divide by 3");
  }
}

}  // namespace transport_check

// Collective over t: every rank runs every check; returns this rank's failures (empty when t conforms).
// A check that throws ends the run: the communicator may not be usable after an error.
template <class T>
std::vector<std::string> check_transport_conformance(T& t) {
  using namespace transport_check;
  static_assert(check_transport<T>(), "check_transport_conformance<T>: T must model the Transport concept");
  Report report(T::name, t.size(), t.rank());
  auto run = [&](const char* section, void (*check)(T&, Report&)) {
    report.section(section);
    check(t, report);
  };
  try {
    run("shape", check_shape<T>);
    run("messages", check_messages<T>);
    run("order", check_order<T>);
    if constexpr (!is_stepwise_v<T>) run("tags", check_tags<T>);
    run("split", check_splits<T>);
    run("split isolation", check_split_isolation<T>);
    run("concurrent use", check_concurrent<T>);
    run("memory space", check_memory<T>);
  } catch (const std::exception& e) {
    report.fail("threw: ", e.what());
  }
  return std::move(report.failures());
}

}  // namespace paro::testing
