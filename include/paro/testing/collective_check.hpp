#pragma once
// Checking a collective on any transport, as nccl-tests does: deterministic inputs whose reductions are
// exact in every data type, the expected result computed independently in int64, and an element-by-element
// comparison. paro's tests (threads and mpi alike) and paro-bench's #wrong column use it; so can a user
// validating a new cluster or backend.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/core/env.hpp"

namespace paro::testing {

struct Case {
  Collective coll = Collective::all_reduce;
  Algorithm algo = Algorithm::automatic;
  DataType dt = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::size_t count = 0;  // per-rank block for all_gather / reduce_scatter, whole buffer for all_reduce
  bool in_place = false;
  Scope scope = Scope::global;
};

template <class Collectives = algorithms::BuiltinCollectives>
std::string describe(const Case& c, int ranks) {
  return detail::concat(Collectives::name_of(c.coll), " algo=", name_of(c.algo), " scope=", name_of(c.scope),
                        " ranks=", ranks, " ", name_of(c.dt), " ", name_of(c.op), " count=", c.count,
                        c.in_place ? " in-place" : " out-of-place");
}

inline bool is_signed(DataType dt) { return dt != DataType::u8; }

// Rank r's input element i: small integers, so every sum, product, min and max over up to 16 ranks is
// exact in every type (|sum| <= 112 fits int8 and bfloat16's 8 significant bits, |product| <= 16).
inline std::int64_t input_value(DataType dt, ReduceOp op, int r, std::size_t i) {
  const auto ri = static_cast<std::int64_t>(r), ii = static_cast<std::int64_t>(i % 1000003);
  if (op == ReduceOp::prod) {
    if ((ri + ii) % 5 == 0) return 2;
    return (is_signed(dt) && (ri + 2 * ii) % 7 == 3) ? -1 : 1;
  }
  return (ri * 5 + ii * 3 + 1) % 8 - (is_signed(dt) ? 3 : 0);
}

// Input element i reduced over the ranks first .. last, exactly.
inline std::int64_t expected_reduction(DataType dt, ReduceOp op, int first, int last, std::size_t i) {
  std::int64_t acc = input_value(dt, op, first, i);
  for (int r = first + 1; r <= last; ++r) {
    const std::int64_t v = input_value(dt, op, r, i);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

// The exact result as an element of type T; avg divides the exact sum once, as the library defines it.
template <class T>
T as_element(std::int64_t exact, ReduceOp op, int ranks) {
  if (op != ReduceOp::avg) return T(static_cast<float>(exact));
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(exact / ranks);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(exact) / static_cast<T>(ranks);
  } else {
    return T(static_cast<float>(exact) / static_cast<float>(ranks));
  }
}

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>)
    return a == b;
  else
    return static_cast<float>(a) == static_cast<float>(b);
}

template <class T>
T element(std::int64_t v) {
  if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>)
    return static_cast<T>(v);
  else
    return T(static_cast<float>(v));
}

// Fills count elements of rank's input, starting at global element index `first`.
inline void fill_inputs(void* buf, std::size_t count, DataType dt, ReduceOp op, int rank, std::size_t first) {
  visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < count; ++i) p[i] = element<T>(input_value(dt, op, rank, first + i));
  });
}

struct CheckResult {
  std::size_t wrong = 0;  // elements of this rank's output (and, out of place, input) that are wrong
  std::string report;     // the case and the first few wrong elements; empty when all are right
};

// One rank's buffers for a case, in the transport's memory space (device memory on a CUDA backend), filled
// with the case's inputs; verify() reads them back and compares every element with the exact result, which
// the collective's descriptor says how to compute (algorithms/collective.hpp: shape and source). Ranks are
// numbered within the case's scope.
template <class Transport, class Collectives = algorithms::BuiltinCollectives>
class StagedCase {
 public:
  StagedCase(Transport& t, const Case& c)
      : t_(t),
        c_(c),
        n_(t.size()),
        r_(t.rank()),
        shape_(Collectives::shape(c.coll, c.count, n_, r_)),
        esize_(size_of(c.dt)),
        send_buffer_(t.allocate(c.in_place ? 0 : shape_.in * esize_)),
        recv_buffer_(t.allocate(c.in_place ? 0 : shape_.out * esize_)),
        shared_buffer_(t.allocate(c.in_place ? shape_.full * esize_ : 0)) {
    visit_data_type(c.dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> input(shape_.in), untouched(c.in_place ? shape_.full : shape_.out, element<T>(99));
      fill_inputs(input.data(), shape_.in, c.dt, c.op, r_, shape_.first_input);
      if (c.in_place) {
        std::copy(input.begin(), input.end(), untouched.begin() + static_cast<std::ptrdiff_t>(shape_.send_at));
        t.upload(shared_buffer_.data(), untouched.data(), shape_.full * esize_);
      } else {
        t.upload(send_buffer_.data(), input.data(), shape_.in * esize_);
        t.upload(recv_buffer_.data(), untouched.data(), shape_.out * esize_);
      }
    });
  }

  const Case& spec() const { return c_; }
  const void* send() { return c_.in_place ? shared_buffer_.data() + shape_.send_at * esize_ : send_buffer_.data(); }
  void* recv() { return c_.in_place ? shared_buffer_.data() + shape_.recv_at * esize_ : recv_buffer_.data(); }

  CheckResult verify() {
    return visit_data_type(c_.dt, [&](auto tag) -> CheckResult {
      using T = decltype(tag);
      std::vector<T> output(shape_.out), input(c_.in_place ? 0 : shape_.in);
      t_.download(output.data(), recv(), shape_.out * esize_);
      if (!c_.in_place) t_.download(input.data(), send(), shape_.in * esize_);
      std::string report;
      std::size_t wrong = 0;
      auto check = [&](const char* what, std::size_t i, T got, T want) {
        if (same(got, want)) return;
        if (++wrong <= 3)
          report += detail::concat(" [", what, " ", i, ": got ", static_cast<double>(static_cast<float>(got)), " want ",
                                   static_cast<double>(static_cast<float>(want)), "]");
      };
      for (std::size_t i = 0; i < shape_.out; ++i) {
        const algorithms::Source from = Collectives::source(c_.coll, i, c_.count, r_, n_);
        const T want = from.first == from.last
                           ? element<T>(input_value(c_.dt, c_.op, from.first, from.index))
                           : as_element<T>(expected_reduction(c_.dt, c_.op, from.first, from.last, from.index), c_.op,
                                           from.last - from.first + 1);
        check("recv", i, output[i], want);
      }
      for (std::size_t i = 0; i < input.size(); ++i)  // out of place, the input must be left as it was
        check("send", i, input[i], element<T>(input_value(c_.dt, c_.op, r_, shape_.first_input + i)));
      if (wrong == 0) return {};
      return {wrong, detail::concat("rank ", r_, ": ", describe<Collectives>(c_, n_), ": ", wrong, " wrong", report)};
    });
  }

 private:
  using Buffer = decltype(std::declval<Transport&>().allocate(std::size_t{}));
  Transport& t_;
  Case c_;
  int n_, r_;
  BufferShape shape_;
  std::size_t esize_;
  Buffer send_buffer_, recv_buffer_, shared_buffer_;
};

// Runs one case on this rank and checks this rank's buffers.
template <class Comm>
CheckResult check_case(Comm& comm, const Case& c) {
  StagedCase<std::remove_reference_t<decltype(comm.transport(c.scope))>, typename Comm::Collectives> staged(
      comm.transport(c.scope), c);
  comm.collective(c.coll, staged.send(), staged.recv(), c.count, c.dt, c.op, Options{c.algo, c.scope});
  return staged.verify();
}

// The failure description of one case ("" when all right).
template <class Comm>
std::string run_case(Comm& comm, const Case& c) {
  return check_case(comm, c).report;
}

// A broadcast of count elements from root over the scope, checked element by element on this rank: every
// rank starts with its own inputs, and must end with root's. Returns the failure description ("" if right).
template <class Comm>
std::string check_broadcast(Comm& comm, DataType dt, std::size_t count, int root, Scope scope = Scope::global) {
  auto& t = comm.transport(scope);
  const std::size_t bytes = count * size_of(dt);
  auto buffer = t.allocate(bytes);
  return visit_data_type(dt, [&](auto tag) -> std::string {
    using T = decltype(tag);
    std::vector<T> values(count);
    fill_inputs(values.data(), count, dt, ReduceOp::sum, t.rank(), 0);
    t.upload(buffer.data(), values.data(), bytes);
    comm.broadcast(buffer.data(), count, dt, root, Options{Algorithm::automatic, scope});
    t.download(values.data(), buffer.data(), bytes);
    std::size_t wrong = 0, first = 0;
    for (std::size_t i = count; i-- > 0;)
      if (!same(values[i], element<T>(input_value(dt, ReduceOp::sum, root, i)))) ++wrong, first = i;
    if (wrong == 0) return {};
    return detail::concat("rank ", t.rank(), ": broadcast scope=", name_of(scope), " ranks=", t.size(), " ",
                          name_of(dt), " count=", count, " root=", root, ": ", wrong, " wrong, the first at ", first);
  });
}

// A split by rank parity: each half all-reduces on its own (host buffers: for host-memory transports).
// Returns this rank's failures.
template <class Transport, class Registry>
std::vector<std::string> check_parity_split(Communicator<Transport, Registry>& comm) {
  const int r = comm.rank();
  Communicator<Transport> sub(comm.transport().split(r % 2, r));
  std::int64_t x = r, sum = 0;
  sub.all_reduce(&x, &sum, 1, ReduceOp::sum, {Algorithm::ring});
  std::int64_t want = 0;
  for (int q = r % 2; q < comm.size(); q += 2) want += q;
  std::vector<std::string> failures;
  if (sum != want) failures.push_back(detail::concat("rank ", r, ": parity sum ", sum, ", want ", want));
  const int want_size = (comm.size() + 1 - r % 2) / 2;
  if (sub.size() != want_size)
    failures.push_back(detail::concat("rank ", r, ": parity communicator of ", sub.size(), " ranks, want ", want_size));
  return failures;
}

// PARO_TEST_MATRIX=reduced (the sanitizer runs of scripts/test.sh): three data types and three ops
// instead of all; the plain run covers them all, and memory errors and races do not depend on the type.
inline bool reduced_matrix() {
  const auto v = env::get("PARO_TEST_MATRIX");
  detail::require(!v || *v == "full" || *v == "reduced", "PARO_TEST_MATRIX='", *v, "'; allowed: full reduced");
  return v && *v == "reduced";
}

// The data types and ops a matrix covers: all, or three of each under PARO_TEST_MATRIX=reduced.
inline std::vector<DataType> matrix_data_types() {
  if (reduced_matrix()) return {DataType::f32, DataType::f16, DataType::i32};
  return {std::begin(all_data_types), std::end(all_data_types)};
}
inline std::vector<ReduceOp> matrix_ops() {
  if (reduced_matrix()) return {ReduceOp::sum, ReduceOp::max, ReduceOp::avg};
  return {std::begin(all_reduce_ops), std::end(all_reduce_ops)};
}

// Broadcasts of every data type (three under PARO_TEST_MATRIX=reduced) and the given counts from the first,
// the middle and the last rank of the scope; with `large`, also 3 MiB + 3 bytes of u8 and f32 from the first
// and the last (a pipelined chain where the scope has more than 3 ranks). Returns this rank's failures.
template <class Comm>
std::vector<std::string> broadcast_matrix(Comm& comm, const std::vector<std::size_t>& counts,
                                          Scope scope = Scope::global, bool large = false) {
  const std::vector<DataType> dtypes = matrix_data_types();
  const int n = comm.transport(scope).size();
  std::vector<std::string> failures;
  for (DataType dt : dtypes)
    for (std::size_t count : counts)
      for (int root : {0, n / 2, n - 1}) {
        std::string f = check_broadcast(comm, dt, count, root, scope);
        if (!f.empty()) failures.push_back(std::move(f));
      }
  if (large)
    for (DataType dt : {DataType::u8, DataType::f32})
      for (int root : {0, n - 1}) {
        std::string f = check_broadcast(comm, dt, ((std::size_t{3} << 20) + 3) / size_of(dt), root, scope);
        if (!f.empty()) failures.push_back(std::move(f));
      }
  return failures;
}

// The standard matrix on one communicator: every data type x op (one op where the collective does not reduce), the
// given counts, in place and out of place. Returns the failure descriptions of this rank.
template <class Comm>
std::vector<std::string> run_matrix(Comm& comm, Collective coll, Algorithm algo, const std::vector<std::size_t>& counts,
                                    Scope scope = Scope::global) {
  const std::vector<DataType> dtypes = matrix_data_types();
  const std::vector<ReduceOp> ops = matrix_ops();
  std::vector<std::string> failures;
  for (DataType dt : dtypes) {
    for (ReduceOp op : ops) {
      if (!Comm::Collectives::reduces(coll) && op != ReduceOp::sum) continue;
      for (std::size_t count : counts) {
        for (bool in_place : {false, true}) {
          std::string f = run_case(comm, Case{coll, algo, dt, op, count, in_place, scope});
          if (!f.empty()) failures.push_back(std::move(f));
        }
      }
    }
  }
  return failures;
}

}  // namespace paro::testing
