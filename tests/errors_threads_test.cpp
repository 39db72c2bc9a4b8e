// Misuse and faults on the threads backend: each is a clear paro::Error on every rank, never a hang.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::DataType;
using paro::ReduceOp;

// Runs body on n ranks and returns the error it raised (threads::run's: the root cause), if any.
template <class Body>
std::optional<paro::Error> failure_of(int n, Body body) {
  try {
    paro::threads::run(n, [&](paro::threads::Transport t) {
      paro::Communicator comm(std::move(t));
      body(comm);
    });
  } catch (const paro::Error& e) {
    return e;
  }
  return std::nullopt;
}

// The message of the error body raised on n ranks ("" if none).
template <class Body>
std::string error_of(int n, Body body) {
  const auto e = failure_of(n, std::move(body));
  return e ? e->what() : "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(Misuse, NullBufferWithElements) {
  auto msg = error_of(2, [](auto& comm) {
    float x[4] = {};
    comm.all_reduce(nullptr, x, 4, DataType::f32, ReduceOp::sum);
  });
  EXPECT_CONTAINS(msg, "all_reduce: send buffer is null but 16 bytes");
  msg = error_of(2, [](auto& comm) {
    float x[4] = {};
    comm.all_gather(x, nullptr, 4, DataType::f32);
  });
  EXPECT_CONTAINS(msg, "all_gather: recv buffer is null but 32 bytes");
}

// A count whose bytes overflow size_t is refused before anything is allocated or sent.
TEST(Misuse, CountsWhoseBytesOverflowAreRefused) {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  auto msg = error_of(2, [&](auto& comm) {
    float x = 0;
    comm.all_reduce(&x, &x, huge, DataType::f32, ReduceOp::sum);
  });
  EXPECT_CONTAINS(msg, "all_reduce: count 9223372036854775807 of float over 1 rank(s) overflows the addressable size");
  msg = error_of(3, [&](auto& comm) {
    float x = 0;
    comm.all_gather(&x, &x, std::numeric_limits<std::size_t>::max() / 8, DataType::f64);
  });
  EXPECT_CONTAINS(msg, "all_gather: count 2305843009213693951 of double over 3 rank(s) overflows");
}

TEST(Misuse, NullBuffersWithZeroCountAreFine) {
  EXPECT_EQ(error_of(3,
                     [](auto& comm) {
                       comm.all_reduce(nullptr, nullptr, 0, DataType::f64, ReduceOp::max);
                       comm.reduce_scatter(nullptr, nullptr, 0, DataType::i8, ReduceOp::sum);
                       comm.all_gather(nullptr, nullptr, 0, DataType::bf16);
                     }),
            "");
}

TEST(Misuse, UnknownTypeOrOp) {
  auto msg = error_of(1, [](auto& comm) {
    float x = 0;
    comm.all_reduce(&x, &x, 1, static_cast<DataType>(42), ReduceOp::sum);
  });
  EXPECT_CONTAINS(msg, "all_reduce: invalid DataType value 42; allowed: f32 f64 f16 bf16 i8 i32 i64 u8");
  msg = error_of(1, [](auto& comm) {
    float x = 0;
    comm.reduce_scatter(&x, &x, 1, DataType::f32, static_cast<ReduceOp>(9));
  });
  EXPECT_CONTAINS(msg, "reduce_scatter: invalid ReduceOp value 9; allowed: sum prod min max avg");
}

TEST(Misuse, NativeNeedsABackendThatHasIt) {
  auto msg = error_of(2, [](auto& comm) {
    float x = 1, y = 0;
    comm.all_reduce(&x, &y, 1, ReduceOp::sum, {Algorithm::native});
  });
  EXPECT_CONTAINS(msg, "algorithm native is not available on the threads backend; allowed here: automatic ring tree");
}

TEST(Misuse, OverlappingBuffersThatAreNotInPlace) {
  auto msg = error_of(2, [](auto& comm) {
    std::vector<float> buf(8);
    comm.all_gather(buf.data() + 1, buf.data(), 4);  // in place would be buf + rank*4
  });
  EXPECT_CONTAINS(msg, "overlap without being in place");
}

TEST(Misuse, UnknownLaneSettings) {
  setenv("PARO_LANES", "fibers", 1);
  EXPECT_CONTAINS(error_of(2, [](auto&) {}), "PARO_LANES=fibers: allowed values are auto, threads and inline");
  unsetenv("PARO_LANES");
  setenv("PARO_CC_TOGETHER", "yes", 1);
  EXPECT_CONTAINS(error_of(2, [](auto&) {}), "PARO_CC_TOGETHER");
  unsetenv("PARO_CC_TOGETHER");
}

TEST(Faults, RanksDisagreeingOnCountFailInsteadOfHanging) {
  setenv("PARO_TIMEOUT", "20", 1);
  auto msg = error_of(4, [](auto& comm) {
    std::vector<float> x(12 + (comm.rank() == 2 ? 4 : 0));
    comm.all_reduce(x.data(), x.data(), x.size(), ReduceOp::sum, {Algorithm::ring});
  });
  EXPECT_CONTAINS(msg, "message size mismatch");
  unsetenv("PARO_TIMEOUT");
}

TEST(Faults, ParoCheckNamesTheDisagreement) {
  setenv("PARO_CHECK", "1", 1);
  auto msg = error_of(3, [](auto& comm) {
    std::vector<float> x(8);
    const paro::Options tree{Algorithm::tree};
    if (comm.rank() == 1)
      comm.all_reduce(x.data(), x.data(), 8, ReduceOp::max, tree);
    else
      comm.all_reduce(x.data(), x.data(), 8, ReduceOp::sum, tree);
  });
  EXPECT_CONTAINS(msg, "PARO_CHECK: the ranks of this global call disagree: rank 0 calls all_reduce scope=global");
  EXPECT_CONTAINS(msg, "rank 1 calls all_reduce scope=global algo=tree count=8 float max");
  // A zero count on one rank would otherwise return at once there and leave the others waiting.
  msg = error_of(2, [](auto& comm) {
    std::vector<float> x(8);
    comm.all_gather(x.data(), x.data() + comm.rank() * 4, comm.rank() == 0 ? 0 : 4);
  });
  EXPECT_CONTAINS(msg, "count=0");
  // Ranks that plan paro_cc differently (pinned apart here) are named with their plans.
  msg = error_of(4, [](auto& comm) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = "nodes=2";
    config.tuning.check_signatures = true;
    config.tuning.algorithms = comm.rank() == 1 ? "allreduce:paro_cc(chunk=4K)" : "allreduce:paro_cc(chunk=8K)";
    std::decay_t<decltype(comm)> pinned(comm.transport().split(0, comm.rank()), config);
    std::vector<float> x(4096);
    pinned.all_reduce(x.data(), x.data(), x.size(), ReduceOp::sum);
  });
  EXPECT_CONTAINS(msg, "PARO_CHECK: the ranks of this global call disagree");
  EXPECT_CONTAINS(msg, "algo=paro_cc(chunk=");
  EXPECT_EQ(error_of(4,
                     [](auto& comm) {
                       std::vector<float> x(8);
                       comm.all_reduce(x.data(), x.data(), 8, ReduceOp::sum);
                     }),
            "");
  unsetenv("PARO_CHECK");
}

TEST(Faults, APeerThatNeverArrivesTimesOut) {
  setenv("PARO_TIMEOUT", "0.5", 1);
  auto msg = error_of(3, [](auto& comm) {
    if (comm.rank() == 2) return;  // this rank skips the collective
    float x = 1;
    comm.all_reduce(&x, &x, 1, ReduceOp::sum, {Algorithm::ring});
  });
  EXPECT_CONTAINS(msg, "timed out after 0.5 s");
  EXPECT_CONTAINS(msg, "PARO_TIMEOUT");
  unsetenv("PARO_TIMEOUT");
}

TEST(Faults, AFailingRankStopsTheOthersAndItsErrorIsReported) {
  std::atomic<int> stopped{0};
  try {
    paro::threads::run(4, [&](paro::threads::Transport t) {
      paro::Communicator comm(std::move(t));
      if (comm.rank() == 1) throw paro::Error("rank 1 gave up");
      try {
        float x = 1;
        comm.all_reduce(&x, &x, 1, ReduceOp::sum, {Algorithm::ring});
      } catch (const paro::Error& e) {
        if (std::string(e.what()).find("another rank failed: rank 1") != std::string::npos) ++stopped;
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const paro::Error& e) {
    EXPECT_CONTAINS(e.what(), "rank 1 gave up");
  }
  EXPECT_EQ(stopped.load(), 3);
}

// Each kind of error is raised where it should be, so that a trainer can tell a mistake (fix the call)
// from a stuck or failed peer (restart the job) without reading messages.
TEST(ErrorKinds, UsageTimeoutAndPeerFailure) {
  auto kind_of = [](int n, auto body) {
    const auto e = failure_of(n, std::move(body));
    EXPECT_TRUE(e.has_value()) << "no error";
    return e ? e->kind() : paro::ErrorKind::backend;
  };
  EXPECT_EQ(kind_of(2, [](auto& comm) { comm.all_reduce(nullptr, nullptr, 4, DataType::f32, ReduceOp::sum); }),
            paro::ErrorKind::usage);
  EXPECT_THROW(paro::parse_scope("world"), paro::UsageError);
  EXPECT_THROW(paro::AlgorithmOverrides::parse("allreduce:fast"), paro::UsageError);

  setenv("PARO_TIMEOUT", "0.3", 1);
  std::atomic<int> timeouts{0}, stopped{0};
  const auto root = kind_of(3, [&](auto& comm) {
    if (comm.rank() == 2) return;  // never enters the collective
    float x = 1;
    try {
      comm.all_reduce(&x, &x, 1, ReduceOp::sum, {Algorithm::ring});
    } catch (const paro::TimeoutError&) {
      ++timeouts;
      throw;
    } catch (const paro::PeerFailure&) {
      ++stopped;  // the rank that did not time out first is stopped by the one that did
      throw;
    }
  });
  unsetenv("PARO_TIMEOUT");
  EXPECT_EQ(root, paro::ErrorKind::timeout) << "the root cause is reported";
  EXPECT_GE(timeouts.load(), 1);
  EXPECT_EQ(timeouts.load() + stopped.load(), 2) << "both waiting ranks raise a timeout or a peer failure";

  std::atomic<int> peer_failures{0};
  kind_of(4, [&](auto& comm) {
    if (comm.rank() == 0) throw paro::UsageError("rank 0 gave up");
    float x = 1;
    try {
      comm.all_reduce(&x, &x, 1, ReduceOp::sum, {Algorithm::ring});
    } catch (const paro::PeerFailure& e) {
      if (e.message().find("rank 0 gave up") != std::string::npos) ++peer_failures;
      throw;
    }
  });
  EXPECT_EQ(peer_failures.load(), 3);
}

TEST(ErrorKinds, ContextKeepsTheKind) {
  try {
    paro::rethrow_with_context(paro::TimeoutError("waiting for rank 3"), "all_reduce: ");
  } catch (const paro::TimeoutError& e) {
    EXPECT_EQ(e.message(), "all_reduce: waiting for rank 3");
    EXPECT_EQ(std::string(e.what()), "paro: all_reduce: waiting for rank 3");
    return;
  }
  ADD_FAILURE() << "the kind was lost";
}

TEST(Split, ColorsKeysAndEmptyMembers) {
  auto failures = paro::testing::on_threads(7, [](auto& comm) {
    std::vector<std::string> f;
    const int r = comm.rank();
    // Colour by parity, reversed order by key; rank 6 stays out (negative colour).
    auto sub = comm.transport().split(r == 6 ? -1 : r % 2, -r);
    if (r == 6) {
      if (sub.size() != 0) f.push_back("rank 6 should get an empty communicator");
      return f;
    }
    const int expected_size = r % 2 == 0 ? 3 : 3;
    const int expected_rank = r % 2 == 0 ? (4 - r) / 2 : (5 - r) / 2;
    if (sub.size() != expected_size || sub.rank() != expected_rank)
      f.push_back(paro::detail::concat("rank ", r, ": sub rank ", sub.rank(), "/", sub.size()));
    paro::Communicator subcomm(std::move(sub));
    std::int32_t x = r, sum = 0;
    subcomm.all_reduce(&x, &sum, 1, ReduceOp::sum);
    if (sum != (r % 2 == 0 ? 0 + 2 + 4 : 1 + 3 + 5)) f.push_back(paro::detail::concat("rank ", r, ": sum ", sum));
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

}  // namespace
