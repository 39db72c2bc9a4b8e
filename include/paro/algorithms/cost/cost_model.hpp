#pragma once
// The alpha-beta cost model: the links, the scope's shape, and the terms every algorithm's prediction is
// built from (hops, flat rings and trees, direct exchanges, a flat level), and the lower bound that no
// algorithm can beat on the topology. Each algorithm's own formula is beside it: the flat ones in their
// descriptors (ring.hpp, tree.hpp), paro_cc's and paro_seq's in paro_cc_cost.hpp, MiCS-HCS's in
// mics_hcs_cost.hpp; registry.hpp turns them into the automatic choice (as NCCL's tuner does).
//
// Two link classes: intra (inside a node; per rank) and inter (leaving a node; per NIC). A NIC is either
// shared by all ranks of its node (public cloud) or one per rank (rail-optimized GPU clusters). Times are
// in microseconds, sizes in bytes, bandwidths in Gbit/s.
//
// Where the numbers come from (first found): PARO_COST_FILE (written by paro-bench --calibrate), the link
// keys of PARO_EMULATE, the links of the topology file, PARO_LINKS=<preset> (presets()), the default preset.
// The formulas are in docs/algorithms.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/collective.hpp"
#include "paro/core/error.hpp"
#include "paro/topology/topology.hpp"

namespace paro::algorithms {

struct LinkModel {
  LinkSpec intra{800, 1};  // default: NVLink-class links inside a node
  LinkSpec inter{200, 5};  // one 200 Gbit/s NIC per rank
  NicModel nic = NicModel::per_rank;
  // Where the topology gives them: a NIC's own link (inter above is the same), and a NIC's share of its
  // pod's uplink when every NIC of the pod sends across pods (the bound's, and CostModel::hop's pod term).
  std::optional<LinkSpec> nic_link, pod_link;
  double step_us = 2;        // software cost of one message step
  double lane_us = 20;       // starting the lanes of one overlapped call
  double reduce_gbps = 400;  // local reduction throughput (bytes of one operand)
  double copy_gbps = 800;    // local copies
  // Measured corrections per (collective, algorithm, and for paro_cc where its lanes ran): at calibrated
  // sizes, measured time over the formula's; between them interpolated in log(size), beyond them the
  // nearest. What the formulas leave out (waking lanes, scheduling, caches) depends on the size, as NCCL's
  // tuner carries a base latency and a bandwidth efficiency per algorithm. paro_cc's lanes on threads and
  // inline are two schedules that the formulas miss by different factors, so each has its own.
  using Correction = std::vector<std::pair<double, double>>;  // (full-buffer bytes, ratio), by bytes
  struct CorrectionKey {
    Collective collective;
    Algorithm algorithm;
    bool lanes_inline = false;
    friend bool operator<(const CorrectionKey& a, const CorrectionKey& b) {
      return std::tie(a.collective, a.algorithm, a.lanes_inline) < std::tie(b.collective, b.algorithm, b.lanes_inline);
    }
  };
  std::map<CorrectionKey, Correction> corrections;
  // How far predictions may be off (a fraction; a calibration measures it): algorithms predicted within it
  // of the fastest are told apart by their predictions at the neighbouring sizes (AlgorithmList::decide).
  double model_error = 0.05;
  std::string source = "default preset";

  double correction(Collective c, Algorithm a, double bytes, bool lanes_inline = false) const {
    auto it = corrections.find({c, a, lanes_inline});
    if (it == corrections.end() || it->second.empty()) return 1;
    const Correction& k = it->second;
    if (bytes <= k.front().first) return k.front().second;
    if (bytes >= k.back().first) return k.back().second;
    std::size_t i = 1;
    while (k[i].first < bytes) ++i;
    const double f = std::log(bytes / k[i - 1].first) / std::log(k[i].first / k[i - 1].first);
    return k[i - 1].second + f * (k[i].second - k[i - 1].second);
  }
};

struct NamedPreset {
  const char* name;
  const char* describes;
  LinkModel model;
};

// Where only messages take time: every software and local cost zero (reductions and copies 1e9 Gbit/s).
inline LinkModel links_only() {
  LinkModel m;
  m.step_us = 0;
  m.lane_us = 0;
  m.reduce_gbps = m.copy_gbps = 1e9;
  return m;
}

inline std::vector<NamedPreset> presets() {
  auto make = [](LinkSpec intra, LinkSpec inter, NicModel nic, double step, double reduce) {
    LinkModel m;
    m.intra = intra;
    m.inter = inter;
    m.nic = nic;
    m.step_us = step;
    m.reduce_gbps = reduce;
    m.copy_gbps = 2 * reduce;
    return m;
  };
  return {
      {"nvlink-ib400", "H100/H200 nodes: NVLink 3.6 Tbit/s per GPU, one 400 Gbit/s InfiniBand NIC per GPU",
       make({3600, 1}, {400, 4}, NicModel::per_rank, 2, 8000)},
      {"nvlink-roce200", "A100 nodes: NVLink 2.4 Tbit/s per GPU, one 200 Gbit/s RoCE NIC per GPU",
       make({2400, 1}, {200, 6}, NicModel::per_rank, 2, 6000)},
      {"pcie-eth100", "PCIe GPUs: 128 Gbit/s per GPU, one 100 Gbit/s Ethernet NIC per node",
       make({128, 3}, {100, 15}, NicModel::shared, 3, 4000)},
      {"cpu-tcp25", "CPU hosts: shared memory 80 Gbit/s per rank, one 25 Gbit/s TCP NIC per node",
       make({80, 1}, {25, 30}, NicModel::shared, 3, 40)},
      {"links-only",
       "a simulated cluster that times messages only (SimGrid SMPI without computation): no software, copy or "
       "reduction time; links from the topology",
       links_only()},
  };
}

inline LinkModel preset(const std::string& name) {
  std::string names;
  for (const auto& p : presets()) {
    if (name == p.name) {
      LinkModel m = p.model;
      m.source = detail::concat("preset ", p.name);
      return m;
    }
    names += detail::concat(names.empty() ? "" : " ", p.name);
  }
  throw UsageError(detail::concat("PARO_LINKS='", name, "' is not a preset; allowed: ", names));
}

// Where paro_cc's lanes run (PARO_LANES): on threads of their own, which pipeline the levels but are woken
// for every call (LinkModel::lane_us); inline on the caller's thread, overlapping the levels through the
// rail's hooks (the only way where the backend cannot be driven from several threads); or, per call,
// whichever of the two the model predicts faster.
enum class LaneChoice { threads, inline_only, faster };
inline constexpr LaneChoice all_lane_choices[] = {LaneChoice::faster, LaneChoice::threads, LaneChoice::inline_only};
// PARO_LANES's value for each.
inline const char* name_of(LaneChoice c) {
  return c == LaneChoice::threads ? "threads" : c == LaneChoice::inline_only ? "inline" : "auto";
}

// What the model needs to know about a scope: how the hierarchical algorithms would cut it, and how its
// flat algorithms' messages meet the links.
struct CostShape {
  int ranks = 1;
  std::vector<int> units;                  // units per level of the hierarchy, top first; empty: flat
  std::vector<bool> rail_inter;            // per level: do the rail's messages leave the node?
  std::vector<bool> rail_pods;             // per level: do they cross pods?
  bool leaf_inter = false;                 // does the innermost (flat) unit span nodes?
  bool even = true;                        // every level's units are alike (else the flat ring runs)
  int nodes = 1;                           // distinct nodes among the scope's members
  int ranks_per_node = 1;                  // the scope's members on the fullest node
  double nic_flows = 1;                    // flows through one NIC when every member sends across nodes at once
  double ring_nic_flows = 0;               // flows through one NIC in a flat ring step (0: the ring stays in a node)
  int ring_inter_hops = 0;                 // hops of the flat ring (of `ranks`) that leave a node
  int ring_pod_hops = 0;                   // ... and that cross pods
  double ring_pod_flows = 0;               // flows leaving one pod in a flat ring step
  int pods = 1;                            // distinct pods among the scope's members (1: no pod level known)
  int pod_ranks = 0, pod_nics = 0;         // the scope's members in its fullest pod, and their NICs
  LaneChoice lanes = LaneChoice::threads;  // where paro_cc's lanes may run
  // The same scope cut by its nodes alone, where its chain has a level above the node (cost_shape.hpp,
  // scope_shape): a hierarchical algorithm may run whichever cut is predicted faster. Its lanes are this
  // shape's.
  std::shared_ptr<const CostShape> node_cut;
  // Members of one unit at `level` (level 0: the whole scope; units.size(): the innermost unit).
  int members_below(std::size_t level) const {
    int r = ranks;
    for (std::size_t k = 0; k < level; ++k) r /= std::max(units[k], 1);
    return r;
  }
  int leaf() const { return members_below(units.size()); }
  bool hierarchical() const { return !units.empty() && even; }
};

// The per-call choices of an algorithm that has none (a descriptor without `Params`, registry.hpp).
struct NoParams {
  friend bool operator==(const NoParams&, const NoParams&) { return true; }
  friend bool operator!=(const NoParams&, const NoParams&) { return false; }
};
// Which of an algorithm's measured corrections applies (LinkModel::correction): its inline-lanes one only
// for params that say so (paro_cc's own overload of this function).
inline bool corrected_inline(const NoParams&) { return false; }

// What a descriptor's `predict` returns: the time and, for an algorithm with per-call choices, how it would
// run the call (its Params: the plan its schedules then follow).
template <class Params = NoParams>
struct Predicted {
  double time_us = 0;
  Params params{};
};
using Prediction = Predicted<>;

// Exchanges a direct exchange over n members keeps in flight (direct.hpp) when each carries
// `exchange_bytes`: enough for `window_bytes` in flight, at least 16, at most n - 1. Small blocks go to
// every member at once and pay one latency; large ones come a window at a time, each window's latency
// small beside its transfer, so that paro_cc's unit can move one window while the next flies.
inline int direct_window(int n, double exchange_bytes, double window_bytes) {
  constexpr double fewest = 16;
  const double wanted = exchange_bytes > 0 ? std::max(std::ceil(window_bytes / exchange_bytes), fewest) : n;
  return static_cast<int>(std::max(1.0, std::min(wanted, n - 1.0)));
}

// Exchanges per batch of paro_cc's together schedule (paro_cc.hpp, rail_batches) over a rail of g units
// whose direct exchange keeps `window` in flight: the whole window where it holds the rail, else half of
// it. Exchanges posted at once share the NIC and land together; with half-window batches my unit's
// exchange of one batch runs while the next flies, and its replacements leave a batch apart, so two
// batches are always in flight and the next one's latency hides behind the one before's transfer.
inline int rail_batch(int g, int window) {
  window = std::max(window, 1);
  return window >= g - 1 ? window : (window + 1) / 2;
}

class CostModel {
 public:
  // Blocks up to this size are exchanged directly inside paro_cc's levels (PARO_DIRECT_MAX): about where
  // a message's latency and its transfer time are equal on NVLink/InfiniBand/Ethernet-class links.
  static constexpr std::size_t default_direct_max_bytes = std::size_t{256} << 10;
  // Receives a ring keeps posted (PARO_RING_WINDOW, ring.hpp).
  static constexpr std::size_t default_ring_window = 4;
  // Bytes a direct exchange keeps in flight (PARO_DIRECT_WINDOW, direct_window): about ten times a
  // latency's worth of bandwidth on NVLink/InfiniBand-class links, so a window's latency costs about 10%.
  static constexpr std::size_t default_direct_window_bytes = std::size_t{1} << 20;

  CostModel() = default;
  // bound_links: the links the lower bound is computed on (the topology's own, where known).
  CostModel(LinkModel links, LinkModel bound_links, std::size_t direct_max_bytes = default_direct_max_bytes,
            std::size_t ring_window = default_ring_window,
            std::size_t direct_window_bytes = default_direct_window_bytes)
      : l_(std::move(links)),
        bound_(std::move(bound_links)),
        direct_max_(static_cast<double>(direct_max_bytes)),
        ring_window_(static_cast<double>(std::max<std::size_t>(ring_window, 1))),
        direct_window_bytes_(static_cast<double>(direct_window_bytes)) {}
  const LinkModel& links() const { return l_; }
  const LinkModel& bound_links() const { return bound_; }
  // Blocks up to this many bytes are exchanged directly (PARO_DIRECT_MAX; 0: rings only).
  double direct_max_bytes() const { return direct_max_; }
  // This model on other links, with its bound and direct threshold.
  CostModel with_links(LinkModel links) const {
    CostModel m = *this;
    m.l_ = std::move(links);
    return m;
  }

  // No algorithm beats this: the bytes that must cross a node's NICs and each rank's intra links, traded
  // off against each other at best, the bytes that must enter a pod through its uplink, and one latency
  // of the slowest link the last byte must cross (an algorithm that posts all its messages at once pays
  // no more). Software costs (steps, reductions) are not in it.
  double lower_bound(Collective c, std::size_t full_bytes, const CostShape& s) const {
    return lower_bound(BuiltinCollectives::traffic(c), full_bytes, s);
  }
  // The same for any collective, by what it must move (its descriptor's traffic(), collective.hpp).
  double lower_bound(const MinimumTraffic& t, std::size_t full_bytes, const CostShape& s) const {
    return bound_on(bound_, t, full_bytes, s);
  }
  // The same bound on the links the predictions use: no prediction is below it (Builtin::formula), where
  // a formula's lanes would otherwise overlap on a NIC they share.
  double bound_on_own_links(const MinimumTraffic& t, std::size_t full_bytes, const CostShape& s) const {
    return bound_on(l_, t, full_bytes, s);
  }

  static double bound_on(const LinkModel& links, const MinimumTraffic& t, std::size_t full_bytes, const CostShape& s) {
    const double N = static_cast<double>(full_bytes);
    const int n = s.ranks, q = std::max(1, s.nodes), m = std::max(1, s.ranks_per_node);
    if (n <= 1) return 0;
    // Bytes every rank must receive, and a unit (node, pod) of `units` through its boundary, at the least.
    const double per_rank = t.received(n) * N;
    auto entering = [&](int units, int members) { return t.entering(n, units, members) * N; };
    const LinkSpec nic = links.nic_link.value_or(links.inter);
    const double nic_us = nic.us_per_byte() / (links.nic == NicModel::per_rank ? m : 1);
    const double intra_us = links.intra.us_per_byte();
    double bandwidth = 0;
    if (q == 1) {
      bandwidth = per_rank * intra_us;
    } else {
      // y bytes through the node's NICs leave per_rank - y/m for each rank's intra links.
      const double per_node_nic = entering(q, m);
      const double balanced = intra_us > 0 ? per_rank * intra_us / (nic_us + intra_us / m) : per_node_nic;
      const double y = std::max(per_node_nic, std::min(balanced, per_rank * m));
      bandwidth = std::max(y * nic_us, (per_rank - y / m) * intra_us);
    }
    double latency = q > 1 ? nic.latency_us : links.intra.latency_us;
    if (links.pod_link && s.pods > 1 && s.pod_nics > 0) {
      bandwidth = std::max(bandwidth, entering(s.pods, s.pod_ranks) * links.pod_link->us_per_byte() / s.pod_nics);
      latency = std::max(latency, links.pod_link->latency_us);
    }
    return bandwidth + latency;
  }

  // The terms algorithm descriptors build their predictions from (each algorithm's `predict`, next to
  // its schedules). N: the full buffer in bytes; n: ranks; formulas in docs/algorithms.md.
  struct Hop {
    double alpha, beta;  // per message (us), per byte (us)
  };
  // A ring whose hops differ (a flat ring over nodes): every block crosses each hop in turn (their mean),
  // and the slowest hop carries every block.
  struct RingHops {
    Hop mean, slowest;
  };
  // The mean of hops taken in the given shares.
  static Hop mean_hop(std::initializer_list<std::pair<double, Hop>> shares) {
    Hop m{0, 0};
    for (const auto& [share, h] : shares) {
      m.alpha += share * h.alpha;
      m.beta += share * h.beta;
    }
    return m;
  }

  // A message inside a node, or leaving it with `flows` messages through its NIC at once. One that also
  // crosses pods takes the pod uplink's latency and, with `pod_flows` messages leaving the pod at once,
  // its share of the uplink (pod_link: a NIC's share when all of the pod's NICs send).
  Hop hop(bool inter, double flows, const CostShape* pod_crossing = nullptr, double pod_flows = 0) const {
    if (!inter) return {l_.intra.latency_us + l_.step_us, l_.intra.us_per_byte()};
    const double share = l_.nic == NicModel::shared ? std::max(1.0, flows) : 1.0;
    Hop h{l_.inter.latency_us + l_.step_us, std::max(l_.intra.us_per_byte(), share * l_.inter.us_per_byte())};
    if (pod_crossing && l_.pod_link) {
      const double nics = std::max(1, pod_crossing->pod_nics);
      h.alpha = std::max(h.alpha, l_.pod_link->latency_us + l_.step_us);
      h.beta = std::max(h.beta, l_.pod_link->us_per_byte() * std::max(1.0, pod_flows) / nics);
    }
    return h;
  }
  // Every member of the scope sends across pods at once (a rail between pods, a tree's long step).
  double all_pod_flows(const CostShape& s) const { return s.pod_ranks * instances(s); }
  // A message when every member sends at once to anywhere in the scope: through the NIC, shared by the
  // node's senders, and across pods where the scope spans nodes and pods (a tree's step, an exchange).
  Hop all_senders_hop(const CostShape& s) const {
    return hop(s.nodes > 1, s.nic_flows, s.pods > 1 ? &s : nullptr, all_pod_flows(s));
  }
  // Instances of the scope's collective that run at once on a node's ranks (one per group or rail).
  static double instances(const CostShape& s) { return s.nic_flows / std::max(1, s.ranks_per_node); }
  // The slowest link of a flat scope: its messages to the next rank (ring) or to all (direct).
  Hop flat_link(const CostShape& s) const {
    return hop(s.ring_nic_flows > 0, s.ring_nic_flows, s.ring_pod_hops > 0 ? &s : nullptr, s.ring_pod_flows);
  }
  // A flat scope's ring: most of its hops stay in a node.
  RingHops ring_link(const CostShape& s) const {
    const Hop slowest = flat_link(s);
    if (s.ring_nic_flows <= 0 || s.ring_inter_hops <= 0) return {slowest, slowest};
    const double n = std::max(1, s.ranks), inter = s.ring_inter_hops / n, pods = s.ring_pod_hops / n;
    return {mean_hop({{1 - inter, hop(false, 0)}, {inter - pods, hop(true, s.ring_nic_flows)}, {pods, slowest}}),
            slowest};
  }
  double reduce_us(double bytes) const { return bytes * 8e-3 / l_.reduce_gbps; }
  double copy_us(double bytes) const { return bytes * 8e-3 / l_.copy_gbps; }
  double barrier_us(int n) const { return std::ceil(std::log2(std::max(n, 2))) * (l_.step_us + l_.inter.latency_us); }

  // Ring over n ranks with full buffer N: all-gather and reduce-scatter take n-1 steps of N/n bytes.
  double flat_ring(Collective c, double N, int n, const Hop& h) const { return flat_ring(c, N, n, RingHops{h, h}); }
  // A step takes at least a block's crossing of the average hop (the block goes round the ring), and the
  // slowest hop's pace: a message moves once its receive is posted (MPI's rendezvous, SMPI, NCCL's
  // credits), and a ring keeps `window` posted, so that hop carries at most `window` blocks per crossing
  // and at most one block per transfer time. Where the two are close the window's blocks arrive in bursts
  // that share the link and neither hides the other: the root of their squares (within 12% of the
  // simulated flat rings, docs/simulation.md), and never slower than one block at a time.
  double flat_ring(Collective c, double N, int n, const RingHops& h) const {
    if (n <= 1) return l_.step_us;
    const double block = N / n, steps = n - 1;
    const double transfer = block * h.slowest.beta, crossing = h.slowest.alpha + transfer;
    const double pace = std::min(crossing, std::hypot(transfer, crossing / ring_window_));
    const double step = std::max(h.mean.alpha + block * h.mean.beta, pace);
    const double rs = steps * step + steps * reduce_us(block);
    const double ag = steps * step;
    return c == Collective::all_gather ? ag : c == Collective::reduce_scatter ? rs : rs + ag;
  }

  // Recursive doubling / halving and Bruck: the step at rank distance d moves d/n of the buffer (d/p over
  // the power-of-two part), every rank at once. Where the members lie in rank order, halving's partner
  // r xor d stays in the node for a short step and crosses pods only for steps as long as a pod; Bruck's
  // r - d leaves the node (and the pod) from the first d members of each at every distance, so its steps
  // all take the NIC, shared by d senders. The fold of a non-power-of-two count takes the slowest hop.
  double flat_tree(Collective c, double N, int n, const CostShape& s) const {
    const bool in_order = s.ring_inter_hops * s.ranks_per_node <= s.ranks;
    const Hop slowest = all_senders_hop(s);
    auto halving_at = [&](int d) {
      if (!in_order || (s.pods > 1 && d >= s.pod_ranks)) return slowest;
      return hop(s.nodes > 1 && d >= s.ranks_per_node, s.nic_flows);
    };
    auto bruck_at = [&](int d) {
      if (!in_order) return slowest;
      return hop(s.nodes > 1, std::min(d, s.ranks_per_node) * instances(s), s.pods > 1 ? &s : nullptr,
                 std::min(d, s.pod_ranks) * instances(s));
    };
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const bool fold = p != n;
    double ag = 0, steps = 0;  // Bruck over n: distance d moves min(d, n-d) blocks
    for (int d = 1; d < n; d *= 2) {
      const Hop h = bruck_at(d);
      ag += h.alpha + std::min(d, n - d) * N / n * h.beta;
    }
    for (int d = 1; d < p; d *= 2) {
      const Hop h = halving_at(d);
      steps += h.alpha + static_cast<double>(d) / p * N * h.beta;
    }
    const double folding = fold * (2 * slowest.alpha + (1 + 1.0 / n) * N * slowest.beta);
    switch (c) {
      case Collective::all_gather: return ag;
      case Collective::reduce_scatter: return steps + folding + ((p - 1.0) / p + fold) * reduce_us(N);
      case Collective::all_reduce:
        return 2 * steps + fold * (2 * slowest.alpha + 2 * N * slowest.beta) + ((p - 1.0) / p + fold) * reduce_us(N);
      case Collective::all_to_all: break;  // Bruck's exchange, all_to_all_cost.hpp
    }
    return 0;
  }

  Hop rail_hop(const CostShape& s, std::size_t level) const {
    const bool pods = level < s.rail_pods.size() && s.rail_pods[level];
    return hop(s.rail_inter[level], s.nic_flows, pods ? &s : nullptr, all_pod_flows(s));
  }
  Hop leaf_hop(const CostShape& s) const { return hop(s.leaf_inter, s.nic_flows); }

  // How a level's rail moves the blocks of its n members, `block` bytes each (direct.hpp): a ring one
  // block per step, each step a latency; a direct exchange a window of blocks at a time, which share the
  // links and so land together, each window a latency.
  struct Arrivals {
    double latency, per;  // per: one block's transfer
    int burst;            // blocks that land together: 1 in a ring
    bool ring;            // a ring (a block per step), or a direct exchange (a window at a time)
    // When the k-th block from the rail is in (all-gather).
    double at(int k) const { return std::ceil(k / static_cast<double>(burst)) * (latency + burst * per); }
    // Reduce-scatter: each partial leaves as it is made, taking `step`; the windows' latencies follow.
    double step() const { return burst == 1 ? latency + per : per; }
    double tail(int n) const { return burst == 1 ? 0 : latency * std::ceil((n - 1) / static_cast<double>(burst)); }
  };
  // Exchanges in flight in a direct exchange over n members, `exchange_bytes` each (direct_window).
  int direct_window(int n, double exchange_bytes) const {
    return algorithms::direct_window(n, exchange_bytes, direct_window_bytes_);
  }
  // Windows of exchanges in flight that a direct exchange over n members takes, each paying one latency.
  double windows(int n, double exchange_bytes) const {
    return n <= 1 ? 0 : std::ceil((n - 1.0) / direct_window(n, exchange_bytes));
  }
  // all_direct: every level exchanges directly (Prediction::direct), else blocks up to PARO_DIRECT_MAX.
  Arrivals arrivals(const Hop& h, double block, int n, bool all_direct = false) const {
    if (all_direct || block <= direct_max_) return {h.alpha, block * h.beta, direct_window(n, block), false};
    return {h.alpha, block * h.beta, 1, true};
  }
  // A flat level (direct or ring) of n members with full buffer N.
  double flat_level(Collective c, double N, int n, Hop h, bool all_direct = false) const {
    if (n <= 1 || (!all_direct && N / n > direct_max_)) return flat_ring(c, N, n, h);
    const double rs = direct(Collective::reduce_scatter, n, 1, N / n, h),
                 ag = direct(Collective::all_gather, n, 1, N / n, h);
    return c == Collective::all_gather ? ag : c == Collective::reduce_scatter ? rs : rs + ag;
  }

  // direct_all_reduce (direct.hpp) of `bytes` over n members: every buffer to every member, one round.
  double direct_all_reduce(int n, double bytes, const Hop& h) const {
    return n <= 1 ? 0 : h.alpha * windows(n, bytes) + (n - 1) * (bytes * h.beta + reduce_us(bytes));
  }

  // One direct exchange over n members (direct.hpp) carrying `lists` blocks of `block` bytes per peer: one
  // latency per window of exchanges in flight.
  double direct(Collective c, int n, double lists, double block, const Hop& h) const {
    const double reduce = c == Collective::reduce_scatter ? lists * reduce_us(block) : 0;
    return h.alpha * windows(n, lists * block) + (n - 1) * (lists * block * h.beta + reduce);
  }

 private:
  LinkModel l_, bound_;
  double direct_max_ = static_cast<double>(default_direct_max_bytes);
  double ring_window_ = static_cast<double>(default_ring_window);
  double direct_window_bytes_ = static_cast<double>(default_direct_window_bytes);
};

}  // namespace paro::algorithms
