#pragma once
// Broadcast: every rank's buffer becomes the root's. Not one of the registry's collectives (there is one
// schedule, chosen by size, and nothing hierarchical to gain for what it serves: a trainer's start-up
// parameter sync); the Communicator's broadcast verb runs it on the scope's transport.
//
// Two shapes, over ranks renumbered so that the root is 0:
//   binomial tree: rank v receives from v - 2^k (2^k its lowest set bit) and sends to v + 2^j for every
//     2^j below that bit: ceil(log2 n) steps of the whole message;
//   pipelined chain: 0 -> 1 -> ... -> n-1, the message cut into K chunks, each forwarded as soon as it has
//     arrived: n - 2 + K steps of one chunk.
// Cost (S bytes, per-message latency a, per-byte time b):
//   tree:  ceil(log2 n) (a + S b);   chain: (n - 2 + K) (a + S b / K).
// The chain runs where its bandwidth term is the smaller, (n - 2 + K) / K < ceil(log2 n), i.e. for
// messages of many chunks; the rule depends only on n, S and the chunk size, so every rank picks alike.

#include <cstddef>
#include <vector>

#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/tags.hpp"

namespace paro::algorithms {

inline int ceil_log2(int n) {
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  return steps;
}

// Whether a broadcast of `bytes` over n ranks runs as a pipelined chain (else as a binomial tree).
inline bool broadcast_chains(int n, std::size_t bytes, std::size_t chunk_bytes) {
  if (n <= 2 || chunk_bytes == 0) return false;
  const double chunks = static_cast<double>((bytes + chunk_bytes - 1) / chunk_bytes);
  return (n - 2 + chunks) / chunks < ceil_log2(n);
}

template <class T>
void binomial_broadcast(T& t, void* buf, std::size_t bytes, int root) {
  const int n = t.size(), v = mod(t.rank() - root, n);
  auto actual = [&](int relative) { return mod(relative + root, n); };
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      auto r = t.irecv(buf, bytes, actual(v - mask), tags::broadcast);
      t.wait(r);
      break;
    }
  }
  std::vector<typename T::Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) sends.push_back(t.isend(buf, bytes, actual(v + mask), tags::broadcast));
  t.wait_all(sends);
}

// At most params.window receives are posted ahead (a stepwise transport runs with one and whole blocks,
// which makes this a plain chain).
template <class T>
void chain_broadcast(T& t, void* buf, std::size_t bytes, int root, const RingParams& params) {
  const int n = t.size(), v = mod(t.rank() - root, n);
  const int prev = mod(t.rank() - 1, n), next = mod(t.rank() + 1, n);
  const ChunkPlan plan = ChunkPlan::for_layout(BlockLayout::uniform(1, bytes), 1, params.chunk_bytes);
  char* data = static_cast<char*>(buf);
  auto piece = [&](std::size_t c) { return plan.piece(bytes, c); };
  const std::size_t window = std::max<std::size_t>(1, std::min(params.window, plan.chunks));
  std::vector<typename T::Request> recvs(window), sends;
  auto post_recv = [&](std::size_t c) {
    auto [off, len] = piece(c);
    recvs[c % window] = t.irecv(data + off, len, prev, tags::broadcast);
  };
  if (v > 0)
    for (std::size_t c = 0; c < window; ++c) post_recv(c);
  for (std::size_t c = 0; c < plan.chunks; ++c) {
    if (v > 0) {
      t.wait(recvs[c % window]);
      if (c + window < plan.chunks) post_recv(c + window);
    }
    if (v < n - 1) {
      auto [off, len] = piece(c);
      sends.push_back(t.isend(data + off, len, next, tags::broadcast));
    }
  }
  t.wait_all(sends);
}

template <class T>
void broadcast(T& t, void* buf, std::size_t bytes, int root, const RingParams& params) {
  activity::PhaseScope phase("broadcast");
  if (t.size() == 1 || bytes == 0) return;
  if (broadcast_chains(t.size(), bytes, params.chunk_bytes))
    chain_broadcast(t, buf, bytes, root, params);
  else
    binomial_broadcast(t, buf, bytes, root);
}

}  // namespace paro::algorithms
