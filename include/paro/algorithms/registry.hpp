#pragma once
// The algorithms paro knows, each described once and registered here once; names, PARO_ALGO parsing,
// predictions and the automatic choice all come from this list.
//
// A descriptor is a struct in its algorithm's own file:
//   static constexpr Algorithm id;            its identity (an unused value for one added outside paro)
//   static constexpr const char* name;        what PARO_ALGO, --algo and the tables call it
//   static constexpr Family family;           flat, hierarchical or native (algorithm.hpp)
//   static Prediction predict(const CostModel&, Collective, double full_bytes, const CostShape&)
//                                             the cost formula, from CostModel's terms (cost/cost_model.hpp)
//   template <class Ctx> static void all_reduce(Ctx&, const Call&)      the schedules, those it implements;
//   template <class Ctx> static void all_gather(Ctx&, const Call&)      a collective without one is rejected
//   template <class Ctx> static void reduce_scatter(Ctx&, const Call&)  with the list of those that have it
// where Ctx (the Communicator's) gives comm() (the scope's transport), hierarchy() (its levels,
// hierarchy.hpp), ring() (RingParams) and levels() (HierarchicalParams for this call).
//
// Adding an algorithm: its file with its schedules and descriptor, and one entry in BuiltinAlgorithms
// (CONTRIBUTING.md). A program can also run one of its own without changing paro:
//   using MyAlgorithms = paro::algorithms::BuiltinAlgorithms::with<MyAllGather>;
//   paro::Communicator<paro::threads::Transport, MyAlgorithms> comm(std::move(t));

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/mics_hcs.hpp"
#include "paro/algorithms/native.hpp"
#include "paro/algorithms/paro_cc.hpp"
#include "paro/algorithms/paro_seq.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/algorithms/tree.hpp"

namespace paro::algorithms {

namespace registry_detail {

// A stand-in for the Communicator's context: only used to ask whether a descriptor has a schedule.
struct ProbeContext;

template <class D, class = void>
struct has_all_reduce : std::false_type {};
template <class D>
struct has_all_reduce<D, std::void_t<decltype(&D::template all_reduce<ProbeContext>)>> : std::true_type {};
template <class D, class = void>
struct has_all_gather : std::false_type {};
template <class D>
struct has_all_gather<D, std::void_t<decltype(&D::template all_gather<ProbeContext>)>> : std::true_type {};
template <class D, class = void>
struct has_reduce_scatter : std::false_type {};
template <class D>
struct has_reduce_scatter<D, std::void_t<decltype(&D::template reduce_scatter<ProbeContext>)>> : std::true_type {};

}  // namespace registry_detail

// Does descriptor D have a schedule for c?
template <class D>
constexpr bool implements(Collective c) {
  switch (c) {
    case Collective::all_reduce: return registry_detail::has_all_reduce<D>::value;
    case Collective::all_gather: return registry_detail::has_all_gather<D>::value;
    case Collective::reduce_scatter: return registry_detail::has_reduce_scatter<D>::value;
  }
  return false;
}

struct Choice {
  Algorithm algorithm;
  Prediction prediction;
};

template <class... Descriptors>
struct AlgorithmList {
  static_assert(sizeof...(Descriptors) > 0, "an AlgorithmList needs at least one descriptor");

  // This list with more descriptors (an algorithm of a program's own).
  template <class... More>
  using with = AlgorithmList<Descriptors..., More...>;

  static constexpr std::array<Algorithm, sizeof...(Descriptors)> ids = {Descriptors::id...};

  // Calls f(D{}) with the descriptor D of `a`; false when the list has none.
  template <class F>
  static bool visit(Algorithm a, F&& f) {
    return ((Descriptors::id == a ? (f(Descriptors{}), true) : false) || ...);
  }

  static bool contains(Algorithm a) {
    return visit(a, [](auto) {});
  }

  // The name, or nullptr for an id this list does not have ("automatic" is no descriptor's).
  static const char* name_of(Algorithm a) {
    if (a == Algorithm::automatic) return "automatic";
    const char* name = nullptr;
    visit(a, [&](auto d) { name = decltype(d)::name; });
    return name;
  }

  static Family family(Algorithm a) {
    Family f = Family::flat;
    visit(a, [&](auto d) { f = decltype(d)::family; });
    return f;
  }

  // The algorithms of one family, in list order (what tests and tools iterate).
  static std::vector<Algorithm> in_family(Family f) {
    std::vector<Algorithm> out;
    ((Descriptors::family == f ? out.push_back(Descriptors::id) : void()), ...);
    return out;
  }

  // Every algorithm a call may be planned with on a transport without native collectives, and automatic.
  static std::vector<Algorithm> portable_and_automatic() {
    std::vector<Algorithm> out;
    ((Descriptors::family != Family::native ? out.push_back(Descriptors::id) : void()), ...);
    out.push_back(Algorithm::automatic);
    return out;
  }

  static bool implements(Algorithm a, Collective c) {
    bool yes = false;
    visit(a, [&](auto d) { yes = algorithms::implements<decltype(d)>(c); });
    return yes;
  }

  // "automatic ring tree ...": what "allowed:" messages list.
  static std::string names() {
    std::string out = "automatic";
    ((out += std::string(" ") + Descriptors::name), ...);
    return out;
  }

  // A name as PARO_ALGO and --algo take it: case, '_' and '-' do not matter; auto and default mean automatic.
  static Algorithm parse(std::string_view s) {
    const std::string key = paro::detail::lowercase_without_underscores(paro::detail::trim(s));
    if (key == "automatic" || key == "auto" || key == "default") return Algorithm::automatic;
    for (Algorithm a : ids)
      if (key == paro::detail::lowercase_without_underscores(name_of(a))) return a;
    throw UsageError(paro::detail::concat("unknown algorithm '", s, "'; allowed: ", names()));
  }

  // The formula alone, without the model's measured corrections (but for paro_cc's choice of lanes, which
  // compares its two schedules as measured).
  static Prediction formula(const CostModel& m, Algorithm a, Collective c, std::size_t full_bytes, const CostShape& s) {
    if (s.ranks <= 1) return {m.links().step_us, 0};
    Prediction p;
    visit(a, [&](auto d) { p = decltype(d)::predict(m, c, static_cast<double>(full_bytes), s); });
    if (p.time_us > 0) p.time_us = std::max(p.time_us, m.bound_on_own_links(c, full_bytes, s));  // 0: not modelled
    return p;
  }

  static Prediction predict(const CostModel& m, Algorithm a, Collective c, std::size_t full_bytes, const CostShape& s) {
    Prediction p = formula(m, a, c, full_bytes, s);
    p.time_us *= m.links().correction(c, a, static_cast<double>(full_bytes), p.lanes_inline);
    return p;
  }

  // How automatic decides for c at one size (what `paro-bench --explain` prints): every candidate, flat
  // ones always, hierarchical ones where the scope has levels, native never (it is not modelled).
  // Candidates predicted within the model's error of the fastest are a near tie that another calibration
  // could flip: among them wins the lowest sum of predicted time over the near tie's best at this size
  // and at a quarter and four times it, then the one listed first. So the pick follows the trend over
  // sizes rather than one size's noise, and depends only on (model, collective, size, shape).
  struct Candidate {
    Algorithm algorithm{};
    Prediction prediction;  // corrections included
    double correction = 1;  // the measured correction in it
    bool near = false;      // within the model's error of the fastest
    double score = 0;       // near ones: the sum above
  };
  // Fixed capacity, so that deciding, which every automatic call does, allocates nothing.
  struct Decision {
    std::array<Candidate, sizeof...(Descriptors)> candidates{};  // the first `count`, in list order
    std::size_t count = 0, fastest = 0, picked = 0;
  };

  static Decision decide(const CostModel& m, Collective c, std::size_t full_bytes, const CostShape& s) {
    Decision d;
    auto consider = [&](auto descriptor) {
      using D = decltype(descriptor);
      if (D::family == Family::native || !algorithms::implements<D>(c)) return;
      if (D::family == Family::hierarchical && !s.hierarchical()) return;
      const Prediction p = predict(m, D::id, c, full_bytes, s);
      d.candidates[d.count++] = {D::id, p,
                                 m.links().correction(c, D::id, static_cast<double>(full_bytes), p.lanes_inline)};
    };
    (consider(Descriptors{}), ...);
    paro::detail::require(d.count > 0, paro::name_of(c), ": no registered algorithm implements it");
    auto& cs = d.candidates;
    for (std::size_t i = 1; i < d.count; ++i)
      if (cs[i].prediction.time_us < cs[d.fastest].prediction.time_us) d.fastest = i;
    const double limit = cs[d.fastest].prediction.time_us * (1 + m.links().model_error);
    std::size_t near = 0;
    for (std::size_t i = 0; i < d.count; ++i) near += cs[i].near = cs[i].prediction.time_us <= limit;
    d.picked = d.fastest;
    if (near < 2) return d;
    for (std::size_t bytes : {full_bytes / 4, full_bytes, full_bytes * 4}) {
      if (bytes == 0) continue;
      std::array<double, sizeof...(Descriptors)> t{};
      double lowest = 0;
      for (std::size_t i = 0; i < d.count; ++i)
        if (cs[i].near) {
          t[i] = bytes == full_bytes ? cs[i].prediction.time_us : predict(m, cs[i].algorithm, c, bytes, s).time_us;
          lowest = lowest == 0 ? t[i] : std::min(lowest, t[i]);
        }
      for (std::size_t i = 0; i < d.count; ++i)
        if (cs[i].near) cs[i].score += t[i] / std::max(lowest, 1e-9);
    }
    d.picked = d.count;
    for (std::size_t i = 0; i < d.count; ++i)
      if (cs[i].near && (d.picked == d.count || cs[i].score < cs[d.picked].score * (1 - 1e-9))) d.picked = i;
    return d;
  }

  // automatic's pick for c (decide()).
  static Choice best(const CostModel& m, Collective c, std::size_t full_bytes, const CostShape& s) {
    const Decision d = decide(m, c, full_bytes, s);
    const Candidate& k = d.candidates[d.picked];
    return {k.algorithm, k.prediction};
  }
};

// Every algorithm paro ships, in the order tables list them.
using BuiltinAlgorithms = AlgorithmList<Ring, Tree, MicsHcs, ParoSeq, ParoCC, Native>;

}  // namespace paro::algorithms

namespace paro {

inline constexpr auto all_algorithms = algorithms::BuiltinAlgorithms::ids;

// Names of the built-in algorithms (a Communicator names its own registry's, Communicator::name_of).
inline const char* name_of(Algorithm a) {
  const char* name = algorithms::BuiltinAlgorithms::name_of(a);
  return name ? name : "unregistered";
}

inline Algorithm parse_algorithm(std::string_view s) { return algorithms::BuiltinAlgorithms::parse(s); }

// The algorithm forced per collective (automatic where nothing is forced): PARO_ALGO's grammar, NCCL_ALGO's
// own, "ring" for all or "allreduce:ring;allgather:tree" (';' or ',' between entries).
class AlgorithmOverrides {
 public:
  AlgorithmOverrides() { forced_.fill(Algorithm::automatic); }

  template <class Registry = algorithms::BuiltinAlgorithms>
  static AlgorithmOverrides parse(std::string_view text) {
    AlgorithmOverrides o;
    try {
      std::size_t start = 0;
      while (start <= text.size()) {
        std::size_t end = text.find_first_of(";,", start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view entry = detail::trim(text.substr(start, end - start));
        if (!entry.empty()) {
          const std::size_t colon = entry.find(':');
          if (colon == std::string_view::npos) {
            o.forced_.fill(Registry::parse(entry));
          } else {
            o.forced_[index(parse_collective(entry.substr(0, colon)))] = Registry::parse(entry.substr(colon + 1));
          }
        }
        start = end + 1;
      }
    } catch (const Error& e) {
      throw UsageError(detail::concat("PARO_ALGO='", text, "': ", e.message(),
                                      " (form: 'ring' or 'allreduce:ring;allgather:tree')"));
    }
    return o;
  }

  Algorithm operator[](Collective c) const { return forced_[index(c)]; }

 private:
  std::array<Algorithm, 3> forced_{};
  static std::size_t index(Collective c) { return static_cast<std::size_t>(c); }
};

}  // namespace paro
