// paro-train: data-parallel training of a character-level language model (train/char_mlp.hpp, 1.1 M
// parameters) on Debian's fortunes text, with any PaRO-DP strategy on paro's scoped collectives.
//
//   paro-train --strategy NIG --steps 300                          (8 thread ranks as 2 nodes x 4)
//   paro-train --strategy all --steps 50 --verify                  (every strategy against NNN; exit 1 on a mismatch)
//   paro-train --config ds_config.json --accum 4 --trainable fc2,head
//   paro-train --strategy NNN --compress separate --ratio 32 [--no-error-feedback] [--adaptive] [--block-cols 256]
//   mpirun -np 8 paro-train --backend mpi --emulate nodes=2,ranks=4 --strategy IIG
//   paro-train --strategy NIG --steps 300 --checkpoint-dir ckpt --checkpoint-every 50   [--resume]
//
// Prints the loss per step, the step time, and per rank the bytes held (measured: the engine's buffers;
// model: dp::footprint) and sent per step inside groups and between them (measured: every message,
// counted by the paced transport; model: dp::traffic). Groups are the emulated nodes.
//
// Checkpoints (dp/checkpoint.hpp): every N steps and at the end, the engine's shards, SEPARATE's state per
// rank and trainer.json (the step and the data position: samples consumed) into --checkpoint-dir's
// step-NNNNNNNN folder, made the latest only once complete. --resume continues from the latest, also with
// another strategy or rank count (without SEPARATE, whose error feedback is per rank).

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "paro/compression/separate.hpp"
#include "paro/dp/checkpoint.hpp"
#include "paro/dp/deepspeed_config.hpp"
#include "paro/dp/engine.hpp"
#include "paro/dp/model.hpp"
#include "paro/paro.hpp"
#include "paro/testing/dp_check.hpp"
#include "paro/tools/launch.hpp"
#include "paro/tools/over_ranks.hpp"
#include "paro/tools/report.hpp"
#include "train/char_mlp.hpp"
#include "train/corpus.hpp"

namespace {

using paro::dp::Strategy;

struct Settings {
  std::string backend = "threads";
  int thread_ranks = 8;
  std::string emulate;  // threads default: nodes=2 when -t is even
  std::string strategy = "NNN";
  std::string config;
  int accumulation = 1, batch = 16, steps = 100, log_every = 10;
  float lr = 1e-3f;
  std::uint64_t seed = 1;
  std::string trainable = "all";
  std::string corpus = "/usr/share/games/fortunes";
  std::string compress = "none";
  int ratio = 32;
  bool no_error_feedback = false, adaptive = false, verify = false, overlap = false;
  std::string error_rule = "smoothed";
  std::size_t block_cols = 0, min_elements = 4096;
  std::string json_path;
  std::string checkpoint_dir;
  int checkpoint_every = 0, keep_checkpoints = 2;
  bool resume = false;
  int kill_at_step = -1, kill_rank = 0;
};

// A DeepSpeed-style config (dp/deepspeed_config.hpp); flags given on the command line win.
void apply_config(Settings& s, const std::string& path, const CLI::App& app) {
  const paro::dp::DeepSpeedConfig c = paro::dp::DeepSpeedConfig::read(path);
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  if (c.strategy && !given("--strategy")) s.strategy = c.strategy->name();
  if (c.accumulation && !given("--accum")) s.accumulation = *c.accumulation;
  if (c.micro_batch && !given("--batch")) s.batch = *c.micro_batch;
  if (c.lr && !given("--lr")) s.lr = *c.lr;
}

struct RunResult {
  std::vector<double> losses;
  double validation = 0, step_ms = 0;
  paro::dp::Footprint held, model_held;
  paro::dp::Traffic sent, model_sent;  // per step
  bool traffic_modelled = true;
  double wire_bytes = 0;  // SEPARATE: per step
  std::vector<float> final_params;
  std::uint64_t params_hash = 0;
};

// FNV-1a over the parameters' bytes: a fingerprint two runs can compare bit for bit.
std::uint64_t fnv1a(const std::vector<float>& values) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

std::string hex(std::uint64_t h) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

template <class Transport>
class Trainer {
 public:
  Trainer(paro::Communicator<Transport>& comm, const Settings& s, const paro::train::Corpus& corpus)
      : comm_(comm), s_(s), corpus_(corpus), model_(s.trainable) {}

  RunResult run(const Strategy& strategy) {
    std::vector<float> trainable, frozen;
    model_.initialise(s_.seed, trainable, frozen);
    paro::dp::Engine<Transport> engine(comm_, strategy, trainable, frozen, paro::dp::Adam{s_.lr});
    engine.set_overlap(s_.overlap);
    std::unique_ptr<paro::compression::Separate> separate;
    if (s_.compress == "separate") separate = compressor(engine);
    RunResult r;
    position_ = 0;
    const int first = s_.resume ? resume(engine, separate.get(), strategy) : 0;
    const int steps = s_.steps - first;
    paro::detail::require(steps >= 1, "--resume: the checkpoint is at step ", first, "; --steps ", s_.steps,
                          " leaves nothing to run");
    take_traffic();
    double seconds = 0;
    for (int k = first; k < s_.steps; ++k) {
      if (k == s_.kill_at_step && comm_.rank() == s_.kill_rank) std::raise(SIGKILL);
      comm_.barrier();
      take_traffic();  // not the step's: the barrier, the last step's loss
      const auto start = std::chrono::steady_clock::now();
      double loss = 0;
      for (int a = 0; a < s_.accumulation; ++a) {
        engine.begin_micro_step();
        loss += micro_step_loss(engine, batch(a));
        engine.end_micro_step();
      }
      engine.step(s_.accumulation);
      position_ += samples_per_step();
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const paro::dp::Traffic t = take_traffic();
      r.sent.intra += t.intra;
      r.sent.inter += t.inter;
      if (separate) r.wire_bytes += static_cast<double>(separate->last_call().wire_bytes) / steps;
      r.losses.push_back(paro::mean_over_ranks(comm_, loss / s_.accumulation));
      if (comm_.rank() == 0 && s_.log_every > 0 && (k % s_.log_every == 0 || k + 1 == s_.steps))
        std::printf("  %s step %4d  loss %.4f\n", strategy.name().c_str(), k, r.losses.back());
      if (!s_.checkpoint_dir.empty() &&
          ((s_.checkpoint_every > 0 && (k + 1) % s_.checkpoint_every == 0) || k + 1 == s_.steps))
        save(engine, separate.get(), strategy, k + 1);
    }
    r.sent.intra /= steps;  // exact: every step sends the same bytes
    r.sent.inter /= steps;
    r.step_ms = paro::mean_over_ranks(comm_, seconds / steps * 1e3);
    r.held = engine.memory();
    r.model_held = paro::dp::footprint(strategy, engine.sizes(), engine.cluster());
    if (s_.overlap) r.model_held.full_grads *= 2;  // the gradient in flight beside the one being computed
    r.traffic_modelled = !separate;
    r.model_sent = paro::dp::traffic(strategy, engine.sizes(), engine.cluster(), s_.accumulation);
    engine.begin_micro_step();
    r.validation = validation_loss(engine.trainable_params(), engine.frozen_params());
    r.final_params = engine.gather_trainable();
    r.params_hash = fnv1a(r.final_params);
    take_traffic();
    return r;
  }

  const paro::train::CharMlp& model() const { return model_; }

 private:
  paro::Communicator<Transport>& comm_;
  const Settings& s_;
  const paro::train::Corpus& corpus_;
  paro::train::CharMlp model_;
  std::vector<float> exact_;    // --verify: this micro-step's gradient before it is put on the grid
  std::uint64_t position_ = 0;  // samples of the training text consumed by all ranks so far

  std::uint64_t samples_per_step() const {
    return static_cast<std::uint64_t>(s_.accumulation) * static_cast<std::uint64_t>(comm_.size()) *
           static_cast<std::uint64_t>(s_.batch);
  }

  static std::string separate_file(const std::string& folder, int rank) {
    return paro::detail::concat(folder, "/separate-rank-", rank, ".bin");
  }

  // A checkpoint of the state after `step` steps (collective): the engine's shards, SEPARATE's state of every
  // rank, trainer.json; then rank 0 makes it the latest.
  void save(paro::dp::Engine<Transport>& engine, paro::compression::Separate* separate, const Strategy& strategy,
            int step) {
    const paro::dp::CheckpointDirectory dir(s_.checkpoint_dir);
    std::string folder;
    paro::on_every_rank_or_none(comm_, "checkpoint save", [&] { folder = dir.create(step); });
    engine.save(folder);
    const std::string fingerprint = hex(fnv1a(engine.gather_trainable()));
    paro::on_every_rank_or_none(comm_, "checkpoint save", [&] {
      if (separate) {
        std::ostringstream state;
        separate->save(state);
        paro::dp::write_file_atomically(separate_file(folder, comm_.rank()), state.str());
      }
      if (comm_.rank() != 0) return;
      const nlohmann::json t = {{"step", step},
                                {"samples", position_},
                                {"ranks", comm_.size()},
                                {"strategy", strategy.name()},
                                {"compress", s_.compress},
                                {"corpus_characters", corpus_.size()},
                                {"parameters_fnv1a64", fingerprint}};
      paro::dp::write_file_atomically(folder + "/trainer.json", t.dump(2) + "\n");
    });
    paro::on_every_rank_or_none(comm_, "checkpoint commit", [&] {
      if (comm_.rank() == 0) dir.commit(step, s_.keep_checkpoints);
    });
    if (comm_.rank() == 0) {
      std::printf("  %s checkpoint: step %d in %s (trainable parameters fnv1a-64 %s)\n", strategy.name().c_str(), step,
                  folder.c_str(), fingerprint.c_str());
      std::fflush(stdout);
    }
  }

  // Loads the latest checkpoint (collective); returns its step.
  int resume(paro::dp::Engine<Transport>& engine, paro::compression::Separate* separate, const Strategy& strategy) {
    const paro::dp::CheckpointDirectory dir(s_.checkpoint_dir);
    long latest = 0;
    std::string folder, saved_strategy;
    int saved_ranks = 0;
    std::uint64_t samples = 0;
    paro::on_every_rank_or_none(comm_, "--resume", [&] {
      const std::optional<long> found = dir.latest();
      paro::detail::require(found.has_value(), "--resume: '", s_.checkpoint_dir,
                            "' holds no complete checkpoint (no 'latest' file)");
      latest = *found;
      folder = dir.step_path(latest);
      const std::string path = folder + "/trainer.json";
      std::string compress;
      try {
        const nlohmann::json t = nlohmann::json::parse(paro::dp::read_whole_file(path));
        paro::detail::require(t.at("step").get<long>() == latest, "--resume: '", path, "': step ", t.at("step").dump(),
                              " is not its folder's");
        paro::detail::require(t.at("corpus_characters").get<std::size_t>() == corpus_.size(), "--resume: '", path,
                              "' was trained on a text of ", t.at("corpus_characters").dump(),
                              " characters; --corpus has ", corpus_.size());
        saved_ranks = t.at("ranks").get<int>();
        samples = t.at("samples").get<std::uint64_t>();
        saved_strategy = t.at("strategy").get<std::string>();
        compress = t.at("compress").get<std::string>();
      } catch (const nlohmann::json::exception& e) {
        throw paro::UsageError(paro::detail::concat("--resume: '", path, "': ", e.what()));
      }
      paro::detail::require(compress == s_.compress, "--resume: the checkpoint was trained with --compress ", compress,
                            "; resume with the same (SEPARATE's error feedback is part of the state)");
      if (separate) {
        paro::detail::require(saved_ranks == comm_.size(), "--resume: SEPARATE's error feedback is per rank; the ",
                              "checkpoint has ", saved_ranks, " ranks, this run ", comm_.size());
        std::istringstream state(paro::dp::read_whole_file(separate_file(folder, comm_.rank())));
        separate->load(state);
      }
    });
    engine.load(folder);
    position_ = samples;
    const std::string fingerprint = hex(fnv1a(engine.gather_trainable()));
    if (comm_.rank() == 0)
      std::printf("  %s resumed: step %ld from %s (%s on %d ranks) (trainable parameters fnv1a-64 %s)\n",
                  strategy.name().c_str(), latest, folder.c_str(), saved_strategy.c_str(), saved_ranks,
                  fingerprint.c_str());
    return static_cast<int>(latest);
  }

  // The micro-step's loss; adds this rank's gradient into the engine's. Strategies differ only in the order
  // in which they sum gradients (over ranks and micro-steps), and float sums depend on it: a coordinate whose
  // sum cancels to ~0 can flip the sign of Adam's step, which BLAS kernels of another CPU can provoke. So
  // --verify puts every gradient on a grid of 2^-16, small enough that the sum of all n A of them stays
  // below 2^8: such sums are exact in any order (24-bit mantissa), and every strategy must then reach NNN's
  // parameters bit for bit.
  template <class Engine>
  double micro_step_loss(Engine& engine, const std::vector<std::size_t>& starts) {
    if (!s_.verify)
      return model_.loss(engine.trainable_params(), engine.frozen_params(), corpus_, starts, engine.gradients());
    exact_.assign(engine.sizes().trainable, 0.0f);
    const double loss = model_.loss(engine.trainable_params(), engine.frozen_params(), corpus_, starts, exact_.data());
    constexpr float grid = 65536.0f;
    const float bound = 256.0f / static_cast<float>(comm_.size() * s_.accumulation);
    float* grads = engine.gradients();
    for (std::size_t i = 0; i < exact_.size(); ++i) {
      const float g = std::nearbyint(exact_[i] * grid) / grid;
      paro::detail::require(std::fabs(g) < bound, "--verify: gradient ", g, " at ", i,
                            " is too large to sum exactly over ", comm_.size(), " ranks x ", s_.accumulation,
                            " micro-steps");
      grads[i] += g;
    }
    return loss;
  }

  // The micro-step's windows of this rank: the next samples of one stream that all ranks consume in rank
  // order, so that a run resumed on another rank count continues where the saved one stopped.
  std::vector<std::size_t> batch(int micro) const {
    std::vector<std::size_t> starts(static_cast<std::size_t>(s_.batch));
    const auto n = static_cast<std::uint64_t>(comm_.size());
    for (std::size_t b = 0; b < starts.size(); ++b) {
      const std::uint64_t index = position_ +
                                  (static_cast<std::uint64_t>(micro) * n + static_cast<std::uint64_t>(comm_.rank())) *
                                      static_cast<std::uint64_t>(s_.batch) +
                                  b;
      starts[b] = corpus_.training_start(index, paro::train::CharMlp::context);
    }
    return starts;
  }

  // The held-out text, 4096 windows split over the ranks.
  double validation_loss(const float* trainable, const float* frozen) {
    const std::size_t windows = 4096, n = static_cast<std::size_t>(comm_.size()),
                      me = static_cast<std::size_t>(comm_.rank());
    std::vector<std::size_t> starts;
    for (std::size_t i = me; i < windows; i += n)
      starts.push_back(corpus_.validation_start(i, windows, paro::train::CharMlp::context));
    double sums[2] = {model_.loss(trainable, frozen, corpus_, starts, nullptr) * static_cast<double>(starts.size()),
                      static_cast<double>(starts.size())};
    comm_.all_reduce(sums, sums, 2, paro::ReduceOp::sum, {paro::Algorithm::tree});
    return sums[0] / sums[1];
  }

  // SEPARATE for the boundary's gradient synchronisation: each trainable tensor a matrix of the flat
  // gradient vector (biases go uncompressed); global scope, the automatic algorithm.
  std::unique_ptr<paro::compression::Separate> compressor(paro::dp::Engine<Transport>& engine) {
    paro::compression::SeparateOptions o;
    o.ratio = s_.ratio;
    o.error_feedback = !s_.no_error_feedback;
    o.error_rule = paro::compression::parse_error_rule(s_.error_rule);
    o.adaptive = s_.adaptive;
    o.block_cols = s_.block_cols;
    o.min_elements = s_.min_elements;
    const std::string risk = o.divergence_risk();
    if (!risk.empty() && comm_.rank() == 0) std::fprintf(stderr, "paro-train: warning: %s\n", risk.c_str());
    auto sep = std::make_unique<paro::compression::Separate>(o);
    struct Piece {
      std::size_t id, offset;
    };
    auto pieces = std::make_shared<std::vector<Piece>>();
    for (const auto& t : model_.tensors())
      if (t.trainable) pieces->push_back({sep->add(t.name, t.rows, t.cols, paro::DataType::f32), t.offset});
    paro::compression::Separate* raw = sep.get();
    engine.set_gradient_sync([this, raw, pieces](float* grads, std::size_t) {
      std::vector<paro::compression::Separate::Gradient> call;
      for (const Piece& p : *pieces) call.push_back({p.id, grads + p.offset, grads + p.offset});
      raw->all_reduce(comm_, call);
    });
    return sep;
  }

  // This rank's bytes sent since the last call, by link class.
  paro::dp::Traffic take_traffic() { return paro::testing::take_traced_traffic(comm_.rank()); }
};

std::string kib(double bytes) { return paro::detail::concat(static_cast<long long>(bytes / 1024.0 + 0.5), " KiB"); }

template <class Transport>
int train(paro::Communicator<Transport>& comm, const Settings& s, nlohmann::json& records) {
  const paro::train::Corpus corpus(s.corpus);
  Trainer<Transport> trainer(comm, s, corpus);
  const bool root = comm.rank() == 0;
  const std::vector<Strategy> strategies =
      s.strategy == "all" ? Strategy::all_valid() : std::vector<Strategy>{Strategy::parse(s.strategy)};
  if (root) {
    std::printf(
        "# paro-train: %d ranks (%s), groups of %d; model %zu parameters (%zu trainable: %s); corpus %zu "
        "characters; batch %d per rank x %d micro-steps; Adam lr %g; %s\n",
        comm.size(), Transport::name, comm.transport(paro::Scope::intra).size(),
        trainer.model().trainable_count() + trainer.model().frozen_count(), trainer.model().trainable_count(),
        s.trainable.c_str(), corpus.size(), s.batch, s.accumulation, static_cast<double>(s.lr),
        s.compress == "separate"
            ? paro::detail::concat("SEPARATE ratio ", s.ratio,
                                   s.no_error_feedback ? " without error feedback" : " error rule " + s.error_rule,
                                   s.adaptive ? " adaptive" : "", s.block_cols ? " block-diagonal" : "")
                  .c_str()
            : "uncompressed");
  }
  bool mismatch = false;
  std::vector<float> reference;
  if (root)
    std::printf("#\n# %-8s %10s %12s %12s %22s %22s %22s %10s %9s\n", "strategy", "loss", "val_loss", "vs NNN",
                "held (meas/model)", "intra B/step (m/m)", "inter B/step (m/m)", "step ms", "bytes ok");
  for (const Strategy& st : strategies) {
    RunResult r = trainer.run(st);
    const bool held_ok = r.held.params == r.model_held.params && r.held.grads == r.model_held.grads &&
                         r.held.optimizer == r.model_held.optimizer &&
                         r.held.gathered_params == r.model_held.gathered_params &&
                         r.held.full_grads == r.model_held.full_grads;
    const bool sent_ok =
        !r.traffic_modelled || (r.sent.intra == r.model_sent.intra && r.sent.inter == r.model_sent.inter);
    const bool bytes_ok = !paro::any_rank(comm, !(held_ok && sent_ok));
    double diff = 0;
    if (reference.empty())
      reference = r.final_params;
    else
      diff = paro::testing::relative_difference(r.final_params, reference);
    diff = paro::reduce_over_ranks(comm, std::max(diff, 0.0), paro::ReduceOp::max);
    if (s.verify && (!bytes_ok || diff != 0)) mismatch = true;
    if (root) {
      auto pair = [](double a, double b, bool modelled) {
        return modelled ? paro::detail::concat(static_cast<long long>(a), "/", static_cast<long long>(b))
                        : paro::detail::concat(static_cast<long long>(a), "/-");
      };
      std::printf("  %-8s %10.4f %12.4f %12.2e %22s %22s %22s %10.1f %9s\n", st.name().c_str(), r.losses.back(),
                  r.validation, diff, (kib(r.held.peak()) + "/" + kib(r.model_held.peak())).c_str(),
                  pair(r.sent.intra, r.model_sent.intra, r.traffic_modelled).c_str(),
                  pair(r.sent.inter, r.model_sent.inter, r.traffic_modelled).c_str(), r.step_ms,
                  bytes_ok ? "yes" : "NO");
      std::printf("  %s trainable parameters fnv1a-64 %s\n", st.name().c_str(), hex(r.params_hash).c_str());
      std::fflush(stdout);
      nlohmann::json j = {{"strategy", st.name()},
                          {"ranks", comm.size()},
                          {"group", comm.transport(paro::Scope::intra).size()},
                          {"steps", s.steps},
                          {"accumulation", s.accumulation},
                          {"batch", s.batch},
                          {"lr", s.lr},
                          {"trainable", s.trainable},
                          {"compress", s.compress},
                          {"losses", r.losses},
                          {"validation_loss", r.validation},
                          {"step_ms", r.step_ms},
                          {"relative_difference_to_nnn", diff},
                          {"held_bytes",
                           {{"params", r.held.params},
                            {"grads", r.held.grads},
                            {"optimizer", r.held.optimizer},
                            {"gathered_params", r.held.gathered_params},
                            {"full_grads", r.held.full_grads}}},
                          {"sent_bytes_per_step", {{"intra", r.sent.intra}, {"inter", r.sent.inter}}},
                          {"bytes_match_model", bytes_ok},
                          {"parameters_fnv1a64", hex(r.params_hash)}};
      if (r.traffic_modelled)
        j["model_sent_bytes_per_step"] = {{"intra", r.model_sent.intra}, {"inter", r.model_sent.inter}};
      if (s.compress == "separate") {
        j["ratio"] = s.ratio;
        j["error_feedback"] = !s.no_error_feedback;
        j["error_rule"] = paro::compression::name_of(paro::compression::parse_error_rule(s.error_rule));
        j["adaptive"] = s.adaptive;
        j["block_cols"] = s.block_cols;
        j["wire_bytes_per_step"] = r.wire_bytes;
      }
      records.push_back(j);
    }
  }
  if (root) {
    std::printf(
        "# held: peak bytes per rank (parameters, gradients, Adam states, and the gathered parameters and full "
        "gradients of a micro-step); B/step: bytes this rank sent per step inside its group and between groups; "
        "vs NNN: max|p - p_NNN| / max|p_NNN| of the trainable parameters\n");
    if (s.verify) std::printf("# verify: %s\n", mismatch ? "MISMATCH" : "every strategy matches NNN and the model");
  }
  return mismatch ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"paro-train: data-parallel training with PaRO-DP strategies on paro's collectives"};
  app.add_option("--backend", s.backend, "threads or mpi")
      ->capture_default_str()
      ->check(CLI::IsMember({"threads", "mpi"}));
  app.add_option("-t,--nthreads", s.thread_ranks, "ranks of the threads backend")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option(
      "--emulate", s.emulate,
      "emulated cluster (PARO_EMULATE form); groups are its nodes (threads default nodes=2 when -t is even)");
  app.add_option("--strategy", s.strategy, "p g os letters (N, I, G; e.g. NIG), a ZeRO stage 0-3, or all")
      ->capture_default_str();
  app.add_option("--config", s.config,
                 "DeepSpeed-style JSON: zero_optimization.{paro_strategy|stage}, gradient_accumulation_steps, "
                 "train_micro_batch_size_per_gpu, optimizer.params.lr");
  app.add_option("--accum", s.accumulation, "micro-steps per step")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--batch", s.batch, "samples per rank and micro-step")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("--steps", s.steps, "optimizer steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--lr", s.lr, "Adam's learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", s.seed, "initial parameters")->capture_default_str();
  app.add_option("--trainable", s.trainable, "all, or some of emb,fc1,fc2,head (the others frozen)")
      ->capture_default_str();
  app.add_option("--corpus", s.corpus, "a text file or folder (default: Debian's fortunes)")->capture_default_str();
  app.add_option("--compress", s.compress,
                 "none, or separate: gradient synchronisation through SEPARATE (g = N strategies)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "separate"}));
  app.add_option("--ratio", s.ratio, "SEPARATE's ratio")->capture_default_str()->check(CLI::Range(2, 4096));
  app.add_flag("--no-error-feedback", s.no_error_feedback, "SEPARATE without error feedback");
  app.add_flag("--adaptive", s.adaptive, "G-SEPARATE");
  app.add_option("--error-rule", s.error_rule,
                 "SEPARATE's error update: smoothed (b e + (1-b)(h-h~)) or beta_on_residual ((1-b)e + b(h-h~), as the "
                 "SEPARATE paper writes it; 'seed' is its former name)")
      ->capture_default_str()
      ->check(CLI::IsMember({"smoothed", "beta_on_residual", "seed"}));
  app.add_option("--block-cols", s.block_cols, "SEPARATE's block-diagonal projection (0: full)")->capture_default_str();
  app.add_option("--min-elements", s.min_elements, "SEPARATE: smaller tensors go uncompressed")->capture_default_str();
  app.add_flag("--overlap", s.overlap,
               "overlap each micro-step's gradient reduce-scatter with the next micro-step (g = I or G)");
  app.add_flag("--verify", s.verify,
               "exit 1 unless every strategy ends bitwise equal to NNN (gradients on an exactly summable grid) and "
               "measured bytes equal the model's");
  app.add_option("--log-every", s.log_every, "print the loss every this many steps (0: only the table)")
      ->capture_default_str();
  app.add_option("--json", s.json_path, "one record per strategy: losses, bytes, time");
  app.add_option(
      "--checkpoint-dir", s.checkpoint_dir,
      "save checkpoints here (a folder every rank can write): every --checkpoint-every steps and at the end");
  app.add_option("--checkpoint-every", s.checkpoint_every, "steps between checkpoints (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--keep-checkpoints", s.keep_checkpoints, "the newest checkpoints kept")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_flag(
      "--resume", s.resume,
      "continue from --checkpoint-dir's latest checkpoint (any strategy and rank count; with SEPARATE the same "
      "ranks)");
  app.add_option("--kill-at-step", s.kill_at_step,
                 "tests: rank --kill-rank sends itself SIGKILL as step K begins (a crash, for the restart tests)");
  app.add_option("--kill-rank", s.kill_rank, "tests: the rank that --kill-at-step kills")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (!s.config.empty()) apply_config(s, s.config, app);
    paro::detail::require(s.compress == "none" || s.strategy != "all",
                          "--compress separate: give one strategy with g = N (e.g. NNN, NNG, INI), not all");
    paro::detail::require(s.strategy != "all" || (s.checkpoint_dir.empty() && !s.resume),
                          "--checkpoint-dir / --resume: give one strategy, not all");
    paro::detail::require(!s.resume || !s.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
    paro::tools::LaunchOptions o;
    o.backend = s.backend;
    o.thread_ranks = s.thread_ranks;
    o.emulate = s.emulate;
    o.trace = true;  // the bytes sent per step are counted from the traced messages
    o.program = "paro-train";
    o.argc = &argc;
    o.argv = &argv;
    return paro::tools::launch_tool(o, s.json_path,
                                    [&](auto& comm, nlohmann::json& records) { return train(comm, s, records); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-train: %s\n", e.what());
    return 2;
  }
}
