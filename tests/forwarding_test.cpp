// The transport decorators forward the whole Transport concept (transport/forwarding.hpp): over a fake
// inner transport with every optional member, each decorator keeps them (bind_thread, abandon,
// shared_memory_id; issue and the native collectives where the decorator passes them through) and the
// traits (stepwise, has_native_collectives, the memory space); over one without, it lacks them. At run
// time, bind_thread on a decorated transport (stacked, split) reaches the inner one.

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "fake_transport.hpp"
#include "paro/topology/emulation.hpp"
#include "paro/transport/checksum.hpp"
#include "paro/transport/faults.hpp"
#include "paro/transport/forwarding.hpp"
#include "paro/transport/paced.hpp"
#include "paro/transport/recording.hpp"

namespace {

// The concept's members only: no optional member, not stepwise, no native collectives, host memory.
using Bare = paro::testing::FakeTransport<true>;

// A buffer outside host memory, as far as is_host_memory_v can tell.
struct OtherBuffer {
  char* data() { return nullptr; }
};

// Every optional member, stepwise, native collectives, a memory space of its own; counts bind_thread calls.
struct Full : Bare {
  static constexpr const char* name = "full";
  static constexpr bool has_native_collectives = true;
  static constexpr bool stepwise = true;
  int* bound = nullptr;

  Full split(int, int) { return *this; }
  OtherBuffer allocate(std::size_t) { return {}; }
  void bind_thread() { ++*bound; }
  void issue() {}
  void abandon(const std::string&) {}
  int shared_memory_id() { return 7; }
  void native_all_reduce(const void*, void*, std::size_t, paro::DataType, paro::ReduceOp) {}
  void native_all_gather(const void*, void*, std::size_t, paro::DataType) {}
  void native_reduce_scatter(const void*, void*, std::size_t, paro::DataType, paro::ReduceOp) {}
  void native_all_to_all(const void*, void*, std::size_t, paro::DataType) {}
};

// A decorator that changes nothing: the base alone makes a whole transport.
template <class Inner>
class Plain : public paro::Forwarding<Plain<Inner>, Inner> {
  using Base = paro::Forwarding<Plain<Inner>, Inner>;

 public:
  Plain() = default;
  explicit Plain(Inner inner) : Base(std::move(inner)) {}
};

template <class Inner>
using Checksum = paro::checksum::Transport<Inner>;
template <class Inner>
using Faults = paro::faults::Transport<Inner>;
template <class Inner>
using Paced = paro::paced::Transport<Inner>;
template <class Inner>
using Recording = paro::recording::Transport<Inner>;

// The optional members that transport.hpp has no detector for.
namespace concept_detail = paro::detail::transport_concept;
template <template <class> class Member, class T>
constexpr bool has = concept_detail::has<Member, T>;
template <class T>
using issue = concept_detail::issue<T>;
template <class T>
using shared_memory_id = decltype(std::declval<T&>().shared_memory_id());
template <class T>
using native_all_reduce =
    decltype(std::declval<T&>().native_all_reduce(nullptr, nullptr, std::size_t{}, paro::DataType{}, paro::ReduceOp{}));
template <class T>
using native_all_gather =
    decltype(std::declval<T&>().native_all_gather(nullptr, nullptr, std::size_t{}, paro::DataType{}));
template <class T>
using native_reduce_scatter = decltype(std::declval<T&>().native_reduce_scatter(nullptr, nullptr, std::size_t{},
                                                                                paro::DataType{}, paro::ReduceOp{}));
template <class T>
using native_all_to_all =
    decltype(std::declval<T&>().native_all_to_all(nullptr, nullptr, std::size_t{}, paro::DataType{}));

// What every decorator keeps of its inner transport.
template <template <class> class Decorator>
constexpr bool keeps_inner_members() {
  using OverFull = Decorator<Full>;
  using OverBare = Decorator<Bare>;
  static_assert(paro::check_transport<OverFull>() && paro::check_transport<OverBare>());
  static_assert(paro::has_bind_thread_v<OverFull> && !paro::has_bind_thread_v<OverBare>);
  static_assert(paro::has_abandon_v<OverFull> && !paro::has_abandon_v<OverBare>);
  static_assert(has<shared_memory_id, OverFull> && !has<shared_memory_id, OverBare>);
  static_assert(!paro::is_host_memory_v<OverFull> && paro::is_host_memory_v<OverBare>);
  static_assert(std::is_same_v<typename OverFull::Buffer, OtherBuffer>);
  return true;
}

// What a decorator that leaves NCCL's rules alone passes through as well.
template <template <class> class Decorator>
constexpr bool passes_traits_through() {
  using OverFull = Decorator<Full>;
  using OverBare = Decorator<Bare>;
  static_assert(paro::is_stepwise_v<OverFull> && !paro::is_stepwise_v<OverBare>);
  static_assert(OverFull::has_native_collectives && !OverBare::has_native_collectives);
  static_assert(has<native_all_reduce, OverFull> && !has<native_all_reduce, OverBare>);
  static_assert(has<native_all_gather, OverFull> && !has<native_all_gather, OverBare>);
  static_assert(has<native_reduce_scatter, OverFull> && !has<native_reduce_scatter, OverBare>);
  static_assert(has<native_all_to_all, OverFull> && !has<native_all_to_all, OverBare>);
  static_assert(has<issue, OverFull> && !has<issue, OverBare>);
  static_assert(std::string_view(OverFull::name) == "full" && std::string_view(OverBare::name) == "fake");
  return true;
}

static_assert(keeps_inner_members<Plain>() && passes_traits_through<Plain>());
static_assert(keeps_inner_members<Checksum>() && passes_traits_through<Checksum>());
static_assert(keeps_inner_members<Faults>() && passes_traits_through<Faults>());
static_assert(keeps_inner_members<Paced>() && passes_traits_through<Paced>());
static_assert(keeps_inner_members<Recording>());
// Recording imposes NCCL's rules whatever its inner transport: stepwise, issue() of its own, no native
// collectives (the schedules are what it tests).
static_assert(paro::is_stepwise_v<Recording<Full>> && paro::is_stepwise_v<Recording<Bare>>);
static_assert(has<issue, Recording<Full>> && has<issue, Recording<Bare>>);
static_assert(!Recording<Full>::has_native_collectives && !has<native_all_reduce, Recording<Full>>);
// Stacked decorators see through each other.
static_assert(paro::has_bind_thread_v<Checksum<Faults<Full>>> && !paro::has_bind_thread_v<Checksum<Faults<Bare>>>);
static_assert(paro::is_stepwise_v<Paced<Checksum<Full>>> && !paro::is_host_memory_v<Paced<Checksum<Full>>>);

TEST(Forwarding, BindThreadReachesTheInnerTransport) {
  int bound = 0;
  Full inner;
  inner.bound = &bound;

  Checksum<Full> checked(inner);
  checked.bind_thread();
  Faults<Full> faulty(inner, std::nullopt);
  faulty.bind_thread();
  auto paced = Paced<Full>::wrap(inner, paro::topology::EmulationSpec::parse("nodes=1"));
  paced.bind_thread();
  Recording<Full> recorded(inner);
  recorded.bind_thread();
  EXPECT_EQ(bound, 4);

  // Through two decorators, and on a communicator split from them.
  Checksum<Faults<Full>> stacked(Faults<Full>(inner, std::nullopt));
  stacked.bind_thread();
  stacked.split(0, 0).bind_thread();
  paced.split(0, 0).bind_thread();
  EXPECT_EQ(bound, 7);
  EXPECT_EQ(stacked.shared_memory_id(), 7);
}

TEST(Forwarding, PlainDecoratorForwardsWaitAll) {
  int bound = 0;
  Full inner;
  inner.bound = &bound;
  Plain<Full> plain(inner);
  std::vector<Plain<Full>::Request> requests{plain.isend(nullptr, 0, 0, 0), plain.irecv(nullptr, 0, 0, 0)};
  plain.wait_all(requests);  // the inner wait_all: the fake's leaves the vector as it is
  EXPECT_EQ(requests.size(), 2u);
  plain.split(0, 0).bind_thread();
  EXPECT_EQ(bound, 1);
}

}  // namespace
