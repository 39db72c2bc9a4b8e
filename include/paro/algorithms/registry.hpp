#pragma once
// The algorithms paro knows, each described once and registered here once; names, PARO_ALGO parsing,
// predictions and the automatic choice all come from this list.
//
// A descriptor is a struct in its algorithm's own file:
//   static constexpr Algorithm id;            its identity (an unused value for one added outside paro)
//   static constexpr const char* name;        what PARO_ALGO, --algo and the tables call it
//   static constexpr Family family;           flat, hierarchical or native (algorithm.hpp)
//   static Predicted<Params> predict(const CostModel&, Collective, double full_bytes, const CostShape&)
//                                             the cost formula, from CostModel's terms (cost/cost_model.hpp),
//                                             and how the call would run
//   template <class Ctx> static void all_reduce(Ctx&, const Call&)      the schedules, those it implements,
//   template <class Ctx> static void all_gather(Ctx&, const Call&)      each named by its collective's
//   template <class Ctx> static void reduce_scatter(Ctx&, const Call&)  descriptor (collective.hpp); a
//                                                                      collective without one is rejected
//                                                                      with the list of those that have it
// and, for an algorithm with per-call choices (a plan is a value: PARO_ALGO pins it, --explain prints it):
//   using Params = ...;                                   the choices; equality-comparable
//   static void print(std::ostream&, const Params&)       "key=value,key=value", as PARO_ALGO takes them
//   static void set(Params&, std::string_view key, std::string_view value)   one pin; UsageError if bad
//   static void settle(Params&, const CostShape&, LaneChoice)   what the scope and backend allow, last
// where Ctx (the Communicator's) gives comm() (the scope's transport), hierarchy(by_nodes) (its levels,
// hierarchy.hpp), ring() (RingParams), direct() (DirectParams) and params<Params>() (this call's plan).
//
// Adding an algorithm: its file with its schedules and descriptor, and one entry in BuiltinAlgorithms
// (CONTRIBUTING.md). A program can also run one of its own without changing paro:
//   using MyAlgorithms = paro::algorithms::BuiltinAlgorithms::with<MyAllGather>;
//   paro::Communicator<paro::threads::Transport, MyAlgorithms> comm(std::move(t));

#include <algorithm>
#include <array>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/collective.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/mics_hcs.hpp"
#include "paro/algorithms/native.hpp"
#include "paro/algorithms/paro_cc.hpp"
#include "paro/algorithms/paro_seq.hpp"
#include "paro/algorithms/ring.hpp"
#include "paro/algorithms/tree.hpp"

namespace paro::algorithms {

namespace registry_detail {

template <class D, class = void>
struct params_of {
  using type = NoParams;
};
template <class D>
struct params_of<D, std::void_t<typename D::Params>> {
  using type = typename D::Params;
};

// std::variant<NoParams, each distinct Params of the list>.
template <class Variant, class... More>
struct unique_variant {
  using type = Variant;
};
template <class... Known, class Next, class... More>
struct unique_variant<std::variant<Known...>, Next, More...> {
  using type =
      typename std::conditional_t<(std::is_same_v<Known, Next> || ...), unique_variant<std::variant<Known...>, More...>,
                                  unique_variant<std::variant<Known..., Next>, More...>>::type;
};

}  // namespace registry_detail

// Collectives: the collectives these algorithms run (collective.hpp's CollectiveList).
template <class CollectiveListT, class... Descriptors>
struct BasicAlgorithmList {
  static_assert(sizeof...(Descriptors) > 0, "an AlgorithmList needs at least one descriptor");
  using Collectives = CollectiveListT;

  // This list with more descriptors (an algorithm of a program's own).
  template <class... More>
  using with = BasicAlgorithmList<Collectives, Descriptors..., More...>;
  // This list running more collectives (a collective of a program's own, with algorithms that run it).
  template <class... More>
  using with_collectives = BasicAlgorithmList<typename Collectives::template with<More...>, Descriptors...>;

  static constexpr std::array<Algorithm, sizeof...(Descriptors)> ids = {Descriptors::id...};

  template <class D>
  static constexpr bool has_params() {
    return !std::is_same_v<typename registry_detail::params_of<D>::type, NoParams>;
  }

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

  // Does a have a schedule for c?
  static bool implements(Algorithm a, Collective c) {
    bool yes = false;
    visit(a, [&](auto d) { yes = Collectives::template implements<decltype(d)>(c); });
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

  // Every distinct Params of the list's descriptors, and NoParams: what a prediction or a plan carries.
  using Params =
      typename registry_detail::unique_variant<std::variant<NoParams>,
                                               typename registry_detail::params_of<Descriptors>::type...>::type;
  struct Prediction {
    double time_us = 0;
    Params params;
  };

  // The formula alone, without the model's measured corrections (but for paro_cc's choice of lanes, which
  // compares its two schedules as measured).
  static Prediction formula(const CostModel& m, Algorithm a, Collective c, std::size_t full_bytes, const CostShape& s) {
    Prediction p{m.links().step_us, params_of(a)};
    if (s.ranks <= 1) return p;
    visit(a, [&](auto d) {
      const auto own = decltype(d)::predict(m, c, static_cast<double>(full_bytes), s);
      p = {own.time_us, own.params};
    });
    if (p.time_us > 0)
      p.time_us = std::max(p.time_us, m.bound_on_own_links(Collectives::traffic(c), full_bytes, s));  // 0: not modelled
    return p;
  }

  static Prediction predict(const CostModel& m, Algorithm a, Collective c, std::size_t full_bytes, const CostShape& s) {
    Prediction p = formula(m, a, c, full_bytes, s);
    p.time_us *= m.links().correction(c, a, static_cast<double>(full_bytes), inline_lanes(p.params));
    return p;
  }

  // Which of a's measured corrections applies to a plan (CostModel::correction).
  static bool inline_lanes(const Params& p) {
    return std::visit([](const auto& own) { return corrected_inline(own); }, p);
  }

  // a's choices before any prediction: its Params' defaults, or NoParams.
  static Params params_of(Algorithm a) {
    Params p;
    visit(a, [&](auto d) { p = typename registry_detail::params_of<decltype(d)>::type{}; });
    return p;
  }

  // "chunk=1M,lanes=inline,...": a's plan as PARO_ALGO's pins take it; empty for an algorithm without choices.
  static std::string print(Algorithm a, const Params& p) {
    std::ostringstream out;
    visit(a, [&](auto d) {
      using D = decltype(d);
      if constexpr (has_params<D>()) {
        const auto* own = std::get_if<typename D::Params>(&p);
        D::print(out, own ? *own : typename D::Params{});
      }
    });
    return out.str();
  }

  // "all_reduce:paro_cc(chunk=1M,...)": the PARO_ALGO entry that pins c to a with plan p.
  static std::string pin(Collective c, Algorithm a, const Params& p) {
    const std::string choices = print(a, p);
    return paro::detail::concat(Collectives::name_of(c), ":", name_of(a), choices.empty() ? "" : "(" + choices + ")");
  }

  // Applies pins ("key=value" each) to a plan of a; UsageError naming the key and what a takes.
  static void apply(Algorithm a, Params& p, const std::vector<std::pair<std::string, std::string>>& pins) {
    if (pins.empty()) return;
    visit(a, [&](auto d) {
      using D = decltype(d);
      if constexpr (has_params<D>()) {
        if (!std::holds_alternative<typename D::Params>(p)) p = typename D::Params{};
        for (const auto& [key, value] : pins) D::set(std::get<typename D::Params>(p), key, value);
      } else {
        throw UsageError(paro::detail::concat(D::name, " takes no parameters ('", pins.front().first, "=",
                                              pins.front().second, "')"));
      }
    });
  }

  // What the scope and the backend allow a plan of a, applied last (the descriptor's settle).
  static void settle(Algorithm a, Params& p, const CostShape& s, LaneChoice lanes) {
    visit(a, [&](auto d) {
      using D = decltype(d);
      if constexpr (has_params<D>()) {
        if (!std::holds_alternative<typename D::Params>(p)) p = typename D::Params{};
        D::settle(std::get<typename D::Params>(p), s, lanes);
      }
    });
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
      if (D::family == Family::native || !Collectives::template implements<D>(c)) return;
      if (D::family == Family::hierarchical && !s.hierarchical()) return;
      const Prediction p = predict(m, D::id, c, full_bytes, s);
      d.candidates[d.count++] = {
          D::id, p, m.links().correction(c, D::id, static_cast<double>(full_bytes), inline_lanes(p.params))};
    };
    (consider(Descriptors{}), ...);
    paro::detail::require(d.count > 0, Collectives::name_of(c), ": no registered algorithm implements it");
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

  struct Choice {
    Algorithm algorithm;
    Prediction prediction;
  };

  // automatic's pick for c (decide()).
  static Choice best(const CostModel& m, Collective c, std::size_t full_bytes, const CostShape& s) {
    const Decision d = decide(m, c, full_bytes, s);
    const Candidate& k = d.candidates[d.picked];
    return {k.algorithm, k.prediction};
  }
};

template <class... Descriptors>
using AlgorithmList = BasicAlgorithmList<BuiltinCollectives, Descriptors...>;

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

// The algorithm forced per collective (automatic where nothing is forced), with its pinned choices:
// PARO_ALGO's grammar, NCCL_ALGO's own, "ring" for all (the collectives ring runs; the others stay
// automatic) or "allreduce:ring;allgather:tree" (';' or ',' between entries), an entry's algorithm optionally with
// pins, "allreduce:paro_cc(chunk=1M,lanes=inline)": the choices named are fixed, the others the cost model's.
// paro-bench --explain prints the entry that pins each of automatic's picks.
class AlgorithmOverrides {
 public:
  using Pins = std::vector<std::pair<std::string, std::string>>;  // (key, value) in the order written

  template <class Registry = algorithms::BuiltinAlgorithms>
  static AlgorithmOverrides parse(std::string_view text) {
    AlgorithmOverrides o;
    try {
      for (std::string_view entry : entries(text)) {
        const std::size_t colon = entry.find(':');
        const std::string_view choice = colon == std::string_view::npos ? entry : entry.substr(colon + 1);
        const std::size_t open = choice.find('(');
        const Algorithm a = Registry::parse(choice.substr(0, open));
        Pins pins;
        if (open != std::string_view::npos) pins = parse_pins(choice.substr(open));
        // Checked now, on a plan of a, so that a bad key or value fails at startup.
        typename Registry::Params checked = Registry::params_of(a);
        Registry::apply(a, checked, pins);
        if (colon == std::string_view::npos) {
          o.all_ = {a, pins};
          o.all_runs_.clear();
          for (Collective c : Registry::Collectives::ids)
            if (a == Algorithm::automatic || Registry::implements(a, c)) o.all_runs_.push_back(c);
          o.per_collective_.clear();
        } else {
          o.set(Registry::Collectives::parse(entry.substr(0, colon)), {a, pins});
        }
      }
    } catch (const Error& e) {
      throw UsageError(detail::concat("PARO_ALGO='", text, "': ", e.message(),
                                      " (form: 'ring', 'allreduce:ring;allgather:tree' or "
                                      "'allreduce:paro_cc(chunk=1M,lanes=inline)')"));
    }
    return o;
  }

  Algorithm operator[](Collective c) const { return entry(c).algorithm; }
  const Pins& pins(Collective c) const { return entry(c).pins; }

 private:
  struct Entry {
    Algorithm algorithm = Algorithm::automatic;
    Pins pins;
  };
  Entry all_;                                                 // an entry without a collective
  std::vector<Collective> all_runs_;                          // the collectives all_'s algorithm runs
  std::vector<std::pair<Collective, Entry>> per_collective_;  // those with one, written after it

  const Entry& entry(Collective c) const {
    static const Entry automatic;
    for (const auto& [k, e] : per_collective_)
      if (k == c) return e;
    return std::find(all_runs_.begin(), all_runs_.end(), c) != all_runs_.end() ? all_ : automatic;
  }
  void set(Collective c, Entry e) {
    for (auto& [k, old] : per_collective_)
      if (k == c) {
        old = std::move(e);
        return;
      }
    per_collective_.emplace_back(c, std::move(e));
  }

  // The entries between ';' or ',' outside parentheses.
  static std::vector<std::string_view> entries(std::string_view text) {
    std::vector<std::string_view> out;
    std::size_t start = 0, depth = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
      const char ch = i < text.size() ? text[i] : ';';
      if (ch == '(') ++depth;
      if (ch == ')') depth = depth > 0 ? depth - 1 : 0;
      if ((ch == ';' || ch == ',') && (depth == 0 || i == text.size())) {
        const std::string_view entry = detail::trim(text.substr(start, i - start));
        if (!entry.empty()) out.push_back(entry);
        start = i + 1;
      }
    }
    return out;
  }

  // "(key=value,key=value)".
  static Pins parse_pins(std::string_view text) {
    detail::require(text.size() >= 2 && text.back() == ')', "'", text, "' is not '(key=value,...)'");
    Pins pins;
    std::string_view rest = text.substr(1, text.size() - 2);
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view pin = detail::trim(rest.substr(0, comma));
      const std::size_t eq = pin.find('=');
      detail::require(eq != std::string_view::npos && eq > 0, "pin '", pin, "' is not key=value");
      pins.emplace_back(std::string(detail::trim(pin.substr(0, eq))), std::string(detail::trim(pin.substr(eq + 1))));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return pins;
  }
};

}  // namespace paro
