#pragma once
// Lanes: how the CPU executor overlaps the levels of a hierarchical schedule. Each lane is the sequence of
// steps one level runs (intra-group, rail, ...), written as plain blocking code on its own
// sub-communicator; the lanes of one call run at once on their own threads and hand work to each other
// through Progress counters.
//
// Where the backend cannot be driven from several threads at once, the lanes run one after the other in
// the order given, which must therefore be a dependency order; results are the same, only the overlap is lost.
//
// Lane threads are kept between calls (LaneWorkers): starting threads per call would cost more than a
// small collective.

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "paro/core/activity.hpp"
#include "paro/core/error.hpp"

namespace paro::algorithms {

// A count of finished items that one lane publishes and another waits on. A lane that fails poisons
// it, so that its consumers stop with an error instead of waiting for ever.
class Progress {
 public:
  void advance() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
    }
    cv_.notify_all();
  }

  void poison() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      poisoned_ = true;
    }
    cv_.notify_all();
  }

  // Blocks until at least `count` items are done.
  void wait_for(std::size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_ >= count || poisoned_; });
    if (done_ < count) throw PeerFailure("stopped because another lane of this collective failed");
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t done_ = 0;
  bool poisoned_ = false;
};

// Threads that run lanes, kept for the life of the process; a call takes idle ones or adds new ones.
class LaneWorkers {
 public:
  static LaneWorkers& instance() {
    static LaneWorkers workers;
    return workers;
  }

  // Runs task on an idle worker; done() is called on that worker when it returns (task must not throw).
  void start(std::function<void()> task) {
    Worker* w = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_.empty()) {
        all_.push_back(std::make_unique<Worker>());
        Worker* fresh = all_.back().get();
        fresh->thread = std::thread([this, fresh] { loop(*fresh); });
        idle_.push_back(fresh);
      }
      w = idle_.back();
      idle_.pop_back();
    }
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->task = std::move(task);
    }
    w->cv.notify_one();
  }

  ~LaneWorkers() {
    for (auto& w : all_) {
      {
        std::lock_guard<std::mutex> lock(w->mutex);
        w->stop = true;
      }
      w->cv.notify_one();
      w->thread.join();
    }
  }

 private:
  struct Worker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable cv;
    std::function<void()> task;
    bool stop = false;
  };

  std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> all_;
  std::vector<Worker*> idle_;

  void loop(Worker& w) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(w.mutex);
        w.cv.wait(lock, [&] { return w.stop || w.task; });
        if (!w.task) return;
        task = std::move(w.task);
        w.task = nullptr;
      }
      task();
      // Only now: a worker handed a task while busy would hold it back behind a lane it may depend on.
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(&w);
    }
  }
};

// Runs the lanes (callables taking no arguments) and returns when all are done. On failure every Progress
// in `links` is poisoned and the first error is rethrown (the root cause, not a consumer's "stopped").
template <class... Lanes>
void run_lanes(bool concurrent, std::vector<Progress*> links, Lanes&&... lanes) {
  constexpr std::size_t count = sizeof...(Lanes);
  std::exception_ptr errors[count];
  std::size_t first_failure = count;
  std::mutex failure_mutex;
  std::size_t index = 0;
  auto guarded = [&](std::size_t i, auto& lane) {
    if (!concurrent && first_failure != count) return;  // one after the other: stop at the first failure
    try {
      lane();
    } catch (...) {
      errors[i] = std::current_exception();
      {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (first_failure == count) first_failure = i;
      }
      for (Progress* p : links) p->poison();
    }
  };
  if (!concurrent) {
    (guarded(index++, lanes), ...);
  } else {
    // All but the last lane go to workers; the last runs on the calling thread.
    std::mutex done_mutex;
    std::condition_variable done_cv;
    std::size_t running = 0;
    const activity::Collective caller = activity::current().collective;  // for the lanes' errors
    auto launch = [&](auto& lane) {
      const std::size_t i = index++;
      if (i + 1 == count) return guarded(i, lane);
      {
        std::lock_guard<std::mutex> lock(done_mutex);
        ++running;
      }
      LaneWorkers::instance().start([&, i] {
        {
          activity::CollectiveScope scope(caller);
          guarded(i, lane);
        }
        std::lock_guard<std::mutex> lock(done_mutex);
        if (--running == 0) done_cv.notify_all();
      });
    };
    (launch(lanes), ...);
    std::unique_lock<std::mutex> lock(done_mutex);
    done_cv.wait(lock, [&] { return running == 0; });
  }
  if (first_failure < count) std::rethrow_exception(errors[first_failure]);
}

}  // namespace paro::algorithms
