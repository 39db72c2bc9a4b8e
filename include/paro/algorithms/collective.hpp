#pragma once
// The collectives paro knows, each described once and listed here once; the verbs' checks, the dispatch
// to an algorithm's schedule, PARO_ALGO's and --coll's names, the buffers of tools and checkers, the
// bus-bandwidth factor and the lower bound all come from this list.
//
// A descriptor is a struct:
//   static constexpr Collective id;          its identity (an unused value for one added outside paro)
//   static constexpr const char* name;       what PARO_ALGO, --coll and messages call it
//   static constexpr const char* aliases;    other names it answers to, space-separated ('_', '-' and case
//                                            never matter)
//   static constexpr bool reduces;           whether it takes a ReduceOp
//   static constexpr const char* in_place;   what in place means for its buffers (for error messages)
//   static BufferShape shape(count, ranks, rank)          one rank's buffers, in elements
//   static Source source(i, count, rank, ranks)           where output element i comes from (checkers)
//   static double bus_factor(ranks)                       nccl-tests' busbw = algbw * bus_factor
//   static MinimumTraffic traffic()                       what no algorithm can avoid moving (the bound)
//   template <class A, class Ctx> using Schedule = ...    the member an algorithm descriptor A implements
//   template <class A, class Ctx> static void run(Ctx&, const Call&)   calls it
// and optionally
//   template <class T> static void stage(T&, const Call&) what the non-native schedules expect done first
// validate() follows from shape and reduces (CollectiveList::validate).
//
// Adding a collective: its descriptor, its schedules (a member of each algorithm that runs it) and its
// tests (CONTRIBUTING.md). A program can add one without changing paro, as it can an algorithm:
//   using Mine = paro::algorithms::BuiltinAlgorithms::with<MyAlgorithm>::with_collectives<MyCollective>;

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/arguments.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro {

// One rank's buffers for a collective of `count` elements over `ranks` ranks: element counts of send (in)
// and recv (out), the single buffer of an in-place call (full) with where send and recv sit in it, and
// the global index of the rank's first input element (inputs are numbered across ranks as a checker does).
struct BufferShape {
  std::size_t in, out, full;
  std::size_t send_at, recv_at;
  std::size_t first_input;
};

namespace algorithms {

// Where an output element comes from: input element `index` (global numbering) reduced over the ranks
// first .. last; a copy of rank `first`'s where first == last.
struct Source {
  int first, last;
  std::size_t index;
};

// The bytes a collective must move at the least, as shares of its full buffer N: into every rank, and into
// a unit (a node, a pod) of `members` of the `ranks` ranks, one of `units` such units
// (CostModel::lower_bound).
struct MinimumTraffic {
  double (*received)(int ranks);
  double (*entering)(int ranks, int units, int members);
};

namespace collective_detail {

// A stand-in for the Communicator's schedule context: only used to ask whether a descriptor has a schedule.
struct ProbeContext;

template <class C, class A, class = void>
struct has_schedule : std::false_type {};
template <class C, class A>
struct has_schedule<C, A, std::void_t<typename C::template Schedule<A, ProbeContext>>> : std::true_type {};

template <class C, class T, class = void>
struct has_stage : std::false_type {};
template <class C, class T>
struct has_stage<C, T, std::void_t<decltype(C::stage(std::declval<T&>(), std::declval<const Call&>()))>>
    : std::true_type {};

inline double gathered_share(int ranks) { return ranks <= 1 ? 0 : (ranks - 1.0) / ranks; }
inline double entering_gathered(int ranks, int, int members) {
  return ranks <= 0 ? 0 : static_cast<double>(ranks - members) / ranks;
}
// Every rank keeps 1/ranks of its buffer and receives the rest; a unit of `members` receives, for each of
// them, the blocks of the ranks outside it.
inline double entering_exchanged(int ranks, int, int members) {
  return ranks <= 0 ? 0 : static_cast<double>(members) * (ranks - members) / ranks;
}
// Named functions rather than lambdas: nvcc's front end rejects lambdas in a braced return.
inline double reduced_and_gathered_share(int ranks) { return 2 * gathered_share(ranks); }
inline double entering_reduced_and_gathered(int, int units, int) { return 2 * gathered_share(units); }

}  // namespace collective_detail

// recv = every rank's send (count elements each) in rank order.
struct AllGather {
  static constexpr Collective id = Collective::all_gather;
  static constexpr const char* name = "all_gather";
  static constexpr const char* aliases = "ag";
  static constexpr bool reduces = false;
  static constexpr const char* in_place = "send == recv + rank*count";
  static BufferShape shape(std::size_t count, int ranks, int rank) {
    const std::size_t mine = static_cast<std::size_t>(rank) * count, all = count * static_cast<std::size_t>(ranks);
    return {count, all, all, mine, 0, mine};
  }
  static Source source(std::size_t i, std::size_t count, int, int) {
    const int from = static_cast<int>(i / count);
    return {from, from, i};
  }
  static double bus_factor(int ranks) { return collective_detail::gathered_share(ranks); }
  static MinimumTraffic traffic() { return {collective_detail::gathered_share, collective_detail::entering_gathered}; }
  template <class A, class Ctx>
  using Schedule = decltype(&A::template all_gather<Ctx>);
  template <class A, class Ctx>
  static void run(Ctx& x, const Call& c) {
    A::all_gather(x, c);
  }
  // Schedules other than the backend's own start from this rank's block in place (algorithm.hpp: Call).
  template <class T>
  static void stage(T& t, const Call& c) {
    const std::size_t block = c.count * size_of(c.dt);
    t.copy(static_cast<char*>(c.recv) + static_cast<std::size_t>(t.rank()) * block, c.send, block);
  }
};

// recv = block rank of send (ranks*count elements) reduced over the ranks.
struct ReduceScatter {
  static constexpr Collective id = Collective::reduce_scatter;
  static constexpr const char* name = "reduce_scatter";
  static constexpr const char* aliases = "rs";
  static constexpr bool reduces = true;
  static constexpr const char* in_place = "recv == send + rank*count";
  static BufferShape shape(std::size_t count, int ranks, int rank) {
    const std::size_t mine = static_cast<std::size_t>(rank) * count, all = count * static_cast<std::size_t>(ranks);
    return {all, count, all, 0, mine, 0};
  }
  static Source source(std::size_t i, std::size_t count, int rank, int ranks) {
    return {0, ranks - 1, static_cast<std::size_t>(rank) * count + i};
  }
  static double bus_factor(int ranks) { return collective_detail::gathered_share(ranks); }
  static MinimumTraffic traffic() { return {collective_detail::gathered_share, collective_detail::entering_gathered}; }
  template <class A, class Ctx>
  using Schedule = decltype(&A::template reduce_scatter<Ctx>);
  template <class A, class Ctx>
  static void run(Ctx& x, const Call& c) {
    A::reduce_scatter(x, c);
  }
};

// recv = send (count elements) reduced over the ranks.
struct AllReduce {
  static constexpr Collective id = Collective::all_reduce;
  static constexpr const char* name = "all_reduce";
  static constexpr const char* aliases = "ar";
  static constexpr bool reduces = true;
  static constexpr const char* in_place = "send == recv";
  static BufferShape shape(std::size_t count, int, int) { return {count, count, count, 0, 0, 0}; }
  static Source source(std::size_t i, std::size_t, int, int ranks) { return {0, ranks - 1, i}; }
  // A reduce-scatter and an all-gather's worth of bytes.
  static double bus_factor(int ranks) { return 2 * collective_detail::gathered_share(ranks); }
  static MinimumTraffic traffic() {
    return {collective_detail::reduced_and_gathered_share, collective_detail::entering_reduced_and_gathered};
  }
  template <class A, class Ctx>
  using Schedule = decltype(&A::template all_reduce<Ctx>);
  template <class A, class Ctx>
  static void run(Ctx& x, const Call& c) {
    A::all_reduce(x, c);
  }
};

// recv block j (count elements) = rank j's send block rank; send and recv hold ranks*count.
struct AllToAll {
  static constexpr Collective id = Collective::all_to_all;
  static constexpr const char* name = "all_to_all";
  static constexpr const char* aliases = "a2a alltoall";
  static constexpr bool reduces = false;
  static constexpr const char* in_place = "send == recv";
  static BufferShape shape(std::size_t count, int ranks, int rank) {
    const std::size_t all = count * static_cast<std::size_t>(ranks);
    return {all, all, all, 0, 0, static_cast<std::size_t>(rank) * all};
  }
  static Source source(std::size_t i, std::size_t count, int rank, int ranks) {
    const int from = static_cast<int>(i / count);
    const std::size_t all = count * static_cast<std::size_t>(ranks);
    return {from, from, static_cast<std::size_t>(from) * all + static_cast<std::size_t>(rank) * count + i % count};
  }
  // nccl-tests' alltoall bus bandwidth: every rank sends and receives (n-1)/n of its buffer.
  static double bus_factor(int ranks) { return collective_detail::gathered_share(ranks); }
  static MinimumTraffic traffic() { return {collective_detail::gathered_share, collective_detail::entering_exchanged}; }
  template <class A, class Ctx>
  using Schedule = decltype(&A::template all_to_all<Ctx>);
  template <class A, class Ctx>
  static void run(Ctx& x, const Call& c) {
    A::all_to_all(x, c);
  }
};

template <class... Descriptors>
struct CollectiveList {
  static_assert(sizeof...(Descriptors) > 0, "a CollectiveList needs at least one descriptor");

  // This list with more descriptors (a collective of a program's own).
  template <class... More>
  using with = CollectiveList<Descriptors..., More...>;

  static constexpr Collective ids[] = {Descriptors::id...};

  // Calls f(C{}) with the descriptor C of `c`; false when the list has none.
  template <class F>
  static bool visit(Collective c, F&& f) {
    return ((Descriptors::id == c ? (f(Descriptors{}), true) : false) || ...);
  }

  static bool contains(Collective c) {
    return visit(c, [](auto) {});
  }

  // The descriptor of c; UsageError naming what is allowed for an id this list does not have.
  template <class F>
  static void with_descriptor(Collective c, F&& f) {
    if (!visit(c, std::forward<F>(f)))  // the message only on failure: checkers call this per element
      throw UsageError(paro::detail::concat("invalid Collective value ", static_cast<int>(c), "; allowed: ", names()));
  }

  // The name, or "unregistered" for an id this list does not have.
  static const char* name_of(Collective c) {
    const char* name = "unregistered";
    visit(c, [&](auto d) { name = decltype(d)::name; });
    return name;
  }

  // "all_gather reduce_scatter all_reduce": what "allowed:" messages list.
  static std::string names() {
    std::string out;
    ((out += (out.empty() ? "" : " ") + std::string(Descriptors::name)), ...);
    return out;
  }

  // A name as PARO_ALGO and --coll take it: case, '_' and '-' do not matter; aliases count.
  static Collective parse(std::string_view s) {
    const std::string key = paro::detail::lowercase_without_underscores(paro::detail::trim(s));
    Collective found{};
    const bool known = ((answers_to<Descriptors>(key) ? (found = Descriptors::id, true) : false) || ...);
    paro::detail::require(known, "unknown collective '", s, "'; allowed: ", names());
    return found;
  }

  // Does algorithm descriptor A have a schedule for c?
  template <class A>
  static constexpr bool implements(Collective c) {
    return ((Descriptors::id == c && collective_detail::has_schedule<Descriptors, A>::value) || ...);
  }

  static bool reduces(Collective c) {
    bool yes = false;
    visit(c, [&](auto d) { yes = decltype(d)::reduces; });
    return yes;
  }
  static BufferShape shape(Collective c, std::size_t count, int ranks, int rank) {
    BufferShape s{};
    with_descriptor(c, [&](auto d) { s = decltype(d)::shape(count, ranks, rank); });
    return s;
  }
  // Elements in the full buffer per element of count (ranks for all_gather, 1 for all_reduce, ...).
  static std::size_t blocks(Collective c, int ranks) { return shape(c, 1, ranks, 0).full; }
  static Source source(Collective c, std::size_t i, std::size_t count, int rank, int ranks) {
    Source s{};
    with_descriptor(c, [&](auto d) { s = decltype(d)::source(i, count, rank, ranks); });
    return s;
  }
  static double bus_factor(Collective c, int ranks) {
    double f = 0;
    with_descriptor(c, [&](auto d) { f = decltype(d)::bus_factor(ranks); });
    return f;
  }
  static MinimumTraffic traffic(Collective c) {
    MinimumTraffic t{};
    with_descriptor(c, [&](auto d) { t = decltype(d)::traffic(); });
    return t;
  }

  // A verb's local checks, from the descriptor's shape: type and op (all_gather's op is unused: sum), sizes,
  // buffers, in place or disjoint. rank and ranks: this rank's index in the scope and the scope's size.
  static validation::CheckedCall validate(Collective c, int rank, int ranks, const void* send, void* recv,
                                          std::size_t count, DataType dt, ReduceOp op) {
    validation::CheckedCall checked{};
    with_descriptor(c, [&](auto d) {
      using C = decltype(d);
      const char* what = C::name;
      const ReduceOp used = C::reduces ? op : ReduceOp::sum;
      validation::data_type_and_op(what, dt, used);
      const BufferShape s = C::shape(1, ranks, rank);
      const std::size_t in = validation::checked_bytes(what, count, dt, static_cast<int>(s.in));
      const std::size_t out = validation::checked_bytes(what, count, dt, static_cast<int>(s.out));
      const std::size_t full = validation::checked_bytes(what, count, dt, static_cast<int>(s.full));
      validation::buffers(what, send, in, recv, out);
      const std::size_t element = size_of(dt);
      // In place, the smaller buffer sits inside the larger one at its offset in the full buffer.
      bool in_place = false;
      if (in <= out) {
        const char* at = static_cast<const char*>(recv) + s.send_at * count * element;
        validation::in_place_or_disjoint(what, send, in, recv, out, at, C::in_place);
        in_place = send == at;
      } else {
        const char* at = static_cast<const char*>(send) + s.recv_at * count * element;
        validation::in_place_or_disjoint(what, recv, out, send, in, at, C::in_place);
        in_place = recv == at;
      }
      checked = {{send, recv, count, dt, used}, full, in_place};
    });
    return checked;
  }

  // What the non-native schedules of c expect done before they start (the descriptor's stage, if any).
  template <class T>
  static void stage(Collective c, T& t, const Call& call) {
    visit(c, [&](auto d) {
      using C = decltype(d);
      if constexpr (collective_detail::has_stage<C, T>::value) C::stage(t, call);
    });
  }

 private:
  template <class C>
  static bool answers_to(const std::string& key) {
    if (key == paro::detail::lowercase_without_underscores(C::name)) return true;
    std::string_view rest = C::aliases;
    while (!rest.empty()) {
      const std::size_t space = rest.find(' ');
      if (key == paro::detail::lowercase_without_underscores(rest.substr(0, space))) return true;
      rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
    }
    return false;
  }
};

// Every collective the registry's algorithms run, in the order tables list them.
using BuiltinCollectives = CollectiveList<AllReduce, AllGather, ReduceScatter, AllToAll>;

}  // namespace algorithms

inline constexpr auto& all_collectives = algorithms::BuiltinCollectives::ids;

// Names of the built-in collectives (a Communicator names its own list's, Communicator::name_of).
inline const char* name_of(Collective c) { return algorithms::BuiltinCollectives::name_of(c); }

inline Collective parse_collective(std::string_view s) { return algorithms::BuiltinCollectives::parse(s); }

// One rank's buffers for built-in collective c.
inline BufferShape buffer_shape(Collective c, std::size_t count, int ranks, int rank) {
  return algorithms::BuiltinCollectives::shape(c, count, ranks, rank);
}

}  // namespace paro
