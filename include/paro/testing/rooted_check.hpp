#pragma once
// Checking gather, scatter, reduce, all_to_allv and point-to-point messages on any communicator (Communicator<T> or
// AnyCommunicator), with collective_check.hpp's exact inputs: every element against its known value, in the
// transport's memory space.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/testing/collective_check.hpp"

namespace paro::testing {

namespace check_detail {

// A buffer of `bytes` in t's memory space, filled with `values` (host) or left as allocated; shared, so
// that the check of a verb issued without waiting can own it.
template <class T>
auto staged(T& t, std::size_t bytes, const void* values) {
  auto b = std::make_shared<decltype(t.allocate(bytes))>(t.allocate(bytes));
  if (values && bytes > 0) t.upload(b->data(), values, bytes);
  return b;
}

// `bytes` of t's memory at src, as host bytes.
template <class T>
std::vector<unsigned char> downloaded(T& t, const void* src, std::size_t bytes) {
  std::vector<unsigned char> got(bytes);
  if (bytes > 0) t.download(got.data(), src, bytes);
  return got;
}

// Rank `from`'s elements first .. first + count - 1 (op's inputs) as host bytes of dt.
inline std::vector<unsigned char> inputs(DataType dt, ReduceOp op, int from, std::size_t first, std::size_t count) {
  std::vector<unsigned char> bytes(count * size_of(dt));
  fill_inputs(bytes.data(), count, dt, op, from, first);
  return bytes;
}

// How many of `got`'s count elements differ from rank `from`'s inputs starting at `first` (or, with
// reduce_over > 0, from the exact reduction over ranks 0 .. reduce_over - 1); the first wrong index in `at`.
inline std::size_t wrong_elements(const std::vector<unsigned char>& got, DataType dt, ReduceOp op, int from,
                                  std::size_t first, std::size_t count, int reduce_over, std::size_t& at) {
  return visit_data_type(dt, [&](auto tag) {
    using E = decltype(tag);
    const E* p = reinterpret_cast<const E*>(got.data());
    std::size_t wrong = 0;
    for (std::size_t i = count; i-- > 0;) {
      const E want = reduce_over > 0
                         ? as_element<E>(expected_reduction(dt, op, 0, reduce_over - 1, first + i), op, reduce_over)
                         : element<E>(input_value(dt, op, from, first + i));
      if (!same(p[i], want)) ++wrong, at = i;
    }
    return wrong;
  });
}

}  // namespace check_detail

// A verb issued without waiting, and the check of its result once its request completed (the check owns
// the buffers): the start_* functions below issue one, the check_* ones issue it and wait.
struct Issued {
  Request request;
  std::function<std::string()> verify;
};
inline std::string finished(Issued i) {
  i.request.wait();
  return i.verify();
}

// Gather of count elements per rank to root: the root's recv holds every rank's inputs in rank order.
template <class Comm>
Issued start_gather(Comm& comm, DataType dt, std::size_t count, int root, bool in_place, Scope scope) {
  auto& t = comm.transport(scope);
  const int n = t.size(), r = t.rank();
  const std::size_t block = count * size_of(dt), all = block * static_cast<std::size_t>(n);
  const auto mine = check_detail::inputs(dt, ReduceOp::sum, r, 0, count);
  const bool shared = in_place && r == root;
  std::vector<unsigned char> initial(all, 0x5a);
  if (shared) std::copy(mine.begin(), mine.end(), initial.begin() + static_cast<std::ptrdiff_t>(root * block));
  auto recv = check_detail::staged(t, r == root ? all : 0, initial.data());
  auto send = check_detail::staged(t, shared ? 0 : block, mine.data());
  const void* from = shared ? static_cast<const void*>(recv->data() + root * block) : send->data();
  Request q =
      comm.igather(from, r == root ? recv->data() : nullptr, count, dt, root, Options{Algorithm::automatic, scope});
  return {std::move(q), [&t, recv, send, dt, count, root, in_place, scope, n, r, block, all]() -> std::string {
            if (r != root) return {};
            const auto got = check_detail::downloaded(t, recv->data(), all);
            for (int j = 0; j < n; ++j) {
              const std::vector<unsigned char> part(got.begin() + static_cast<std::ptrdiff_t>(j * block),
                                                    got.begin() + static_cast<std::ptrdiff_t>((j + 1) * block));
              std::size_t at = 0;
              if (std::size_t wrong = check_detail::wrong_elements(part, dt, ReduceOp::sum, j, 0, count, 0, at))
                return paro::detail::concat("rank ", r, ": gather scope=", name_of(scope), " ranks=", n, " ",
                                            name_of(dt), " count=", count, " root=", root, in_place ? " in-place" : "",
                                            ": block of rank ", j, ": ", wrong, " wrong, the first at ", at);
            }
            return {};
          }};
}

// Scatter of count elements per rank from root: rank j gets elements j*count .. of the root's inputs.
template <class Comm>
Issued start_scatter(Comm& comm, DataType dt, std::size_t count, int root, bool in_place, Scope scope) {
  auto& t = comm.transport(scope);
  const int n = t.size(), r = t.rank();
  const std::size_t block = count * size_of(dt), all = block * static_cast<std::size_t>(n);
  const auto root_inputs = check_detail::inputs(dt, ReduceOp::sum, root, 0, count * static_cast<std::size_t>(n));
  const bool shared = in_place && r == root;
  std::vector<unsigned char> untouched(block, 0x5a);
  auto send = check_detail::staged(t, r == root ? all : 0, root_inputs.data());
  auto recv = check_detail::staged(t, shared ? 0 : block, untouched.data());
  void* into = shared ? static_cast<void*>(send->data() + root * block) : recv->data();
  Request q =
      comm.iscatter(r == root ? send->data() : nullptr, into, count, dt, root, Options{Algorithm::automatic, scope});
  return {std::move(q), [&t, recv, send, into, dt, count, root, in_place, scope, n, r, block]() -> std::string {
            const auto got = check_detail::downloaded(t, into, block);
            std::size_t at = 0;
            if (std::size_t wrong = check_detail::wrong_elements(got, dt, ReduceOp::sum, root,
                                                                 static_cast<std::size_t>(r) * count, count, 0, at))
              return paro::detail::concat("rank ", r, ": scatter scope=", name_of(scope), " ranks=", n, " ",
                                          name_of(dt), " count=", count, " root=", root, in_place ? " in-place" : "",
                                          ": ", wrong, " wrong, the first at ", at);
            return {};
          }};
}

// Reduce of count elements to root: the root's recv is the exact reduction; every send is left as it was.
template <class Comm>
Issued start_reduce(Comm& comm, DataType dt, ReduceOp op, std::size_t count, int root, bool in_place, Scope scope) {
  auto& t = comm.transport(scope);
  const int n = t.size(), r = t.rank();
  const std::size_t bytes = count * size_of(dt);
  const auto mine = check_detail::inputs(dt, op, r, 0, count);
  std::vector<unsigned char> untouched(bytes, 0x5a);
  auto send = check_detail::staged(t, bytes, mine.data());
  auto recv = check_detail::staged(t, in_place || r != root ? 0 : bytes, untouched.data());
  void* into = in_place ? static_cast<void*>(send->data()) : r == root ? recv->data() : nullptr;
  Request q = comm.ireduce(send->data(), into, count, dt, op, root, Options{Algorithm::automatic, scope});
  return {std::move(q), [&t, recv, send, into, dt, op, count, root, in_place, scope, n, r, bytes]() -> std::string {
            std::size_t at = 0;
            const std::size_t wrong =
                r == root
                    ? check_detail::wrong_elements(check_detail::downloaded(t, into, bytes), dt, op, 0, 0, count, n, at)
                    : check_detail::wrong_elements(check_detail::downloaded(t, send->data(), bytes), dt, op, r, 0,
                                                   count, 0, at);
            if (wrong == 0) return {};
            return paro::detail::concat("rank ", r, ": reduce scope=", name_of(scope), " ranks=", n, " ", name_of(dt),
                                        " ", name_of(op), " count=", count, " root=", root, in_place ? " in-place" : "",
                                        ": ", wrong, r == root ? " wrong in recv" : " changed in send",
                                        ", the first at ", at);
          }};
}

template <class Comm>
std::string check_gather(Comm& comm, DataType dt, std::size_t count, int root, bool in_place, Scope scope) {
  return finished(start_gather(comm, dt, count, root, in_place, scope));
}
template <class Comm>
std::string check_scatter(Comm& comm, DataType dt, std::size_t count, int root, bool in_place, Scope scope) {
  return finished(start_scatter(comm, dt, count, root, in_place, scope));
}
template <class Comm>
std::string check_reduce(Comm& comm, DataType dt, ReduceOp op, std::size_t count, int root, bool in_place,
                         Scope scope) {
  return finished(start_reduce(comm, dt, op, count, root, in_place, scope));
}

// Gather, scatter and reduce: every data type (reduce: every op), the counts, the first, middle and last
// root, in and out of place.
template <class Comm>
std::vector<std::string> rooted_matrix(Comm& comm, const std::vector<std::size_t>& counts,
                                       Scope scope = Scope::global) {
  const std::vector<DataType> dtypes = matrix_data_types();
  const std::vector<ReduceOp> ops = matrix_ops();
  const int n = comm.transport(scope).size();
  std::vector<std::string> failures;
  auto add = [&](std::string f) {
    if (!f.empty()) failures.push_back(std::move(f));
  };
  for (DataType dt : dtypes)
    for (std::size_t count : counts)
      for (int root : {0, n / 2, n - 1})
        for (bool in_place : {false, true}) {
          add(check_gather(comm, dt, count, root, in_place, scope));
          add(check_scatter(comm, dt, count, root, in_place, scope));
          for (ReduceOp op : ops) add(check_reduce(comm, dt, op, count, root, in_place, scope));
        }
  return failures;
}

namespace check_detail {

// all_to_allv's test pattern: rank i sends count(i, j) elements to rank j, about `scale` each, some none;
// symmetric (count(i, j) == count(j, i)) for in place, where each rank's send and recv blocks are one.
inline std::size_t v_count(int i, int j, std::size_t scale, bool symmetric) {
  const int h = symmetric ? 3 * (i + j) + i * j + 1 : 5 * i + 3 * j + 1;
  return h % 7 == 0 ? 0 : scale * static_cast<std::size_t>(h % 4) + static_cast<std::size_t>(h % 3);
}

// Blocks in the reverse rank order, one element apart (so that nothing assumes packed blocks).
inline Blocks reversed_with_gaps(std::vector<std::size_t> counts) {
  std::vector<std::size_t> displs(counts.size());
  std::size_t at = 0;
  for (std::size_t j = counts.size(); j-- > 0;) {
    displs[j] = at;
    at += counts[j] + 1;
  }
  return {std::move(counts), std::move(displs)};
}

}  // namespace check_detail

// all_to_allv with blocks of their own lengths (check_detail::v_count; zeros among them), laid out in the
// reverse rank order with gaps: every received block exact (rank j's inputs from element r * stride), the
// gaps untouched.
template <class Comm>
Issued start_all_to_allv(Comm& comm, DataType dt, std::size_t scale, bool in_place, Scope scope) {
  auto& t = comm.transport(scope);
  const int n = t.size(), r = t.rank();
  const std::size_t e = size_of(dt), stride = 4 * scale + 4;
  std::vector<std::size_t> sends(static_cast<std::size_t>(n)), receives(sends.size());
  for (int j = 0; j < n; ++j) {
    sends[static_cast<std::size_t>(j)] = check_detail::v_count(r, j, scale, in_place);
    receives[static_cast<std::size_t>(j)] = check_detail::v_count(j, r, scale, in_place);
  }
  const Blocks send_blocks = check_detail::reversed_with_gaps(sends);
  const Blocks recv_blocks = check_detail::reversed_with_gaps(receives);
  const std::size_t send_bytes = (send_blocks.total() + sends.size()) * e;
  const std::size_t recv_bytes = (recv_blocks.total() + receives.size()) * e;
  std::vector<unsigned char> initial(send_bytes, 0x5a);
  for (int j = 0; j < n; ++j) {
    const auto k = static_cast<std::size_t>(j);
    const auto values = check_detail::inputs(dt, ReduceOp::sum, r, k * stride, sends[k]);
    std::copy(values.begin(), values.end(), initial.begin() + static_cast<std::ptrdiff_t>(send_blocks.displs[k] * e));
  }
  std::vector<unsigned char> untouched(recv_bytes, 0x5a);
  auto send = check_detail::staged(t, send_bytes, initial.data());
  auto recv = check_detail::staged(t, in_place ? 0 : recv_bytes, untouched.data());
  void* into = in_place ? static_cast<void*>(send->data()) : recv->data();
  Request q = comm.iall_to_allv(send->data(), send_blocks, into, recv_blocks, dt, Options{Algorithm::automatic, scope});
  return {
      std::move(q),
      [&t, send, recv, into, recv_blocks, dt, scale, in_place, scope, n, r, e, stride, recv_bytes]() -> std::string {
        const auto got = check_detail::downloaded(t, into, recv_bytes);
        const auto where = [&](const std::string& what) {
          return paro::detail::concat("rank ", r, ": all_to_allv scope=", name_of(scope), " ranks=", n, " ",
                                      name_of(dt), " scale=", scale, in_place ? " in-place" : "", ": ", what);
        };
        for (int j = 0; j < n; ++j) {
          const auto k = static_cast<std::size_t>(j);
          const std::size_t count = recv_blocks.counts[k];
          const auto first = got.begin() + static_cast<std::ptrdiff_t>(recv_blocks.displs[k] * e);
          const std::vector<unsigned char> block(first, first + static_cast<std::ptrdiff_t>(count * e));
          std::size_t at = 0;
          if (std::size_t wrong = check_detail::wrong_elements(block, dt, ReduceOp::sum, j,
                                                               static_cast<std::size_t>(r) * stride, count, 0, at))
            return where(paro::detail::concat("block of rank ", j, " (", count, " elements): ", wrong,
                                              " wrong, the first at ", at));
          const auto gap = first + static_cast<std::ptrdiff_t>(count * e);
          if (!std::all_of(gap, gap + static_cast<std::ptrdiff_t>(e), [](unsigned char b) { return b == 0x5a; }))
            return where(paro::detail::concat("the gap after the block of rank ", j, " was written"));
        }
        return {};
      }};
}

template <class Comm>
std::string check_all_to_allv(Comm& comm, DataType dt, std::size_t scale, bool in_place, Scope scope) {
  return finished(start_all_to_allv(comm, dt, scale, in_place, scope));
}

// all_to_allv for every data type, each scale, in and out of place.
template <class Comm>
std::vector<std::string> all_to_allv_matrix(Comm& comm, const std::vector<std::size_t>& scales,
                                            Scope scope = Scope::global) {
  std::vector<std::string> failures;
  for (DataType dt : matrix_data_types())
    for (std::size_t scale : scales)
      for (bool in_place : {false, true}) {
        std::string f = check_all_to_allv(comm, dt, scale, in_place, scope);
        if (!f.empty()) failures.push_back(std::move(f));
      }
  return failures;
}

// A random gather, scatter or reduce (a random root; reduce: a random op), or an all_to_allv with blocks of
// about count / 4, of a random type, scope and placement, issued; every rank draws the same from the same
// generator state.
template <class Comm>
Issued start_random_verb(Comm& comm, std::mt19937_64& rng, std::size_t count) {
  const Scope scope = all_scopes[rng() % std::size(all_scopes)];
  const DataType dt = all_data_types[rng() % std::size(all_data_types)];
  const int root = static_cast<int>(rng() % static_cast<std::uint64_t>(comm.transport(scope).size()));
  const bool in_place = rng() % 2 == 1;
  const ReduceOp op = all_reduce_ops[rng() % std::size(all_reduce_ops)];
  switch (rng() % 4) {
    case 0: return start_gather(comm, dt, count, root, in_place, scope);
    case 1: return start_scatter(comm, dt, count, root, in_place, scope);
    case 2: return start_reduce(comm, dt, op, count, root, in_place, scope);
    default: return start_all_to_allv(comm, dt, count / 4, in_place, scope);
  }
}

// Point-to-point on a ring: every rank sends `messages` messages on each of two tags to the next rank and
// receives the previous rank's, posting the receives of the second tag first; each must arrive in order,
// exact. Then a receive of the wrong length fails naming the sender and both lengths, and the ring runs
// again (the ranks stay usable). Needs two ranks or more.
template <class Comm>
std::vector<std::string> check_messages(Comm& comm, std::size_t count, Scope scope = Scope::global) {
  auto& t = comm.transport(scope);
  const int n = t.size(), r = t.rank(), next = (r + 1) % n, previous = (r + n - 1) % n;
  const DataType dt = DataType::i32;
  const std::size_t bytes = count * size_of(dt);
  constexpr int messages = 3;
  const int tags[2] = {0, 16383};
  std::vector<std::string> failures;
  if (n < 2) return failures;
  auto ring = [&](const char* when) {
    std::vector<decltype(check_detail::staged(t, 0, nullptr))> sent, received;
    std::vector<Request> requests;
    for (int g : {0, 1})
      for (int k = 0; k < messages; ++k) {
        const auto values = check_detail::inputs(dt, ReduceOp::sum, r, static_cast<std::size_t>(k + 10 * g), count);
        sent.push_back(check_detail::staged(t, bytes, values.data()));
        requests.push_back(comm.isend(sent.back()->data(), count, dt, next, tags[g], scope));
      }
    for (int g : {1, 0})
      for (int k = 0; k < messages; ++k) {
        received.push_back(check_detail::staged(t, bytes, nullptr));
        requests.push_back(comm.irecv(received.back()->data(), count, dt, previous, tags[g], scope));
      }
    for (Request& q : requests) q.wait();
    for (int i = 0; i < 2 * messages; ++i) {
      const int g = i < messages ? 1 : 0, k = i % messages;
      const auto got = check_detail::downloaded(t, received[static_cast<std::size_t>(i)]->data(), bytes);
      std::size_t at = 0;
      if (std::size_t wrong = check_detail::wrong_elements(got, dt, ReduceOp::sum, previous,
                                                           static_cast<std::size_t>(k + 10 * g), count, 0, at))
        failures.push_back(paro::detail::concat("rank ", r, ": ", when, " message ", k, " with tag ", tags[g],
                                                " from rank ", previous, " (count ", count, "): ", wrong,
                                                " wrong, the first at ", at));
    }
  };
  ring("first ring:");
  // The wrong length: rank 0 sends count + 1 elements to rank 1, which receives count.
  if (r <= 1 && n >= 2) {
    auto buffer = check_detail::staged(t, bytes + size_of(dt), nullptr);
    std::string error;
    try {
      if (r == 0)
        comm.send(buffer->data(), count + 1, dt, 1, 7, scope);
      else
        comm.recv(buffer->data(), count, dt, 0, 7, scope);
    } catch (const Error& e) {
      error = e.what();
    }
    const std::string want =
        paro::detail::concat("rank 0 sent ", bytes + size_of(dt), " bytes, this receive takes ", bytes);
    if (r == 1 && error.find(want) == std::string::npos)
      failures.push_back(
          paro::detail::concat("rank 1: a receive of the wrong length gave '", error, "', want '", want, "'"));
    if (r == 0 && !error.empty()) failures.push_back("rank 0: the send of the wrong length failed: " + error);
  }
  ring("after a wrong length:");
  return failures;
}

}  // namespace paro::testing
