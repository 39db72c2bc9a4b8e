#pragma once
// All-to-all schedules: rank r's block j of send goes to rank j, where it lands as block r of recv.
//
// - pairwise (the ring's all_to_all): exchange k sends my block for rank r+k and receives rank r-k's,
//   every exchange posted at once (as NCCL's all-to-all and MPI's linear one: one latency, not one per
//   window); n-1 messages per rank, each link's bytes once.
// - bruck (the tree's all_to_all): ceil(log2 n) steps; the step at distance d sends every block whose
//   rotated index has bit d to rank r+d. About half the buffer per step: fewer, larger messages, for
//   small blocks where latency dominates.
// - hierarchical (paro_cc's and paro_seq's all_to_all): with U units of g members (my unit u, my index i),
//   the blocks for unit u' are first exchanged inside my unit, so that member i holds what all of my unit
//   sends to (u', i); that piece crosses the rail as one message of g blocks, and is placed by source on
//   arrival. Each remote unit costs one message on the slow links instead of g. paro_cc overlaps the
//   pieces: the rail carries piece k while my unit exchanges piece k+1; paro_seq runs the unit's pieces,
//   then the rail. Inside a unit the same applies level by level. Uneven units run the pairwise exchange.
// - all_to_allv (a length per block): the pairwise exchange.
//
// In place (send == recv), the input is copied aside first. Costs are in cost/all_to_all_cost.hpp.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/algorithms/layout.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::algorithms {

namespace all_to_all_detail {
constexpr int tag = tags::all_to_all;

// The call's input where a schedule may read it while recv fills: send itself, or (in place) a copy.
template <class T>
struct Input {
  decltype(std::declval<T&>().allocate(std::size_t{})) copy;
  const char* data;
  Input(T& t, const void* send, const void* recv, std::size_t bytes) : copy(t.allocate(send == recv ? bytes : 0)) {
    if (send == recv && bytes > 0) t.copy(copy.data(), send, bytes);
    data = send == recv ? copy.data() : static_cast<const char*>(send);
  }
};
}  // namespace all_to_all_detail

// Sends send_at(j) (send_bytes(j) long) to member j and receives member j's block of recv_bytes(j) into
// recv_at(j), for every member j of t, my own block by a copy (none where both are one place). Exchange k
// pairs me with r+k (to) and r-k (from), all of them posted at once; an empty block is neither sent nor
// received, so both sides must agree on which are empty.
template <class T, class SendAt, class RecvAt, class SendBytes, class RecvBytes>
void pairwise_exchange(T& t, SendAt&& send_at, RecvAt&& recv_at, SendBytes&& send_bytes, RecvBytes&& recv_bytes) {
  namespace d = all_to_all_detail;
  const int n = t.size(), r = t.rank();
  if (recv_bytes(r) > 0 && recv_at(r) != send_at(r)) t.copy(recv_at(r), send_at(r), recv_bytes(r));
  if (n == 1) return;
  activity::PhaseScope phase("pairwise all-to-all");
  std::vector<typename T::Request> recvs, sends;
  for (int k = 1; k < n; ++k) {
    const int from = mod(r - k, n), to = mod(r + k, n);
    if (recv_bytes(from) > 0) recvs.push_back(t.irecv(recv_at(from), recv_bytes(from), from, d::tag));
    if (send_bytes(to) > 0) sends.push_back(t.isend(send_at(to), send_bytes(to), to, d::tag));
  }
  t.wait_all(recvs);
  t.wait_all(sends);
}

// Blocks of one length.
template <class T, class SendAt, class RecvAt>
void pairwise_exchange(T& t, SendAt&& send_at, RecvAt&& recv_at, std::size_t bytes) {
  auto every = [bytes](int) { return bytes; };
  pairwise_exchange(t, send_at, recv_at, every, every);
}

template <class T>
void pairwise_all_to_all(T& t, const Call& c) {
  const std::size_t block = c.count * size_of(c.dt);
  const all_to_all_detail::Input<T> in(t, c.send, c.recv, block * static_cast<std::size_t>(t.size()));
  char* out = static_cast<char*>(c.recv);
  pairwise_exchange(
      t, [&](int j) { return in.data + static_cast<std::size_t>(j) * block; },
      [&](int j) { return out + static_cast<std::size_t>(j) * block; }, block);
}

// A block of an all_to_allv buffer, in bytes.
struct Extent {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

// The bytes from a buffer's start to the end of its last non-empty block.
inline std::size_t span(const std::vector<Extent>& blocks) {
  std::size_t end = 0;
  for (const Extent& e : blocks)
    if (e.bytes > 0) end = std::max(end, e.offset + e.bytes);
  return end;
}

// all_to_allv: sends[j] of send goes to rank j, recvs[j] of recv comes from rank j, through the pairwise
// exchange (each rank's blocks have their own lengths, so the exchanges of Bruck's and the hierarchical
// schedule would have to carry them as well). In place (send == recv, and then sends == recvs), the input
// is copied aside first.
template <class T>
void pairwise_all_to_allv(T& t, const void* send, const std::vector<Extent>& sends, void* recv,
                          const std::vector<Extent>& recvs) {
  const all_to_all_detail::Input<T> in(t, send, recv, span(sends));
  char* out = static_cast<char*>(recv);
  const auto of = [](const std::vector<Extent>& blocks, int j) -> const Extent& {
    return blocks[static_cast<std::size_t>(j)];
  };
  // Blocks are addressed only where they are not empty, so a null buffer with no bytes is never offset.
  pairwise_exchange(
      t, [&](int j) { return in.data + of(sends, j).offset; }, [&](int j) { return out + of(recvs, j).offset; },
      [&](int j) { return of(sends, j).bytes; }, [&](int j) { return of(recvs, j).bytes; });
}

// Bruck's all-to-all: rotate so that slot j holds my block for rank r+j; at distance d send the slots
// with bit d to rank r+d and take rank r-d's into the same slots; then slot j holds rank r-j's block.
template <class T>
void bruck_all_to_all(T& t, const Call& c) {
  namespace d = all_to_all_detail;
  const int n = t.size(), r = t.rank();
  const std::size_t block = c.count * size_of(c.dt), all = block * static_cast<std::size_t>(n);
  const char* in = static_cast<const char*>(c.send);
  char* out = static_cast<char*>(c.recv);
  auto slots = t.allocate(all);
  char* slot = slots.data();
  auto at = [block](auto* base, int j) { return base + static_cast<std::size_t>(j) * block; };
  // The rotation reads all of send before recv is written, so in place needs no copy aside.
  for (int j = 0; j < n; ++j) t.copy(at(slot, j), at(in, mod(r + j, n)), block);
  if (n > 1) {
    activity::PhaseScope phase("bruck all-to-all");
    auto outgoing = t.allocate(all / 2 + block), incoming = t.allocate(all / 2 + block);
    for (int dist = 1; dist < n; dist *= 2) {
      std::size_t moved = 0;
      for (int j = dist; j < n; ++j)
        if (j & dist) t.copy(outgoing.data() + block * moved++, at(slot, j), block);
      auto recv = t.irecv(incoming.data(), block * moved, mod(r - dist, n), d::tag);
      auto send = t.isend(outgoing.data(), block * moved, mod(r + dist, n), d::tag);
      t.wait(recv);
      t.wait(send);
      moved = 0;
      for (int j = dist; j < n; ++j)
        if (j & dist) t.copy(at(slot, j), incoming.data() + block * moved++, block);
    }
  }
  for (int j = 0; j < n; ++j) t.copy(at(out, mod(r - j, n)), at(slot, j), block);
}

// The hierarchical exchange over h's levels (see the top of this file): send_at(j) and recv_at(j) as in
// pairwise_exchange, for the members j of h.comm. overlap: the rail carries piece k while my unit
// exchanges piece k+1 (paro_cc); otherwise my unit's pieces first, then the rail (paro_seq). A stepwise
// transport (messages progress only in matched groups) runs the phases one after the other.
// Blocks are addressed through std::function: each level wraps its parent's addressing, so templates on
// the callables would nest without end.
using SendBlockAt = std::function<const char*(int)>;
using RecvBlockAt = std::function<char*(int)>;
template <class T>
void hierarchical_exchange(Hierarchy<T>& h, const SendBlockAt& send_at, const RecvBlockAt& recv_at, std::size_t bytes,
                           bool overlap) {
  namespace d = all_to_all_detail;
  if (hierarchical_detail::flat_path(h, "all_to_all")) return pairwise_exchange(h.comm, send_at, recv_at, bytes);
  const int units = h.unit_count(), g = h.unit_size(), me = h.my_unit;
  T& rail = h.rail;
  const std::size_t piece = bytes * static_cast<std::size_t>(g);
  // Remote piece k (k = 1 .. units-1): outgoing to unit me+k, incoming from unit me-k, g blocks each.
  auto outgoing = rail.allocate(piece * static_cast<std::size_t>(units - 1));
  auto incoming = rail.allocate(piece * static_cast<std::size_t>(units - 1));
  auto out_piece = [&](int k) { return outgoing.data() + piece * static_cast<std::size_t>(k - 1); };
  auto in_piece = [&](int k) { return incoming.data() + piece * static_cast<std::size_t>(k - 1); };
  // My unit's exchange of the blocks for unit `dest`: member l gets mine for (dest, l) and sends me its
  // own for (dest, my index), which land in `into(l)`.
  auto exchange_in_unit = [&](int dest, const RecvBlockAt& into) {
    hierarchical_exchange(
        *h.unit, [&](int l) { return send_at(h.member(dest, l)); }, into, bytes, overlap);
  };
  const bool pipelined = overlap && !is_stepwise_v<T>;
  std::vector<typename T::Request> recvs, sends;
  if (pipelined)
    for (int k = 1; k < units; ++k) recvs.push_back(rail.irecv(in_piece(k), piece, mod(me - k, units), d::tag));
  exchange_in_unit(me, [&](int l) { return recv_at(h.member(me, l)); });
  for (int k = 1; k < units; ++k) {
    exchange_in_unit(mod(me + k, units), [&](int l) { return out_piece(k) + bytes * static_cast<std::size_t>(l); });
    if (pipelined) {
      sends.push_back(rail.isend(out_piece(k), piece, mod(me + k, units), d::tag));
      issue_posted(rail);
    }
  }
  activity::PhaseScope phase("all-to-all rail");
  if (pipelined) {
    rail.wait_all(recvs);
  } else {
    // Rail member v gets piece me->v and sends me piece v->me: pairwise over the rail, a piece per block
    // (no piece of my own: both of mine point at one place, so nothing is copied).
    pairwise_exchange(
        rail, [&](int v) -> const char* { return v == me ? in_piece(1) : out_piece(mod(v - me, units)); },
        [&](int v) { return v == me ? in_piece(1) : in_piece(mod(me - v, units)); }, piece);
  }
  for (int k = 1; k < units; ++k) {
    const int from = mod(me - k, units);
    for (int l = 0; l < g; ++l)
      rail.copy(recv_at(h.member(from, l)), in_piece(k) + bytes * static_cast<std::size_t>(l), bytes);
  }
  rail.wait_all(sends);
}

template <class T>
void hierarchical_all_to_all(Hierarchy<T>& h, const Call& c, bool overlap) {
  const std::size_t block = c.count * size_of(c.dt);
  const all_to_all_detail::Input<T> in(h.comm, c.send, c.recv, block * static_cast<std::size_t>(h.comm.size()));
  char* out = static_cast<char*>(c.recv);
  hierarchical_exchange(
      h, [&](int j) { return in.data + static_cast<std::size_t>(j) * block; },
      [&](int j) { return out + static_cast<std::size_t>(j) * block; }, block, overlap);
}

}  // namespace paro::algorithms
