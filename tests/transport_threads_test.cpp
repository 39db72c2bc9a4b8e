// The Transport concept at compile time, and the transport conformance suite (paro/testing/
// transport_check.hpp) on the threads backend at 1 to 8 ranks and through the paced decorator on emulated
// clusters. tests/collectives_mpi_test.cpp runs the same body on mpi, tests/gpu_test.cu on device memory
// and nccl.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_transport.hpp"
#include "paro/testing/transport_check.hpp"
#include "paro/transport/paced.hpp"
#include "threads_harness.hpp"

namespace {

using Paced = paro::paced::Transport<paro::threads::Transport>;
using paro::testing::FakeTransport;

static_assert(paro::is_transport_v<FakeTransport<true>>);
static_assert(paro::check_transport<FakeTransport<true>>());
// Without wait(Request&): rejected (and check_transport names `wait`: the test transport_missing_wait).
static_assert(!paro::is_transport_v<FakeTransport<false>>);
static_assert(!paro::is_transport_v<int>);

static_assert(paro::check_transport<paro::threads::Transport>());
static_assert(paro::check_transport<Paced>());
// The decorator keeps its inner transport's memory space and traits.
static_assert(paro::is_host_memory_v<Paced>);
static_assert(!paro::is_stepwise_v<Paced>);

std::vector<std::string> conformance(paro::threads::Transport t) {
  return paro::testing::check_transport_conformance(t);
}

class ThreadsTransport : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsTransport, Conformance) {
  auto failures = paro::testing::on_transports(GetParam(), conformance);
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadsTransport, ::testing::Range(1, 9));

// Paced links between nodes and inside them, uneven nodes, and no link keys at all (messages pass
// straight through).
class PacedThreadsTransport : public ::testing::TestWithParam<std::string> {};

TEST_P(PacedThreadsTransport, Conformance) {
  const auto spec = paro::topology::EmulationSpec::parse(GetParam());
  auto failures = paro::testing::on_transports(spec.rank_count().value(), [&](paro::threads::Transport t) {
    Paced paced = Paced::wrap(std::move(t), spec);
    return paro::testing::check_transport_conformance(paced);
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, PacedThreadsTransport,
                         ::testing::Values("nodes=2,ranks=2,intra_gbps=8000,inter_gbps=800,inter_us=5",
                                           "nodes=2,ranks=2:3,inter_gbps=800,nic=shared", "nodes=1,ranks=3"));

}  // namespace
