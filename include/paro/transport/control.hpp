#pragma once
// Control primitives over any Transport: the all-gather of small rows and the barrier that topology
// discovery, PARO_CHECK and the Communicator need below the algorithms. Bruck's all-gather is also the
// tree algorithm's all-gather (algorithms/tree.hpp).

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/memory.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::control {

// Bruck all-gather: `buf` holds n blocks of `count` elements, this rank's block already in place. In step k
// a rank passes the blocks r .. r+k-1 (mod n) it has to rank r-k; a wrapped range travels as two messages.
template <class T>
void bruck_all_gather(T& t, void* buf, std::size_t count, DataType dt) {
  activity::PhaseScope phase("control all-gather");
  const int n = t.size(), r = t.rank();
  const std::size_t block = count * size_of(dt);
  char* data = static_cast<char*>(buf);
  std::vector<typename T::Request> requests;
  auto segments = [&](int first, int len, auto&& visit) {  // blocks first .. first+len-1 (mod n)
    const int head = std::min(len, n - first);
    visit(data + static_cast<std::size_t>(first) * block, static_cast<std::size_t>(head) * block);
    if (head < len) visit(data, static_cast<std::size_t>(len - head) * block);
  };
  for (int k = 1; k < n; k *= 2) {
    const int len = std::min(k, n - k);
    const int to = (r - k + n) % n, from = (r + k) % n;
    segments((r + k) % n, len, [&](char* p, std::size_t b) { requests.push_back(t.irecv(p, b, from, tags::control)); });
    segments(r, len, [&](char* p, std::size_t b) { requests.push_back(t.isend(p, b, to, tags::control)); });
    t.wait_all(requests);
  }
}

// All-gathers rows of control data that live on the host (topology facts, call signatures): in place on
// host transports; on others staged through the transport's memory space. (Staged on the host, they would
// also become simulated buffers under SMPI, transport.hpp.)
template <class T>
void bruck_all_gather_host(T& t, void* rows, std::size_t count, DataType dt) {
  if constexpr (is_host_memory_v<T>) {
    bruck_all_gather(t, rows, count, dt);
  } else {
    const std::size_t bytes = count * size_of(dt) * static_cast<std::size_t>(t.size());
    auto staged = t.allocate(bytes);
    t.upload(staged.data(), rows, bytes);
    bruck_all_gather(t, staged.data(), count, dt);
    t.download(rows, staged.data(), bytes);
  }
}

// Dissemination barrier: ceil(log2 n) rounds of empty messages.
template <class T>
void barrier(T& t) {
  activity::PhaseScope phase("barrier");
  const int n = t.size(), r = t.rank();
  for (int k = 1; k < n; k *= 2) {
    auto q = t.irecv(nullptr, 0, (r - k + n) % n, tags::control);
    auto s = t.isend(nullptr, 0, (r + k) % n, tags::control);
    t.wait(q);
    t.wait(s);
  }
}

}  // namespace paro::control
