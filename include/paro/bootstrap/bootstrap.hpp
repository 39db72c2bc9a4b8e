#pragma once
// Bootstrap: how N processes that share no communicator yet exchange a few bytes out of band (UCX worker
// addresses, NCCL unique ids). Two interfaces, both runtime-polymorphic so that a program can plug in its
// own (the PyTorch backend hands paro its c10d::Store):
//   Store      a key-value store with the shape of c10d::Store: set, get (waits for the key), add
//   Bootstrap  an all-gather of bytes among N ranks (StoreBootstrap builds one over any Store)
// Implementations: MemoryStore (threads of one process, tests), FileStore and TcpStore
// (bootstrap/file_store.hpp, bootstrap/tcp_store.hpp), MpiBootstrap (bootstrap/mpi.hpp).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro::bootstrap {

using Bytes = std::vector<std::uint8_t>;

namespace detail {

// add's counters are stored as decimal text, so that get reads them as c10d's clients expect.
inline Bytes counter_bytes(std::int64_t value) {
  const std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

inline std::int64_t counter_value(const char* store, const std::string& key, const Bytes& value) {
  const std::string text(value.begin(), value.end());
  std::size_t used = 0;
  std::int64_t number = 0;
  try {
    number = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  paro::detail::require(used > 0 && used == text.size(), store, ": add on key '", key,
                        "', whose value is not a decimal integer; add only keys that add created");
  return number;
}

// The one message of every store's get that waited in vain.
inline std::string missing_key(const char* store, const std::string& key, double timeout_seconds,
                               const std::string& where = "") {
  return paro::detail::concat(store, ": key '", key, "' did not appear within ", timeout_seconds, " s", where,
                              " (PARO_TIMEOUT sets the limit)");
}

}  // namespace detail

// Keys are plain strings; values are bytes. get waits until the key exists, up to the store's timeout,
// then throws TimeoutError naming the key. add treats a missing key as 0 and returns the new value; its
// value is readable with get as the decimal text of the number (c10d's convention).
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key) = 0;
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
};

// An all-gather of bytes: every rank's contribution, in rank order (contributions may differ in length).
// Collective: every rank calls it the same number of times.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::vector<Bytes> all_gather(const Bytes& mine) = 0;
};

// The all-gather over a store: round k writes "<prefix>/k/<rank>" and reads every rank's key. Keys stay
// in the store (it is small, and a late reader may still need them); the prefix separates jobs or
// communicators sharing one store.
class StoreBootstrap : public Bootstrap {
 public:
  StoreBootstrap(Store& store, int rank, int size, std::string prefix = "paro")
      : store_(store), rank_(rank), size_(size), prefix_(std::move(prefix)) {
    paro::detail::require(size > 0 && rank >= 0 && rank < size, "StoreBootstrap: rank ", rank, " of size ", size,
                          "; allowed: 0 <= rank < size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<Bytes> all_gather(const Bytes& mine) override {
    const std::string round = prefix_ + "/" + std::to_string(round_++) + "/";
    store_.set(round + std::to_string(rank_), mine);
    std::vector<Bytes> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r)
      all[static_cast<std::size_t>(r)] = r == rank_ ? mine : store_.get(round + std::to_string(r));
    return all;
  }

 private:
  Store& store_;
  int rank_;
  int size_;
  std::string prefix_;
  std::uint64_t round_ = 0;
};

// A store in this process's memory, shared by the threads that play the ranks (tests, single-process runs).
class MemoryStore : public Store {
 public:
  explicit MemoryStore(double timeout_seconds = env::timeout_seconds()) : timeout_(timeout_seconds) {}
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }
  Bytes get(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool found =
        changed_.wait_for(lock, std::chrono::duration<double>(timeout_), [&] { return values_.count(key) > 0; });
    if (!found) throw TimeoutError(detail::missing_key("MemoryStore", key, timeout_));
    return values_[key];
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t value = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = values_.find(key);
      if (it != values_.end()) value = detail::counter_value("MemoryStore", key, it->second);
      value += delta;
      values_[key] = detail::counter_bytes(value);
    }
    changed_.notify_all();
    return value;
  }

 private:
  double timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> values_;
};

}  // namespace paro::bootstrap
