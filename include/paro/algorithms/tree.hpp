#pragma once
// Logarithmic-latency algorithms, for small and medium messages.
//
// - reduce-scatter: recursive halving; all-reduce: recursive halving then recursive doubling
//   (Rabenseifner). For n not a power of two, the first 2(n-p) ranks fold in pairs onto p = 2^floor(log2 n)
//   "virtual" ranks before, and unfold after (one extra full-buffer exchange for those pairs).
// - all-gather: Bruck's algorithm, ceil(log2 n) steps for any n, written straight into the output
//   (paro/transport/control.hpp, which topology discovery and PARO_CHECK use too).
//
// Cost (p = 2^floor(log2 n), fold = 1 if n != p else 0, N bytes in the full buffer):
//   all-reduce:     (2 log2 p + 2 fold) a + (2(p-1)/p + 2 fold) N b
//   reduce-scatter: (log2 p + 2 fold) a + ((p-1)/p + fold (1 + 1/n)) N b
//   all-gather:     ceil(log2 n) a + (n-1)/n N b

#include <cstddef>
#include <type_traits>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/all_to_all.hpp"
#include "paro/algorithms/cost/all_to_all_cost.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/control.hpp"

namespace paro::algorithms {

namespace tree_detail {

constexpr int tag = tags::tree;

// Maps n ranks onto p virtual ranks: even rank 2v (v < extra) stands for itself and rank 2v+1.
struct Fold {
  int n, p, extra;
  explicit Fold(int size) : n(size), p(1), extra(0) {
    while (p * 2 <= n) p *= 2;
    extra = n - p;
  }
  // -1 for the odd ranks that hand their data to their even neighbour.
  int virtual_rank(int r) const { return r < 2 * extra ? (r % 2 == 0 ? r / 2 : -1) : r - extra; }
  // The (first) real rank a virtual rank stands for; real_rank(p) == n.
  int real_rank(int v) const { return v < extra ? 2 * v : v + extra; }
};

// Recursive halving among the p virtual ranks over the element ranges [begin(v), begin(v+1)). On return,
// `acc` holds the reduction of this virtual rank's range. Reads `src` for the first step (which may be
// `acc` already, when the fold has reduced into it).
template <class T, class Begin>
void halve(T& t, const Fold& fold, int v, Begin begin, const char* src, char* acc, char* tmp, DataType dt,
           ReduceOp op) {
  const std::size_t esize = size_of(dt);
  int lo = 0, hi = fold.p;
  for (int mask = fold.p / 2; mask >= 1; mask /= 2) {
    const int mid = lo + mask;
    const int partner = fold.real_rank(v ^ mask);
    const bool lower = v < mid;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    const std::size_t keep_at = begin(keep_lo), keep_len = begin(keep_hi) - keep_at;
    const std::size_t give_at = begin(give_lo), give_len = begin(give_hi) - give_at;
    auto s = t.isend(src + give_at * esize, give_len * esize, partner, tag);
    auto q = t.irecv(tmp, keep_len * esize, partner, tag);
    t.wait(q);
    t.wait(s);
    t.reduce(acc + keep_at * esize, src + keep_at * esize, tmp, keep_len, dt, op);
    src = acc;
    lo = keep_lo;
    hi = keep_hi;
  }
}

// Recursive doubling, the mirror of halve: each virtual rank starts with its range of `buf` and ends with all.
template <class T, class Begin>
void double_up(T& t, const Fold& fold, int v, Begin begin, char* buf, DataType dt) {
  const std::size_t esize = size_of(dt);
  for (int mask = 1; mask < fold.p; mask *= 2) {
    const int mine_lo = v & ~(mask - 1), theirs_lo = (v ^ mask) & ~(mask - 1);
    const int partner = fold.real_rank(v ^ mask);
    const std::size_t mine_at = begin(mine_lo), mine_len = begin(mine_lo + mask) - mine_at;
    const std::size_t theirs_at = begin(theirs_lo), theirs_len = begin(theirs_lo + mask) - theirs_at;
    auto s = t.isend(buf + mine_at * esize, mine_len * esize, partner, tag);
    auto q = t.irecv(buf + theirs_at * esize, theirs_len * esize, partner, tag);
    t.wait(q);
    t.wait(s);
  }
}

}  // namespace tree_detail

// Rabenseifner all-reduce; `out` may equal `in`.
template <class T>
void tree_all_reduce(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op) {
  activity::PhaseScope phase("tree all-reduce");
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt), bytes = count * esize;
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);
  if (n == 1) {
    t.copy(output, input, bytes);
    if (op == ReduceOp::avg) t.divide(output, count, dt, n);
    return;
  }
  const tree_detail::Fold fold(n);
  const int v = fold.virtual_rank(r);
  if (v < 0) {  // odd rank of a folded pair: hand over the input, receive the result
    auto s = t.isend(input, bytes, r - 1, tree_detail::tag);
    t.wait(s);
    auto q = t.irecv(output, bytes, r - 1, tree_detail::tag);
    t.wait(q);
    return;
  }
  const BlockLayout ranges = BlockLayout::balanced(fold.p, count);
  auto begin = [&](int u) { return ranges.offset(u); };
  const bool folded = r < 2 * fold.extra;
  auto tmp = t.allocate(bytes);
  const char* src = input;
  if (folded) {
    auto q = t.irecv(tmp.data(), bytes, r + 1, tree_detail::tag);
    t.wait(q);
    t.reduce(output, input, tmp.data(), count, dt, op);
    src = output;
  }
  tree_detail::halve(t, fold, v, begin, src, output, tmp.data(), dt, op);
  if (op == ReduceOp::avg) t.divide(output + begin(v) * esize, ranges.count(v), dt, n);
  tree_detail::double_up(t, fold, v, begin, output, dt);
  if (folded) {
    auto s = t.isend(output, bytes, r + 1, tree_detail::tag);
    t.wait(s);
  }
}

// Recursive-halving reduce-scatter: `in` holds n blocks of `count` elements, this rank's result goes to `out`
// (which may be its own block of `in`).
template <class T>
void tree_reduce_scatter(T& t, const void* in, void* out, std::size_t count, DataType dt, ReduceOp op) {
  activity::PhaseScope phase("tree reduce-scatter");
  const int n = t.size(), r = t.rank();
  const std::size_t esize = size_of(dt), block = count * esize, bytes = block * static_cast<std::size_t>(n);
  const char* input = static_cast<const char*>(in);
  char* output = static_cast<char*>(out);
  if (n == 1) {
    t.copy(output, input, block);
    if (op == ReduceOp::avg) t.divide(output, count, dt, n);
    return;
  }
  const tree_detail::Fold fold(n);
  const int v = fold.virtual_rank(r);
  if (v < 0) {
    auto s = t.isend(input, bytes, r - 1, tree_detail::tag);
    t.wait(s);
    auto q = t.irecv(output, block, r - 1, tree_detail::tag);
    t.wait(q);
    return;
  }
  // A virtual rank's range is the blocks of the real ranks it stands for.
  auto begin = [&](int u) { return static_cast<std::size_t>(fold.real_rank(u)) * count; };
  auto acc = t.allocate(bytes);
  auto tmp = t.allocate(bytes);
  const bool folded = r < 2 * fold.extra;
  const char* src = input;
  if (folded) {
    auto q = t.irecv(tmp.data(), bytes, r + 1, tree_detail::tag);
    t.wait(q);
    t.reduce(acc.data(), input, tmp.data(), count * static_cast<std::size_t>(n), dt, op);
    src = acc.data();
  }
  tree_detail::halve(t, fold, v, begin, src, acc.data(), tmp.data(), dt, op);
  const std::size_t mine_at = begin(v), mine_len = begin(v + 1) - mine_at;
  if (op == ReduceOp::avg) t.divide(acc.data() + mine_at * esize, mine_len, dt, n);
  t.copy(output, acc.data() + static_cast<std::size_t>(r) * block, block);
  if (folded) {
    auto s = t.isend(acc.data() + static_cast<std::size_t>(r + 1) * block, block, r + 1, tree_detail::tag);
    t.wait(s);
  }
}

// The descriptor (registry.hpp): logarithmic latency, for small and medium messages, on any scope.
struct Tree {
  static constexpr Algorithm id = Algorithm::tree;
  static constexpr const char* name = "tree";
  static constexpr Family family = Family::flat;
  static Prediction predict(const CostModel& m, Collective c, double N, const CostShape& s) {
    if (c == Collective::all_to_all) return {bruck_all_to_all_time(m, N, s)};
    return {m.flat_tree(c, N, s.ranks, s)};
  }
  template <class Ctx>
  static void all_reduce(Ctx& x, const Call& c) {
    tree_all_reduce(x.comm(), c.send, c.recv, c.count, c.dt, c.op);
  }
  template <class Ctx>
  static void all_gather(Ctx& x, const Call& c) {
    control::bruck_all_gather(x.comm(), c.recv, c.count, c.dt);
  }
  template <class Ctx>
  static void reduce_scatter(Ctx& x, const Call& c) {
    tree_reduce_scatter(x.comm(), c.send, c.recv, c.count, c.dt, c.op);
  }
  template <class Ctx>
  static void all_to_all(Ctx& x, const Call& c) {
    bruck_all_to_all(x.comm(), c);
  }
};

}  // namespace paro::algorithms
