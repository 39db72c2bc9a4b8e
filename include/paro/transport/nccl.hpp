#pragma once
// The nccl backend: a Transport over an NCCL communicator, one GPU per rank, buffers in device memory.
//
//   Bootstrap: the ncclUniqueId of rank 0 travels over any host transport (mpi::Transport under mpirun,
//   threads::Transport for ranks as threads of one process), or any other way (unique_id() and join(): the
//   PyTorch backend hands it over torch's store); split(color, key) is ncclCommSplit.
//   Streams: every communicator (and every split of it) owns a non-blocking CUDA stream; its messages and
//   its local steps (copy, reduce, divide: paro's kernels) run there.
//   Threads: one thread drives all communicators of a GPU (NCCL's rule; concurrent_use() is false), so
//   paro_cc's levels overlap through the ring's hooks: a step's messages are issued (issue()) before the
//   hook runs the other level's work.
//   Non-blocking communicators: creation, split and the connections made at a group's end are polled under
//   PARO_TIMEOUT (settle), so a peer that never arrives is an error, not a hang.
//   Messages: isend/irecv only record the message; the first wait() on a communicator issues everything
//   recorded since, as ncclSend/ncclRecv inside one ncclGroupStart/End, and records a CUDA event after it,
//   which is what wait() waits for. NCCL matches a pair's messages in posting order and ignores tags, and a
//   group progresses only as a whole, so this transport is `stepwise`: the Communicator runs rings one
//   block and one receive at a time (see transport.hpp).
//   Waits poll the event and ncclCommGetAsyncError; after PARO_TIMEOUT, or on an NCCL error, the
//   communicator is aborted (ncclCommAbort) and the wait throws paro::Error. Do not use it after that.
//   Native collectives (algorithm native): ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclAlltoAll
//   (NCCL 2.28 and later; in place through a copy of the input), NCCL's own
//   ring or tree as NCCL_ALGO chose when the communicator was created (NCCL reads NCCL_ALGO, e.g.
//   NCCL_ALGO=Ring or NCCL_ALGO=Tree, at ncclCommInitRank). avg is NCCL's sum then paro's divide, so that
//   it truncates integers as every other paro algorithm does.
//
// Needs nvcc (it includes paro's kernels), CUDA and NCCL: the paro::cuda CMake component.

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/core/tags.hpp"
#include "paro/cuda/device_memory.cuh"
#include "paro/cuda/runtime.hpp"
#include "paro/transport/transport.hpp"

namespace paro::nccl {

namespace detail {

// What a failed NCCL result means for the caller (paro/core/error.hpp).
inline ErrorKind kind_of(ncclResult_t rc) {
  if (rc == ncclRemoteError) return ErrorKind::peer_failure;
  if (rc == ncclInvalidArgument || rc == ncclInvalidUsage) return ErrorKind::usage;
  return ErrorKind::backend;
}

inline void check(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  throw_error(kind_of(rc), paro::detail::concat(what, " failed: ", ncclGetErrorString(rc)));
}

// Communicators are created non-blocking: creation, split, a group's connection set-up and collectives
// return ncclInProgress instead of blocking inside NCCL, and settle() polls them under the PARO_TIMEOUT
// deadline, so a peer that never arrives becomes an error rather than a hang.
inline ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Returns once comm's last call has finished (no longer ncclInProgress); throws on its error or after
// `timeout` seconds, naming `what`.
inline void settle(ncclComm_t comm, double timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      throw_error(kind_of(state), paro::detail::concat(what, " failed: ", ncclGetErrorString(state)));
    if (std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(paro::detail::concat("timed out after ", timeout, " s in ", what,
                                              ": a peer did not join or connect (PARO_TIMEOUT sets the limit)"));
    std::this_thread::yield();
  }
}

inline ncclDataType_t nccl_type(DataType dt) {
  switch (dt) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::f16: return ncclFloat16;
    case DataType::bf16: return ncclBfloat16;
    case DataType::i8: return ncclInt8;
    case DataType::i32: return ncclInt32;
    case DataType::i64: return ncclInt64;
    case DataType::u8: return ncclUint8;
  }
  throw UsageError("invalid DataType");
}

inline ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return ncclSum;  // avg: paro divides once afterwards
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
  }
  throw UsageError("invalid ReduceOp");
}

// An NCCL communicator, destroyed with the last Transport that uses it, or aborted when it failed.
struct Comm {
  ncclComm_t comm = nullptr;
  bool failed = false;
  ~Comm() {
    if (!comm) return;
    if (failed)
      ncclCommAbort(comm);
    else
      ncclCommDestroy(comm);
  }
};

// The event after the group that carried a message; null until the message has been issued.
struct Completion {
  std::shared_ptr<cuda::Event> event;
};

struct Message {
  void* buf;
  std::size_t bytes;
  int peer;
  bool is_send;
  std::shared_ptr<Completion> completion;
};

}  // namespace detail

class Transport {
 public:
  static constexpr const char* name = "nccl";
  static constexpr bool has_native_collectives = true;
  static constexpr bool stepwise = true;

  struct Request {
    std::shared_ptr<detail::Completion> completion;
    int peer = 0;
    int tag = 0;
    std::size_t bytes = 0;
    bool is_send = false;
  };

  Transport() = default;

  // Collective over `host`: rank 0 of host creates the ncclUniqueId and sends it to every other rank;
  // every rank then joins with its own GPU `device` (one GPU per rank: NCCL does not allow two ranks of
  // one communicator on the same GPU).
  template <class HostTransport>
  static Transport bootstrap(HostTransport& host, int device) {
    constexpr int tag = tags::nccl_bootstrap;
    ncclUniqueId id{};
    if (host.rank() == 0) {
      id = unique_id();
      std::vector<typename HostTransport::Request> sends;
      for (int r = 1; r < host.size(); ++r) sends.push_back(host.isend(&id, sizeof id, r, tag));
      host.wait_all(sends);
    } else {
      auto request = host.irecv(&id, sizeof id, 0, tag);
      host.wait(request);
    }
    return join(id, host.rank(), host.size(), device);
  }

  // What one rank makes and hands to the others out of band (a host transport, a key-value store).
  static ncclUniqueId unique_id() {
    ncclUniqueId id{};
    detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return id;
  }

  // Collective over the `size` ranks that were handed the same `id`: this one joins as `rank` with its GPU.
  static Transport join(const ncclUniqueId& id, int rank, int size, int device) {
    cuda::set_device(device);
    Transport t{cuda::DeviceMemory(device)};
    ncclConfig_t config = detail::nonblocking_config();
    detail::check(ncclCommInitRankConfig(&t.comm_->comm, size, id, rank, &config), "ncclCommInitRankConfig");
    t.guarded([&] {
      detail::settle(t.comm(), t.timeout_, paro::detail::concat("ncclCommInitRank (rank ", rank, " of ", size, ")"));
    });
    t.read_shape();
    return t;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return memory_.device(); }
  // The Communicator's progress thread runs this first: CUDA calls act on the calling thread's device.
  void bind_thread() { cuda::set_device(device()); }
  cudaStream_t stream() const { return memory_.stream(); }
  ncclComm_t comm() const { return comm_ ? comm_->comm : nullptr; }
  // NCCL allows one thread per GPU (its thread-safety rules): two lanes issuing work on two communicators
  // of one GPU from two threads, in an order that differs between ranks, can deadlock the device. The lanes
  // of overlapped schedules therefore share one thread here, overlapping through the ring's hooks.
  bool concurrent_use() const { return false; }

  // Starts what isend/irecv recorded (transport.hpp: issue), so that it progresses while the caller works.
  void issue() { issue_recorded(); }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    return post(const_cast<void*>(buf), bytes, peer, tag, true);
  }
  Request irecv(void* buf, std::size_t bytes, int peer, int tag) { return post(buf, bytes, peer, tag, false); }

  void wait(Request& r) {
    if (!r.completion) return;
    issue_recorded();  // all that is recorded, not only r: a peer may need those messages to get to r's
    guarded([&] {
      cuda::wait_event(
          *r.completion->event, timeout_,
          paro::detail::concat("rank ", rank_, ": ", r.is_send ? "a send to rank " : "a message from rank ", r.peer,
                               " (", r.bytes, " bytes, tag ", r.tag, ")"),
          [&] { check_async_error(); });
    });
    r.completion.reset();
  }

  void wait_all(std::vector<Request>& requests) {
    for (auto& r : requests) wait(r);
    requests.clear();
  }

  // Collective: ncclCommSplit, once this communicator's messages are done (NCCL forbids splitting with work
  // outstanding); a negative color gives an empty Transport (NCCL_SPLIT_NOCOLOR).
  Transport split(int color, int key) {
    issue_recorded();
    cuda::set_device(device());
    guarded([&] { memory_.finish("the messages before ncclCommSplit"); });
    Transport t(memory_.for_split());
    ncclConfig_t config = detail::nonblocking_config();
    guarded([&] {
      detail::check(ncclCommSplit(comm(), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &t.comm_->comm, &config),
                    "ncclCommSplit");
    });
    if (!t.comm_->comm) return Transport();
    t.guarded([&] { detail::settle(t.comm(), t.timeout_, "ncclCommSplit"); });
    t.read_shape();
    return t;
  }

  // Local steps in device memory, on this communicator's stream (after its messages).
  cuda::DeviceBuffer allocate(std::size_t bytes) const { return memory_.allocate(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) {
    local([&] { memory_.copy(dst, src, bytes); });
  }
  void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dt, ReduceOp op) {
    local([&] { memory_.reduce(dst, a, b, count, dt, op); });
  }
  void divide(void* buf, std::size_t count, DataType dt, int divisor) {
    local([&] { memory_.divide(buf, count, dt, divisor); });
  }
  // Staging is a synchronous copy outside the stream, not a step of the communicator: a caller's thread may
  // stage its buffers while the progress thread drives NCCL.
  void upload(void* dst, const void* host, std::size_t bytes) { memory_.stage(dst, host, bytes); }
  void download(void* host, const void* src, std::size_t bytes) { memory_.stage(host, src, bytes); }

  // Native collectives, with paro's buffer conventions (NCCL's own, in place included).
  void native_all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    collective("ncclAllReduce", [&] {
      return ncclAllReduce(send, recv, count, detail::nccl_type(dt), detail::nccl_op(op), comm(), stream());
    });
    if (op == ReduceOp::avg) divide(recv, count, dt, size_);
  }
  void native_all_gather(const void* send, void* recv, std::size_t count, DataType dt) {
    collective("ncclAllGather",
               [&] { return ncclAllGather(send, recv, count, detail::nccl_type(dt), comm(), stream()); });
  }
  void native_reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    collective("ncclReduceScatter", [&] {
      return ncclReduceScatter(send, recv, count, detail::nccl_type(dt), detail::nccl_op(op), comm(), stream());
    });
    if (op == ReduceOp::avg) divide(recv, count, dt, size_);
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  void native_all_to_all(const void* send, void* recv, std::size_t count, DataType dt) {
    const std::size_t bytes = count * size_of(dt) * static_cast<std::size_t>(size_);
    auto aside = allocate(send == recv ? bytes : 0);
    if (send == recv) copy(aside.data(), send, bytes);
    const void* in = send == recv ? static_cast<const void*>(aside.data()) : send;
    collective("ncclAlltoAll", [&] { return ncclAlltoAll(in, recv, count, detail::nccl_type(dt), comm(), stream()); });
  }
#endif

 private:
  cuda::DeviceMemory memory_;
  std::shared_ptr<detail::Comm> comm_;
  std::vector<detail::Message> recorded_;  // posted, not yet issued to NCCL
  int rank_ = 0, size_ = 0;
  double timeout_ = 300.0;

  explicit Transport(cuda::DeviceMemory memory)
      : memory_(std::move(memory)), comm_(std::make_shared<detail::Comm>()), timeout_(env::timeout_seconds()) {}

  void read_shape() {
    detail::check(ncclCommUserRank(comm(), &rank_), "ncclCommUserRank");
    detail::check(ncclCommCount(comm(), &size_), "ncclCommCount");
  }

  Request post(void* buf, std::size_t bytes, int peer, int tag, bool is_send) {
    const char* what = is_send ? "isend" : "irecv";
    paro::detail::require(comm() != nullptr, what, " on an empty nccl communicator (split with a negative color)");
    paro::detail::require(peer >= 0 && peer < size_, what, ": peer ", peer, " is outside the communicator [0, ", size_,
                          ")");
    paro::detail::require(tag >= 0, what, ": tag ", tag, " is negative; tags are >= 0");
    auto completion = std::make_shared<detail::Completion>();
    recorded_.push_back({buf, bytes, peer, is_send, completion});
    return {completion, peer, tag, bytes, is_send};
  }

  // Issues every recorded message as one NCCL group on the stream, then the event that marks its end.
  void issue_recorded() {
    if (recorded_.empty()) return;
    std::vector<detail::Message> messages = std::move(recorded_);
    recorded_.clear();
    guarded([&] {
      cuda::set_device(device());
      detail::check(ncclGroupStart(), "ncclGroupStart");
      try {
        for (const auto& m : messages) {
          if (m.is_send)
            detail::check(ncclSend(m.buf, m.bytes, ncclUint8, m.peer, comm(), stream()), "ncclSend");
          else
            detail::check(ncclRecv(m.buf, m.bytes, ncclUint8, m.peer, comm(), stream()), "ncclRecv");
        }
      } catch (...) {
        ncclGroupEnd();  // the thread must not stay inside a group
        throw;
      }
      detail::check(ncclGroupEnd(), "ncclGroupEnd");
      // The first messages to a peer connect to it inside ncclGroupEnd: bounded here.
      detail::settle(comm(), timeout_,
                     paro::detail::concat("rank ", rank_, ": issuing ", messages.size(),
                                          " sends and receives (connecting to peers)"));
      auto event = std::make_shared<cuda::Event>(device());
      event->record(stream());
      for (auto& m : messages) m.completion->event = event;
    });
  }

  template <class Call>
  void collective(const char* what, Call&& call) {
    issue_recorded();
    guarded([&] {
      cuda::set_device(device());
      detail::check(call(), what);
      detail::settle(comm(), timeout_, paro::detail::concat("rank ", rank_, ": ", what));
      cuda::Event done(device());
      done.record(stream());
      cuda::wait_event(done, timeout_, paro::detail::concat("rank ", rank_, ": ", what), [&] { check_async_error(); });
    });
  }

  template <class Step>
  void local(Step&& step) {
    issue_recorded();
    guarded(step);
  }

  void check_async_error() const {
    ncclResult_t async = ncclSuccess;
    detail::check(ncclCommGetAsyncError(comm(), &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
      throw_error(detail::kind_of(async),
                  paro::detail::concat("rank ", rank_, ": the NCCL communicator failed: ", ncclGetErrorString(async)));
  }

  // A failure leaves the communicator unusable: abort it now, so that no kernel of it keeps the GPU busy.
  template <class Step>
  void guarded(Step&& step) {
    try {
      step();
    } catch (const Error&) {
      if (comm_ && comm_->comm && !comm_->failed) {
        comm_->failed = true;
        ncclCommAbort(comm_->comm);
        comm_->comm = nullptr;
      }
      throw;
    }
  }
};

// The GPU of this process among its node's: the local rank of the innermost launcher (torchrun, Open MPI,
// MPICH, then Slurm) modulo the GPUs visible, 0 without a launcher. Innermost first: torchrun or mpirun
// started inside an srun task inherit that task's SLURM_LOCALID, the same for all their processes.
inline int local_device() {
  const int gpus = cuda::device_count();
  paro::detail::require(gpus > 0, "nccl: no usable GPU (", cuda::device_census().why_none, ")");
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (auto v = env::get(var)) return static_cast<int>(env::parse_integer(*v, var, 0, 1 << 20)) % gpus;
  return 0;
}

}  // namespace paro::nccl
