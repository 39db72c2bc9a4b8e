// PaRO-DP: strategies (the 14 valid, the 13 invalid with reasons, aliases), the memory and traffic model
// by hand, and the engine on emulated clusters of the threads backend: every strategy ends with NNN's
// parameters and holds and sends exactly the model's bytes (messages counted by the paced transport).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "paro/dp/deepspeed_config.hpp"
#include "paro/dp/model.hpp"
#include "paro/dp/strategy.hpp"
#include "paro/testing/dp_check.hpp"
#include "paro/transport/paced.hpp"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::dp::Cluster;
using paro::dp::Partition;
using paro::dp::Sizes;
using paro::dp::Strategy;

using paro::testing::error_of;

TEST(Strategy, FourteenValidThirteenInvalidWithReasons) {
  std::set<std::string> valid;
  int invalid = 0;
  for (const Strategy& s : Strategy::every()) {
    if (s.valid()) {
      valid.insert(s.name());
      EXPECT_EQ(Strategy::parse(s.name()), s);
    } else {
      ++invalid;
      EXPECT_NE(error_of([&] { Strategy::parse(s.name()); }).find("is not valid: "), std::string::npos) << s.name();
    }
  }
  EXPECT_EQ(valid.size(), 14u);
  EXPECT_EQ(invalid, 13);
  EXPECT_EQ(valid, (std::set<std::string>{"NNN", "NNI", "NII", "INI", "III", "NNG", "NIG", "NGG", "ING", "IIG", "IGG",
                                          "GNG", "GIG", "GGG"}));
  EXPECT_NE(error_of([] { Strategy::parse("GNI"); })
                .find("parameters are sharded over all ranks but optimizer states only "
                      "sharded within the group"),
            std::string::npos);
  EXPECT_NE(error_of([] { Strategy::parse("NGN"); }).find("gradients are sharded over all ranks"), std::string::npos);
}

TEST(Strategy, AliasesCaseAndBadInput) {
  EXPECT_EQ(Strategy::parse("nig").name(), "NIG");
  EXPECT_EQ(Strategy::parse("1").name(), "NNG");
  EXPECT_EQ(Strategy::parse("zero2").name(), "NGG");
  EXPECT_EQ(Strategy::parse("3").name(), "GGG");
  EXPECT_EQ(Strategy::parse("ddp").name(), "NNN");
  EXPECT_EQ(paro::dp::zero_stage(1).name(), "NNG");
  EXPECT_NE(error_of([] { paro::dp::zero_stage(4); }).find("allowed 0, 1, 2, 3"), std::string::npos);
  EXPECT_NE(error_of([] { Strategy::parse("NXG"); }).find("letter 'X' is not N, I or G"), std::string::npos);
  EXPECT_NE(error_of([] { Strategy::parse("NI"); }).find("three letters"), std::string::npos);
}

// By hand: n = 8 ranks in groups of m = 4 (2 groups), Ψ = 1000 (padded to 1000), Ψ' = 800, fp32 + Adam.
TEST(DeepSpeedConfig, TakesItsKeysAndNamesTheFieldOfABadValue) {
  using paro::dp::DeepSpeedConfig;
  const DeepSpeedConfig c = DeepSpeedConfig::parse(
      R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2, "fp16": {"enabled": true},
          "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}, "zero_optimization": {"stage": 2, "paro_strategy": "ngg"}})",
      "ds.json");
  EXPECT_EQ(c.strategy->name(), "NGG");
  EXPECT_EQ(*c.micro_batch, 8);
  EXPECT_EQ(*c.accumulation, 2);
  EXPECT_FLOAT_EQ(*c.lr, 0.002f);
  EXPECT_EQ(DeepSpeedConfig::parse(R"({"zero_optimization": {"stage": 0}})", "ds.json").strategy->name(), "NNN");
  EXPECT_FALSE(DeepSpeedConfig::parse("{}", "ds.json").strategy.has_value());
  auto error = [](const std::string& text) { return error_of([&] { DeepSpeedConfig::parse(text, "ds.json"); }); };
  for (const char* count : {"0", "-1", "2.5", "1e20", "18446744073709551615", "\"4\"", "true"})
    EXPECT_NE(error(std::string(R"({"gradient_accumulation_steps": )") + count + "}")
                  .find("config 'ds.json': gradient_accumulation_steps: expected an integer in [1, 1048576], got "),
              std::string::npos)
        << count;
  EXPECT_NE(
      error(R"({"train_micro_batch_size_per_gpu": 0})").find("train_micro_batch_size_per_gpu: expected an integer"),
      std::string::npos);
  for (const char* lr : {"0", "-0.1", "1e9", "1e-50", "\"0.1\"", "null"})
    EXPECT_NE(error(std::string(R"({"optimizer": {"params": {"lr": )") + lr + "}}}")
                  .find("optimizer.params.lr: expected a number in (0, 1e3], got "),
              std::string::npos)
        << lr;
  EXPECT_NE(error(R"({"optimizer": {"params": {"lr": 1e400}}})").find("config 'ds.json': syntax: "), std::string::npos);
  EXPECT_NE(error(R"({"optimizer": {"type": "SGD"}})").find("optimizer.type: \"SGD\": this engine runs Adam"),
            std::string::npos);
  EXPECT_NE(
      error(R"({"zero_optimization": {"stage": 4}})").find("zero_optimization.stage: expected an integer in [0, 3]"),
      std::string::npos);
  EXPECT_NE(error(R"({"zero_optimization": {"stage": 3, "paro_strategy": "NIG"}})")
                .find("paro_strategy NIG and stage 3 (GGG) disagree; give one"),
            std::string::npos);
  EXPECT_NE(error(R"({"zero_optimization": {"paro_strategy": "GNN"}})")
                .find("zero_optimization.paro_strategy: strategy GNN is not valid"),
            std::string::npos);
  EXPECT_NE(error(R"({"zero_optimization": 2})").find("zero_optimization: expected an object"), std::string::npos);
  EXPECT_NE(error("[1]").find("top level: expected an object"), std::string::npos);
  EXPECT_NE(error_of([] {
              DeepSpeedConfig::read("/nonexistent/ds.json");
            }).find("config '/nonexistent/ds.json': cannot read it"),
            std::string::npos);
}

TEST(Model, FootprintAndTrafficByHand) {
  const Sizes z{1000, 800};
  const Cluster c{8, 4};
  auto nnn = paro::dp::footprint(Strategy::parse("NNN"), z, c);
  EXPECT_EQ(nnn.params, 4000);
  EXPECT_EQ(nnn.grads, 3200);
  EXPECT_EQ(nnn.optimizer, 6400);
  EXPECT_EQ(nnn.peak(), 13600);
  auto nig = paro::dp::footprint(Strategy::parse("NIG"), z, c);
  EXPECT_EQ(nig.grads, 800);      // 800 / 4 x 4 B
  EXPECT_EQ(nig.optimizer, 800);  // 800 / 8 x 8 B
  EXPECT_EQ(nig.full_grads, 3200);
  auto ggg = paro::dp::footprint(Strategy::parse("GGG"), z, c);
  EXPECT_EQ(ggg.params, 500);
  EXPECT_EQ(ggg.gathered_params, 4000);
  // NNN, A = 1: intra RS 600 + intra AG 600 elements, rail AR 2 x 100 (of the 200-element I shard).
  auto t = paro::dp::traffic(Strategy::parse("NNN"), z, c, 1);
  EXPECT_EQ(t.intra, (600 + 600) * 4);
  EXPECT_EQ(t.inter, 200 * 4);
  // NIG, A = 3: per micro-step an intra RS (600); boundary rail RS (100); rebuild rail AG (100) + intra AG (600).
  t = paro::dp::traffic(Strategy::parse("NIG"), z, c, 3);
  EXPECT_EQ(t.intra, (3 * 600 + 600) * 4);
  EXPECT_EQ(t.inter, (100 + 100) * 4);
  // GGG, A = 2: per micro-step params rail AG (1000/4/2 = 125) + intra AG (750), grads intra RS (600) + rail RS (100).
  t = paro::dp::traffic(Strategy::parse("GGG"), z, c, 2);
  EXPECT_EQ(t.intra, 2 * (750 + 600) * 4);
  EXPECT_EQ(t.inter, 2 * (125 + 100) * 4);
  EXPECT_NE(error_of([] {
              paro::dp::traffic(Strategy{}, {10, 10}, {6, 4}, 1);
            }).find("must divide"),
            std::string::npos);
}

// The paper's example: a 7B model on 32 GPUs (4 nodes of 8), slow links between nodes.
TEST(Model, AdvisorPrefersIntraGroupShardingOnSlowInterLinks) {
  paro::dp::Machine mc;
  mc.inter_bytes_per_s = 12.5e9 / 8;  // one 100 Gbit/s NIC shared by 8 GPUs
  mc.tokens = 2048;                   // per GPU and micro-step: communication-bound, the paper's regime
  const auto ranked = paro::dp::advise({7'000'000'000, 7'000'000'000}, {32, 8}, 4, mc);
  auto rank_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < ranked.size(); ++i)
      if (ranked[i].strategy.name() == name) return i;
    return ranked.size();
  };
  EXPECT_TRUE(ranked.front().fits);
  EXPECT_LT(rank_of("NIG"), rank_of("GGG"));
  EXPECT_LT(rank_of("IIG"), rank_of("GGG"));
  EXPECT_FALSE(ranked[rank_of("NNN")].fits);  // 7B x 16 B does not fit in 80 GB
}

// The engine: an emulated cluster through the paced transport (tracing only), grouped by node.
std::vector<std::string> on_paced_cluster(const std::string& emulate, const paro::testing::DpCase& c) {
  using Paced = paro::paced::Transport<paro::threads::Transport>;
  const auto spec = paro::topology::EmulationSpec::parse(emulate);
  std::vector<std::string> failures;
  std::mutex m;
  paro::threads::run(spec.rank_count().value(), [&](paro::threads::Transport t) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    paro::Communicator comm(Paced::wrap(std::move(t), spec, true), config);
    const int me = comm.rank();
    auto mine = paro::testing::check_strategies(comm, c, [me] { return paro::testing::take_traced_traffic(me); });
    std::lock_guard<std::mutex> lock(m);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  return failures;
}

class DpEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(DpEngine, EveryStrategyMatchesNnnAndTheModel) {
  auto failures = on_paced_cluster(GetParam(), {});
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, DpEngine,
                         ::testing::Values("nodes=2,ranks=4",    // 2 groups x 4, as in paro-train
                                           "nodes=4,ranks=2",    // more groups than members
                                           "nodes=2,ranks=3",    // not a power of two
                                           "nodes=1,ranks=4",    // one group: I = G
                                           "nodes=3,ranks=1"));  // groups of one: I = N

// The same results, bytes sent and (with a second full gradient) bytes held when each micro-step's
// gradient reduce-scatter runs while the next micro-step computes.
TEST(DpEngine, OverlappedGradientScattersMatchToo) {
  paro::testing::DpCase c;
  c.overlap = true;
  c.accumulation = 3;
  for (const char* cluster : {"nodes=2,ranks=4", "nodes=2,ranks=3"}) {
    auto failures = on_paced_cluster(cluster, c);
    EXPECT_TRUE(failures.empty()) << cluster << "\n" << paro::testing::first_lines(failures);
  }
}

TEST(DpEngine, RejectsUnevenGroups) {
  auto failures = paro::testing::on_cluster("nodes=2,ranks=3:2", "node", [](auto& comm) {
    std::vector<std::string> f;
    const std::string message = error_of([&] {
      paro::dp::Engine<paro::threads::Transport> e(comm, Strategy::parse("NIG"), {1, 2, 3}, {});
    });
    if (message.find("needs groups of equal size") == std::string::npos) f.push_back(message);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// Bitwise-reproducible training (docs/user-guide.md, "Reproducible runs"): a float sum's last bits depend
// on the order its algorithm reduces in, automatic's algorithm on the cost model, and so do paro_cc's
// pipeline chunk and whether its lanes run inline. A job of 3 SGD steps (all-reduced gradients, then the
// ZeRO pair: reduce-scatter and all-gather of the parameters) run under two cost models that plan
// differently: pinned algorithms (and paro_cc's lanes and chunk, PARO_LANES and PARO_CC_CHUNK) give the
// same bits, automatic does not.
std::vector<float> sgd_job(const char* links_preset, const std::string& algorithms, std::size_t chunk = 0,
                           paro::algorithms::LaneChoice lanes = paro::algorithms::LaneChoice::faster) {
  paro::CommunicatorConfig config;
  config.discovery.emulate = "nodes=2,ranks=3";
  config.tuning.links_preset = links_preset;
  config.tuning.algorithms = algorithms;
  if (chunk) config.tuning.paro_cc_pins = {{"chunk", std::to_string(chunk)}};
  config.tuning.lanes = lanes;
  auto params = paro::tools::run_on_thread_ranks(6, config, [](auto& comm) {
    const std::size_t n = 6 * 65536, shard = n / 6;
    std::vector<float> x(n), g(n), mine(shard);
    for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
    for (int step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < n; ++i)
        g[i] = std::cos(x[i] * static_cast<float>(comm.rank() + 1) + 0.01f * static_cast<float>(i)) / 3;
      comm.all_reduce(g.data(), g.data(), n, paro::ReduceOp::sum);
      for (std::size_t i = 0; i < n; ++i) x[i] -= 0.1f * g[i] + 1e-3f * static_cast<float>(comm.rank());
      comm.reduce_scatter(x.data(), mine.data(), shard, paro::ReduceOp::avg);
      comm.all_gather(mine.data(), x.data(), shard);
    }
    return x;
  });
  for (const auto& other : params) EXPECT_EQ(other, params[0]) << "every rank ends with the same parameters";
  return params[0];
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Reproducible, PinnedAlgorithmsGiveTheSameBitsUnderAnyCostModel) {
  using paro::algorithms::LaneChoice;
  const char* fast_nics = "nvlink-ib400";  // one 400 Gbit/s NIC per rank
  const char* slow_nic = "cpu-tcp25";      // one 25 Gbit/s NIC per node
  // The premise: the two models plan this job's calls differently (with paro_cc's lanes on threads, so
  // that they also choose its chunk), and automatic gives other bits.
  EXPECT_FALSE(same_bits(sgd_job(fast_nics, "", 0, LaneChoice::threads), sgd_job(slow_nic, "", 0, LaneChoice::threads)))
      << "automatic: other plans, other bits";
  for (const char* pinned : {"ring", "tree", "mics_hcs", "allreduce:ring;reducescatter:paro_seq;allgather:paro_cc"})
    EXPECT_TRUE(same_bits(sgd_job(fast_nics, pinned), sgd_job(slow_nic, pinned))) << pinned;
  const char* cc = "allreduce:paro_cc;reducescatter:paro_cc;allgather:paro_cc";
  const std::size_t chunk = std::size_t{256} << 10;  // PARO_CC_CHUNK
  EXPECT_FALSE(same_bits(sgd_job(fast_nics, cc, 0, LaneChoice::threads), sgd_job(slow_nic, cc, 0, LaneChoice::threads)))
      << "paro_cc's chunk not pinned";
  EXPECT_FALSE(same_bits(sgd_job(fast_nics, cc, chunk, LaneChoice::threads),
                         sgd_job(fast_nics, cc, chunk, LaneChoice::inline_only)))
      << "paro_cc's lanes on threads or inline: other orders";
  EXPECT_TRUE(
      same_bits(sgd_job(fast_nics, cc, chunk, LaneChoice::threads), sgd_job(slow_nic, cc, chunk, LaneChoice::threads)))
      << "paro_cc, lanes and chunk pinned";
}

}  // namespace
