// The recording transport's own rules (transport/recording.hpp): what NCCL would do differently from the
// threads backend, shown on schedules that pass there. The collective, hierarchical and nonblocking
// bodies that paro-tests-recorded also runs are the threads tests' (threads_harness.hpp: TestLauncher).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "paro/algorithms/ring.hpp"
#include "threads_harness.hpp"

namespace {

using paro::testing::error_of;
using paro::tools::HostThreads;
using paro::tools::RecordedThreads;

// Rank r's block of a 4-rank all-gather holds r + 1; returns what rank 0 ends with.
template <class Launcher>
std::string ring_all_gather_with_window(std::size_t window) {
  return error_of([&] {
    Launcher::run(4, [&](auto t) {
      constexpr std::size_t count = 64;
      std::vector<float> buf(4 * count, 0.0f);
      for (std::size_t i = 0; i < count; ++i) buf[static_cast<std::size_t>(t.rank()) * count + i] = t.rank() + 1.0f;
      paro::algorithms::RingParams whole_blocks{std::numeric_limits<std::size_t>::max(), window};
      paro::algorithms::ring_all_gather(t, buf.data(), paro::algorithms::BlockLayout::uniform(4, count),
                                        paro::DataType::f32, whole_blocks);
      for (std::size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != static_cast<float>(i / count + 1)) throw paro::UsageError("wrong element");
    });
  });
}

// A ring that posts the next step's receive ahead of the current one: fine with MPI's matching, but an NCCL
// group that holds it cannot complete until the left neighbour forwards a block it has not received yet.
// This is why stepwise transports run rings with a window of one.
TEST(Recording, AReceiveWindowAheadOfTheStepTimesOut) {
  EXPECT_EQ(ring_all_gather_with_window<HostThreads>(2), "(no error)");
  EXPECT_EQ(ring_all_gather_with_window<RecordedThreads>(1), "(no error)");
  const char* before = std::getenv("PARO_TIMEOUT");
  const std::string saved = before ? before : "";
  setenv("PARO_TIMEOUT", "2", 1);
  const std::string error = ring_all_gather_with_window<RecordedThreads>(2);
  if (before)
    setenv("PARO_TIMEOUT", saved.c_str(), 1);
  else
    unsetenv("PARO_TIMEOUT");
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
}

// NCCL has no tags: a receiver that takes tag 2 before tag 1 gets the first message sent.
TEST(Recording, TagsDoNotReorderMessages) {
  auto exchange = [](auto& t) {
    int small = 1;
    double large = 2.0;
    if (t.rank() == 0) {
      auto a = t.isend(&small, sizeof small, 1, 1);
      auto b = t.isend(&large, sizeof large, 1, 2);
      t.wait(a);
      t.wait(b);
    } else {
      auto b = t.irecv(&large, sizeof large, 0, 2);
      auto a = t.irecv(&small, sizeof small, 0, 1);
      t.wait(b);
      t.wait(a);
    }
  };
  EXPECT_EQ(error_of([&] { HostThreads::run(2, [&](auto t) { exchange(t); }); }), "(no error)");
  const std::string error = error_of([&] { RecordedThreads::run(2, [&](auto t) { exchange(t); }); });
  EXPECT_NE(error.find("message size mismatch"), std::string::npos) << error;
}

// Waiting for one message of a group waits for the whole group: here for a receive that rank 1 sends only
// after rank 0's send has arrived, so the send's wait does not return before that.
TEST(Recording, AGroupCompletesAsAWhole) {
  RecordedThreads::run(2, [](auto t) {
    int out = 7, in = 0;
    if (t.rank() == 0) {
      auto s = t.isend(&out, sizeof out, 1, 0);
      auto q = t.irecv(&in, sizeof in, 1, 0);
      t.wait(s);
      EXPECT_EQ(in, 8);  // the receive of the same group has completed too
      t.wait(q);
    } else {
      auto q = t.irecv(&in, sizeof in, 0, 0);
      t.wait(q);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      int reply = in + 1;
      auto s = t.isend(&reply, sizeof reply, 0, 0);
      t.wait(s);
    }
  });
}

// ncclCommSplit must not run with messages outstanding: split completes them first.
TEST(Recording, SplitCompletesOutstandingMessages) {
  RecordedThreads::run(2, [](auto t) {
    int value = t.rank() == 0 ? 42 : 0;
    auto r = t.rank() == 0 ? t.isend(&value, sizeof value, 1, 0) : t.irecv(&value, sizeof value, 0, 0);
    auto sub = t.split(0, t.rank());
    EXPECT_EQ(value, 42);
    EXPECT_EQ(sub.size(), 2);
    t.wait(r);
  });
}

// One thread per GPU: a second thread entering a rank's communicators while the first waits is an error.
TEST(Recording, TwoThreadsOnOneRankIsAnError) {
  std::atomic<bool> helper_waiting{false}, tried{false};
  RecordedThreads::run(2, [&](auto t) {
    auto sub = t.split(0, t.rank());
    int x = 0;
    if (t.rank() == 0) {
      std::thread helper([&] {
        auto q = sub.irecv(&x, sizeof x, 1, 0);
        helper_waiting = true;
        sub.wait(q);  // until rank 1 sends, after the attempt below
      });
      while (!helper_waiting) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the helper is inside wait by now
      const std::string error = error_of([&] { t.issue(); });
      tried = true;
      helper.join();
      EXPECT_NE(error.find("two threads drove one rank's communicators at once"), std::string::npos) << error;
    } else {
      while (!tried) std::this_thread::yield();
      auto s = sub.isend(&x, sizeof x, 0, 0);
      sub.wait(s);
    }
  });
}

}  // namespace
