#pragma once
// What the nonblocking verbs return and what runs them.
//
// Request: the caller's handle on one collective: test() (complete yet?), wait() (until complete; throws
// the collective's error), wait_for(d) (at most d), error() (the failure, once complete).
//
// ProgressEngine: one per Communicator. Collectives run one at a time, in issue order: a nonblocking verb
// queues its collective for a worker thread (started at the first one), a blocking verb runs its collective
// on the calling thread once everything issued before it has finished (no thread hop, so small blocking
// calls cost what they did before nonblocking verbs existed). A worker thread rather than an explicit
// progress call, like Gloo's and torch-ucc's: paro's schedules are sequences of waits on messages, not
// state machines a caller could step, and a trainer's backward pass must not have to call back in.
//
// A failure is sticky: the collective that failed reports its error, and every collective issued after it
// (queued or later) fails without running, naming the first failure. The ranks of a communicator are out
// of step after a failure, so running later collectives would mix their messages; make a new communicator.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "paro/core/error.hpp"

namespace paro {

template <class>
class PointToPoint;

namespace detail {

struct RequestState {
  std::mutex mutex;
  std::condition_variable completed;
  bool done = false;
  std::exception_ptr error;

  void finish(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
      error = std::move(e);
    }
    completed.notify_all();
  }
};

}  // namespace detail

// A nonblocking collective's handle. Copies share the collective. The buffers given to the verb belong to
// the collective until the request is complete (test() true, or wait() returned or threw): do not read,
// write or free them before. A default-constructed Request is complete.
class Request {
 public:
  Request() = default;

  // True once the collective has completed, successfully or not; never throws.
  bool test() const {
    if (!state_) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->done;
  }

  // Returns when the collective has completed; throws its error (a paro::Error) if it failed, every time.
  void wait() const {
    if (!state_) return;
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->completed.wait(lock, [&] { return state_->done; });
    if (state_->error) std::rethrow_exception(state_->error);
  }

  // As wait(), for at most `timeout`: true when complete (throwing its error if it failed), false when the
  // time ran out first (the collective is still running, and still owns its buffers).
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    if (!state_) return true;
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (!state_->completed.wait_for(lock, timeout, [&] { return state_->done; })) return false;
    if (state_->error) std::rethrow_exception(state_->error);
    return true;
  }

  // The error of a completed collective that failed; null while running or after success.
  std::exception_ptr error() const {
    if (!state_) return nullptr;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->error;
  }

 private:
  std::shared_ptr<detail::RequestState> state_;
  explicit Request(std::shared_ptr<detail::RequestState> s) : state_(std::move(s)) {}
  friend class ProgressEngine;
  template <class>
  friend class PointToPoint;
};

class ProgressEngine {
 public:
  // on_worker_start runs first on the worker thread (a CUDA backend selects its device there).
  explicit ProgressEngine(std::function<void()> on_worker_start = {}) : on_worker_start_(std::move(on_worker_start)) {}
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Waits for every queued collective (each ends, at the latest, by its transport's timeout).
  ~ProgressEngine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  // Queues task to run on the worker thread after everything issued before it. describe() names the
  // collective in errors (called only on a failure, so that no call pays for formatting it).
  Request submit(std::function<void()> task, std::function<std::string()> describe) {
    auto state = std::make_shared<detail::RequestState>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
      queue_.push_back({state, std::move(task), std::move(describe)});
    }
    changed_.notify_all();
    return Request(state);
  }

  // Runs task on the calling thread once everything issued before it has finished; throws its error, or the
  // earlier failure that stops it from running.
  template <class Task, class Describe>
  void run_now(Task&& task, Describe&& describe) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
      if (failed_) std::rethrow_exception(earlier_failure(describe()));
      busy_ = true;
    }
    const std::exception_ptr error = attempt(task, describe);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    changed_.notify_all();
    if (error) std::rethrow_exception(error);
  }

  // Returns once everything issued so far has finished; throws the first failure, if any.
  void wait_all() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
    if (failed_) std::rethrow_exception(failed_);
  }

 private:
  struct Item {
    std::shared_ptr<detail::RequestState> state;
    std::function<void()> task;
    std::function<std::string()> describe;
  };

  std::function<void()> on_worker_start_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;  // the front is running while busy_
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failed_;  // the first failure
  std::string failed_what_;
  std::thread worker_;

  void work() {
    auto starting = [] { return std::string("the progress thread's start"); };
    if (on_worker_start_) attempt(on_worker_start_, starting);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;
      busy_ = true;
      Item& item = queue_.front();
      std::exception_ptr error;
      if (failed_) {
        error = earlier_failure(item.describe());
      } else {
        lock.unlock();
        error = attempt(item.task, item.describe);
        lock.lock();
      }
      auto state = std::move(item.state);
      queue_.pop_front();
      busy_ = false;
      lock.unlock();
      state->finish(error);  // the caller may free the buffers from here on
      changed_.notify_all();
      lock.lock();
    }
  }

  // Runs task (without the lock held); returns its failure as a paro::Error, recorded as the first failure
  // if it is one.
  template <class Task, class Describe>
  std::exception_ptr attempt(Task& task, Describe& describe) {
    try {
      task();
      return nullptr;
    } catch (...) {
      const std::exception_ptr error = as_paro_error(std::current_exception(), describe);
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failed_) {
        failed_ = error;
        failed_what_ = describe();
      }
      return error;
    }
  }

  // Why `what` does not run: the first failure, with its kind. Called with mutex_ held and failed_ set.
  std::exception_ptr earlier_failure(const std::string& what) const {
    try {
      std::rethrow_exception(failed_);
    } catch (const Error& e) {
      try {
        throw_error(e.kind(),
                    detail::concat(what, ": not run: the earlier ", failed_what_, " failed on this communicator (",
                                   e.message(), "); its ranks are out of step, make a new communicator"));
      } catch (...) {
        return std::current_exception();
      }
    }
    return failed_;  // not reached: failed_ is always a paro::Error (as_paro_error)
  }

  // Anything a collective throws reaches the caller as a paro::Error (others become BackendError).
  template <class Describe>
  static std::exception_ptr as_paro_error(std::exception_ptr e, Describe& describe) {
    try {
      std::rethrow_exception(e);
    } catch (const Error&) {
      return e;
    } catch (const std::exception& other) {
      return std::make_exception_ptr(BackendError(detail::concat(describe(), ": ", other.what())));
    } catch (...) {
      return std::make_exception_ptr(BackendError(detail::concat(describe(), ": an unknown exception")));
    }
  }
};

}  // namespace paro
