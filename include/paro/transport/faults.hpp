#pragma once
// A transport decorator that injects one fault into the messages of one rank, for the tests that show a
// fault becomes an error on every rank within the timeout (or a detected corruption with
// checksum::Transport above it), never a hang or a silent wrong result.
//
// The fault hits the K-th non-empty message that rank `rank` sends, counted over its communicator and
// every communicator split from it, from construction or from the last inject():
//   drop        the message is never delivered; the sender's wait returns as if it had been
//   delay       the message is posted `ms` milliseconds late
//   duplicate   the message is delivered twice (the copy is matched by the pair's next receive)
//   corrupt     one byte of the message arrives flipped
//   fail        the rank goes silent, as a process that died: that send and every later one of the rank
//               are never delivered (its receives still complete, so nothing it owns is left half-written)
// Written "KIND,rank=R,message=K[,ms=D]" (PARO_FAULT, FaultSpec::parse), e.g. "drop,rank=1,message=3".
//
//   faults::Transport<threads::Transport> t(std::move(inner), faults::FaultSpec::parse("corrupt,rank=2,message=5"));

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/transport/forwarding.hpp"

namespace paro::faults {

enum class FaultKind { drop, delay, duplicate, corrupt, fail };

inline const char* name_of(FaultKind k) {
  switch (k) {
    case FaultKind::drop: return "drop";
    case FaultKind::delay: return "delay";
    case FaultKind::duplicate: return "duplicate";
    case FaultKind::corrupt: return "corrupt";
    case FaultKind::fail: return "fail";
  }
  return "invalid";
}

inline constexpr FaultKind all_fault_kinds[] = {FaultKind::drop, FaultKind::delay, FaultKind::duplicate,
                                                FaultKind::corrupt, FaultKind::fail};

struct FaultSpec {
  FaultKind kind = FaultKind::drop;
  int rank = 0;         // the world rank of the decorated communicator whose message is hit
  long message = 1;     // its K-th non-empty send, from 1
  double delay_ms = 0;  // delay only
  std::string text;     // as written, for messages

  std::string describe() const { return text.empty() ? std::string(name_of(kind)) : text; }

  // "KIND,rank=R,message=K[,ms=D]"; `where` names the source in errors (PARO_FAULT, a test).
  static FaultSpec parse(std::string_view text, std::string_view where = "PARO_FAULT") {
    FaultSpec s;
    s.text = std::string(text);
    std::vector<std::string> parts;
    std::string part;
    for (char c : text) {
      if (c == ',') {
        parts.push_back(part);
        part.clear();
      } else {
        part += c;
      }
    }
    parts.push_back(part);
    const char* form = "; the form is KIND,rank=R,message=K[,ms=D] with KIND one of drop delay duplicate corrupt fail";
    bool known = false;
    for (FaultKind k : all_fault_kinds)
      if (parts[0] == name_of(k)) {
        s.kind = k;
        known = true;
      }
    detail::require(known, where, ": '", text, "': unknown fault '", parts[0], "'", form);
    bool has_rank = false, has_message = false, has_ms = false;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      const auto eq = parts[i].find('=');
      detail::require(eq != std::string::npos, where, ": '", text, "': '", parts[i], "' is not key=value", form);
      const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
      const std::string field = detail::concat(where, " ", key);
      if (key == "rank") {
        s.rank = static_cast<int>(env::parse_integer(value, field, 0, 1 << 24));
        has_rank = true;
      } else if (key == "message") {
        s.message = env::parse_integer(value, field, 1, 1L << 40);
        has_message = true;
      } else if (key == "ms") {
        s.delay_ms = env::parse_number(value, field, 0, 1e7);
        has_ms = true;
      } else {
        throw UsageError(detail::concat(where, ": '", text, "': unknown key '", key, "'", form));
      }
    }
    detail::require(has_rank && has_message, where, ": '", text, "': rank= and message= are required", form);
    detail::require(has_ms == (s.kind == FaultKind::delay), where, ": '", text, "': ms= is ",
                    s.kind == FaultKind::delay ? "required for delay" : "only for delay", form);
    return s;
  }

  static std::optional<FaultSpec> from_env() {
    auto v = env::get("PARO_FAULT");
    if (!v) return std::nullopt;
    return parse(*v);
  }
};

namespace detail {

// Shared by a rank's communicator and its splits: the fault, and how many messages the rank has sent.
struct State {
  std::optional<FaultSpec> spec;
  int world_rank = 0;
  std::atomic<long> sent{0};
  std::atomic<bool> silent{false};  // after a fail
};

}  // namespace detail

template <class Inner>
class Transport : public Forwarding<Transport<Inner>, Inner> {
  using Base = Forwarding<Transport<Inner>, Inner>;
  using Base::inner_;

 public:
  struct Request {
    typename Inner::Request message, copy;           // copy: the duplicate
    std::optional<typename Base::Buffer> corrupted;  // what a corrupted send sends instead of the caller's buffer
  };

  Transport() = default;
  // The world: inner is the whole communicator, and spec's rank is one of its ranks.
  explicit Transport(Inner inner, std::optional<FaultSpec> spec = FaultSpec::from_env())
      : Base(std::move(inner)), state_(std::make_shared<detail::State>()) {
    state_->world_rank = inner_.rank();
    inject(std::move(spec));
  }

  // Arms `spec` (or disarms, with nullopt) and restarts the count, on this rank's communicators; for
  // tests that let set-up traffic pass first. Not while messages are in flight.
  void inject(std::optional<FaultSpec> spec) {
    if (spec)
      paro::detail::require(spec->rank < inner_.size(), "fault '", spec->describe(), "': rank ", spec->rank,
                            " is not a rank of the ", inner_.size(), "-rank communicator");
    state_->spec = std::move(spec);
    state_->sent = 0;
    state_->silent = false;
  }

  // The non-empty messages this rank has sent since the fault was armed, where the fault is for this rank.
  long sent() const { return state_->sent; }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    if (state_->silent) return r;
    const std::optional<FaultKind> fault = bytes > 0 ? hit() : std::nullopt;
    if (!fault) {
      r.message = inner_.isend(buf, bytes, peer, tag);
      return r;
    }
    switch (*fault) {
      case FaultKind::drop: break;  // never posted: the sender believes it sent
      case FaultKind::delay:
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(state_->spec->delay_ms));
        r.message = inner_.isend(buf, bytes, peer, tag);
        break;
      case FaultKind::duplicate:
        r.message = inner_.isend(buf, bytes, peer, tag);
        r.copy = inner_.isend(buf, bytes, peer, tag);
        break;
      case FaultKind::corrupt: {
        r.corrupted.emplace(inner_.allocate(bytes));
        char* wrong = r.corrupted->data();
        inner_.copy(wrong, buf, bytes);
        unsigned char middle = 0;  // through staging, so that any memory space works
        inner_.download(&middle, wrong + bytes / 2, 1);
        middle ^= 0x10;
        inner_.upload(wrong + bytes / 2, &middle, 1);
        r.message = inner_.isend(wrong, bytes, peer, tag);
        break;
      }
      case FaultKind::fail: state_->silent = true; break;
    }
    return r;
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    Request r;
    r.message = inner_.irecv(buf, bytes, peer, tag);
    return r;
  }

  void wait(Request& r) {
    inner_.wait(r.message);
    inner_.wait(r.copy);
    r.corrupted.reset();
  }

  Transport split(int color, int key) { return Transport(inner_.split(color, key), state_); }

 private:
  std::shared_ptr<detail::State> state_;

  Transport(Inner inner, std::shared_ptr<detail::State> state) : Base(std::move(inner)), state_(std::move(state)) {}

  // The fault, when this non-empty send is the one it hits.
  std::optional<FaultKind> hit() {
    const auto& spec = state_->spec;
    if (!spec || spec->rank != state_->world_rank) return std::nullopt;
    if (state_->sent.fetch_add(1) + 1 != spec->message) return std::nullopt;
    return spec->kind;
  }
};

}  // namespace paro::faults
