#pragma once
// paro::Error and its kinds. Every error paro raises is a paro::Error whose message says what was wrong
// and what is allowed; its kind says what a caller can do about it:
//   UsageError    the call or the configuration is wrong (arguments, environment, files, ranks that
//                 disagree); retrying the same thing fails the same way
//   TimeoutError  a wait passed PARO_TIMEOUT: a peer is stuck, slow or never entered the collective
//   PeerFailure   another rank failed first (its error is quoted), or the backend reports a dead peer
//   BackendError  the backend itself failed (an MPI, NCCL or CUDA call, shared memory)
// After a TimeoutError or PeerFailure the communicator is unusable (messages may be outstanding).
// catch (const paro::Error&) catches them all; kind() tells them apart without a cascade of catches.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace paro {

enum class ErrorKind { usage, timeout, peer_failure, backend };

inline const char* name_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::usage: return "usage";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::peer_failure: return "peer failure";
    case ErrorKind::backend: return "backend";
  }
  return "invalid";
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::usage)
      : std::runtime_error("paro: " + message), message_(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }
  // The message without what() 's "paro: " prefix, for errors that quote another.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
  ErrorKind kind_;
};

// One class per kind, so that a catch clause can pick a kind.
template <ErrorKind Kind>
class ErrorOf : public Error {
 public:
  explicit ErrorOf(const std::string& message) : Error(message, Kind) {}
};
using UsageError = ErrorOf<ErrorKind::usage>;
using TimeoutError = ErrorOf<ErrorKind::timeout>;
using PeerFailure = ErrorOf<ErrorKind::peer_failure>;
using BackendError = ErrorOf<ErrorKind::backend>;

// Throws the Error class of `kind` (so that catch clauses for the subclasses see it).
[[noreturn]] inline void throw_error(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::timeout: throw TimeoutError(message);
    case ErrorKind::peer_failure: throw PeerFailure(message);
    case ErrorKind::backend: throw BackendError(message);
    case ErrorKind::usage: break;
  }
  throw UsageError(message);
}

// Rethrows e with `context` before its message, keeping its kind: "all_reduce: " + "unknown data type".
[[noreturn]] inline void rethrow_with_context(const Error& e, const std::string& context) {
  throw_error(e.kind(), context + e.message());
}

namespace detail {

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

// Throws paro::UsageError with the concatenation of args when cond is false.
template <class... Args>
void require(bool cond, Args&&... args) {
  if (!cond) throw UsageError(concat(std::forward<Args>(args)...));
}

}  // namespace detail
}  // namespace paro
