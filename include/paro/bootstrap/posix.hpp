#pragma once
// POSIX helpers shared by the stores that live in files and sockets (file_store.hpp, tcp_store.hpp).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

namespace paro::bootstrap::detail {

using Clock = std::chrono::steady_clock;

inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline std::string errno_text(int error) { return std::strerror(error); }

// Calls attempt() until it returns a value, sleeping 1 ms, 2 ms, ... up to 50 ms between tries;
// an empty value once the deadline has passed.
template <class Attempt>
auto poll_until(Clock::time_point deadline, Attempt attempt) -> decltype(attempt()) {
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (auto value = attempt()) return value;
    if (Clock::now() >= deadline) return {};
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// An open file descriptor, closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

}  // namespace paro::bootstrap::detail
