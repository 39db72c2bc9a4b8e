#pragma once
// Completion: every collective is issued with paro's nonblocking verbs, which run one at a time in issue
// order on the communicator's progress thread. A completion thread (Completer) waits for them in the same
// order, copies results out where a staging buffer was needed, and completes the Work. The Work's future is
// marked on torch's inter-op pool, so that a future's callback may itself wait on another collective of
// this group (PowerSGD-style hooks do) without holding up the completion of that collective.

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/Parallel.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "paro/communicator/communicator.hpp"

namespace paro::torch_backend {

// Future completions launched on torch's inter-op pool that have not yet dropped their references. Such a
// task may hold the last reference to a Work's future and tensors; released while Python finalizes, a
// tensor's Python object would take the GIL, which kills a non-main thread there mid-unwind (SIGABRT).
// Python's exit therefore waits for them (wait_until_idle, registered with atexit by paro_torch).
class CompletionsInFlight {
 public:
  static CompletionsInFlight& instance() {
    static CompletionsInFlight* const it = new CompletionsInFlight;  // never destroyed: pool threads may outlive exit
    return *it;
  }
  void begin() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --count_;
    }
    idle_.notify_all();
  }
  // Returns the number still running after at most `limit` (0: all done).
  int wait_until_idle(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait_for(lock, limit, [&] { return count_ == 0; });
    return count_;
  }

  // Ends one begun completion when it goes out of scope, after whatever the task declared later.
  struct Ending {
    Ending() = default;
    Ending(const Ending&) = delete;
    Ending& operator=(const Ending&) = delete;
    ~Ending() { instance().end(); }
  };

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  int count_ = 0;
};

class Work : public c10d::Work {
 public:
  Work(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type, title),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !error_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // Blocks until the collective completed (paro's PARO_TIMEOUT ends a collective whose peer is gone), or
  // for at most `timeout`; throws the collective's error.
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == ::kNoTimeout)
      done_.wait(lock, [&] { return completed_; });
    else
      TORCH_CHECK(done_.wait_for(lock, timeout, [&] { return completed_; }), "paro backend: the collective did not ",
                  "complete within ", timeout.count(), " ms");
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called once by the completion thread when the results are in place (or the collective failed).
  void complete(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_ = true;
      error_ = error;
    }
    done_.notify_all();
    CompletionsInFlight::instance().begin();
    at::launch([future = future_, outputs = outputs_, error]() mutable {
      const CompletionsInFlight::Ending ending;  // destroyed last: after the references below are dropped
      auto completing = std::move(future);
      auto results = std::move(outputs);
      if (error)
        completing->setError(error);
      else
        completing->markCompleted(c10::IValue(results));
    });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Completes Works on a thread of its own, in issue order: paro runs a communicator's collectives in issue
// order, so waiting for them in that order never waits behind one that could finish sooner. The queue
// outlives its Completer where the Completer is destroyed on that very thread: a Work's future may hold the
// last reference to its process group (a Python callback that captured it), and this thread may drop the
// last reference to the future, destroying the Backend here.
class Completer {
 public:
  // One paro request of a Work, and what runs once it completed (copy a staging buffer out; the closure
  // also keeps the buffers alive until then).
  struct Step {
    Request request;
    std::function<void()> after;
  };

  Completer() : queue_(std::make_shared<Queue>()) {
    thread_ = std::thread([queue = queue_] { queue->run(); });
  }
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  // Completes what was added (each collective ends by PARO_TIMEOUT at the latest).
  ~Completer() {
    queue_->stop();
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();  // run() finishes the queue and returns
    else
      thread_.join();
  }

  void add(c10::intrusive_ptr<Work> work, std::vector<Step> steps) {
    queue_->push({std::move(work), std::move(steps)});
  }

 private:
  struct Pending {
    c10::intrusive_ptr<Work> work;
    std::vector<Step> steps;
  };

  struct Queue {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Pending> pending;
    bool stopping = false;

    void push(Pending p) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        pending.push_back(std::move(p));
      }
      changed.notify_all();
    }
    void stop() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      changed.notify_all();
    }
    void run() {
      for (;;) {
        Pending next;
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return stopping || !pending.empty(); });
          if (pending.empty()) return;
          next = std::move(pending.front());
          pending.pop_front();
        }
        std::exception_ptr error;
        for (Step& s : next.steps) {
          try {
            s.request.wait();
            if (!error && s.after) s.after();
          } catch (...) {
            if (!error) error = as_torch_error(std::current_exception());
          }
        }
        next.work->complete(error);
      }
    }
  };

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
};

}  // namespace paro::torch_backend
