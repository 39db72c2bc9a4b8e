#pragma once
// The mpi backend: a Transport over an MPI communicator (a private duplicate, so paro's tags never meet
// the application's), plus MPI's own collectives as the `native` baseline.
// Needs the paro::mpi CMake component (MPI found at configure time).

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "paro/core/activity.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/tags.hpp"
#include "paro/transport/transport.hpp"

namespace paro::mpi {

namespace detail {

inline void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw BackendError(paro::detail::concat(call, " failed: ", std::string(text, static_cast<std::size_t>(len))));
}

// MPI has no f16/bf16 types, so they travel as two-byte opaque types with paro's own reduction ops.
struct HalfTypes {
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum prod min max
};

template <ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype* type);

inline HalfTypes& half_types() {
  static HalfTypes types = [] {
    HalfTypes t;
    check(MPI_Type_contiguous(2, MPI_BYTE, &t.f16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&t.f16), "MPI_Type_commit");
    check(MPI_Type_contiguous(2, MPI_BYTE, &t.bf16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&t.bf16), "MPI_Type_commit");
    check(MPI_Op_create(&half_op<ReduceOp::sum>, 1, &t.ops[0]), "MPI_Op_create");
    check(MPI_Op_create(&half_op<ReduceOp::prod>, 1, &t.ops[1]), "MPI_Op_create");
    check(MPI_Op_create(&half_op<ReduceOp::min>, 1, &t.ops[2]), "MPI_Op_create");
    check(MPI_Op_create(&half_op<ReduceOp::max>, 1, &t.ops[3]), "MPI_Op_create");
    return t;
  }();
  return types;
}

template <ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  const DataType dt = (*type == half_types().f16) ? DataType::f16 : DataType::bf16;
  host_reduce(inout, inout, in, static_cast<std::size_t>(*len), dt, Op);
}

inline MPI_Datatype mpi_type(DataType dt) {
  switch (dt) {
    case DataType::f32: return MPI_FLOAT;
    case DataType::f64: return MPI_DOUBLE;
    case DataType::f16: return half_types().f16;
    case DataType::bf16: return half_types().bf16;
    case DataType::i8: return MPI_INT8_T;
    case DataType::i32: return MPI_INT32_T;
    case DataType::i64: return MPI_INT64_T;
    case DataType::u8: return MPI_UINT8_T;
  }
  throw UsageError("invalid DataType");
}

inline MPI_Op mpi_op(DataType dt, ReduceOp op) {
  const bool half = dt == DataType::f16 || dt == DataType::bf16;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return half ? half_types().ops[0] : MPI_SUM;
    case ReduceOp::prod: return half ? half_types().ops[1] : MPI_PROD;
    case ReduceOp::min: return half ? half_types().ops[2] : MPI_MIN;
    case ReduceOp::max: return half ? half_types().ops[3] : MPI_MAX;
  }
  throw UsageError("invalid ReduceOp");
}

// Messages larger than an int of bytes go as several pieces on the same tag (matched in order).
constexpr std::size_t max_piece = std::size_t{1} << 30;

inline int checked_count(std::size_t count, const char* what) {
  paro::detail::require(count <= static_cast<std::size_t>(INT_MAX), what, ": MPI collectives take at most ", INT_MAX,
                        " elements per rank, got ", count, "; use algorithm ring or tree for larger messages");
  return static_cast<int>(count);
}

// This process's host as MPI names it, for error messages.
inline std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) return "unknown";
  return std::string(name, static_cast<std::size_t>(length));
}

}  // namespace detail

// Initialises MPI (asking for MPI_THREAD_MULTIPLE, which overlapped algorithms use to drive two
// communicators at once) if nobody has, and finalises it if it did.
class Environment {
 public:
  Environment(int* argc = nullptr, char*** argv = nullptr) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      detail::check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      owner_ = true;
    }
  }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  ~Environment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owner_ && !finalized) MPI_Finalize();
  }

 private:
  bool owner_ = false;
};

class Transport : public HostMemory {
 public:
  static constexpr const char* name = "mpi";
  static constexpr bool has_native_collectives = true;

  struct Request {
    std::vector<MPI_Request> pieces;
    std::size_t bytes = 0;
    int peer = 0;
    int tag = 0;
    bool is_send = false;
  };

  Transport() = default;

  // Duplicates comm; the duplicate is freed with the last copy of this Transport.
  explicit Transport(MPI_Comm comm) : timeout_(env::timeout_seconds()) {
    MPI_Comm dup = MPI_COMM_NULL;
    detail::check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
    adopt(dup);
  }

  static Transport world() { return Transport(MPI_COMM_WORLD); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_ ? *comm_ : MPI_COMM_NULL; }
  // Lanes of an overlapped algorithm may drive different communicators from different threads only where
  // MPI was initialised with MPI_THREAD_MULTIPLE; otherwise they run one after the other.
  bool concurrent_use() const {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level == MPI_THREAD_MULTIPLE;
  }

  Request isend(const void* buf, std::size_t bytes, int peer, int tag) {
    Request r{{}, bytes, peer, tag, true};
    for_each_piece(bytes, [&](std::size_t offset, int n) {
      MPI_Request q;
      detail::check(MPI_Isend(static_cast<const char*>(buf) + offset, n, MPI_BYTE, peer, tag, comm(), &q), "MPI_Isend");
      r.pieces.push_back(q);
    });
    return r;
  }

  Request irecv(void* buf, std::size_t bytes, int peer, int tag) {
    Request r{{}, bytes, peer, tag, false};
    for_each_piece(bytes, [&](std::size_t offset, int n) {
      MPI_Request q;
      detail::check(MPI_Irecv(static_cast<char*>(buf) + offset, n, MPI_BYTE, peer, tag, comm(), &q), "MPI_Irecv");
      r.pieces.push_back(q);
    });
    return r;
  }

  // Whether wait(r) would return (or throw) without blocking; the statuses stay for wait to read.
  bool test(Request& r) {
    for (MPI_Request& q : r.pieces) {
      int done = 0;
      detail::check(MPI_Request_get_status(q, &done, MPI_STATUS_IGNORE), "MPI_Request_get_status");
      if (!done) return false;
    }
    return true;
  }

  // Polls rather than blocking in MPI_Wait, so that a dead peer becomes an error after PARO_TIMEOUT. Under
  // SimGrid's SMPI a poll costs simulated time (smpi/test) and the simulator reports deadlocks itself, so
  // there it blocks.
  void wait(Request& r) {
    if (r.pieces.empty()) return;
    std::vector<MPI_Status> statuses(r.pieces.size());
#ifdef SMPI_H
    detail::check(MPI_Waitall(static_cast<int>(r.pieces.size()), r.pieces.data(), statuses.data()), "MPI_Waitall");
#else
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (unsigned spins = 0;; ++spins) {
      int done = 0;
      detail::check(MPI_Testall(static_cast<int>(r.pieces.size()), r.pieces.data(), &done, statuses.data()),
                    "MPI_Testall");
      if (done) break;
      if ((spins & 1023u) == 1023u) {
        if (std::chrono::steady_clock::now() > deadline) {
          // Withdraw the request so that a late peer cannot write into buffers the caller frees while
          // unwinding; the communicator must not be used for further collectives after this.
          for (auto& q : r.pieces)
            if (q != MPI_REQUEST_NULL) {
              MPI_Cancel(&q);
              MPI_Request_free(&q);
            }
          throw TimeoutError(paro::detail::concat(
              "rank ", rank_, " on host ", detail::processor_name(), ": timed out after ", timeout_, " s waiting for ",
              r.is_send ? "a send to" : "a message from", " rank ", r.peer, " (", r.bytes, " bytes, tag ", r.tag, ")",
              tags::describe(r.tag), ", rank ", world_rank_of(r.peer), " of MPI_COMM_WORLD", activity::describe(),
              "; a peer is stuck or did not enter the same collective (PARO_TIMEOUT sets the limit)"));
        }
        std::this_thread::yield();
      }
    }
#endif
    if (!r.is_send) {
      // Every piece must be full, or a longer message's extra piece would match the next receive.
      std::size_t received = 0;
      bool pieces_match = true;
      std::size_t offset = 0;
      for (auto& s : statuses) {
        int n = 0;
        MPI_Get_count(&s, MPI_BYTE, &n);
        received += static_cast<std::size_t>(n);
        pieces_match &= static_cast<std::size_t>(n) == std::min(detail::max_piece, r.bytes - offset);
        offset += detail::max_piece;
      }
      paro::detail::require(received == r.bytes && pieces_match, "rank ", rank_, ": message size mismatch on tag ",
                            r.tag, ": rank ", r.peer, " sent ", received, " bytes, expected ", r.bytes,
                            " (do all ranks call the same collective with the same count and type?)");
    }
    r.pieces.clear();
  }

  void wait_all(std::vector<Request>& requests) {
    for (auto& r : requests) wait(r);
    requests.clear();
  }

  // The lowest rank that shares this rank's memory (MPI_COMM_TYPE_SHARED): a host identity for discovery.
  int shared_memory_id() {
    MPI_Comm shared = MPI_COMM_NULL;
    detail::check(MPI_Comm_split_type(comm(), MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &shared),
                  "MPI_Comm_split_type");
    int id = rank_;
    detail::check(MPI_Allreduce(MPI_IN_PLACE, &id, 1, MPI_INT, MPI_MIN, shared), "MPI_Allreduce");
    MPI_Comm_free(&shared);
    return id;
  }

  // A negative color gives an empty Transport (MPI_UNDEFINED).
  Transport split(int color, int key) {
    MPI_Comm out = MPI_COMM_NULL;
    detail::check(MPI_Comm_split(comm(), color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
    Transport t;
    t.timeout_ = timeout_;
    if (out != MPI_COMM_NULL) t.adopt(out);
    return t;
  }

  // Native collectives: the public verbs' contract, including paro's in-place conventions.
  void native_all_reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    // MPI counts are ints: large reductions go in pieces, each a complete all-reduce.
    // MPI wants MPI_IN_PLACE on all ranks or none, while paro lets each rank choose: always in place.
    const std::size_t step = static_cast<std::size_t>(INT_MAX) / 2;
    const std::size_t esize = size_of(dt);
    copy(recv, send, count * esize);
    for (std::size_t offset = 0; offset < count; offset += step) {
      const int n = static_cast<int>(std::min(step, count - offset));
      char* out = static_cast<char*>(recv) + offset * esize;
      detail::check(MPI_Allreduce(MPI_IN_PLACE, out, n, detail::mpi_type(dt), detail::mpi_op(dt, op), comm()),
                    "MPI_Allreduce");
    }
    if (op == ReduceOp::avg) divide(recv, count, dt, size_);
  }

  void native_all_gather(const void* send, void* recv, std::size_t count, DataType dt) {
    const int n = detail::checked_count(count, "native all_gather");
    const std::size_t block = count * size_of(dt);
    copy(static_cast<char*>(recv) + static_cast<std::size_t>(rank_) * block, send, block);  // in place on every rank
    detail::check(MPI_Allgather(MPI_IN_PLACE, n, detail::mpi_type(dt), recv, n, detail::mpi_type(dt), comm()),
                  "MPI_Allgather");
  }

  // Never MPI_IN_PLACE (MPI wants it on all ranks or none): paro's in-place reduce-scatter, where recv is the
  // rank's own block of send, goes through a scratch block.
  void native_reduce_scatter(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op) {
    const int n = detail::checked_count(count, "native reduce_scatter");
    const std::size_t block = count * size_of(dt);
    const bool in_place = recv == static_cast<const char*>(send) + static_cast<std::size_t>(rank_) * block;
    HostBuffer scratch(in_place ? block : 0);
    detail::check(MPI_Reduce_scatter_block(send, in_place ? scratch.data() : recv, n, detail::mpi_type(dt),
                                           detail::mpi_op(dt, op), comm()),
                  "MPI_Reduce_scatter_block");
    if (in_place) copy(recv, scratch.data(), block);
    if (op == ReduceOp::avg) divide(recv, count, dt, size_);
  }

  // In place through a copy of the input (MPI_IN_PLACE again wants all ranks or none).
  void native_all_to_all(const void* send, void* recv, std::size_t count, DataType dt) {
    const int n = detail::checked_count(count, "native all_to_all");
    const std::size_t bytes = count * size_of(dt) * static_cast<std::size_t>(size_);
    HostBuffer aside(send == recv ? bytes : 0);
    if (send == recv) copy(aside.data(), send, bytes);
    detail::check(MPI_Alltoall(send == recv ? aside.data() : send, n, detail::mpi_type(dt), recv, n,
                               detail::mpi_type(dt), comm()),
                  "MPI_Alltoall");
  }

 private:
  std::shared_ptr<MPI_Comm> comm_;
  int rank_ = 0;
  int size_ = 0;
  double timeout_ = 300.0;

  void adopt(MPI_Comm c) {
    comm_ = std::shared_ptr<MPI_Comm>(new MPI_Comm(c), [](MPI_Comm* p) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized && *p != MPI_COMM_NULL) MPI_Comm_free(p);
      delete p;
    });
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
  }

  // peer's rank in MPI_COMM_WORLD, for error messages (-1 where MPI cannot say).
  int world_rank_of(int peer) const {
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    int out = -1;
    if (MPI_Comm_group(comm(), &mine) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
      MPI_Group_translate_ranks(mine, 1, &peer, world, &out);
    if (mine != MPI_GROUP_NULL) MPI_Group_free(&mine);
    if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
    return out == MPI_UNDEFINED ? -1 : out;
  }

  template <class F>
  static void for_each_piece(std::size_t bytes, F&& f) {
    if (bytes == 0) return f(std::size_t{0}, 0);
    for (std::size_t offset = 0; offset < bytes; offset += detail::max_piece)
      f(offset, static_cast<int>(std::min(detail::max_piece, bytes - offset)));
  }
};

}  // namespace paro::mpi
