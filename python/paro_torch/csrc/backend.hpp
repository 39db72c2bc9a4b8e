#pragma once
// The "paro" c10d backend: torch.distributed's collectives on a paro Communicator.
//
// Tensors: CPU tensors run on the group's host communicator (ucx or mpi). In a build with CUDA
// (PARO_TORCH_WITH_CUDA, setup.py) CUDA tensors run on a second communicator over the nccl transport, made
// on the group's first CUDA collective (rank 0's ncclUniqueId travels through the group's store), which
// waits for the work on the caller's current stream before reading its inputs and writes staged results
// back on that stream. The CUDA path has never run on a GPU.
//
// Bootstrap: a process group is handed a c10d Store (torchrun, init_method env:// or tcp://); the ucx
// transport exchanges its worker addresses through it. Under mpirun (transport "mpi", or "auto" when Open
// MPI's or a PMI's variables are set) the group's ranks form an MPI communicator instead.
//
// Execution: every collective is issued with paro's nonblocking verbs, which run one at a time in issue
// order on the communicator's progress thread. A completion thread waits for them in the same order,
// copies results out where a staging buffer was needed, and completes the Work. The Work's future is
// marked on torch's inter-op pool, so that a future's callback may itself wait on another collective of
// this group (PowerSGD-style hooks do) without holding up the completion of that collective.

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/Parallel.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/collectives.hpp"
#include "paro/transport/ucx.hpp"
#include "types.hpp"
#ifdef PARO_TORCH_WITH_MPI
#include "paro/transport/mpi.hpp"
#endif
#ifdef PARO_TORCH_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "paro/cuda/runtime.hpp"
#include "paro/transport/nccl.hpp"
#endif

namespace paro::torch_backend {

// ---------------------------------------------------------------------------------------------------
// Errors: paro's kinds become the c10 exceptions that torch.distributed raises for the same causes.

inline std::exception_ptr as_torch_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const UsageError& u) {
    return std::make_exception_ptr(c10::ValueError(std::string(u.what())));
  } catch (const TimeoutError& t) {
    return std::make_exception_ptr(c10::DistNetworkError(std::string(t.what())));
  } catch (const PeerFailure& p) {
    return std::make_exception_ptr(c10::DistNetworkError(std::string(p.what())));
  } catch (const Error& b) {
    return std::make_exception_ptr(c10::DistBackendError(std::string(b.what())));
  } catch (...) {
    return std::current_exception();
  }
}

// Runs f; a paro error it throws leaves as the torch exception of its kind.
template <class F>
auto translating(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    std::rethrow_exception(as_torch_error(std::current_exception()));
  }
}

// ---------------------------------------------------------------------------------------------------
// Tensors and options: torch's names to paro's, with the allowed values in every error.

inline DataType data_type_of(const at::Tensor& t) {
  const std::optional<DataType> dt = paro_type_of(t.scalar_type());
  TORCH_CHECK_TYPE(dt, "paro backend: tensors of type ", t.scalar_type(),
                   " are not supported; allowed: float32 float64 float16 bfloat16 int8 int32 int64 uint8");
  return *dt;
}

inline ReduceOp reduce_op_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    default:
      TORCH_CHECK_VALUE(false, "paro backend: reduce op ", op.op_,
                        " is not supported; allowed: SUM PRODUCT MIN MAX AVG");
  }
}

#ifdef PARO_TORCH_WITH_CUDA
constexpr bool built_with_cuda = true;
#else
constexpr bool built_with_cuda = false;
#endif

// A dense tensor on a device this build handles, or a ValueError that says what was given.
inline void check_dense(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.defined(), "paro backend ", what, ": an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "paro backend ", what, ": only dense (strided) tensors, not ",
                    t.layout());
  TORCH_CHECK_VALUE(t.device().is_cpu() || (built_with_cuda && t.device().is_cuda()), "paro backend ", what,
                    ": a tensor on ", t.device(), "; allowed: ",
                    built_with_cuda ? "cpu, cuda" : "cpu (this build has no CUDA: PARO_TORCH_CUDA=1 at install)");
}

// Tensors that one collective moves between: the same type, on the same device.
inline void check_alike(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "paro backend ", what, ": tensors of types ", a.scalar_type(),
                   " and ", b.scalar_type(), "; all must have the same type");
  TORCH_CHECK_VALUE(a.device() == b.device(), "paro backend ", what, ": tensors on ", a.device(), " and ", b.device(),
                    "; all must be on the same device");
}

inline std::size_t count_of(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

// ---------------------------------------------------------------------------------------------------
// A paro Communicator whatever its transport: what the backend needs of it.

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* transport_name() const = 0;
  // `inputs_ready` (may be empty): Options::inputs_ready, what the collective waits for first.
  virtual Request all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                             std::function<void()> inputs_ready) = 0;
  virtual Request all_gather(const void* send, void* recv, std::size_t count, DataType dt,
                             std::function<void()> inputs_ready) = 0;
  virtual Request reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                                 std::function<void()> inputs_ready) = 0;
  virtual Request broadcast(void* buf, std::size_t count, DataType dt, int root,
                            std::function<void()> inputs_ready) = 0;
  virtual const Topology& topology() const = 0;
  virtual const Groups& groups() const = 0;
  virtual const GroupSpec& grouping() const = 0;
  // The algorithm a collective over a full buffer of this many bytes would run.
  virtual std::string algorithm_for(Collective c, std::size_t full_bytes) const = 0;
};

template <class Transport>
class CollectivesOver final : public Collectives {
 public:
  CollectivesOver(Transport t, CommunicatorConfig config) : comm_(std::move(t), std::move(config)) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  const char* transport_name() const override { return Transport::name; }
  Request all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                     std::function<void()> inputs_ready) override {
    return comm_.iall_reduce(send, recv, count, dt, op, with(std::move(inputs_ready)));
  }
  Request all_gather(const void* send, void* recv, std::size_t count, DataType dt,
                     std::function<void()> inputs_ready) override {
    return comm_.iall_gather(send, recv, count, dt, with(std::move(inputs_ready)));
  }
  Request reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                         std::function<void()> inputs_ready) override {
    return comm_.ireduce_scatter(send, recv, count, dt, op, with(std::move(inputs_ready)));
  }
  Request broadcast(void* buf, std::size_t count, DataType dt, int root, std::function<void()> inputs_ready) override {
    return comm_.ibroadcast(buf, count, dt, root, with(std::move(inputs_ready)));
  }
  const Topology& topology() const override { return comm_.topology(); }
  const Groups& groups() const override { return comm_.groups(); }
  const GroupSpec& grouping() const override { return comm_.grouping(); }
  std::string algorithm_for(Collective c, std::size_t full_bytes) const override {
    return Communicator<Transport>::name_of(comm_.resolve(c, full_bytes));
  }

 private:
  Communicator<Transport> comm_;

  static Options with(std::function<void()> inputs_ready) {
    Options o;
    o.inputs_ready = std::move(inputs_ready);
    return o;
  }
};

// How a process group was asked to run (paro_torch.Options, else the environment).
struct GroupSettings {
  std::string algorithms;                  // PARO_ALGO's grammar; empty: the environment's
  std::string grouping;                    // PARO_GROUP's grammar; empty: the environment's
  std::string transport = "auto";          // auto, ucx, mpi
  std::vector<std::int64_t> global_ranks;  // the group's members as world ranks; empty: the default group
  int world_size = 0;                      // the default group's size (0 while it is being made)
};

// The c10d Store as paro's bootstrap Store. Its get waits with the store's own timeout.
class C10dStore final : public bootstrap::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const bootstrap::Bytes& value) override { store_->set(key, value); }
  bootstrap::Bytes get(const std::string& key) override {
    try {
      return store_->get(key);
    } catch (const c10::DistStoreError& e) {
      throw TimeoutError(detail::concat("c10d store: key '", key, "': ", e.what()));
    }
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// The default group's topology, where it runs on paro: a later group's is the world's restricted to its
// members, so that every group of a process sees the same cluster.
inline std::optional<Topology>& world_topology() {
  static std::optional<Topology> topology;
  return topology;
}

inline Topology restricted(const Topology& world, const std::vector<std::int64_t>& members) {
  Topology t = world;
  t.ranks.clear();
  std::map<std::string, int> next_local;
  for (std::int64_t g : members) {
    TORCH_CHECK_VALUE(g >= 0 && g < world.size(), "paro backend: group member ", g, " is not a rank of the ",
                      world.size(), "-rank world");
    RankPlace p = world.ranks[static_cast<std::size_t>(g)];
    p.local = next_local[p.node]++;
    t.ranks.push_back(p);
  }
  return t;
}

inline bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

inline std::unique_ptr<Collectives> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            const GroupSettings& settings) {
  CommunicatorConfig config;
  if (!settings.algorithms.empty()) config.tuning.algorithms = settings.algorithms;
  if (!settings.grouping.empty()) config.group = GroupSpec::parse(settings.grouping);
  const bool default_group = settings.global_ranks.empty();
  TORCH_CHECK_VALUE(default_group || static_cast<int>(settings.global_ranks.size()) == size,
                    "paro backend: a group of ", size, " ranks with ", settings.global_ranks.size(), " global ranks");
  // Otherwise discovery runs over the group's own ranks: host identity and launcher variables describe each
  // rank wherever it is, but PARO_EMULATE describes the whole world.
  if (!default_group && world_topology())
    config.topology = restricted(*world_topology(), settings.global_ranks);
  else if (!default_group && config.discovery.emulate)
    config.topology = restricted(topology::EmulationSpec::parse(*config.discovery.emulate).place(settings.world_size),
                                 settings.global_ranks);
  const std::string& kind = settings.transport;
  TORCH_CHECK_VALUE(kind == "auto" || kind == "ucx" || kind == "mpi", "paro backend: transport '", kind,
                    "'; allowed: auto ucx mpi");
  std::unique_ptr<Collectives> comm;
  if (kind == "mpi" || (kind == "auto" && launched_by_mpi())) {
#ifdef PARO_TORCH_WITH_MPI
    static mpi::Environment environment;
    int world_rank = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    std::vector<int> members;
    for (std::int64_t g : settings.global_ranks) members.push_back(static_cast<int>(g));
    if (members.empty())
      for (int r = 0; r < size; ++r) members.push_back(r);
    TORCH_CHECK_VALUE(static_cast<int>(members.size()) == size && members[static_cast<std::size_t>(rank)] == world_rank,
                      "paro backend (mpi): torch's rank ", rank, " of ", size, " is MPI_COMM_WORLD rank ", world_rank,
                      " of ", world_size, "; under mpirun set RANK and WORLD_SIZE from the MPI ranks");
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, size, members.data(), &group);
    MPI_Comm created = MPI_COMM_NULL;
    MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &created);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    comm = std::make_unique<CollectivesOver<mpi::Transport>>(mpi::Transport(created), std::move(config));
    MPI_Comm_free(&created);
#else
    TORCH_CHECK_VALUE(kind != "mpi", "paro backend: built without MPI; allowed transports here: auto ucx");
#endif
  }
  if (!comm) {
    C10dStore paro_store(store);
    bootstrap::StoreBootstrap boot(paro_store, rank, size, "paro-torch");
    comm = std::make_unique<CollectivesOver<ucx::Transport>>(ucx::Transport(boot), std::move(config));
  }
  if (default_group) world_topology() = comm->topology();
  return comm;
}

#ifdef PARO_TORCH_WITH_CUDA
// The group's collectives on CUDA tensors: a communicator over NCCL with the host one's ranks, topology and
// grouping, this rank on `device`. Collective: rank 0's ncclUniqueId travels through the group's store (a
// prefix store of its own, so one key per group).
inline std::unique_ptr<Collectives> connect_device(const c10::intrusive_ptr<c10d::Store>& store,
                                                   const Collectives& host, const GroupSettings& settings, int device) {
  const std::string key = "paro-torch/nccl-unique-id";
  ncclUniqueId id{};
  if (host.rank() == 0) {
    id = nccl::Transport::unique_id();
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
    store->set(key, std::vector<std::uint8_t>(bytes, bytes + sizeof id));
  } else {
    const std::vector<std::uint8_t> bytes = C10dStore(store).get(key);
    TORCH_CHECK(bytes.size() == sizeof id, "paro backend: the store's NCCL id has ", bytes.size(), " bytes, not ",
                sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  CommunicatorConfig config;
  config.topology = host.topology();
  config.group = host.grouping();
  if (!settings.algorithms.empty()) config.tuning.algorithms = settings.algorithms;
  return std::make_unique<CollectivesOver<nccl::Transport>>(nccl::Transport::join(id, host.rank(), host.size(), device),
                                                            std::move(config));
}
#endif

// ---------------------------------------------------------------------------------------------------

// Future completions launched on torch's inter-op pool that have not yet dropped their references. Such a
// task may hold the last reference to a Work's future and tensors; released while Python finalizes, a
// tensor's Python object would take the GIL, which kills a non-main thread there mid-unwind (SIGABRT).
// Python's exit therefore waits for them (wait_until_idle, registered with atexit by paro_torch).
class CompletionsInFlight {
 public:
  static CompletionsInFlight& instance() {
    static CompletionsInFlight* const it = new CompletionsInFlight;  // never destroyed: pool threads may outlive exit
    return *it;
  }
  void begin() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --count_;
    }
    idle_.notify_all();
  }
  // Returns the number still running after at most `limit` (0: all done).
  int wait_until_idle(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait_for(lock, limit, [&] { return count_ == 0; });
    return count_;
  }

  // Ends one begun completion when it goes out of scope, after whatever the task declared later.
  struct Ending {
    Ending() = default;
    Ending(const Ending&) = delete;
    Ending& operator=(const Ending&) = delete;
    ~Ending() { instance().end(); }
  };

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  int count_ = 0;
};

class Work : public c10d::Work {
 public:
  Work(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type, title),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !error_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // Blocks until the collective completed (paro's PARO_TIMEOUT ends a collective whose peer is gone), or
  // for at most `timeout`; throws the collective's error.
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == ::kNoTimeout)
      done_.wait(lock, [&] { return completed_; });
    else
      TORCH_CHECK(done_.wait_for(lock, timeout, [&] { return completed_; }), "paro backend: the collective did not ",
                  "complete within ", timeout.count(), " ms");
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called once by the completion thread when the results are in place (or the collective failed).
  void complete(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_ = true;
      error_ = error;
    }
    done_.notify_all();
    CompletionsInFlight::instance().begin();
    at::launch([future = future_, outputs = outputs_, error]() mutable {
      const CompletionsInFlight::Ending ending;  // destroyed last: after the references below are dropped
      auto completing = std::move(future);
      auto results = std::move(outputs);
      if (error)
        completing->setError(error);
      else
        completing->markCompleted(c10::IValue(results));
    });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Completes Works on a thread of its own, in issue order: paro runs a communicator's collectives in issue
// order, so waiting for them in that order never waits behind one that could finish sooner. The queue
// outlives its Completer where the Completer is destroyed on that very thread: a Work's future may hold the
// last reference to its process group (a Python callback that captured it), and this thread may drop the
// last reference to the future, destroying the Backend here.
class Completer {
 public:
  // One paro request of a Work, and what runs once it completed (copy a staging buffer out; the closure
  // also keeps the buffers alive until then).
  struct Step {
    Request request;
    std::function<void()> after;
  };

  Completer() : queue_(std::make_shared<Queue>()) {
    thread_ = std::thread([queue = queue_] { queue->run(); });
  }
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  // Completes what was added (each collective ends by PARO_TIMEOUT at the latest).
  ~Completer() {
    queue_->stop();
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();  // run() finishes the queue and returns
    else
      thread_.join();
  }

  void add(c10::intrusive_ptr<Work> work, std::vector<Step> steps) {
    queue_->push({std::move(work), std::move(steps)});
  }

 private:
  struct Pending {
    c10::intrusive_ptr<Work> work;
    std::vector<Step> steps;
  };

  struct Queue {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Pending> pending;
    bool stopping = false;

    void push(Pending p) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        pending.push_back(std::move(p));
      }
      changed.notify_all();
    }
    void stop() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      changed.notify_all();
    }
    void run() {
      for (;;) {
        Pending next;
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return stopping || !pending.empty(); });
          if (pending.empty()) return;
          next = std::move(pending.front());
          pending.pop_front();
        }
        std::exception_ptr error;
        for (Step& s : next.steps) {
          try {
            s.request.wait();
            if (!error && s.after) s.after();
          } catch (...) {
            if (!error) error = as_torch_error(std::current_exception());
          }
        }
        next.work->complete(error);
      }
    }
  };

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
};

class Backend : public c10d::Backend {
 public:
  // Collective over the group's ranks (the transport connects them).
  Backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupSettings settings)
      : c10d::Backend(rank, size),
        store_(store),
        settings_(std::move(settings)),
        comm_(translating([&] { return connect(store, rank, size, settings_); })) {}

  const std::string getBackendName() const override { return "paro"; }
  Collectives& collectives() { return *comm_; }
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    at::Tensor t = single(tensors, "broadcast");
    TORCH_CHECK_VALUE(opts.rootTensor == 0, "paro backend broadcast: rootTensor ", opts.rootTensor,
                      "; one tensor per process, so 0");
    TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "paro backend broadcast: root rank ", opts.rootRank,
                      "; allowed: 0 ..", size_ - 1);
    Route route = route_for(t);
    Staged s = staged(t);
    Request r = translating([&] {
      return route.comm.broadcast(s.buffer.data_ptr(), count_of(t), data_type_of(t), static_cast<int>(opts.rootRank),
                                  route.ready());
    });
    return enqueue(route, c10d::OpType::BROADCAST, "paro:broadcast", {t}, {{r, s.copy_back}});
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    at::Tensor t = single(tensors, "allreduce");
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    Route route = route_for(t);
    Staged s = staged(t);
    Request r = translating([&] {
      return route.comm.all_reduce(s.buffer.data_ptr(), s.buffer.data_ptr(), count_of(t), data_type_of(t), op,
                                   route.ready());
    });
    return enqueue(route, c10d::OpType::ALLREDUCE, "paro:all_reduce", {t}, {{r, s.copy_back}});
  }

  // One all-reduce of the tensors packed into one buffer.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    TORCH_CHECK_VALUE(!tensors.empty(), "paro backend allreduce_coalesced: no tensors");
    for (const at::Tensor& t : tensors) {
      check_dense(t, "allreduce_coalesced");
      check_alike(t, tensors.front(), "allreduce_coalesced");
    }
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    Route route = route_for(tensors.front());
    at::Tensor flat = flatten(tensors);
    Request r = translating([&] {
      return route.comm.all_reduce(flat.data_ptr(), flat.data_ptr(), count_of(flat), data_type_of(flat), op,
                                   route.ready());
    });
    auto unpack = [flat, tensors] {
      std::int64_t offset = 0;
      for (const at::Tensor& t : tensors) {
        t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
        offset += t.numel();
      }
    };
    return enqueue(route, c10d::OpType::ALLREDUCE_COALESCED, "paro:all_reduce_coalesced", tensors, {{r, unpack}});
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& = c10d::AllgatherOptions()) override {
    at::Tensor in = single(inputs, "allgather");
    std::vector<at::Tensor>& out = per_rank(outputs, in, "allgather", "output", "input");
    Route route = route_for(in);
    at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
    at::Tensor src = in.contiguous();
    Request r = translating([&] {
      return route.comm.all_gather(src.data_ptr(), flat.data_ptr(), count_of(in), data_type_of(in), route.ready());
    });
    auto unpack = [flat, out, src, n = in.numel()] {
      for (std::size_t k = 0; k < out.size(); ++k)
        out[k].copy_(flat.narrow(0, static_cast<std::int64_t>(k) * n, n).view_as(out[k]));
    };
    return enqueue(route, c10d::OpType::ALLGATHER, "paro:all_gather", out, {{r, unpack}});
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& = c10d::AllgatherOptions()) override {
    Route route = route_for(input);
    std::vector<Step> steps{gather_into(route, output, input, "all_gather_into_tensor")};
    return enqueue(route, c10d::OpType::_ALLGATHER_BASE, "paro:all_gather_into_tensor", {output}, std::move(steps));
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& = c10d::AllgatherOptions()) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "paro backend allgather_into_tensor_coalesced: ", outputs.size(),
                      " outputs for ", inputs.size(), " inputs; one each");
    TORCH_CHECK_VALUE(!inputs.empty(), "paro backend allgather_into_tensor_coalesced: no tensors");
    Route route = route_for(inputs.front());
    std::vector<Step> steps;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      steps.push_back(gather_into(route, outputs[k], inputs[k], "allgather_into_tensor_coalesced"));
    return enqueue(route, c10d::OpType::COALESCED, "paro:all_gather_into_tensor_coalesced", outputs, std::move(steps));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    at::Tensor out = single(outputs, "reduce_scatter");
    std::vector<at::Tensor>& in = per_rank(inputs, out, "reduce_scatter", "input", "output");
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    Route route = route_for(out);
    at::Tensor flat = flatten(in);
    Staged s = staged(out);
    Request r = translating([&] {
      return route.comm.reduce_scatter(flat.data_ptr(), s.buffer.data_ptr(), count_of(out), data_type_of(out), op,
                                       route.ready());
    });
    auto keep_alive = [flat, copy_back = s.copy_back] {
      if (copy_back) copy_back();
    };
    return enqueue(route, c10d::OpType::REDUCE_SCATTER, "paro:reduce_scatter", {out}, {{r, keep_alive}});
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    Route route = route_for(input);
    std::vector<Step> steps{scatter_into(route, output, input, opts, "reduce_scatter_tensor")};
    return enqueue(route, c10d::OpType::_REDUCE_SCATTER_BASE, "paro:reduce_scatter_tensor", {output}, std::move(steps));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "paro backend reduce_scatter_tensor_coalesced: ", outputs.size(),
                      " outputs for ", inputs.size(), " inputs; one each");
    TORCH_CHECK_VALUE(!inputs.empty(), "paro backend reduce_scatter_tensor_coalesced: no tensors");
    Route route = route_for(inputs.front());
    std::vector<Step> steps;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      steps.push_back(scatter_into(route, outputs[k], inputs[k], opts, "reduce_scatter_tensor_coalesced"));
    return enqueue(route, c10d::OpType::COALESCED, "paro:reduce_scatter_tensor_coalesced", outputs, std::move(steps));
  }

  // An all-reduce of one byte: it completes on a rank only once every rank has contributed.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& = c10d::BarrierOptions()) override {
    at::Tensor token = at::zeros({1}, at::kByte);
    Route route = route_for(token);
    Request r = translating(
        [&] { return route.comm.all_reduce(token.data_ptr(), token.data_ptr(), 1, DataType::u8, ReduceOp::max, {}); });
    return enqueue(route, c10d::OpType::BARRIER, "paro:barrier", {}, {{r, [token] {}}});
  }

 private:
  using Step = Completer::Step;

  // Where a collective on a tensor runs: the host communicator for CPU tensors; for CUDA tensors the device
  // one, after the work on the caller's current stream, its results staged back on that stream.
  struct Route {
    Collectives& comm;
    std::optional<c10::Stream> stream;
    // Options::inputs_ready for what the caller's stream has been given so far (staging copies included).
    std::function<void()> ready() const {
#ifdef PARO_TORCH_WITH_CUDA
      if (stream) {
        c10::cuda::CUDAGuard guard(stream->device());
        return cuda::after_stream(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *stream).stream());
      }
#endif
      return {};
    }
  };

  Route route_for(const at::Tensor& t) {
    if (!t.device().is_cuda()) return {*comm_, std::nullopt};
#ifdef PARO_TORCH_WITH_CUDA
    c10::cuda::CUDAGuard guard(t.device());
    if (!device_comm_) {
      device_comm_ = translating([&] { return connect_device(store_, *comm_, settings_, t.device().index()); });
      device_ = t.device();
    }
    TORCH_CHECK_VALUE(t.device() == device_, "paro backend: a tensor on ", t.device(), " in a group whose CUDA ",
                      "collectives run on ", device_, "; NCCL takes one GPU per rank and group");
    return {*device_comm_, c10::Stream(c10::cuda::getCurrentCUDAStream(t.device().index()))};
#else
    TORCH_CHECK_VALUE(false, "paro backend: a tensor on ", t.device(), "; this build has no CUDA");
#endif
  }
  // A contiguous buffer for t: t itself, or a copy written back into t after the collective.
  struct Staged {
    at::Tensor buffer;
    std::function<void()> copy_back;
  };

  at::Tensor single(std::vector<at::Tensor>& tensors, const char* what) const {
    TORCH_CHECK_VALUE(tensors.size() == 1, "paro backend ", what, ": ", tensors.size(), " tensors; one per process");
    check_dense(tensors.front(), what);
    data_type_of(tensors.front());
    return tensors.front();
  }

  // The one list of a list form (allgather's outputs, reduce_scatter's inputs): a tensor per rank, each of
  // `single`'s type, device and length.
  std::vector<at::Tensor>& per_rank(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& single,
                                    const char* what, const char* role, const char* single_role) const {
    TORCH_CHECK_VALUE(lists.size() == 1, "paro backend ", what, ": ", lists.size(), " ", role,
                      " lists; one per process");
    std::vector<at::Tensor>& list = lists.front();
    TORCH_CHECK_VALUE(static_cast<int>(list.size()) == size_, "paro backend ", what, ": ", list.size(), " ", role,
                      " tensors for a group of ", size_, "; one per rank");
    for (const at::Tensor& t : list) {
      check_dense(t, what);
      check_alike(t, single, what);
      TORCH_CHECK_VALUE(t.numel() == single.numel(), "paro backend ", what, ": an ", role, " of ", t.numel(),
                        " elements for an ", single_role, " of ", single.numel(), "; they must be equal");
    }
    return list;
  }

  static Staged staged(const at::Tensor& t) {
    if (t.is_contiguous()) return {t, [t] {}};
    at::Tensor copy = t.contiguous();
    return {copy, [t, copy] { t.copy_(copy); }};
  }

  static at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
    return at::cat(flat);
  }

  Step gather_into(const Route& route, at::Tensor& output, at::Tensor& input, const char* what) {
    check_dense(output, what);
    check_dense(input, what);
    check_alike(output, input, what);
    data_type_of(input);
    TORCH_CHECK_VALUE(output.numel() == size_ * input.numel(), "paro backend ", what, ": output of ", output.numel(),
                      " elements for an input of ", input.numel(), " in a group of ", size_, "; it must hold ",
                      size_ * input.numel());
    at::Tensor src = input.contiguous();
    Staged s = staged(output);
    Request r = translating([&] {
      return route.comm.all_gather(src.data_ptr(), s.buffer.data_ptr(), count_of(input), data_type_of(input),
                                   route.ready());
    });
    return {r, [src, copy_back = s.copy_back] { copy_back(); }};
  }

  Step scatter_into(const Route& route, at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts,
                    const char* what) {
    check_dense(output, what);
    check_dense(input, what);
    check_alike(output, input, what);
    data_type_of(input);
    TORCH_CHECK_VALUE(input.numel() == size_ * output.numel(), "paro backend ", what, ": input of ", input.numel(),
                      " elements for an output of ", output.numel(), " in a group of ", size_, "; it must hold ",
                      size_ * output.numel());
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    at::Tensor src = input.contiguous();
    Staged s = staged(output);
    Request r = translating([&] {
      return route.comm.reduce_scatter(src.data_ptr(), s.buffer.data_ptr(), count_of(output), data_type_of(output), op,
                                       route.ready());
    });
    return {r, [src, copy_back = s.copy_back] { copy_back(); }};
  }

  c10::intrusive_ptr<Work> enqueue(const Route& route, c10d::OpType type, const char* title,
                                   std::vector<at::Tensor> outputs, std::vector<Step> steps) {
    if (route.stream)
      for (Step& s : steps)
        if (s.after)
          s.after = [stream = *route.stream, after = std::move(s.after)] {
            c10::StreamGuard guard(stream);
            after();
          };
    auto work = c10::make_intrusive<Work>(rank_, type, title, std::move(outputs));
    completer_.add(work, std::move(steps));
    ++sequence_;
    return work;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  GroupSettings settings_;
  std::unique_ptr<Collectives> comm_;
  std::unique_ptr<Collectives> device_comm_;  // CUDA tensors; made on the first
  c10::Device device_{c10::kCPU};             // device_comm_'s GPU
  std::atomic<std::uint64_t> sequence_{0};
  // Last: destroyed first, so that it completes the Works issued while the communicator still exists.
  Completer completer_;
};

}  // namespace paro::torch_backend
