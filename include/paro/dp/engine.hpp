#pragma once
// A PaRO-DP training step on the library's scoped collectives: parameters, gradients and Adam's states
// held at the strategy's partitions (dp/strategy.hpp), the step procedure of dp/model.hpp (whose
// formulas give this engine's bytes exactly), and gradient accumulation over micro-steps.
//
//   Engine<T> e(comm, Strategy::parse("NIG"), trainable, frozen);   // collective; full initial values
//   for each step:
//     for each of A micro-steps:
//       e.begin_micro_step();                 // full parameters in trainable_params(), frozen_params()
//       backward(...) adds this rank's gradient into e.gradients()   (full trainable vector)
//       e.end_micro_step();
//     e.step(A);                              // synchronise, Adam on the os shard, rebuild
//   between steps: e.save(folder) / e.load(folder)   (dp/checkpoint.hpp; load takes any strategy or rank count)
//
// The gradients summed over ranks and micro-steps are divided by n A before Adam. Groups must be of equal
// size (the shards are equal slices); collectives run as rings inside the group (intra) and along the
// rail (inter), in place, so that no buffer beyond those of Footprint is needed.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/dp/checkpoint.hpp"
#include "paro/dp/model.hpp"
#include "paro/dp/strategy.hpp"
#include "paro/tools/over_ranks.hpp"

namespace paro::dp {

struct Adam {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

template <class Transport>
class Engine {
 public:
  // Replaces the boundary's gradient synchronisation for g = N: given the full accumulated gradient of this
  // rank, leave in it the mean over ranks (e.g. SEPARATE's compressed all-reduce).
  using GradientSync = std::function<void(float* gradients, std::size_t count)>;

  Engine(Communicator<Transport>& comm, Strategy s, const std::vector<float>& trainable,
         const std::vector<float>& frozen, Adam adam = {}, Algorithm algorithm = Algorithm::ring)
      : comm_(comm), s_(s), adam_(adam), algo_(algorithm) {
    detail::require(s.valid(), "strategy ", s.name(), " is not valid: ", s.invalid_reason());
    const auto& groups = comm.groups();
    detail::require(!groups.uneven(), "PaRO-DP needs groups of equal size; the grouping ", comm.grouping().describe(),
                    " gives groups of ", groups.members.front().size(), " .. ", groups.members.back().size(), " ranks");
    cluster_ = {comm.size(), comm.transport(Scope::intra).size()};
    local_ = static_cast<std::size_t>(comm.transport(Scope::intra).rank());
    group_ = static_cast<std::size_t>(comm.transport(Scope::inter).rank());
    sizes_ = {trainable.size() + frozen.size(), trainable.size()};
    trainable_len_ = padded(trainable.size(), cluster_.ranks);
    frozen_len_ = padded(frozen.size(), cluster_.ranks);
    trainable_ = stored(trainable, trainable_len_);
    frozen_ = stored(frozen, frozen_len_);
    grads_.assign(trainable_len_ / parts(s_.g, cluster_), 0.0f);
    m_.assign(trainable_len_ / parts(s_.os, cluster_), 0.0f);
    v_.assign(m_.size(), 0.0f);
    if (s_.p != Partition::N) {
      full_trainable_.assign(trainable_len_, 0.0f);
      full_frozen_.assign(frozen_len_, 0.0f);
    }
    if (s_.g != Partition::N) full_grads_.assign(trainable_len_, 0.0f);
  }

  // A reduce-scatter still in flight (set_overlap) must not outlive its buffer.
  ~Engine() {
    for (Request& r : pending_) try {
        r.wait();
      } catch (const Error&) {
      }
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Sizes& sizes() const { return sizes_; }
  const Cluster& cluster() const { return cluster_; }

  void set_gradient_sync(GradientSync sync) {
    detail::require(!sync || s_.g == Partition::N, "a custom gradient synchronisation needs g = N (strategy ",
                    s_.name(), " shards the gradients every micro-step)");
    sync_ = std::move(sync);
  }

  // The full parameters (valid from begin_micro_step() to the next step()).
  const float* trainable_params() const { return s_.p == Partition::N ? trainable_.data() : full_trainable_.data(); }
  const float* frozen_params() const { return s_.p == Partition::N ? frozen_.data() : full_frozen_.data(); }
  // Where backward adds this rank's gradient of the trainable parameters (full length).
  float* gradients() { return s_.g == Partition::N ? grads_.data() : full_grads_.data(); }

  void begin_micro_step() {
    in_step_ = true;
    if (s_.g != Partition::N) std::fill(full_grads_.begin(), full_grads_.end(), 0.0f);
    if (s_.p == Partition::N) return;
    gather(trainable_.data(), full_trainable_.data(), trainable_len_, s_.p);
    gather(frozen_.data(), full_frozen_.data(), frozen_len_, s_.p);
  }

  void end_micro_step() {
    if (s_.g == Partition::N) return;
    if (!overlap_) {
      scatter(full_grads_.data(), trainable_len_, s_.g, false);
      accumulate(full_grads_.data());
      return;
    }
    finish_scatter();
    // The next micro-step's backward writes the other buffer while this one's reduce-scatter runs.
    std::swap(full_grads_, in_flight_grads_);
    pending_ = scatter(in_flight_grads_.data(), trainable_len_, s_.g, true);
  }

  // g != N: each micro-step's gradient reduce-scatter runs while the next micro-step computes (its result
  // is added at the next end_micro_step or step), at the cost of a second full gradient buffer. Every rank
  // must choose the same. Collectives issued meanwhile (the parameter gathers of p != N) queue behind it.
  void set_overlap(bool on) {
    finish_scatter();
    overlap_ = on && s_.g != Partition::N;
    in_flight_grads_.assign(overlap_ ? trainable_len_ : 0, 0.0f);
    in_flight_grads_.shrink_to_fit();
  }

  // The boundary: gradients to the os partition, Adam on this rank's os shard, parameters rebuilt.
  void step(int accumulation) {
    detail::require(accumulation >= 1, "accumulation ", accumulation, ": must be >= 1");
    finish_scatter();
    float* g = grads_.data();
    float scale = 1.0f / static_cast<float>(cluster_.ranks * accumulation);
    const std::size_t L = trainable_len_;
    if (s_.g == Partition::N && sync_) {
      sync_(g, L);
      scale = 1.0f / static_cast<float>(accumulation);
    } else if (s_.g == Partition::N) {
      intra_reduce_scatter(g, L);
      if (s_.os == Partition::G)
        rail_reduce_scatter(g + offset(Partition::I, L), L);
      else
        rail_all_reduce(g + offset(Partition::I, L), L);
      if (s_.os == Partition::N) intra_all_gather(g, L);
    } else if (s_.g == Partition::I) {
      if (s_.os == Partition::G)
        rail_reduce_scatter(g, L);
      else
        rail_all_reduce(g, L);
    }
    // The os shard of the gradients, inside whatever the accumulator holds.
    const float* shard = g + (offset(s_.os, L) - offset(s_.g, L));
    float* params = trainable_.data() + (offset(s_.os, L) - offset(s_.p, L));
    ++steps_;
    const float c1 = 1.0f - std::pow(adam_.beta1, static_cast<float>(steps_));
    const float c2 = 1.0f - std::pow(adam_.beta2, static_cast<float>(steps_));
    for (std::size_t i = 0; i < m_.size(); ++i) {
      const float gi = shard[i] * scale;
      m_[i] = adam_.beta1 * m_[i] + (1.0f - adam_.beta1) * gi;
      v_[i] = adam_.beta2 * v_[i] + (1.0f - adam_.beta2) * gi * gi;
      params[i] -= adam_.lr * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + adam_.eps);
    }
    // Rebuild the trainable parameters at p's partition.
    float* p = trainable_.data();
    if (s_.os == Partition::G && s_.p != Partition::G)
      rail_all_gather(p + offset(Partition::I, L) - offset(s_.p, L), L);
    if (s_.os != Partition::N && s_.p == Partition::N) intra_all_gather(p, L);
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    in_step_ = false;
  }

  long steps_taken() const { return steps_; }

  // Collective, between steps: this rank's share of the parameters and of Adam's states into
  // engine_shard_path(folder, rank) (dp/checkpoint.hpp), which must be a folder every rank can write.
  // Every rank writes the slice of each vector that a G partition would give it, which lies inside
  // whatever partition it holds: every element is written once, and the writing is spread evenly.
  // Returns once every rank's file is in place; a failure on any rank throws on every rank.
  void save(const std::string& folder) {
    detail::require(!in_step_,
                    "checkpoint save: a step is in progress (begin_micro_step without step); save between steps");
    on_every_rank_or_none(comm_, "checkpoint save", [&] {
      ShardHeader h;
      h.ranks = cluster_.ranks;
      h.group = cluster_.group;
      h.rank = comm_.rank();
      h.params = sizes_.params;
      h.trainable = sizes_.trainable;
      h.step = steps_;
      h.strategy = s_;
      std::vector<const float*> data;
      auto add = [&](StateVector v, Partition held, const std::vector<float>& values, std::size_t L) {
        const std::size_t begin = offset(Partition::G, L);
        h.pieces.push_back({v, begin, L / n(), 0});
        data.push_back(values.data() + (begin - offset(held, L)));
      };
      add(StateVector::trainable, s_.p, trainable_, trainable_len_);
      add(StateVector::frozen, s_.p, frozen_, frozen_len_);
      add(StateVector::adam_m, s_.os, m_, trainable_len_);
      add(StateVector::adam_v, s_.os, v_, trainable_len_);
      std::string bytes = h.encode();
      for (std::size_t i = 0; i < data.size(); ++i)
        bytes.append(reinterpret_cast<const char*>(data[i]), h.pieces[i].count * sizeof(float));
      write_file_atomically(engine_shard_path(folder, comm_.rank()), bytes);
    });
  }

  // Collective, between steps: the state that save() wrote into `folder` replaces this engine's parameters,
  // Adam's states and step count. The saved run's strategy, rank count and group size may differ from this
  // one's; the model (its parameter counts) must be the same. Every rank reads the files whose pieces it
  // needs, so the folder must be readable from every rank. A failure on any rank throws on every rank.
  void load(const std::string& folder) {
    detail::require(!in_step_,
                    "checkpoint load: a step is in progress (begin_micro_step without step); load between steps");
    on_every_rank_or_none(comm_, "checkpoint load", [&] {
      const ShardHeader first = ShardHeader::read(engine_shard_path(folder, 0));
      detail::require(first.rank == 0, "checkpoint '", engine_shard_path(folder, 0), "': its header says rank ",
                      first.rank);
      std::vector<ShardHeader> shards{first};
      detail::require(first.params == sizes_.params && first.trainable == sizes_.trainable, "checkpoint '", folder,
                      "': its model has ", first.params, " parameters (", first.trainable,
                      " trainable); this engine's has ", sizes_.params, " (", sizes_.trainable, ")");
      for (int r = 1; r < first.ranks; ++r) {
        shards.push_back(ShardHeader::read(engine_shard_path(folder, r)));
        const ShardHeader& h = shards.back();
        detail::require(h.ranks == first.ranks && h.rank == r && h.group == first.group && h.params == first.params &&
                            h.trainable == first.trainable && h.step == first.step && h.strategy == first.strategy,
                        "checkpoint '", engine_shard_path(folder, r), "': its header (rank ", h.rank, " of ", h.ranks,
                        ", step ", h.step, ", ", h.strategy.name(), ") does not match rank 0's (", first.ranks,
                        " ranks, step ", first.step, ", ", first.strategy.name(), ")");
      }
      restore(folder, shards, StateVector::trainable, trainable_, offset(s_.p, trainable_len_));
      restore(folder, shards, StateVector::frozen, frozen_, offset(s_.p, frozen_len_));
      restore(folder, shards, StateVector::adam_m, m_, offset(s_.os, trainable_len_));
      restore(folder, shards, StateVector::adam_v, v_, offset(s_.os, trainable_len_));
      steps_ = first.step;
    });
    std::fill(grads_.begin(), grads_.end(), 0.0f);
  }

  // Every trainable parameter (collective; traffic of its own, outside a step's).
  std::vector<float> gather_trainable() {
    std::vector<float> out(trainable_len_);
    if (s_.p == Partition::N)
      std::copy(trainable_.begin(), trainable_.end(), out.begin());
    else
      gather(trainable_.data(), out.data(), trainable_len_, s_.p);
    out.resize(sizes_.trainable);
    return out;
  }

  // Bytes this rank holds, by the categories of Footprint (capacities of the buffers themselves).
  Footprint memory() const {
    auto bytes = [](const std::vector<float>& v) { return static_cast<double>(v.capacity() * sizeof(float)); };
    Footprint f;
    f.params = bytes(trainable_) + bytes(frozen_);
    f.grads = bytes(grads_);
    f.optimizer = bytes(m_) + bytes(v_);
    f.gathered_params = bytes(full_trainable_) + bytes(full_frozen_);
    f.full_grads = bytes(full_grads_) + bytes(in_flight_grads_);
    return f;
  }

 private:
  Communicator<Transport>& comm_;
  Strategy s_;
  Adam adam_;
  Algorithm algo_;
  Cluster cluster_;
  Sizes sizes_;
  std::size_t local_ = 0, group_ = 0;  // my index in the group, my group's index on the rail
  std::size_t trainable_len_ = 0, frozen_len_ = 0;
  std::vector<float> trainable_, frozen_;            // at p's partition
  std::vector<float> grads_;                         // accumulator at g's partition
  std::vector<float> m_, v_;                         // Adam at os's partition
  std::vector<float> full_trainable_, full_frozen_;  // p != N: gathered for a micro-step
  std::vector<float> full_grads_;                    // g != N: a micro-step's gradient
  std::vector<float> in_flight_grads_;               // overlap: the previous one, being reduce-scattered
  std::vector<Request> pending_;                     // overlap: its reduce-scatters
  bool overlap_ = false;
  GradientSync sync_;
  long steps_ = 0;
  bool in_step_ = false;  // from begin_micro_step() to step()

  // Fills `out`, elements [begin, begin + out.size()) of a vector, from the pieces of every shard file
  // that overlap it; positions past the vector's real length (padding) are zero.
  static void restore(const std::string& folder, const std::vector<ShardHeader>& shards, StateVector v,
                      std::vector<float>& out, std::uint64_t begin) {
    std::fill(out.begin(), out.end(), 0.0f);
    const std::uint64_t end = std::min<std::uint64_t>(begin + out.size(), shards.front().real_length(v));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> read;  // [from, to) filled
    for (const ShardHeader& h : shards)
      for (const ShardPiece& p : h.pieces) {
        const std::uint64_t from = std::max(begin, p.begin), to = std::min(end, p.begin + p.count);
        if (p.vector != v || from >= to) continue;
        read_piece(engine_shard_path(folder, h.rank), p, from, to - from, out.data() + (from - begin));
        read.emplace_back(from, to);
      }
    std::sort(read.begin(), read.end());
    std::uint64_t reach = begin;
    for (auto [from, to] : read) {
      if (from > reach) break;
      reach = std::max(reach, to);
    }
    detail::require(reach >= end, "checkpoint '", folder, "': no shard file holds ", name_of(v), " [", reach, ", ", end,
                    ") (", shards.size(), " files of a ", shards.front().strategy.name(), " run)");
  }

  // Where a shard of a vector of length L starts in the full vector.
  std::size_t offset(Partition p, std::size_t L) const {
    const std::size_t m = static_cast<std::size_t>(cluster_.group), n = static_cast<std::size_t>(cluster_.ranks);
    if (p == Partition::N) return 0;
    if (p == Partition::I) return local_ * (L / m);
    return local_ * (L / m) + group_ * (L / n);
  }

  std::vector<float> stored(const std::vector<float>& full, std::size_t L) const {
    std::vector<float> padded_full(full);
    padded_full.resize(L, 0.0f);
    const std::size_t begin = offset(s_.p, L);
    return std::vector<float>(padded_full.begin() + static_cast<std::ptrdiff_t>(begin),
                              padded_full.begin() + static_cast<std::ptrdiff_t>(begin + L / parts(s_.p, cluster_)));
  }

  Options intra() const { return {algo_, Scope::intra}; }
  Options rail() const { return {algo_, Scope::inter}; }
  std::size_t m() const { return static_cast<std::size_t>(cluster_.group); }
  std::size_t n() const { return static_cast<std::size_t>(cluster_.ranks); }

  // In place on a full vector x of length L (the I shard lands at offset(I)), or on its I slot.
  // Reduce-scatters are started nonblocking when `start` (the overlap), else run at once (the Request
  // returned is then complete).
  Request intra_reduce_scatter(float* x, std::size_t L, bool start = false) {
    return reduce_scatter(x, x + local_ * (L / m()), L / m(), intra(), start);
  }
  Request rail_reduce_scatter(float* slot, std::size_t L, bool start = false) {
    return reduce_scatter(slot, slot + group_ * (L / n()), L / n(), rail(), start);
  }
  Request reduce_scatter(float* send, float* recv, std::size_t count, Options o, bool start) {
    if (start) return comm_.ireduce_scatter(send, recv, count, ReduceOp::sum, o);
    comm_.reduce_scatter(send, recv, count, ReduceOp::sum, o);
    return {};
  }
  void intra_all_gather(float* x, std::size_t L) { comm_.all_gather(x + local_ * (L / m()), x, L / m(), intra()); }
  void rail_all_reduce(float* slot, std::size_t L) { comm_.all_reduce(slot, slot, L / m(), ReduceOp::sum, rail()); }
  void rail_all_gather(float* slot, std::size_t L) {
    comm_.all_gather(slot + group_ * (L / n()), slot, L / n(), rail());
  }

  // A shard stored at partition p into the full vector `full`.
  void gather(const float* shard, float* full, std::size_t L, Partition p) {
    std::copy(shard, shard + L / parts(p, cluster_), full + offset(p, L));
    if (p == Partition::G) rail_all_gather(full + offset(Partition::I, L), L);
    intra_all_gather(full, L);
  }

  // Sums the full vector x over the ranks that share partition p's shard, left at offset(p): at once, or
  // started (`start`), returning the requests to wait for.
  std::vector<Request> scatter(float* x, std::size_t L, Partition p, bool start) {
    std::vector<Request> started;
    started.push_back(intra_reduce_scatter(x, L, start));
    if (p == Partition::G) started.push_back(rail_reduce_scatter(x + offset(Partition::I, L), L, start));
    return started;
  }

  // Adds this rank's g shard of a reduce-scattered full gradient into the accumulator.
  void accumulate(const float* full) {
    const float* mine = full + offset(s_.g, trainable_len_);
    for (std::size_t i = 0; i < grads_.size(); ++i) grads_[i] += mine[i];
  }

  void finish_scatter() {
    if (pending_.empty()) return;
    for (Request& r : pending_) r.wait();
    pending_.clear();
    accumulate(in_flight_grads_.data());
  }
};

}  // namespace paro::dp
