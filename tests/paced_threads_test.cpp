// The paced transport on the threads backend: exact results through it, messages that take at least
// their emulated link time (shared and per-rank NICs, latency), links that carry concurrent messages in
// interleaved pieces, traces naming world ranks on split communicators, and the cost model's view of
// emulated scopes.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/testing/collective_check.hpp"
#include "paro/testing/rooted_check.hpp"
#include "paro/transport/paced.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::Scope;
using Paced = paro::paced::Transport<paro::threads::Transport>;
using paro::topology::EmulationSpec;

template <class Body>
void on_paced(const std::string& emulate, Body body, bool trace = false) {
  const auto spec = EmulationSpec::parse(emulate);
  paro::threads::run(spec.rank_count().value(),
                     [&](paro::threads::Transport t) { body(Paced::wrap(std::move(t), spec, trace)); });
}

TEST(Paced, ExactResultsThroughTheDecorator) {
  const std::string emulate = "switches=2,nodes=2,ranks=2,intra_gbps=8000,inter_gbps=800,inter_us=20";
  std::vector<std::string> failures;
  std::mutex m;
  on_paced(emulate, [&](Paced t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    paro::Communicator comm(std::move(t), config);
    std::vector<std::string> mine;
    for (Collective coll : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter})
      for (Algorithm algo :
           {Algorithm::ring, Algorithm::tree, Algorithm::mics_hcs, Algorithm::paro_cc, Algorithm::automatic})
        for (auto& f : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 1000})) mine.push_back(f);
    for (auto& f : paro::testing::rooted_matrix(comm, {0, 1000})) mine.push_back(f);
    for (auto& f : paro::testing::all_to_allv_matrix(comm, {300})) mine.push_back(f);
    for (auto& f : paro::testing::check_messages(comm, 1000)) mine.push_back(f);
    std::lock_guard<std::mutex> lock(m);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// Rank 0 and 1 on node 0 each send `bytes` to their partner on node 1 at once; returns the seconds from
// before the ranks started to the slowest rank's completion.
double two_flows_across(const std::string& emulate, std::size_t bytes) {
  std::mutex m;
  double slowest = 0;
  const auto start = std::chrono::steady_clock::now();
  on_paced(emulate, [&](Paced t) {
    std::vector<char> buf(bytes);
    const int r = t.rank();
    auto q = r < 2 ? t.isend(buf.data(), bytes, r + 2, 1) : t.irecv(buf.data(), bytes, r - 2, 1);
    t.wait(q);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(m);
    slowest = std::max(slowest, s);
  });
  return slowest;
}

// Only lower bounds: a loaded machine can make messages slower, never faster than their links.
TEST(Paced, MessagesTakeTheirLinkTime) {
  const std::size_t megabyte = 1000000;  // 10 ms at 0.8 Gbit/s
  EXPECT_GE(two_flows_across("nodes=2,ranks=2,inter_gbps=0.8,nic=shared", megabyte), 0.020) << "one NIC, two flows";
  EXPECT_GE(two_flows_across("nodes=2,ranks=2,inter_gbps=0.8,nic=per_rank", megabyte), 0.010);
  EXPECT_GE(two_flows_across("nodes=2,ranks=2,inter_us=30000", 0), 0.030) << "latency alone";
  // Inside a node the intra links pace instead.
  EXPECT_GE(two_flows_across("nodes=1,ranks=4,intra_gbps=0.8,inter_gbps=0.001", megabyte), 0.010);
  EXPECT_LT(two_flows_across("nodes=1,ranks=4,intra_gbps=0.8,inter_gbps=0.001", megabyte), 1.0) << "not the inter link";
}

// Point-to-point messages are paced as the collectives' are: 1 MB across nodes at 0.8 Gbit/s takes at least
// 10 ms from its send to its receive.
TEST(Paced, PointToPointMessagesTakeTheirLinkTime) {
  const std::string emulate = "nodes=2,ranks=1,inter_gbps=0.8";
  double seconds = 0;
  on_paced(emulate, [&](Paced t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    paro::Communicator comm(std::move(t), config);
    std::vector<char> buf(1000000);
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      comm.send(buf.data(), buf.size(), paro::DataType::u8, 1);
    } else {
      comm.recv(buf.data(), buf.size(), paro::DataType::u8, 0);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  });
  EXPECT_GE(seconds, 0.010);
}

using paro::paced::detail::book_both;
using paro::paced::detail::Calendar;

// The booked intervals of a calendar, for comparing.
std::vector<std::pair<std::int64_t, std::int64_t>> intervals(const Calendar& c) {
  std::vector<std::pair<std::int64_t, std::int64_t>> v;
  for (int k = 0; k < c.count; ++k) v.emplace_back(c.busy[k].from, c.busy[k].to);
  return v;
}

TEST(PacedLinks, AMessageTakesTheTimeBothItsLinksAreFree) {
  Calendar tx{}, rx{};
  tx.add({0, 10});   // the sender's link is busy first,
  rx.add({20, 30});  // the receiver's later: 15 ns of message fit 10 in the gap, 5 after
  const auto booked = book_both(tx, rx, 0, 15);
  EXPECT_EQ(booked.from, 10);
  EXPECT_EQ(booked.to, 35) << "booking it whole after both links' last interval would end at 45";
  EXPECT_EQ(intervals(tx), (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 20}, {30, 35}}));
  EXPECT_EQ(intervals(rx), (std::vector<std::pair<std::int64_t, std::int64_t>>{{10, 35}}));

  Calendar other_tx{}, other_rx{};  // disjoint links run at once
  const auto parallel = book_both(other_tx, other_rx, 0, 15);
  EXPECT_EQ(parallel.from, 0);
  EXPECT_EQ(parallel.to, 15);
  EXPECT_EQ(book_both(tx, rx, 40, 0).to, 40) << "no bandwidth limit: no time";
  EXPECT_EQ(tx.count, 0) << "intervals that ended before now are dropped";
}

// Four shared NICs, every rank of two per node sending one unit to every rank on the other nodes, eight
// rounds posted at once in a fixed shuffled order: the links carry it in close to its link time (each NIC
// sends and receives 8 x 2 x 6 units), where whole bookings in posting order take about twice that.
TEST(PacedLinks, AnAllToAllOverSharedNicsKeepsItsLinksBusy) {
  constexpr int nodes = 4, ranks_per_node = 2, rounds = 8;
  std::vector<Calendar> tx(nodes), rx(nodes);
  std::vector<std::pair<int, int>> messages;
  for (int round = 0; round < rounds; ++round)
    for (int a = 0; a < nodes * ranks_per_node; ++a)
      for (int b = 0; b < nodes * ranks_per_node; ++b)
        if (a / ranks_per_node != b / ranks_per_node) messages.emplace_back(a / ranks_per_node, b / ranks_per_node);
  std::mt19937 shuffle(7);
  std::shuffle(messages.begin(), messages.end(), shuffle);
  std::int64_t end = 0;
  for (auto [a, b] : messages) end = std::max(end, book_both(tx[a], rx[b], 0, 1000).to);
  const std::int64_t link_time = std::int64_t{rounds} * ranks_per_node * ranks_per_node * (nodes - 1) * 1000;
  EXPECT_GE(end, link_time);
  EXPECT_LE(end, link_time * 115 / 100);
  for (const auto& c : tx) {
    EXPECT_LE(c.count, Calendar::capacity);
    for (int k = 0; k + 1 < c.count; ++k) EXPECT_LT(c.busy[k].to, c.busy[k + 1].from) << "sorted, disjoint, merged";
  }
}

TEST(PacedLinks, AFullCalendarBooksItsShortestGap) {
  Calendar c{};
  for (int k = 0; k < Calendar::capacity; ++k) c.add({100 * k, 100 * k + 50 + (k == 5 ? 45 : 0)});
  ASSERT_EQ(c.count, Calendar::capacity);
  c.add({100000, 100010});
  EXPECT_EQ(c.count, Calendar::capacity);
  EXPECT_EQ(c.busy[5].from, 500);
  EXPECT_EQ(c.busy[5].to, 650) << "the 5-ns gap after [500, 595) closed";
  EXPECT_EQ(c.busy[c.count - 1].to, 100010);
}

TEST(Paced, TraceNamesWorldRanksOnSplitCommunicators) {
  paro::paced::TraceLog::process().take_rank(3);
  on_paced(
      "nodes=2,ranks=2,intra_gbps=100,inter_gbps=10",
      [](Paced t) {
        Paced odd = t.split(t.rank() % 2, t.rank());  // {0, 2} and {1, 3}: both pairs cross nodes
        ASSERT_EQ(odd.size(), 2);
        int x = t.rank();
        if (odd.rank() == 1) {
          auto s = odd.isend(&x, sizeof x, 0, 5);
          odd.wait(s);
        } else {
          auto q = odd.irecv(&x, sizeof x, 1, 5);
          odd.wait(q);
          EXPECT_EQ(x, t.rank() + 2);
        }
      },
      true);
  const auto events = paro::paced::TraceLog::process().take_rank(3);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].peer, 1);
  EXPECT_TRUE(events[0].inter);
  EXPECT_EQ(events[0].bytes, sizeof(int));
  EXPECT_GE(events[0].end_ns, events[0].start_ns);
}

TEST(Paced, CostShapeOfEmulatedScopes) {
  std::mutex m;
  paro::threads::run(8, [&](paro::threads::Transport t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = "nodes=2,ranks=4";
    paro::Communicator comm(std::move(t), config);
    const auto& global = comm.shape(Scope::global);
    const auto& intra = comm.shape(Scope::intra);
    const auto& inter = comm.shape(Scope::inter);
    std::lock_guard<std::mutex> lock(m);
    EXPECT_EQ(global.units, std::vector<int>{2});
    EXPECT_EQ(global.rail_inter, std::vector<bool>{true});
    EXPECT_EQ(global.nodes, 2);
    EXPECT_EQ(global.ring_nic_flows, 1);
    EXPECT_TRUE(intra.units.empty());
    EXPECT_EQ(intra.nodes, 1);
    EXPECT_EQ(intra.ring_nic_flows, 0);
    EXPECT_TRUE(inter.units.empty());
    EXPECT_EQ(inter.nodes, 2);
    EXPECT_EQ(inter.ring_nic_flows, 4) << "all four rails cross the node's NIC at once";
  });
}

// The tools' threads default (2 emulated nodes) must not replace the cluster of a topology file: it did,
// and paro-bench -t 128 with the simulation study's file then modelled 2 nodes of 64 ranks.
TEST(Launch, TheThreadsDefaultEmulationGivesWayToATopologyFile) {
  struct Unset {
    std::string saved[2];
    bool had[2] = {false, false};
    const char* names[2] = {"PARO_EMULATE", "PARO_TOPO_FILE"};
    Unset() {
      for (int i = 0; i < 2; ++i)
        if (const char* v = std::getenv(names[i])) had[i] = true, saved[i] = v, ::unsetenv(names[i]);
    }
    ~Unset() {
      for (int i = 0; i < 2; ++i) had[i] ? ::setenv(names[i], saved[i].c_str(), 1) : ::unsetenv(names[i]);
    }
  } restore;
  paro::tools::LaunchOptions o;
  o.thread_ranks = 8;
  EXPECT_EQ(paro::tools::emulation_option(o), "nodes=2");
  ::setenv("PARO_TOPO_FILE", "cluster.topo.json", 1);
  EXPECT_EQ(paro::tools::emulation_option(o), "") << "discovery reads the file itself";
  o.emulate = "nodes=4";
  EXPECT_EQ(paro::tools::emulation_option(o), "nodes=4") << "an explicit emulation still wins";
  ::unsetenv("PARO_TOPO_FILE");
  o.emulate.clear();
  o.thread_ranks = 7;
  EXPECT_EQ(paro::tools::emulation_option(o), "");
}

}  // namespace
