// PaRO-DP checkpoints (dp/checkpoint.hpp, Engine::save / load): a run stopped half-way and resumed from its
// checkpoint, on the same or another strategy and on the same or another rank count, ends with bitwise the
// parameters of a run that was never stopped; the directory protocol (latest, pruning, a half-written
// save); and the errors of a wrong, missing or damaged checkpoint.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "paro/dp/checkpoint.hpp"
#include "paro/dp/engine.hpp"
#include "paro/testing/dp_check.hpp"
#include "threads_harness.hpp"

namespace {

namespace fs = std::filesystem;
using paro::dp::CheckpointDirectory;
using paro::dp::Engine;
using paro::dp::ShardHeader;
using paro::dp::Strategy;
using paro::testing::error_of;

constexpr std::size_t trainable_count = 1003, frozen_count = 37;  // not multiples of any rank count here
constexpr int accumulation = 2;

// A folder of its own under the system's temporary one, removed at the end of the test.
struct TemporaryFolder {
  fs::path path;
  TemporaryFolder() {
    static std::atomic<int> next{0};
    path = fs::temp_directory_path() /
           paro::detail::concat("paro-checkpoint-", ::getpid(), "-", next++, "-",
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TemporaryFolder() { fs::remove_all(path); }
};

std::vector<float> initial(std::size_t count, float rate) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = std::cos(rate * static_cast<float>(i));
  return v;
}

// Every rank adds the same gradient, on a grid of 2^-12 within +-8: summed over 8 ranks and 2 micro-steps
// that stays exact in any order, and the engine's 1/(n A) is exact for a power-of-two n. So every
// strategy and every power-of-two rank count takes bitwise the same steps; only a lost or wrong state
// (parameters, frozen parameters, Adam's m and v, the step count in its bias correction) can differ.
template <class T>
void train(Engine<T>& e, int from_step, int to_step) {
  for (int k = from_step; k < to_step; ++k) {
    for (int a = 0; a < accumulation; ++a) {
      e.begin_micro_step();
      const float *theta = e.trainable_params(), *fixed = e.frozen_params();
      float* g = e.gradients();
      for (std::size_t i = 0; i < trainable_count; ++i) {
        const float target = std::sin(0.1f * static_cast<float>(i) + 0.3f * static_cast<float>(k) + 0.7f * a);
        const float x =
            (1.0f + static_cast<float>(i % 7) / 7.0f) * (theta[i] - target) + 0.5f * fixed[i % frozen_count];
        g[i] += std::nearbyint(std::fmax(-8.0f, std::fmin(8.0f, x)) * 4096.0f) / 4096.0f;
      }
      e.end_micro_step();
    }
    e.step(accumulation);
  }
}

paro::CommunicatorConfig cluster(const char* emulate) {
  paro::CommunicatorConfig config;
  config.discovery.emulate = emulate;
  return config;
}

int ranks_of(const char* emulate) { return paro::topology::EmulationSpec::parse(emulate).rank_count().value(); }

const paro::dp::Adam adam{1e-2f};

// Trains `strategy` on `emulate` from step `from` (loading `resume_from` first, if given) to step `to`,
// saving into `save_to` (if given); returns rank 0's full trainable parameters.
// A resumed engine starts from other values, frozen parameters included: only load() can bring back the
// saved ones.
std::vector<float> run(const char* emulate, const char* strategy, int from, int to, const std::string& resume_from,
                       const std::string& save_to) {
  const float start = resume_from.empty() ? 1.0f : -3.0f;
  return paro::tools::run_on_thread_ranks(ranks_of(emulate), cluster(emulate), [&](auto& comm) {
    Engine<paro::threads::Transport> e(comm, Strategy::parse(strategy), initial(trainable_count, 0.05f * start),
                                       initial(frozen_count, 0.2f * start), adam);
    if (!resume_from.empty()) {
      e.load(resume_from);
      EXPECT_EQ(e.steps_taken(), from);
    }
    train(e, from, to);
    if (!save_to.empty()) e.save(save_to);
    return e.gather_trainable();
  })[0];
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Checkpoint, ResumedRunsMatchAnUninterruptedOneBitwise) {
  const std::vector<float> uninterrupted = run("nodes=2,ranks=4", "NNN", 0, 6, "", "");
  struct Case {
    const char *saved_on, *saved_strategy, *resumed_on, *resumed_strategy;
  };
  for (const Case& c : {Case{"nodes=2,ranks=4", "NIG", "nodes=2,ranks=4", "NIG"},     // as it was
                        Case{"nodes=2,ranks=4", "GGG", "nodes=2,ranks=4", "NNN"},     // all sharded -> replicated
                        Case{"nodes=2,ranks=4", "IIG", "nodes=2,ranks=2", "NIG"},     // 8 -> 4 ranks
                        Case{"nodes=2,ranks=2", "NNN", "nodes=4,ranks=2", "GGG"},     // 4 -> 8 ranks
                        Case{"nodes=2,ranks=4", "NNI", "nodes=1,ranks=8", "IGG"}}) {  // groups of 4 -> 8
    TemporaryFolder folder;
    const std::string saved = folder.path.string();
    run(c.saved_on, c.saved_strategy, 0, 3, "", saved);
    const std::vector<float> resumed = run(c.resumed_on, c.resumed_strategy, 3, 6, saved, "");
    EXPECT_TRUE(same_bits(resumed, uninterrupted))
        << c.saved_strategy << " on " << c.saved_on << " resumed as " << c.resumed_strategy << " on " << c.resumed_on
        << ": differs by " << paro::testing::relative_difference(resumed, uninterrupted);
  }
}

// The premise of the test above: without Adam's states the continuation differs, so the check can fail.
TEST(Checkpoint, LosingAdamsStateChangesTheBits) {
  TemporaryFolder folder;
  const std::string saved = folder.path.string();
  const std::vector<float> uninterrupted = run("nodes=2,ranks=2", "NNN", 0, 6, "", "");
  const std::vector<float> at_three = run("nodes=2,ranks=2", "NIG", 0, 3, "", saved);
  const std::vector<float> restarted = paro::tools::run_on_thread_ranks(4, cluster("nodes=2,ranks=2"), [&](auto& comm) {
    Engine<paro::threads::Transport> e(comm, Strategy::parse("NIG"), at_three, initial(frozen_count, 0.2f), adam);
    train(e, 3, 6);  // the parameters of step 3, fresh optimizer
    return e.gather_trainable();
  })[0];
  EXPECT_FALSE(same_bits(restarted, uninterrupted));
  EXPECT_TRUE(same_bits(run("nodes=2,ranks=2", "NIG", 3, 6, saved, ""), uninterrupted));
}

TEST(Checkpoint, EveryRankWritesItsOwnSliceOfEveryVector) {
  TemporaryFolder folder;
  const std::string saved = folder.path.string();
  run("nodes=2,ranks=2", "NIG", 0, 1, "", saved);
  // Parameters replicated (p = N), Adam's states sharded (os = G): each rank still writes one quarter of
  // each, the slice a G partition gives it, so that no rank writes more than the others.
  for (int r = 0; r < 4; ++r) {
    const ShardHeader h = ShardHeader::read(paro::dp::engine_shard_path(saved, r));
    std::vector<std::uint64_t> counts;
    for (const auto& p : h.pieces) counts.push_back(p.count);
    EXPECT_EQ(counts, (std::vector<std::uint64_t>{1004 / 4, 40 / 4, 1004 / 4, 1004 / 4})) << "rank " << r;
  }
}

TEST(Checkpoint, DirectoryNamesTheLatestCompleteSaveAndPrunesOlderOnes) {
  TemporaryFolder folder;
  const CheckpointDirectory dir(folder.path.string());
  EXPECT_FALSE(dir.latest().has_value());
  for (long step : {4L, 8L, 12L}) {
    dir.create(step);
    dir.commit(step, 2);
  }
  EXPECT_EQ(dir.latest(), 12L);
  EXPECT_FALSE(fs::exists(dir.step_path(4)));
  EXPECT_TRUE(fs::exists(dir.step_path(8)));
  dir.create(16);  // a save killed before its commit
  EXPECT_EQ(dir.latest(), 12L);
  std::ofstream(folder.path / "latest") << "step-12\n";
  EXPECT_NE(error_of([&] { (void)dir.latest(); }).find("does not name a step folder"), std::string::npos);
  std::ofstream(folder.path / "latest") << "step-00000004\n";
  EXPECT_NE(error_of([&] { (void)dir.latest(); }).find("which is not a folder of"), std::string::npos);
}

// Every rank reports the same error; returns rank 0's.
std::string load_error(const char* emulate, const char* strategy, std::size_t trainable, const std::string& folder) {
  return paro::tools::run_on_thread_ranks(ranks_of(emulate), cluster(emulate), [&](auto& comm) {
    Engine<paro::threads::Transport> e(comm, Strategy::parse(strategy), initial(trainable, 0.05f),
                                       initial(frozen_count, 0.2f), adam);
    return error_of([&] { e.load(folder); });
  })[0];
}

TEST(Checkpoint, WrongMissingOrDamagedCheckpointsAreErrors) {
  TemporaryFolder folder;
  const std::string saved = folder.path.string();
  run("nodes=2,ranks=2", "GGG", 0, 1, "", saved);
  const std::string rank2 = paro::dp::engine_shard_path(saved, 2);
  EXPECT_NE(load_error("nodes=2,ranks=2", "NNN", trainable_count + 1, saved)
                .find("its model has 1040 parameters (1003 trainable); this engine's has 1041 (1004)"),
            std::string::npos);
  std::string bytes = paro::dp::read_whole_file(rank2);
  paro::dp::write_file_atomically(rank2, bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(load_error("nodes=2,ranks=2", "NNN", trainable_count, saved)
                .find("engine-rank-00002.bin': size: the pieces need"),
            std::string::npos);
  bytes[16] = 3;  // rank 2's file claims to be rank 3's
  paro::dp::write_file_atomically(rank2, bytes);
  EXPECT_NE(load_error("nodes=2,ranks=2", "NNN", trainable_count, saved).find("does not match rank 0's"),
            std::string::npos);
  fs::remove(rank2);
  EXPECT_NE(load_error("nodes=2,ranks=2", "NNN", trainable_count, saved).find("engine-rank-00002.bin': cannot read it"),
            std::string::npos);
  EXPECT_NE(
      load_error("nodes=2,ranks=2", "NNN", trainable_count, (folder.path / "none").string()).find("cannot read it"),
      std::string::npos);
  bytes.replace(0, 8, "PARODP99");
  EXPECT_NE(error_of([&] { ShardHeader::parse(bytes, bytes.size(), "x"); }).find("not a PaRO-DP shard file"),
            std::string::npos);
}

TEST(Checkpoint, SavingOrLoadingInsideAStepIsAnError) {
  TemporaryFolder folder;
  const auto errors = paro::tools::run_on_thread_ranks(2, paro::CommunicatorConfig{}, [&](auto& comm) {
    Engine<paro::threads::Transport> e(comm, Strategy::parse("NNG"), initial(8, 0.1f), {}, adam);
    e.begin_micro_step();
    return error_of([&] { e.save(folder.path.string()); }) + " | " + error_of([&] { e.load(folder.path.string()); });
  });
  EXPECT_NE(errors[0].find("checkpoint save: a step is in progress"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("checkpoint load: a step is in progress"), std::string::npos) << errors[0];
}

}  // namespace
