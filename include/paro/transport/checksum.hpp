#pragma once
// A transport decorator that makes wrong data an error: every message carries a small header with its
// sequence number on its channel (the pair and tag it travels on), its size and a 64-bit checksum of its
// bytes; the receiver checks all three when it waits. A corrupted, lost-and-replaced, duplicated or
// reordered message becomes a BackendError naming the peer, the tag and what was wrong, instead of a
// wrong result. The cost: one header message per message and a pass over the bytes on each side (for
// device memory, through a copy to the host), so it is a debugging and acceptance-test option.
//
//   Communicator comm(checksum::Transport<mpi::Transport>(mpi::Transport(MPI_COMM_WORLD)));
//
// Sequence numbers count per (peer, tag) channel, since that is what matches in post order; on a
// stepwise transport (NCCL's rules: no tags) per peer.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "paro/core/activity.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/transport.hpp"

namespace paro::checksum {

// 64-bit hash of bytes. Each step is a bijection of the running state for a fixed word, so a message that
// differs from the sent one in exactly one 8-byte word always hashes differently.
inline std::uint64_t hash(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0x243f6a8885a308d3ull ^ bytes;
  auto mix = [&h](std::uint64_t w) {
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  };
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    mix(w);
  }
  if (i < bytes) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    mix(w ^ 0xff00000000000000ull);  // the tail, marked so that it differs from a full word of zeros
  }
  return h;
}

struct Header {
  std::uint64_t sequence = 0;  // on the channel, from 0
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};

template <class Inner>
class Transport {
  static_assert(check_transport<Inner>(), "checksum::Transport<T>: T must model the Transport concept");

 public:
  static constexpr const char* name = Inner::name;
  static constexpr bool has_native_collectives = Inner::has_native_collectives;
  static constexpr bool stepwise = is_stepwise_v<Inner>;
  using Buffer = decltype(std::declval<Inner&>().allocate(std::size_t{}));

  struct Request {
    typename Inner::Request header, payload;
    std::optional<Buffer> header_buffer;  // in the inner transport's memory space
    // Receives: what to check once both have arrived.
    bool is_receive = false;
    void* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0, tag = 0;
    std::uint64_t sequence = 0;
  };

  Transport() = default;
  explicit Transport(Inner inner) : inner_(std::move(inner)) {}

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  bool concurrent_use() const { return inner_.concurrent_use(); }
  Inner& inner() { return inner_; }

  auto allocate(std::size_t bytes) { return inner_.allocate(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) { inner_.copy(dst, src, bytes); }
  void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    inner_.reduce(dst, a, b, count, dt, op);
  }
  void divide(void* buf, std::size_t count, DataType dt, int divisor) { inner_.divide(buf, count, dt, divisor); }
  void upload(void* dst, const void* host, std::size_t bytes) { inner_.upload(dst, host, bytes); }
  void download(void* host, const void* src, std::size_t bytes) { inner_.download(host, src, bytes); }
  template <class I = Inner, class = decltype(std::declval<I&>().shared_memory_id())>
  int shared_memory_id() {
    return inner_.shared_memory_id();
  }
  template <class I = Inner, class = decltype(std::declval<I&>().issue())>
  void issue() {
    inner_.issue();
  }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    const Header h{sent_[channel(peer, tag)]++, bytes, hash_of(buf, bytes)};
    r.header_buffer.emplace(inner_.allocate(sizeof(Header)));
    inner_.upload(r.header_buffer->data(), &h, sizeof(Header));
    r.header = inner_.isend(r.header_buffer->data(), sizeof(Header), peer, tag);
    r.payload = inner_.isend(buf, bytes, peer, tag);
    return r;
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    r.is_receive = true;
    r.buf = buf;
    r.bytes = bytes;
    r.peer = peer;
    r.tag = tag;
    r.sequence = received_[channel(peer, tag)]++;
    r.header_buffer.emplace(inner_.allocate(sizeof(Header)));
    r.header = inner_.irecv(r.header_buffer->data(), sizeof(Header), peer, tag);
    r.payload = inner_.irecv(buf, bytes, peer, tag);
    return r;
  }

  void wait(Request& r) {
    inner_.wait(r.header);
    inner_.wait(r.payload);
    if (r.is_receive) {
      Header h;
      inner_.download(&h, r.header_buffer->data(), sizeof(Header));
      r.is_receive = false;
      verify(r, h);
    }
    r.header_buffer.reset();
  }
  void wait_all(std::vector<Request>& requests) {
    for (auto& r : requests) wait(r);
    requests.clear();
  }
  template <class I = Inner, class = decltype(std::declval<I&>().abandon(std::declval<const std::string&>()))>
  void abandon(const std::string& why) {
    inner_.abandon(why);
  }

  Transport split(int color, int key) { return Transport(inner_.split(color, key)); }

  void native_all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    inner_.native_all_reduce(send, recv, count, dt, op);
  }
  void native_all_gather(const void* send, void* recv, std::size_t count, DataType dt) {
    inner_.native_all_gather(send, recv, count, dt);
  }
  void native_reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    inner_.native_reduce_scatter(send, recv, count, dt, op);
  }

 private:
  Inner inner_;
  std::map<std::pair<int, int>, std::uint64_t> sent_, received_;  // next sequence number per channel

  std::pair<int, int> channel(int peer, int tag) const { return {peer, stepwise ? 0 : tag}; }

  std::uint64_t hash_of(const void* buf, std::size_t bytes) {
    if constexpr (is_host_memory_v<Inner>) {
      return hash(buf, bytes);
    } else {
      std::vector<unsigned char> host(bytes);
      inner_.download(host.data(), buf, bytes);
      return hash(host.data(), bytes);
    }
  }

  void verify(const Request& r, const Header& h) {
    auto where = [&] {
      return paro::detail::concat("rank ", rank(), ": the message from rank ", r.peer, " on tag ", r.tag, " (#",
                                  r.sequence, " on that channel, ", r.bytes, " bytes)");
    };
    if (h.sequence != r.sequence)
      fail(paro::detail::concat(where(), " carries sequence number #", h.sequence,
                                ": a message on the channel was lost, duplicated or reordered (checksum transport)"));
    if (h.bytes != r.bytes)
      fail(paro::detail::concat(where(), " was sent with ", h.bytes,
                                " bytes: sender and receiver disagree on its size (checksum transport)"));
    const std::uint64_t got = hash_of(r.buf, r.bytes);
    if (got != h.hash)
      fail(paro::detail::concat(where(), " arrived corrupted: its bytes hash to ", std::hex, got,
                                ", the sender's hashed to ", h.hash, " (checksum transport)"));
  }

  // The inner transport gives up its outstanding messages first, so that the unwinding can free buffers.
  [[noreturn]] void fail(const std::string& what) {
    const std::string why = what + activity::describe();
    abandon_posted(inner_, why);
    throw BackendError(why);
  }
};

}  // namespace paro::checksum
