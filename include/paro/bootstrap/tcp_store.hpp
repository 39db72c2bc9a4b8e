#pragma once
// TcpStore: a Store served over TCP by a TcpStoreServer in one process (paro-run, or rank 0 with
// PARO_STORE_SERVE=1), the shape of PyTorch's TCPStore.
//
// NO AUTHENTICATION, NO ENCRYPTION (as PyTorch's TCPStore): whoever reaches the port reads and writes every
// key. Run it on the job's private network only; the server listens on 127.0.0.1 unless given an address.
//
// The server is one background thread with poll() over non-blocking sockets: a slow or broken client never
// stalls the others. A get for a missing key is held at the server until some client sets the key; the
// client bounds the wait with its own timeout (and then drops the connection). A request that breaks the
// protocol or the size limits gets an error reply, a line on stderr, and its connection is closed.

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/posix.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro::bootstrap {

// What the server accepts (and the client accepts in a reply) per request.
struct TcpStoreLimits {
  std::size_t max_key_bytes = 4096;
  std::size_t max_value_bytes = std::size_t{64} << 20;
};

namespace detail::tcp {

// The protocol, all integers big-endian:
//   request  op (1 byte), key length (4), value length (8), key, value
//            set: value = the bytes    get: no value    add: value = the delta (8 bytes, two's complement)
//   reply    status (1 byte: 0 ok, 1 error), length (8), payload
//            set: empty    get: the value, once the key exists    add: the new value (8 bytes)
//            error: the reason as text (the client then reconnects for its next request)
enum Op : std::uint8_t { op_set = 0x51, op_get = 0x52, op_add = 0x53 };
enum Status : std::uint8_t { status_ok = 0, status_error = 1 };
constexpr std::size_t request_header_bytes = 13;
constexpr std::size_t reply_header_bytes = 9;
constexpr std::size_t max_error_bytes = 4096;

inline void put_be(std::uint8_t* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * (bytes - 1 - i)));
}

inline std::uint64_t get_be(const std::uint8_t* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = value << 8 | in[i];
  return value;
}

inline Bytes counter_delta(std::int64_t delta) {
  Bytes out(8);
  put_be(out.data(), static_cast<std::uint64_t>(delta), 8);
  return out;
}

inline Bytes request(Op op, const std::string& key, const Bytes& value) {
  Bytes out(request_header_bytes + key.size() + value.size());
  out[0] = op;
  put_be(&out[1], key.size(), 4);
  put_be(&out[5], value.size(), 8);
  std::copy(key.begin(), key.end(), out.begin() + request_header_bytes);
  std::copy(value.begin(), value.end(), out.begin() + static_cast<std::ptrdiff_t>(request_header_bytes + key.size()));
  return out;
}

inline Bytes reply(Status status, const Bytes& payload) {
  Bytes out(reply_header_bytes + payload.size());
  out[0] = status;
  put_be(&out[1], payload.size(), 8);
  std::copy(payload.begin(), payload.end(), out.begin() + reply_header_bytes);
  return out;
}

inline std::string url(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return paro::detail::concat("tcp://", ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", port);
}

using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// nullptr with the resolver's error in `error` when the host does not resolve.
inline AddressList resolve(const std::string& host, int port, bool passive, int& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  error = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  return AddressList(error == 0 ? list : nullptr, &::freeaddrinfo);
}

// Small requests and replies go out at once rather than waiting for Nagle's timer.
inline void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Waits until fd is ready for `events`; false when the deadline passes first.
inline bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the next send/recv report the error
  }
}

}  // namespace detail::tcp

class TcpStoreServer {
 public:
  // Listens on address:port; port 0 picks a free port (see port()).
  explicit TcpStoreServer(std::string address = "127.0.0.1", int port = 0, TcpStoreLimits limits = {})
      : address_(std::move(address)), limits_(limits) {
    paro::detail::require(port >= 0 && port <= 65535, "TcpStoreServer: port ", port,
                          "; allowed: 0 (any free) to 65535");
    int error = 0;
    auto list = detail::tcp::resolve(address_, port, true, error);
    if (!list)
      throw UsageError(paro::detail::concat("TcpStoreServer: cannot resolve address '", address_,
                                            "': ", ::gai_strerror(error), "; give one of this host's addresses"));
    int last_errno = 0;
    for (addrinfo* a = list.get(); a != nullptr && !listener_; a = a->ai_next) {
      detail::Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      int one = 1;
      if (fd) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (fd && ::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), SOMAXCONN) == 0)
        listener_ = std::move(fd);
      else
        last_errno = errno;
    }
    if (!listener_)
      throw BackendError(paro::detail::concat("TcpStoreServer: cannot listen on ", detail::tcp::url(address_, port),
                                              ": ", detail::errno_text(last_errno)));
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
      throw BackendError(paro::detail::concat("TcpStoreServer: pipe: ", detail::errno_text(errno)));
    wake_read_.reset(wake[0]);
    wake_write_.reset(wake[1]);
    thread_ = std::thread([this] { serve(); });
  }

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Stops the thread; the sockets close with their Fd members.
  ~TcpStoreServer() {
    const char stop = 1;
    while (::write(wake_write_.get(), &stop, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }

  int port() const { return port_; }
  const std::string& address() const { return address_; }
  std::string url() const { return detail::tcp::url(address_, port_); }

 private:
  struct Client {
    detail::Fd fd;
    std::string peer;
    Bytes in;                            // received bytes of the request being assembled
    Bytes out;                           // the reply being sent
    std::size_t sent = 0;                // bytes of `out` already sent
    std::optional<std::string> waiting;  // the key of a held get
    bool closing = false;                // rejected: send the error, drain, close
    detail::Clock::time_point close_by{};
  };

  bool idle(const Client& c) const { return c.out.empty() && !c.waiting && !c.closing; }

  void log(const Client& c, const std::string& what) const {
    std::fputs(paro::detail::concat("paro: TcpStoreServer ", url(), ": client ", c.peer, ": ", what, "\n").c_str(),
               stderr);
  }

  void serve() {
    std::vector<pollfd> polled;
    for (;;) {
      polled.assign({{wake_read_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}});
      bool any_closing = false;
      for (auto& [fd, c] : clients_) {
        any_closing |= c.closing;
        const short out = c.out.empty() ? 0 : POLLOUT;
        polled.push_back({fd, static_cast<short>(c.closing || idle(c) || c.waiting ? POLLIN | out : out), 0});
      }
      // Rejected clients get a bounded time to read their error; wake up to enforce it.
      if (::poll(polled.data(), polled.size(), any_closing ? 100 : -1) < 0) {
        if (errno == EINTR) continue;
        std::fputs(paro::detail::concat("paro: TcpStoreServer ", url(), ": poll failed (", detail::errno_text(errno),
                                        "); the store stops serving\n")
                       .c_str(),
                   stderr);
        return;
      }
      if (polled[0].revents != 0) return;
      if (polled[1].revents != 0) accept_clients();
      for (std::size_t i = 2; i < polled.size(); ++i) {
        if (polled[i].revents == 0) continue;
        auto it = clients_.find(polled[i].fd);
        if (it != clients_.end() && !step(it->second, polled[i].revents)) drop(it);
      }
      const auto now = detail::Clock::now();
      for (auto it = clients_.begin(); it != clients_.end();) {
        auto next = std::next(it);
        if (it->second.closing && now >= it->second.close_by) drop(it);
        it = next;
      }
    }
  }

  void accept_clients() {
    for (;;) {
      sockaddr_storage peer{};
      socklen_t length = sizeof peer;
      const int fd =
          ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          std::fputs(
              paro::detail::concat("paro: TcpStoreServer ", url(), ": accept failed: ", detail::errno_text(errno), "\n")
                  .c_str(),
              stderr);
        return;
      }
      detail::tcp::set_no_delay(fd);
      char host[NI_MAXHOST] = "?", service[NI_MAXSERV] = "?";
      ::getnameinfo(reinterpret_cast<sockaddr*>(&peer), length, host, sizeof host, service, sizeof service,
                    NI_NUMERICHOST | NI_NUMERICSERV);
      Client& c = clients_[fd];
      c.fd.reset(fd);
      c.peer = paro::detail::concat(host, ":", service);
    }
  }

  // Serves one ready client; false when its connection is to be closed.
  bool step(Client& c, short revents) {
    try {
      if ((revents & POLLOUT) && !flush(c)) return false;
      if ((revents & (POLLIN | POLLHUP | POLLERR)) && !receive(c)) return false;
      while (idle(c) && handle_next(c)) {
      }
      if (c.closing && c.out.empty()) ::shutdown(c.fd.get(), SHUT_WR);  // the client sees EOF after the error
      return true;
    } catch (const std::exception& e) {  // e.g. out of memory: this client only
      log(c, paro::detail::concat("closing the connection: ", e.what()));
      return false;
    }
  }

  bool flush(Client& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      c.sent += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.sent = 0;
    return true;
  }

  bool receive(Client& c) {
    std::uint8_t chunk[65536];
    const ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0) {
      if (!c.closing && !c.in.empty()) log(c, "closed the connection in the middle of a request");
      return false;
    }
    if (c.closing) return true;  // drained so that our close does not reset the connection before the error
    if (!idle(c)) {
      reject(c, "sent a request before the answer to its previous one");
      return true;
    }
    c.in.insert(c.in.end(), chunk, chunk + n);
    return true;
  }

  // Handles the first request in c.in if it is complete; false when it is not (yet).
  bool handle_next(Client& c) {
    namespace tcp = detail::tcp;
    if (c.in.size() < tcp::request_header_bytes) return false;
    const auto op = c.in[0];
    const std::uint64_t key_bytes = tcp::get_be(&c.in[1], 4);
    const std::uint64_t value_bytes = tcp::get_be(&c.in[5], 8);
    if (op != tcp::op_set && op != tcp::op_get && op != tcp::op_add) {
      reject(c, paro::detail::concat("unknown operation ", static_cast<int>(op), "; allowed: set ",
                                     static_cast<int>(tcp::op_set), ", get ", static_cast<int>(tcp::op_get), ", add ",
                                     static_cast<int>(tcp::op_add)));
      return false;
    }
    if (key_bytes > limits_.max_key_bytes || value_bytes > limits_.max_value_bytes) {
      reject(c, paro::detail::concat("a key of ", key_bytes, " bytes and a value of ", value_bytes,
                                     " bytes; allowed: keys up to ", limits_.max_key_bytes, " bytes, values up to ",
                                     limits_.max_value_bytes, " bytes"));
      return false;
    }
    const std::uint64_t expected_value = op == tcp::op_get ? 0 : op == tcp::op_add ? 8 : value_bytes;
    if (value_bytes != expected_value) {
      reject(c, paro::detail::concat("a value of ", value_bytes, " bytes with ", op == tcp::op_get ? "get" : "add",
                                     "; allowed: ", expected_value));
      return false;
    }
    const std::size_t total = tcp::request_header_bytes + key_bytes + value_bytes;
    if (c.in.size() < total) return false;
    const auto key_begin = c.in.begin() + tcp::request_header_bytes;
    std::string key(key_begin, key_begin + static_cast<std::ptrdiff_t>(key_bytes));
    Bytes value(key_begin + static_cast<std::ptrdiff_t>(key_bytes), c.in.begin() + static_cast<std::ptrdiff_t>(total));
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(total));
    if (op == tcp::op_set) {
      values_[key] = std::move(value);
      answer(c, tcp::status_ok, Bytes{});
      wake_waiters(key);
    } else if (op == tcp::op_get) {
      auto it = values_.find(key);
      if (it != values_.end()) {
        answer(c, tcp::status_ok, it->second);
      } else {
        c.waiting = key;
        waiters_.emplace(key, c.fd.get());
      }
    } else {
      add(c, key, static_cast<std::int64_t>(tcp::get_be(value.data(), 8)));
    }
    return true;
  }

  void add(Client& c, const std::string& key, std::int64_t delta) {
    auto it = values_.find(key);
    std::int64_t sum = delta;
    try {
      if (it != values_.end()) sum += detail::counter_value("TcpStore", key, it->second);
    } catch (const UsageError& e) {  // the client's mistake, not the protocol's: the connection stays
      const std::string& text = e.message();
      answer(c, detail::tcp::status_error, Bytes(text.begin(), text.end()));
      return;
    }
    values_[key] = detail::counter_bytes(sum);
    answer(c, detail::tcp::status_ok, detail::tcp::counter_delta(sum));
    wake_waiters(key);
  }

  void answer(Client& c, detail::tcp::Status status, const Bytes& payload) {
    c.out = detail::tcp::reply(status, payload);
    c.sent = 0;
  }

  void wake_waiters(const std::string& key) {
    const auto [begin, end] = waiters_.equal_range(key);
    for (auto it = begin; it != end; ++it) {
      Client& waiter = clients_.at(it->second);
      waiter.waiting.reset();
      answer(waiter, detail::tcp::status_ok, values_.at(key));
    }
    waiters_.erase(begin, end);
  }

  void reject(Client& c, const std::string& reason) {
    log(c, "closing the connection: " + reason);
    forget_wait(c);
    const std::string text = reason.substr(0, detail::tcp::max_error_bytes);
    answer(c, detail::tcp::status_error, Bytes(text.begin(), text.end()));
    c.in.clear();
    c.closing = true;
    c.close_by = detail::deadline_after(2.0);
  }

  void forget_wait(Client& c) {
    if (!c.waiting) return;
    const auto [begin, end] = waiters_.equal_range(*c.waiting);
    for (auto it = begin; it != end; ++it)
      if (it->second == c.fd.get()) {
        waiters_.erase(it);
        break;
      }
    c.waiting.reset();
  }

  void drop(std::map<int, Client>::iterator it) {
    forget_wait(it->second);
    clients_.erase(it);
  }

  std::string address_;
  TcpStoreLimits limits_;
  int port_ = 0;
  detail::Fd listener_;
  detail::Fd wake_read_;
  detail::Fd wake_write_;
  // Touched by the server thread only.
  std::map<int, Client> clients_;  // by socket
  std::map<std::string, Bytes> values_;
  std::multimap<std::string, int> waiters_;  // key -> sockets of the clients whose get waits for it
  std::thread thread_;                       // last: starts after every member above exists
};

class TcpStore : public Store {
 public:
  // Connects to the server at host:port, retrying until the timeout, so that clients may start first.
  TcpStore(std::string host, int port, double timeout_seconds = env::timeout_seconds(), TcpStoreLimits limits = {})
      : host_(std::move(host)), port_(port), timeout_(timeout_seconds), limits_(limits) {
    paro::detail::require(!host_.empty(), "TcpStore: the host is empty; give the store server's name or address");
    paro::detail::require(port > 0 && port <= 65535, "TcpStore: port ", port, "; allowed: 1 to 65535");
    paro::detail::require(timeout_ > 0, "TcpStore: timeout ", timeout_, " s; allowed: a positive number of seconds");
    std::lock_guard<std::mutex> lock(mutex_);
    connect(detail::deadline_after(timeout_));
  }

  std::string url() const { return detail::tcp::url(host_, port_); }

  void set(const std::string& key, const Bytes& value) override { call(detail::tcp::op_set, "set", key, value); }

  Bytes get(const std::string& key) override { return call(detail::tcp::op_get, "get", key, Bytes{}); }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    const Bytes sum = call(detail::tcp::op_add, "add", key, detail::tcp::counter_delta(delta));
    if (sum.size() != 8)
      throw BackendError(paro::detail::concat("TcpStore ", url(), ": add answered ", sum.size(),
                                              " bytes instead of 8; is that a paro store server?"));
    return static_cast<std::int64_t>(detail::tcp::get_be(sum.data(), 8));
  }

 private:
  // One request and its reply. Any failure drops the connection, so that the next request starts in step.
  Bytes call(detail::tcp::Op op, const char* what, const std::string& key, const Bytes& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto deadline = detail::deadline_after(timeout_);
    try {
      if (!socket_) connect(deadline);
      send_all(detail::tcp::request(op, key, value), deadline, what, key);
      std::uint8_t header[detail::tcp::reply_header_bytes];
      receive_all(header, sizeof header, deadline, what, key);
      const std::uint64_t size = detail::tcp::get_be(header + 1, 8);
      if (header[0] > detail::tcp::status_error || size > limits_.max_value_bytes + detail::tcp::max_error_bytes)
        throw BackendError(paro::detail::concat("TcpStore ", url(), ": a malformed answer to ", what, " of key '", key,
                                                "' (status ", static_cast<int>(header[0]), ", ", size,
                                                " bytes); is that a paro store server?"));
      Bytes payload(static_cast<std::size_t>(size));
      receive_all(payload.data(), payload.size(), deadline, what, key);
      if (header[0] == detail::tcp::status_error)
        throw UsageError(paro::detail::concat("TcpStore ", url(), ": the server refused ", what, " of key '", key,
                                              "': ", std::string(payload.begin(), payload.end())));
      return payload;
    } catch (...) {
      socket_.reset();
      throw;
    }
  }

  void connect(detail::Clock::time_point deadline) {
    std::string last_error = "no address";
    const bool connected = detail::poll_until(deadline, [&]() -> std::optional<bool> {
                             if (try_connect(deadline, last_error)) return true;
                             return std::nullopt;
                           }).has_value();
    if (!connected)
      throw TimeoutError(paro::detail::concat("TcpStore: cannot connect to the store server at ", url(), " within ",
                                              timeout_, " s (last error: ", last_error,
                                              "); is it running? PARO_TIMEOUT sets the limit"));
  }

  bool try_connect(detail::Clock::time_point deadline, std::string& last_error) {
    int error = 0;
    auto list = detail::tcp::resolve(host_, port_, false, error);
    if (!list) {
      if (error == EAI_AGAIN) return false;  // the resolver may come back
      throw UsageError(paro::detail::concat("TcpStore: cannot resolve host '", host_, "': ", ::gai_strerror(error)));
    }
    for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
      detail::Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) {
        last_error = detail::errno_text(errno);
        continue;
      }
      // Non-blocking, so that an unreachable host costs no more than the deadline.
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 &&
          (errno != EINPROGRESS || !detail::tcp::wait_ready(fd.get(), POLLOUT, deadline))) {
        last_error = errno == EINPROGRESS ? "timed out" : detail::errno_text(errno);
        continue;
      }
      int so_error = 0;
      socklen_t length = sizeof so_error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &length);
      if (so_error != 0) {
        last_error = detail::errno_text(so_error);
        continue;
      }
      detail::tcp::set_no_delay(fd.get());
      socket_ = std::move(fd);
      return true;
    }
    return false;
  }

  [[noreturn]] void lost(const char* what, const std::string& key, const std::string& why) const {
    throw PeerFailure(paro::detail::concat("TcpStore: lost the connection to the store server at ", url(), " during ",
                                           what, " of key '", key, "' (", why,
                                           "); its process may have ended before this rank was done"));
  }

  [[noreturn]] void timed_out(const char* what, const std::string& key) const {
    if (std::string(what) == "get") throw TimeoutError(detail::missing_key("TcpStore", key, timeout_, " at " + url()));
    throw TimeoutError(paro::detail::concat("TcpStore: ", what, " of key '", key, "' got no answer from ", url(),
                                            " within ", timeout_, " s (PARO_TIMEOUT sets the limit)"));
  }

  void send_all(const Bytes& bytes, detail::Clock::time_point deadline, const char* what, const std::string& key) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(socket_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n >= 0) {
        sent += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!detail::tcp::wait_ready(socket_.get(), POLLOUT, deadline)) timed_out(what, key);
      } else if (errno != EINTR) {
        lost(what, key, detail::errno_text(errno));
      }
    }
  }

  void receive_all(std::uint8_t* out, std::size_t size, detail::Clock::time_point deadline, const char* what,
                   const std::string& key) {
    std::size_t received = 0;
    while (received < size) {
      const ssize_t n = ::recv(socket_.get(), out + received, size - received, 0);
      if (n > 0) {
        received += static_cast<std::size_t>(n);
      } else if (n == 0) {
        lost(what, key, "the server closed it");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!detail::tcp::wait_ready(socket_.get(), POLLIN, deadline)) timed_out(what, key);
      } else if (errno != EINTR) {
        lost(what, key, detail::errno_text(errno));
      }
    }
  }

  std::string host_;
  int port_;
  double timeout_;
  TcpStoreLimits limits_;
  std::mutex mutex_;  // one request at a time on the connection
  detail::Fd socket_;
};

}  // namespace paro::bootstrap
