#pragma once
// The public verbs. A Communicator owns a transport; every verb validates its arguments, plans (planner.hpp:
// the argument, else PARO_ALGO, else the cost model's fastest) and runs the algorithm's schedule, found
// through its descriptor in the registry (algorithms/registry.hpp).
//
// Buffer conventions (NCCL's):
//   all_reduce(send, recv, count)          both hold count elements; in place when send == recv
//   all_gather(send, recv, count)          send holds count, recv holds size()*count, rank r's block at
//                                          recv + r*count; in place when send == recv + rank()*count
//   reduce_scatter(send, recv, count)      send holds size()*count, recv holds count; in place when
//                                          recv == send + rank()*count (the other blocks of send are then
//                                          left undefined)
//   all_to_all(send, recv, count)          both hold size()*count; block j of send goes to rank j, block j
//                                          of recv comes from rank j; in place when send == recv
//   all_to_allv(send, send_blocks,         as all_to_all with a count and a displacement per rank on each
//               recv, recv_blocks)         side (communicator/blocks.hpp); in place when send == recv and
//                                          send_blocks == recv_blocks
//   broadcast(buf, count, root)            buf holds count elements; the root's become everyone's
//   gather(send, recv, count, root)        send holds count; the root's recv holds size()*count, rank r's block
//                                          at recv + r*count (recv unused elsewhere); in place at the root
//                                          when send == recv + root*count
//   scatter(send, recv, count, root)       the root's send holds size()*count (unused elsewhere); recv holds
//                                          count, block rank() of it; in place at the root when recv ==
//                                          send + root*count
//   reduce(send, recv, count, op, root)    both hold count elements (recv only at the root): the root's recv
//                                          = send reduced over the scope's ranks; in place when send == recv
//   send / recv(buf, count, peer, tag)     point-to-point (communicator/point_to_point.hpp): not collective
// All ranks must call the same verbs in the same order with the same count, type, op, algorithm and scope
// (all_to_allv: the same type and scope, and each pair of ranks the same length for its block).
// Buffers belong to the caller; a verb returns when this rank's part is complete and its buffers may be
// reused (other ranks may still be finishing theirs).
//
// Scopes (communicator/scopes.hpp): global (every rank), intra (the ranks of my group), inter (my rail:
// the ranks with my index in every group). Groups come from the topology (communicator/discovery.hpp) and
// PARO_GROUP (topology/grouping.hpp).
//
// Algorithms: ring and tree (flat), mics_hcs, paro_seq and paro_cc (hierarchical: over the levels of the
// topology among the scope's ranks), native (the backend's own), automatic (the cost model's fastest).
// all_to_all's: ring (pairwise exchange), tree (Bruck's), paro_seq and paro_cc (hierarchical); all_to_allv's:
// the pairwise exchange.
// The settings that change how they run are a Tuning (communicator/tuning.hpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/broadcast.hpp"
#include "paro/algorithms/collective.hpp"
#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/cost/link_sources.hpp"
#include "paro/algorithms/hierarchy.hpp"
#include "paro/algorithms/paro_cc.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/algorithms/rooted.hpp"
#include "paro/communicator/blocks.hpp"
#include "paro/communicator/discovery.hpp"
#include "paro/communicator/jobs.hpp"
#include "paro/communicator/options.hpp"
#include "paro/communicator/planner.hpp"
#include "paro/communicator/point_to_point.hpp"
#include "paro/communicator/progress.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/communicator/signature.hpp"
#include "paro/communicator/tuning.hpp"
#include "paro/communicator/validation.hpp"
#include "paro/communicator/verbs.hpp"
#include "paro/core/activity.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology.hpp"
#include "paro/transport/control.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

// Registry: the algorithms this communicator can run and the collectives they run (algorithms/registry.hpp,
// algorithms/collective.hpp); a program adds its own with BuiltinAlgorithms::with<...> and
// ::with_collectives<...>.
template <class Transport, class Registry = algorithms::BuiltinAlgorithms>
class Communicator : public Verbs<Communicator<Transport, Registry>> {
  static_assert(check_transport<Transport>(),
                "paro::Communicator<T>: T does not model the Transport concept (see paro/transport/transport.hpp)");
  using Named = Verbs<Communicator>;
  using Planned = Planner<Registry, Transport>;
  using Plan = typename Planned::Plan;

 public:
  using Collectives = typename Registry::Collectives;

  // Collective: discovers the topology (unless config gives it), forms the groups and splits off the
  // intra-group, rail and per-level communicators. Throws UsageError for a configuration that does not fit
  // the transport (and whatever discovery raises).
  explicit Communicator(Transport transport, CommunicatorConfig config = {})
      : t_(std::move(transport)),
        tuning_(tuned_for<Transport>(std::move(config.tuning))),
        overrides_(AlgorithmOverrides::parse<Registry>(tuning_.algorithms)),
        topology_(config.topology ? std::move(*config.topology) : topology::discover(t_, config.discovery)),
        groups_(Groups::make(checked(topology_), config.group)),
        grouping_(config.group),
        cost_(algorithms::link_model_for(topology_, tuning_.cost_file, tuning_.links_preset),
              algorithms::link_model_for(topology_, std::nullopt, tuning_.links_preset), tuning_.direct.max_bytes,
              tuning_.ring.window, tuning_.direct.window_bytes),
        scopes_(t_, topology_, groups_, cost_.bound_links().nic, lane_choice(t_)),
        messages_(t_) {
    if (groups_.uneven())
      log::info(rank(), "grouping by ", grouping_.describe(), ": groups of different sizes (",
                groups_.members.front().size(), " .. ", groups_.members.back().size(),
                " ranks); intra and inter collectives run on communicators of those sizes");
  }

  int rank() const { return t_.rank(); }
  int size() const { return t_.size(); }
  Transport& transport() { return t_; }
  Transport& transport(Scope s) { return scopes_.transport(s, t_); }
  // The ranks that share this rank's node, switch or pod (a level the topology knows).
  Transport& level(Level l) { return scopes_.level(l); }
  const Topology& topology() const { return topology_; }
  const Groups& groups() const { return groups_; }
  const GroupSpec& grouping() const { return grouping_; }
  const Tuning& tuning() const { return tuning_; }

  // Returns once every rank of the scope has called it (after this rank's earlier collectives completed).
  void barrier(Scope s = Scope::global) {
    Transport& t = scoped("barrier", s);
    engine_.run_now(
        [&t, s] {
          activity::CollectiveScope doing(&s, [](const void* scope) {
            return std::string("barrier ") + paro::name_of(*static_cast<const Scope*>(scope));
          });
          control::barrier(t);
        },
        [] { return std::string("barrier"); });
  }

  // Whether a call of c may request algorithm a here: registered, with a schedule for c, and (native) on a
  // backend that has its own collectives.
  static bool available(Algorithm a, Collective c) { return Planned::available(a, c); }

  // The name of an algorithm or a collective of this communicator's registry.
  static const char* name_of(Algorithm a) { return Planned::name_of(a); }
  static const char* name_of(Collective c) { return Collectives::name_of(c); }

  // The algorithm a verb would run: an explicit request, else PARO_ALGO, else the automatic choice.
  Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic,
                    Scope scope = Scope::global) const {
    return plan(c, full_bytes, requested, scope).algorithm;
  }
  // The PARO_ALGO entry that pins what that call would run, its algorithm and plan ("all_reduce:paro_cc(
  // chunk=8M,...)", what paro-bench --explain prints): a run pinned with it runs the same schedule.
  std::string pin(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic,
                  Scope scope = Scope::global) const {
    const Plan p = plan(c, full_bytes, requested, scope);
    return Registry::pin(c, p.algorithm, p.params);
  }

  // The cost model's view: predicted time of an algorithm (native is not modelled: 0), the lower bound,
  // and the shape of a scope (how the hierarchical algorithms cut it).
  const algorithms::CostModel& cost_model() const { return cost_; }
  // Replaces the model (e.g. with one measured at run time); every rank must set the same one, since the
  // model decides algorithms and pipeline chunks that the ranks must agree on.
  void set_cost_model(algorithms::CostModel model) { cost_ = std::move(model); }
  // Where paro_cc's lanes may run in calls made from now on (PARO_LANES; a backend that cannot be driven
  // from several threads runs them inline whatever this says); every rank must set the same.
  void set_lanes(algorithms::LaneChoice lanes) {
    tuning_.lanes = lanes;
    scopes_.set_lanes(lane_choice(t_));
  }
  // Collective: the hierarchical algorithms' sub-communicators of every scope, cut by its levels and by
  // its nodes alone, built now instead of at their first use, so that no later call pays for the splits
  // (a benchmark that times a first call; under SMPI a 3-level split of 128 ranks is 1.5 ms simulated).
  void build_hierarchies() {
    for (Scope s : all_scopes)
      for (bool by_nodes : {false, true}) scopes_.hierarchy(s, transport(s), by_nodes);
  }
  const algorithms::CostShape& shape(Scope s) const { return scopes_.shape(s); }
  double predict_us(Algorithm a, Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return Registry::predict(cost_, a, c, full_bytes, shape(s)).time_us;
  }
  double lower_bound_us(Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return cost_.lower_bound(Collectives::traffic(c), full_bytes, shape(s));
  }

  // Any collective of the registry's list by value, with its descriptor's buffers (algorithms/collective.hpp);
  // all_reduce, all_gather and reduce_scatter (verbs.hpp) are this for theirs. op is unused by a collective
  // that does not reduce. Errors: UsageError for bad arguments or an algorithm this backend or collective
  // does not have; TimeoutError / PeerFailure / BackendError when the communication fails.
  void collective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                  Options o = {}) {
    run_now(prepare(c, send, recv, count, dt, op, std::move(o)));
  }

  // buf (count elements) on every rank of the scope becomes root's buf; root is a rank of the scope. One
  // schedule, chosen by size (algorithms/broadcast.hpp): the algorithm must be automatic. Errors as
  // collective().
  void broadcast(void* buf, std::size_t count, DataType dt, int root, Options o = {}) {
    run_now(prepare_rooted(Rooted::broadcast, buf, buf, count, dt, root, std::move(o)));
  }
  // The root's recv = every rank's send (count elements each) in rank order (algorithms/rooted.hpp);
  // recv may be null elsewhere. Errors as broadcast.
  void gather(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    run_now(prepare_rooted(Rooted::gather, send, recv, count, dt, root, std::move(o)));
  }
  // recv (count elements) = block rank() of the root's send; send may be null elsewhere. Errors as broadcast.
  void scatter(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    run_now(prepare_rooted(Rooted::scatter, send, recv, count, dt, root, std::move(o)));
  }
  // The root's recv = send reduced over the scope's ranks; recv may be null elsewhere. It runs as an
  // all_reduce (with o's algorithm) whose result only the root keeps: on a ring or a hierarchy an all-reduce
  // moves the bytes a reduce to one rank must move through that rank's links. Errors as all_reduce.
  void reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root, Options o = {}) {
    run_now(prepare_reduce(send, recv, count, dt, op, root, std::move(o)));
  }

  // Block j of send (send_blocks.counts[j] elements from element send_blocks.displs[j]) goes to rank j of
  // the scope, and rank j's block for this rank lands at recv_blocks' block j: every block has its own
  // length, zero included, and both ranks of a pair must give it the same one (PARO_CHECK=1 compares them).
  // One schedule, the pairwise exchange (algorithms/all_to_all.hpp): the algorithm must be automatic or
  // ring. Errors as all_reduce.
  void all_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DataType dt,
                   Options o = {}) {
    run_now(prepare_all_to_allv(send, send_blocks, recv, recv_blocks, dt, std::move(o)));
  }

  // Point-to-point (communicator/point_to_point.hpp): count elements of buf to / from rank peer of scope s
  // (not this rank), with a tag in 0 .. 16383. Messages between two ranks with one tag match in the order
  // they were issued; a receive of another length than its message fails, naming both. Not collective, and
  // independent of the collectives in flight. Errors: UsageError for bad arguments or a backend that cannot
  // carry them; TimeoutError / PeerFailure / BackendError as the collectives'.
  void send(const void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    isend(buf, count, dt, peer, tag, s).wait();
  }
  void recv(void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    irecv(buf, count, dt, peer, tag, s).wait();
  }
  Request isend(const void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    return post_message(true, const_cast<void*>(buf), count, dt, peer, tag, s);
  }
  Request irecv(void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    return post_message(false, buf, count, dt, peer, tag, s);
  }
  // Whether this backend carries point-to-point messages (else they fail with a UsageError that says why).
  bool messages_available() const { return messages_.available(); }

  // Nonblocking forms (communicator/progress.hpp): the arguments are checked now (a UsageError is thrown
  // here); the collective runs on this communicator's progress thread after everything issued before it,
  // and the Request reports its completion and its error. The buffers belong to the collective until the
  // request completes. Every rank must issue the same collectives in the same order, blocking or not.
  Request icollective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                      Options o = {}) {
    return submit(prepare(c, send, recv, count, dt, op, std::move(o)));
  }
  Request ibroadcast(void* buf, std::size_t count, DataType dt, int root, Options o = {}) {
    return submit(prepare_rooted(Rooted::broadcast, buf, buf, count, dt, root, std::move(o)));
  }
  Request igather(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    return submit(prepare_rooted(Rooted::gather, send, recv, count, dt, root, std::move(o)));
  }
  Request iscatter(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    return submit(prepare_rooted(Rooted::scatter, send, recv, count, dt, root, std::move(o)));
  }
  Request ireduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root, Options o = {}) {
    return submit(prepare_reduce(send, recv, count, dt, op, root, std::move(o)));
  }
  Request iall_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DataType dt,
                       Options o = {}) {
    return submit(prepare_all_to_allv(send, send_blocks, recv, recv_blocks, dt, std::move(o)));
  }

  // Returns once every collective issued so far has completed; throws the first failure, if any. Use it
  // before driving transport() directly while nonblocking collectives may be in flight.
  void wait_all() { engine_.wait_all(); }

  // The typed forms of broadcast and all_to_allv (verbs.hpp: the data type follows from T).
  using Named::all_to_allv;
  using Named::broadcast;
  using Named::iall_to_allv;
  using Named::ibroadcast;

 private:
  Transport t_;
  Tuning tuning_;
  AlgorithmOverrides overrides_;
  Topology topology_;
  Groups groups_;
  GroupSpec grouping_;
  algorithms::CostModel cost_;
  Scopes<Transport> scopes_;
  PointToPoint<Transport> messages_;  // their own communicator and thread
  // Last: destroyed first, so that its worker finishes the queued collectives while the rest still exists.
  ProgressEngine engine_{[this] { bind_worker_thread(); }};

  using Job = CollectiveJob<Communicator>;
  using RootedJob = paro::RootedJob<Communicator>;
  using AllToAllvJob = paro::AllToAllvJob<Communicator>;
  using Context = ScheduleContext<Communicator>;
  friend Job;
  friend RootedJob;
  friend AllToAllvJob;
  friend Context;

  // The checks that need no communication, and the plan; the rest happens in execute().
  Job prepare(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, Options o) {
    Transport& t = scoped(Collectives::name_of(c), o.scope);
    const validation::CheckedCall k = Collectives::validate(c, t.rank(), t.size(), send, recv, count, dt, op);
    Job j{this, c, o.scope, plan(c, k.bytes, o.algorithm, o.scope), k.call, k.in_place, std::move(o.inputs_ready)};
    log::info(rank(), j);
    return j;
  }

  static void check_root(const char* what, int root, const Transport& t, Scope s) {
    detail::require(root >= 0 && root < t.size(), what, ": root ", root, " is not a rank of the ", paro::name_of(s),
                    " scope; allowed: 0 .. ", t.size() - 1);
  }

  // Broadcast, gather and scatter: recv (broadcast: the buffer) on every rank, send where it is read.
  RootedJob prepare_rooted(Rooted kind, const void* send, void* recv, std::size_t count, DataType dt, int root,
                           Options o) {
    const char* what = paro::name_of(kind);
    Transport& t = scoped(what, o.scope);
    validation::data_type_and_op(what, dt, ReduceOp::sum);
    const int n = t.size();
    check_root(what, root, t, o.scope);
    const std::size_t block = validation::checked_bytes(what, count, dt, 1);
    const std::size_t all = validation::checked_bytes(what, count, dt, n);
    const bool root_here = t.rank() == root;
    if (kind == Rooted::broadcast) validation::buffers(what, recv, block, recv, block);
    if (kind == Rooted::gather) {
      validation::buffers(what, send, block, recv, root_here ? all : 0);
      if (root_here)
        validation::in_place_or_disjoint(what, send, block, recv, all, static_cast<char*>(recv) + root * block,
                                         "send == recv + root*count");
    }
    if (kind == Rooted::scatter) {
      validation::buffers(what, send, root_here ? all : 0, recv, block);
      if (root_here)
        validation::in_place_or_disjoint(what, recv, block, send, all, static_cast<const char*>(send) + root * block,
                                         "recv == send + root*count");
    }
    detail::require(o.algorithm == Algorithm::automatic, what, ": algorithm ", name_of(o.algorithm), "; ", what,
                    " has one schedule (",
                    kind == Rooted::broadcast ? "a binomial tree, a pipelined chain for large messages"
                                              : "a direct exchange with the root",
                    "), so allowed: automatic");
    RootedJob j{this, kind, o.scope, send, recv, count, dt, root, std::move(o.inputs_ready)};
    log::info(rank(), j);
    return j;
  }

  // A reduce: an all_reduce into the root's recv, or elsewhere into scratch that the job keeps.
  struct ReduceJob {
    Job all_reduce;
    std::shared_ptr<void> scratch;
    void operator()() const { all_reduce(); }
    std::string describe() const { return "reduce, as " + all_reduce.describe(); }
  };
  ReduceJob prepare_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root,
                           Options o) {
    const char* what = "reduce";
    Transport& t = scoped(what, o.scope);
    check_root(what, root, t, o.scope);
    validation::data_type_and_op(what, dt, op);
    std::shared_ptr<void> scratch;
    if (t.rank() != root) {
      auto buffer =
          std::make_shared<decltype(t.allocate(0))>(t.allocate(validation::checked_bytes(what, count, dt, 1)));
      recv = count == 0 ? nullptr : static_cast<void*>(buffer->data());
      scratch = buffer;
    }
    return {prepare(Collective::all_reduce, send, recv, count, dt, op, std::move(o)), std::move(scratch)};
  }

  AllToAllvJob prepare_all_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks,
                                   DataType dt, Options o) {
    const char* what = "all_to_allv";
    Transport& t = scoped(what, o.scope);
    validation::data_type_and_op(what, dt, ReduceOp::sum);
    std::vector<algorithms::Extent> sends = validation::extents(what, "send_blocks", send_blocks, dt, t.size());
    std::vector<algorithms::Extent> recvs = validation::extents(what, "recv_blocks", recv_blocks, dt, t.size());
    const auto me = static_cast<std::size_t>(t.rank());
    detail::require(sends[me].bytes == recvs[me].bytes, what, ": this rank (", me, ") sends itself ",
                    send_blocks.counts[me], " elements (send_blocks.counts[", me, "]) but takes ",
                    recv_blocks.counts[me], " from itself (recv_blocks.counts[", me, "])");
    validation::disjoint(what, "recv_blocks", recvs, dt);
    const std::size_t send_span = algorithms::span(sends), recv_span = algorithms::span(recvs);
    validation::buffers(what, send, send_span, recv, recv_span);
    const bool in_place = send == recv && send_span + recv_span > 0;
    if (in_place)
      detail::require(send_blocks == recv_blocks, what, ": in place (send == recv) with send_blocks != recv_blocks; ",
                      "in place means send == recv with the same blocks");
    else
      validation::in_place_or_disjoint(what, send, send_span, recv, recv_span, nullptr,
                                       "send == recv with send_blocks == recv_blocks");
    detail::require(o.algorithm == Algorithm::automatic || o.algorithm == Algorithm::ring, what, ": algorithm ",
                    name_of(o.algorithm),
                    "; all_to_allv has one schedule (the pairwise exchange), so allowed: automatic ring");
    AllToAllvJob j{
        this, o.scope, send, recv, dt, std::move(sends), std::move(recvs), in_place, std::move(o.inputs_ready)};
    log::info(rank(), j);
    return j;
  }

  Request post_message(bool is_send, void* buf, std::size_t count, DataType dt, int peer, int tag, Scope s) {
    const char* what = is_send ? "send" : "recv";
    Transport& t = scoped(what, s);
    detail::require(messages_.available(), what, ": ", messages_.why_unavailable());
    validation::data_type_and_op(what, dt, ReduceOp::sum);
    const std::size_t bytes = validation::checked_bytes(what, count, dt, 1);
    validation::buffers(what, buf, is_send ? bytes : 0, buf, is_send ? 0 : bytes);
    detail::require(peer >= 0 && peer < t.size(), what, ": peer ", peer, " is not a rank of the ", paro::name_of(s),
                    " scope; allowed: 0 .. ", t.size() - 1);
    detail::require(peer != t.rank(), what, ": peer ", peer, " is this rank; a message to oneself has no one to ",
                    "match it here, copy the buffer instead");
    detail::require(tag >= 0 && tag <= PointToPoint<Transport>::max_tag, what, ": tag ", tag, "; allowed: 0 .. ",
                    PointToPoint<Transport>::max_tag);
    const int world_peer =
        s == Scope::global ? peer : scope_members(s, groups_, rank(), size())[static_cast<std::size_t>(peer)];
    return messages_.post(is_send, buf, bytes, world_peer, tag, t.rank(), peer);
  }

  template <class J>
  void run_now(const J& j) {
    engine_.run_now(j, [&j] { return j.describe(); });
  }
  template <class J>
  Request submit(const J& j) {
    return engine_.submit(j, [j] { return j.describe(); });
  }

  // On the thread that runs the collective: agreement (PARO_CHECK), then the schedule.
  void execute(const Job& j) {
    activity::CollectiveScope doing(&j, [](const void* job) { return static_cast<const Job*>(job)->describe(); });
    Transport& t = transport(j.scope);
    const algorithms::Call& call = j.call;
    if (j.inputs_ready) j.inputs_ready();
    check_agreement(t, static_cast<std::int64_t>(j.collective), j.scope, j.plan.algorithm,
                    Registry::print(j.plan.algorithm, j.plan.params), call.count, call.dt,
                    static_cast<std::int64_t>(call.op));
    if (call.count == 0) return;
    if (Registry::family(j.plan.algorithm) != algorithms::Family::native) Collectives::stage(j.collective, t, call);
    run(j.collective, j.plan, j.scope, call);
  }

  void execute(const RootedJob& j) {
    activity::CollectiveScope doing(&j, [](const void* job) { return static_cast<const RootedJob*>(job)->describe(); });
    Transport& t = transport(j.scope);
    if (j.inputs_ready) j.inputs_ready();
    check_agreement(t, rooted_signature(j.kind), j.scope, Algorithm::automatic, "", j.count, j.dt, j.root);
    const std::size_t block = j.count * size_of(j.dt);
    if (block == 0) return;
    switch (j.kind) {
      case Rooted::broadcast: algorithms::broadcast(t, j.recv, block, j.root, tuning_.ring); return;
      case Rooted::gather: algorithms::direct_gather(t, j.send, j.recv, block, j.root, tuning_.ring); return;
      case Rooted::scatter: algorithms::direct_scatter(t, j.send, j.recv, block, j.root, tuning_.ring); return;
    }
  }

  void execute(const AllToAllvJob& j) {
    activity::CollectiveScope doing(&j,
                                    [](const void* job) { return static_cast<const AllToAllvJob*>(job)->describe(); });
    Transport& t = transport(j.scope);
    if (j.inputs_ready) j.inputs_ready();
    check_agreement(t, all_to_allv_signature, j.scope, Algorithm::automatic, "", 0, j.dt, 0);
    if (tuning_.check_signatures) check_block_agreement(t, j.sends, j.recvs, j.dt);
    algorithms::pairwise_all_to_allv(t, j.send, j.sends, j.recv, j.recvs);
  }

  // A CUDA backend's calls act on the calling thread's current device: the progress thread selects it.
  void bind_worker_thread() {
    if constexpr (has_bind_thread_v<Transport>) t_.bind_thread();
  }

  void run(Collective c, const Plan& p, Scope s, const algorithms::Call& call) {
    Context x{*this, s, p};
    Registry::visit(p.algorithm, [&](auto d) {
      Collectives::visit(c, [&](auto k) { run_schedule<decltype(k), decltype(d)>(x, call); });
    });
  }
  // Algorithm D's schedule for collective K, where it has one (the planner lets no other pair through). A
  // function of its own: GCC 12 drops an `if constexpr` on both types inside the nested generic lambdas.
  template <class K, class D>
  static void run_schedule(Context& x, const algorithms::Call& call) {
    if constexpr (algorithms::collective_detail::has_schedule<K, D>::value) K::template run<D>(x, call);
  }

  Plan plan(Collective c, std::size_t full_bytes, Algorithm requested, Scope scope) const {
    return Planned::plan(c, full_bytes, requested, overrides_[c], overrides_.pins(c), cost_, shape(scope), tuning_,
                         lane_choice(t_));
  }

  void check_agreement(Transport& t, std::int64_t c, Scope s, Algorithm a, const std::string& plan, std::size_t count,
                       DataType dt, std::int64_t op) {
    if (tuning_.check_signatures)
      check_call_agreement(t, tuning_, lane_choice(t), c, s, a, plan, count, dt, op,
                           [](auto id) { return name_of(id); });
  }

  const Topology& checked(const Topology& topo) const {
    detail::require(t_.size() > 0, "Communicator: the transport is empty (a split with a negative color)");
    detail::require(topo.size() == t_.size(), "Communicator: the topology describes ", topo.size(),
                    " ranks but the transport has ", t_.size());
    topo.validate();
    return topo;
  }

  // The construction rejected empty transports, and every rank is in a group and a rail, so no scope is empty.
  Transport& scoped(const char* what, Scope s) {
    detail::require(s == Scope::global || s == Scope::intra || s == Scope::inter, what, ": invalid Scope value ",
                    static_cast<int>(s), "; allowed: global intra inter");
    return transport(s);
  }

  // Where paro_cc's lanes may run on this communicator: threads of their own only where the backend lets
  // several threads drive it at once.
  algorithms::LaneChoice lane_choice(const Transport& t) const {
    return t.concurrent_use() ? tuning_.lanes : algorithms::LaneChoice::inline_only;
  }
};

}  // namespace paro
