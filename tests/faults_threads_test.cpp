// Injected faults (transport/faults.hpp) on every algorithm, under the checksum transport
// (transport/checksum.hpp), on an emulated 2 x 3 cluster of thread ranks: every fault but a short delay
// becomes an error on every rank within the timeout, never a hang or a wrong result; a delay shorter
// than the timeout changes nothing. Without checksums a corrupted byte goes unseen, which is what the
// checksum transport is for. Also runs under TSan (scripts/test.sh).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "paro/testing/transport_check.hpp"
#include "paro/transport/checksum.hpp"
#include "paro/transport/faults.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::faults::FaultKind;
using paro::faults::FaultSpec;
using Wire = paro::faults::Transport<paro::threads::Transport>;
using Checked = paro::checksum::Transport<Wire>;

static_assert(paro::check_transport<Wire>() && paro::check_transport<Checked>());
static_assert(paro::is_host_memory_v<Checked> && !paro::is_stepwise_v<Checked>);

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

constexpr int ranks = 6;        // nodes=2: two nodes of three
constexpr int faulty_rank = 4;  // on the second node, not a leader
constexpr std::size_t count = 1000;
constexpr double timeout_s = 3;  // PARO_TIMEOUT, with room for TSan's slowdown in the clean runs

// Rank r's input element j is (r + 1) * 1000 + j, so that every output element has one exact value.
std::int32_t input(int r, std::size_t j) { return static_cast<std::int32_t>((r + 1) * 1000 + j); }

std::int32_t expected(Collective c, int me, std::size_t i) {
  std::int32_t sum = 0;
  switch (c) {
    case Collective::all_reduce:
      for (int r = 0; r < ranks; ++r) sum += input(r, i);
      return sum;
    case Collective::all_gather: return input(static_cast<int>(i / count), i);
    case Collective::reduce_scatter:
      for (int r = 0; r < ranks; ++r) sum += input(r, static_cast<std::size_t>(me) * count + i);
      return sum;
    case Collective::all_to_all:
      return input(static_cast<int>(i / count), static_cast<std::size_t>(me) * count + i % count);
  }
  return 0;
}

// Runs c with algorithm a, out of place, and says whether this rank's result is exact.
template <class Comm>
bool run_and_check(Comm& comm, Collective c, Algorithm a) {
  const auto shape = paro::buffer_shape(c, count, comm.size(), comm.rank());
  std::vector<std::int32_t> in(shape.in), out(shape.out, -1);
  for (std::size_t j = 0; j < in.size(); ++j) in[j] = input(comm.rank(), shape.first_input + j);
  comm.collective(c, in.data(), out.data(), count, paro::DataType::i32, paro::ReduceOp::sum, {a});
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i] != expected(c, comm.rank(), i)) return false;
  return true;
}

Wire& wire_of(Wire& t) { return t; }
Wire& wire_of(Checked& t) { return t.inner(); }

struct Outcome {
  std::string error;   // the first error of the faulty collective or the barrier after it; "" for none
  bool wrong = false;  // the collective returned a wrong result without an error
  double seconds = 0;  // from the faulty collective's start to this rank's error or success
  long sent = 0;       // the faulty rank: its messages in the faulty run
  long hit = 0;        // the faulty rank: which of them the fault hit
};

// On every rank: a clean run of c (it builds the scopes' communicators and counts the faulty rank's
// messages), a barrier, then the same run with `kind` on the middle one of those messages, then a
// barrier, which a rank whose part of the collective finished before the fault took effect fails in.
template <class MakeTransport>
std::vector<Outcome> run_with_fault(FaultKind kind, Collective c, Algorithm a, MakeTransport make_transport) {
  const std::optional<std::string> saved = paro::env::get("PARO_TIMEOUT");
  setenv("PARO_TIMEOUT", paro::detail::concat(timeout_s).c_str(), 1);
  paro::CommunicatorConfig config;
  config.discovery.emulate = "nodes=2";
  auto outcomes = paro::tools::run_on_thread_ranks(
      ranks, config,
      [&](auto& comm) {
        Outcome o;
        Wire& wire = wire_of(comm.transport());
        FaultSpec fault;
        fault.kind = kind;
        fault.rank = faulty_rank;
        fault.message = 1L << 40;  // counts, never hits
        fault.delay_ms = kind == FaultKind::delay ? 200 : 0;
        wire.inject(fault);
        if (!run_and_check(comm, c, a)) o.error = "the clean run was wrong";
        const long clean_messages = wire.sent();
        // Every rank finishes the clean run before any starts the faulty one: a fault's error stops the
        // whole threads world, and must not reach a rank still in the clean run, outside its try.
        comm.barrier();
        fault.message = std::max(1L, (clean_messages + 1) / 2);
        o.hit = fault.message;
        wire.inject(fault);
        const auto start = std::chrono::steady_clock::now();
        try {
          o.wrong = !run_and_check(comm, c, a);
          comm.barrier();
        } catch (const paro::Error& e) {
          o.error = e.what();
        }
        o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        o.sent = wire.sent();
        return o;
      },
      make_transport);
  if (saved)
    setenv("PARO_TIMEOUT", saved->c_str(), 1);
  else
    unsetenv("PARO_TIMEOUT");
  return outcomes;
}

Checked checked_wire(paro::threads::Transport& t) { return Checked(Wire(std::move(t), std::nullopt)); }
Wire bare_wire(paro::threads::Transport& t) { return Wire(std::move(t), std::nullopt); }

constexpr Algorithm algorithms[] = {Algorithm::ring, Algorithm::tree, Algorithm::mics_hcs, Algorithm::paro_seq,
                                    Algorithm::paro_cc};
constexpr Collective collectives[] = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter};

class InjectedFault : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Every (kind, algorithm) pair; the collective rotates so that every kind meets every collective too.
TEST_P(InjectedFault, BecomesAnErrorOnEveryRankWithinTheTimeout) {
  const auto [k, a] = GetParam();
  const FaultKind kind = paro::faults::all_fault_kinds[k];
  const Algorithm algorithm = algorithms[a];
  const Collective c = collectives[(k + a) % 3];
  SCOPED_TRACE(
      paro::detail::concat(paro::faults::name_of(kind), " on ", paro::name_of(c), " ", paro::name_of(algorithm)));
  const auto outcomes = run_with_fault(kind, c, algorithm, checked_wire);
  ASSERT_GE(outcomes[faulty_rank].sent, outcomes[faulty_rank].hit) << "the fault never took effect";
  for (int r = 0; r < ranks; ++r) {
    const Outcome& o = outcomes[static_cast<std::size_t>(r)];
    SCOPED_TRACE(paro::detail::concat("rank ", r));
    EXPECT_FALSE(o.wrong) << "a wrong result without an error";
    EXPECT_LT(o.seconds, 3 * timeout_s + 2) << "slower than the timeout allows";
    switch (kind) {
      case FaultKind::delay: EXPECT_EQ(o.error, "") << "a delay within the timeout is harmless"; break;
      case FaultKind::corrupt: EXPECT_CONTAINS(o.error, "(checksum transport)"); break;
      // Lost or doubled messages show as a size mismatch or a checksum's sequence error where the channel's next
      // message arrives in their place, else as a timeout.
      case FaultKind::drop:
      case FaultKind::duplicate: EXPECT_NE(o.error, "") << "the fault went unnoticed"; break;
      case FaultKind::fail:
        EXPECT_CONTAINS(o.error, "timed out after 3 s");
        EXPECT_CONTAINS(o.error, "; during ");  // what was waiting (TimeoutSaysWhatWaitedOnWhom)
        break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KindsAndAlgorithms, InjectedFault,
                         ::testing::Combine(::testing::Range(0, 5), ::testing::Range(0, 5)), [](const auto& info) {
                           return paro::detail::concat(
                               paro::faults::name_of(paro::faults::all_fault_kinds[std::get<0>(info.param)]), "_",
                               paro::name_of(algorithms[std::get<1>(info.param)]));
                         });

// The reason for the checksum transport: the same corruption, without it, is a silent wrong result.
TEST(InjectedFault, CorruptionWithoutChecksumsIsSilent) {
  const auto outcomes = run_with_fault(FaultKind::corrupt, Collective::all_reduce, Algorithm::ring, bare_wire);
  int wrong = 0;
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.error, "");
    wrong += o.wrong;
  }
  EXPECT_GE(wrong, 1) << "the corrupted byte changed no result";
}

// The first line of a hung job's log names the collective, the level, the phase and step, and the world
// ranks of the waiting rank and of its peer.
TEST(InjectedFault, TimeoutSaysWhatWaitedOnWhom) {
  const auto outcomes = run_with_fault(FaultKind::fail, Collective::all_reduce, Algorithm::mics_hcs, bare_wire);
  for (const Outcome& o : outcomes) {
    EXPECT_CONTAINS(o.error, "timed out after 3 s waiting for a message from rank ");
    EXPECT_CONTAINS(o.error, "; during all_reduce mics_hcs global count=1000 int32 sum, the ");
    EXPECT_CONTAINS(o.error, " step ");
    EXPECT_CONTAINS(o.error, "(world rank ");
    EXPECT_CONTAINS(o.error, "on tag 82 (ring)");
  }
}

// Both decorators keep the transport's contract when no fault is armed.
TEST(InjectedFault, DecoratorsPassTheTransportConformanceSuite) {
  auto failures = paro::testing::on_transports(5, [](paro::threads::Transport t) {
    Checked checked = checked_wire(t);
    return paro::testing::check_transport_conformance(checked);
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

TEST(FaultSpec, ParsesTheDocumentedFormAndRejectsTheRest) {
  const FaultSpec s = FaultSpec::parse("delay,rank=3,message=7,ms=250");
  EXPECT_EQ(s.kind, FaultKind::delay);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.message, 7);
  EXPECT_EQ(s.delay_ms, 250);
  EXPECT_EQ(FaultSpec::parse("fail,message=2,rank=0").kind, FaultKind::fail);
  auto error = [](const char* text) { return paro::testing::error_of([&] { FaultSpec::parse(text); }); };
  EXPECT_CONTAINS(error("lose,rank=1,message=1"), "unknown fault 'lose'");
  EXPECT_CONTAINS(error("drop,rank=1"), "rank= and message= are required");
  EXPECT_CONTAINS(error("drop,rank=-1,message=1"), "PARO_FAULT rank: '-1' is not an integer in [0,");
  EXPECT_CONTAINS(error("drop,rank=1,message=0"), "PARO_FAULT message: '0' is not an integer in [1,");
  EXPECT_CONTAINS(error("drop,rank=1,message=1,ms=5"), "ms= is only for delay");
  EXPECT_CONTAINS(error("delay,rank=1,message=1"), "ms= is required for delay");
  EXPECT_CONTAINS(error("delay,rank=1,message=1,ms=nan"), "PARO_FAULT ms: 'nan' is not a number in [0,");
  EXPECT_CONTAINS(error("drop,rank=1,message=1,seed=3"), "unknown key 'seed'");
  EXPECT_CONTAINS(error("drop,rank"), "'rank' is not key=value");
  // A rank outside the communicator is refused when the fault is armed.
  const std::string msg = paro::testing::error_of([] {
    paro::threads::run(
        2, [](paro::threads::Transport t) { Wire(std::move(t), FaultSpec::parse("drop,rank=2,message=1")); });
  });
  EXPECT_CONTAINS(msg, "rank 2 is not a rank of the 2-rank communicator");
}

TEST(Checksum, HashSeesEveryFlippedByteAndTheLength) {
  std::vector<unsigned char> bytes(37);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  const auto base = paro::checksum::hash(bytes.data(), bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] ^= 1;
    EXPECT_NE(paro::checksum::hash(bytes.data(), bytes.size()), base) << "byte " << i;
    bytes[i] ^= 1;
  }
  EXPECT_NE(paro::checksum::hash(bytes.data(), 36), paro::checksum::hash(bytes.data(), 37));
  const std::vector<unsigned char> zeros(16, 0);
  EXPECT_NE(paro::checksum::hash(zeros.data(), 8), paro::checksum::hash(zeros.data(), 9));
}

}  // namespace
