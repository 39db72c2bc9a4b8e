// A collective added without changing paro: an inclusive scan (rank r receives the reduction of ranks
// 0..r), described in this file with an algorithm that runs it, registered with one line, then run
// through Communicator::collective, PARO_ALGO, the automatic choice and the checkers like a built-in one.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "paro/testing/nonblocking_check.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::algorithms::Call;
using paro::algorithms::CostModel;
using paro::algorithms::CostShape;
using paro::algorithms::Prediction;

struct Scan {
  static constexpr Collective id = Collective{100};
  static constexpr const char* name = "scan";
  static constexpr const char* aliases = "prefix_sum inclusive_scan";
  static constexpr bool reduces = true;
  static constexpr const char* in_place = "send == recv";
  static paro::BufferShape shape(std::size_t count, int, int) { return {count, count, count, 0, 0, 0}; }
  static paro::algorithms::Source source(std::size_t i, std::size_t, int rank, int) { return {0, rank, i}; }
  static double bus_factor(int) { return 1; }  // the last rank's result crosses one link per rank before it
  // The last rank must receive the whole buffer, through its node's NIC where rank 0 is elsewhere.
  static paro::algorithms::MinimumTraffic traffic() {
    return {[](int ranks) { return ranks > 1 ? 1.0 : 0.0; }, [](int, int units, int) { return units > 1 ? 1.0 : 0.0; }};
  }
  template <class A, class Ctx>
  using Schedule = decltype(&A::template scan<Ctx>);
  template <class A, class Ctx>
  static void run(Ctx& x, const Call& c) {
    A::scan(x, c);
  }
};

// A chain: rank r waits for the partial result of ranks 0..r-1, adds its own and passes it on; avg sums
// along the chain and each rank divides its own result by its number of terms.
struct ChainScan {
  static constexpr Algorithm id = Algorithm{101};
  static constexpr const char* name = "chain_scan";
  static constexpr paro::algorithms::Family family = paro::algorithms::Family::flat;
  static Prediction predict(const CostModel& m, Collective, double N, const CostShape& s) {
    const auto h = m.flat_link(s);
    return {(s.ranks - 1) * (h.alpha + N * h.beta + m.reduce_us(N))};
  }
  template <class Ctx>
  static void scan(Ctx& x, const Call& c) {
    auto& t = x.comm();
    const std::size_t bytes = c.count * paro::size_of(c.dt);
    const paro::ReduceOp combine = c.op == paro::ReduceOp::avg ? paro::ReduceOp::sum : c.op;
    if (c.send != c.recv) t.copy(c.recv, c.send, bytes);
    if (t.rank() > 0) {
      auto before = t.allocate(bytes);
      auto r = t.irecv(before.data(), bytes, t.rank() - 1, tag);
      t.wait(r);
      t.reduce(c.recv, before.data(), c.recv, c.count, c.dt, combine);
    }
    if (t.rank() + 1 < t.size()) {
      auto s = t.isend(c.recv, bytes, t.rank() + 1, tag);
      t.wait(s);
    }
    if (c.op == paro::ReduceOp::avg) t.divide(c.recv, c.count, c.dt, t.rank() + 1);
  }
  static constexpr int tag = 0x7e02;
};

using WithScan = paro::algorithms::BuiltinAlgorithms::with<ChainScan>::with_collectives<Scan>;  // the registration

template <class Body>
std::vector<std::string> on_ranks(int n, Body body) {
  return paro::testing::joined(paro::tools::on_thread_ranks(n, [&](paro::threads::Transport& t) {
    paro::Communicator<paro::threads::Transport, WithScan> comm(std::move(t));
    return body(comm);
  }));
}

TEST(CollectiveExtension, RunsAndChecksExactlyAtEveryRankCount) {
  for (int n : {1, 2, 3, 5, 8}) {
    auto failures = on_ranks(n, [](auto& comm) {
      auto f = paro::testing::run_matrix(comm, Scan::id, ChainScan::id, {0, 1, 7, 1000});
      auto automatic = paro::testing::run_matrix(comm, Scan::id, Algorithm::automatic, {5});
      f.insert(f.end(), automatic.begin(), automatic.end());
      return f;
    });
    EXPECT_TRUE(failures.empty()) << n << " ranks:\n" << paro::testing::first_lines(failures);
  }
}

TEST(CollectiveExtension, NamedInParoAlgoAndMessagesAndTheCostModel) {
  using Collectives = WithScan::Collectives;
  EXPECT_EQ(Collectives::parse("Prefix-Sum"), Scan::id);
  EXPECT_EQ(Collectives::names(), "all_reduce all_gather reduce_scatter all_to_all scan");
  const std::string unknown = paro::testing::error_of([] { Collectives::parse("gather"); });
  EXPECT_NE(unknown.find("unknown collective 'gather'; allowed: all_reduce all_gather reduce_scatter all_to_all scan"),
            std::string::npos)
      << unknown;
  EXPECT_TRUE(WithScan::implements(ChainScan::id, Scan::id));
  EXPECT_FALSE(WithScan::implements(Algorithm::ring, Scan::id));
  EXPECT_FALSE(WithScan::implements(ChainScan::id, Collective::all_reduce));

  setenv("PARO_ALGO", "scan:chain_scan", 1);
  auto failures = on_ranks(3, [](auto& comm) {
    std::vector<std::string> f;
    if (comm.resolve(Scan::id, 1 << 20) != ChainScan::id) f.push_back("PARO_ALGO not applied");
    if (comm.pin(Scan::id, 1 << 20) != "scan:chain_scan") f.push_back("pin " + comm.pin(Scan::id, 1 << 20));
    if (!(comm.lower_bound_us(Scan::id, 1 << 20) > 0)) f.push_back("no lower bound");
    std::vector<float> x(4, static_cast<float>(comm.rank() + 1)), y(4);
    comm.collective(Scan::id, x.data(), y.data(), 4, paro::DataType::f32, paro::ReduceOp::sum);
    const float want = static_cast<float>((comm.rank() + 1) * (comm.rank() + 2) / 2);
    if (y[3] != want) f.push_back(paro::detail::concat("rank ", comm.rank(), ": ", y[3], " want ", want));
    return f;
  });
  unsetenv("PARO_ALGO");
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);

  const std::string msg = paro::testing::error_of([] {
    on_ranks(2, [](auto& comm) {
      float x = 1, y = 0;
      comm.collective(Scan::id, &x, &y, 1, paro::DataType::f32, paro::ReduceOp::sum, {Algorithm::ring});
      return std::vector<std::string>{};
    });
  });
  EXPECT_NE(msg.find("scan: algorithm ring has no scan schedule; allowed: automatic chain_scan"), std::string::npos)
      << msg;
}

TEST(CollectiveExtension, BuiltInCommunicatorsRejectIt) {
  const std::string msg = paro::testing::error_of([] {
    paro::testing::joined(paro::tools::on_thread_ranks(2, [](paro::threads::Transport& t) {
      paro::Communicator<paro::threads::Transport> comm(std::move(t));
      float x = 1, y = 0;
      comm.collective(Scan::id, &x, &y, 1, paro::DataType::f32, paro::ReduceOp::sum);
      return std::vector<std::string>{};
    }));
  });
  EXPECT_NE(msg.find("invalid Collective value 100; allowed: all_reduce all_gather reduce_scatter"), std::string::npos)
      << msg;
}

TEST(CollectiveExtension, NonblockingAlongsideTheBuiltIns) {
  for (int n : {2, 4}) {
    auto failures = on_ranks(n, [](auto& comm) {
      std::vector<std::string> f;
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        auto more = paro::testing::check_nonblocking(comm, seed);
        f.insert(f.end(), more.begin(), more.end());
      }
      return f;
    });
    EXPECT_TRUE(failures.empty()) << n << " ranks:\n" << paro::testing::first_lines(failures);
  }
}

}  // namespace
