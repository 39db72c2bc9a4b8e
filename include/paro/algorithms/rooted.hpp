#pragma once
// Gather and scatter: one rank's buffer of n blocks to or from every rank's one block. Like broadcast, not
// one of the registry's collectives: the root's link carries (n - 1) blocks whatever the schedule, so the
// direct exchange is the bandwidth-optimal one; the Communicator's gather and scatter verbs run it on the
// scope's transport.
//
// Cost (S bytes per block, per-message latency a, per-byte time b): (n - 1) (a + S b) at the root, with
// at most `window` messages in flight there (the receives or sends of a stepwise transport one at a time).

#include <algorithm>
#include <cstddef>
#include <vector>

#include "paro/algorithms/ring.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::algorithms {

// The root's side of both: `post(peer)` for every other rank, at most `window` in flight.
template <class T, class Post>
void root_exchange(T& t, int root, std::size_t window, Post&& post) {
  const int n = t.size();
  const std::size_t in_flight = is_stepwise_v<T> ? 1 : std::max<std::size_t>(1, window);
  std::vector<typename T::Request> posted;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == root) continue;
    posted.push_back(post(peer));
    if (posted.size() == in_flight) t.wait_all(posted);
  }
  t.wait_all(posted);
}

// recv (root only, n blocks of block_bytes) = every rank's send in rank order; the root's own block is
// copied unless it is already in place (send == recv + root * block_bytes).
template <class T>
void direct_gather(T& t, const void* send, void* recv, std::size_t block_bytes, int root, const RingParams& params) {
  if (t.rank() != root) {
    auto r = t.isend(send, block_bytes, root, tags::gather_scatter);
    t.wait(r);
    return;
  }
  char* out = static_cast<char*>(recv);
  char* mine = out + static_cast<std::size_t>(root) * block_bytes;
  if (send != mine) t.copy(mine, send, block_bytes);
  root_exchange(t, root, params.window, [&](int peer) {
    return t.irecv(out + static_cast<std::size_t>(peer) * block_bytes, block_bytes, peer, tags::gather_scatter);
  });
}

// Every rank's recv = block rank() of the root's send (n blocks of block_bytes); the root's own block is
// copied unless it is already in place (recv == send + root * block_bytes).
template <class T>
void direct_scatter(T& t, const void* send, void* recv, std::size_t block_bytes, int root, const RingParams& params) {
  if (t.rank() != root) {
    auto r = t.irecv(recv, block_bytes, root, tags::gather_scatter);
    t.wait(r);
    return;
  }
  const char* in = static_cast<const char*>(send);
  const char* mine = in + static_cast<std::size_t>(root) * block_bytes;
  if (recv != mine) t.copy(recv, mine, block_bytes);
  root_exchange(t, root, params.window, [&](int peer) {
    return t.isend(in + static_cast<std::size_t>(peer) * block_bytes, block_bytes, peer, tags::gather_scatter);
  });
}

}  // namespace paro::algorithms
