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
#include "paro/transport/forwarding.hpp"
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
class Transport : public Forwarding<Transport<Inner>, Inner> {
  using Base = Forwarding<Transport<Inner>, Inner>;
  using Base::inner_;

 public:
  struct Request {
    typename Inner::Request header, payload;
    std::optional<typename Base::Buffer> header_buffer;  // in the inner transport's memory space
    // Receives: what to check once both have arrived.
    bool is_receive = false;
    void* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0, tag = 0;
    std::uint64_t sequence = 0;
  };

  Transport() = default;
  explicit Transport(Inner inner) : Base(std::move(inner)) {}

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

 private:
  std::map<std::pair<int, int>, std::uint64_t> sent_, received_;  // next sequence number per channel

  std::pair<int, int> channel(int peer, int tag) const { return {peer, Base::stepwise ? 0 : tag}; }

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
      return paro::detail::concat("rank ", this->rank(), ": the message from rank ", r.peer, " on tag ", r.tag, " (#",
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
