#pragma once
// The "paro" c10d backend: torch.distributed's collectives on a paro Communicator.
//
// Tensors: CPU tensors run on the group's host communicator (ucx or mpi). In a build with CUDA
// (PARO_HAVE_CUDA, setup.py) CUDA tensors run on a second communicator over the nccl transport, made
// on the group's first CUDA collective (rank 0's ncclUniqueId travels through the group's store), which
// waits for the work on the caller's current stream before reading its inputs and writes staged results
// back on that stream. The CUDA path has never run on a GPU.
//
// The pieces: errors.hpp (paro's errors as torch's), types.hpp (torch's types and ops as paro's, tensor
// checks), collectives.hpp (a communicator whatever its transport), store.hpp (the c10d Store as paro's),
// connect.hpp (bootstrap), work.hpp (Works, futures and their completion); this file, the Backend.

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "connect.hpp"
#include "errors.hpp"
#include "paro/communicator/any_communicator.hpp"
#include "paro/communicator/communicator.hpp"
#include "types.hpp"
#include "work.hpp"
#ifdef PARO_HAVE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "paro/cuda/runtime.hpp"
#endif

namespace paro::torch_backend {

class Backend : public c10d::Backend {
 public:
  // Collective over the group's ranks (the transport connects them).
  Backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupSettings settings)
      : c10d::Backend(rank, size),
        store_(store),
        settings_(std::move(settings)),
        comm_(translating([&] { return connect(store, rank, size, settings_); })) {}

  const std::string getBackendName() const override { return "paro"; }
  AnyCommunicator& communicator() { return *comm_; }
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
      return route.comm.ibroadcast(s.buffer.data_ptr(), count_of(t), data_type_of(t), static_cast<int>(opts.rootRank),
                                   route.options());
    });
    return enqueue(route, c10d::OpType::BROADCAST, "paro:broadcast", {t}, {{r, s.copy_back}});
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    at::Tensor t = single(tensors, "allreduce");
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    Route route = route_for(t);
    Staged s = staged(t);
    premultiply(s.buffer, opts.reduceOp);  // t's values are replaced by the result either way
    Request r = translating([&] {
      return route.comm.iall_reduce(s.buffer.data_ptr(), s.buffer.data_ptr(), count_of(t), data_type_of(t), op,
                                    route.options());
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
    premultiply(flat, opts.reduceOp);
    Request r = translating([&] {
      return route.comm.iall_reduce(flat.data_ptr(), flat.data_ptr(), count_of(flat), data_type_of(flat), op,
                                    route.options());
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
      return route.comm.iall_gather(src.data_ptr(), flat.data_ptr(), count_of(in), data_type_of(in), route.options());
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
    premultiply(flat, opts.reduceOp);
    Staged s = staged(out);
    Request r = translating([&] {
      return route.comm.ireduce_scatter(flat.data_ptr(), s.buffer.data_ptr(), count_of(out), data_type_of(out), op,
                                        route.options());
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

  // dist.all_to_all_single: rows of input (dim 0) to each rank by input_splits, rows of output from each rank
  // by output_splits (empty: size(0) / group size each).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& output_splits,
                                               std::vector<std::int64_t>& input_splits,
                                               const c10d::AllToAllOptions& = c10d::AllToAllOptions()) override {
    const char* what = "all_to_all_single";
    check_dense(output, what);
    check_dense(input, what);
    check_alike(output, input, what);
    data_type_of(input);
    const std::int64_t row = row_elements(input);
    TORCH_CHECK_VALUE(row_elements(output) == row, "paro backend ", what, ": output rows of ", row_elements(output),
                      " elements for input rows of ", row, "; they must be equal");
    std::vector<std::int64_t> sends = splits(input_splits, input, "input_split_sizes", what);
    std::vector<std::int64_t> receives = splits(output_splits, output, "output_split_sizes", what);
    for (auto* counts : {&sends, &receives})
      for (std::int64_t& c : *counts) c *= row;
    Route route = route_for(input);
    at::Tensor src = input.contiguous();
    Staged s = staged(output);
    // Without split sizes every rank's blocks are alike (torch's rule), so no rank needs to ask the others.
    const bool even = input_splits.empty() && output_splits.empty();
    Step step = exchange(route, src, sends, s.buffer, receives, even);
    step.after = [after = std::move(step.after), copy_back = s.copy_back] {
      after();
      copy_back();
    };
    return enqueue(route, c10d::OpType::ALLTOALL_BASE, "paro:all_to_all_single", {output}, {std::move(step)});
  }

  // dist.all_to_all: inputs[j] to rank j, outputs[j] from rank j; any sizes that the ranks agree on.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& = c10d::AllToAllOptions()) override {
    const char* what = "all_to_all";
    TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
                      "paro backend ", what, ": ", inputs.size(), " inputs and ", outputs.size(),
                      " outputs for a group of ", size_, "; one of each per rank");
    std::vector<std::int64_t> sends, receives;
    for (int j = 0; j < size_; ++j) {
      for (const at::Tensor* t : {&inputs[j], &outputs[j]}) {
        check_dense(*t, what);
        check_alike(*t, inputs.front(), what);
      }
      sends.push_back(inputs[j].numel());
      receives.push_back(outputs[j].numel());
    }
    data_type_of(inputs.front());
    Route route = route_for(inputs.front());
    at::Tensor flat_in = flatten(inputs);
    at::Tensor flat_out =
        at::empty({std::accumulate(receives.begin(), receives.end(), std::int64_t{0})}, inputs.front().options());
    Step step = exchange(route, flat_in, sends, flat_out, receives, false);
    step.after = [after = std::move(step.after), flat_out, outputs] {
      after();
      std::int64_t at = 0;
      for (const at::Tensor& t : outputs) {
        t.copy_(flat_out.narrow(0, at, t.numel()).view_as(t));
        at += t.numel();
      }
    };
    return enqueue(route, c10d::OpType::ALLTOALL, "paro:all_to_all", outputs, {std::move(step)});
  }

  // dist.reduce: the root's tensor becomes the reduction (paro's reduce); the others' are left as they were.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    at::Tensor t = single(tensors, "reduce");
    const int root = checked_rank(opts.rootRank, "reduce", "root");
    const ReduceOp op = reduce_op_of(opts.reduceOp);
    Route route = route_for(t);
    Staged s = staged(t);
    const bool root_here = rank_ == root;
    at::Tensor src = premultiplies(opts.reduceOp) && !root_here ? s.buffer.clone() : s.buffer;
    premultiply(src, opts.reduceOp);
    Request r = translating([&] {
      return route.comm.ireduce(src.data_ptr(), root_here ? s.buffer.data_ptr() : nullptr, count_of(t), data_type_of(t),
                                op, root, route.options());
    });
    auto finish = [src, copy_back = root_here ? s.copy_back : std::function<void()>([] {})] { copy_back(); };
    return enqueue(route, c10d::OpType::REDUCE, "paro:reduce", {t}, {{r, finish}});
  }

  // dist.gather: the root's outputs[0][j] = rank j's input; other ranks pass no outputs.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    at::Tensor in = single(inputs, "gather");
    const int root = checked_rank(opts.rootRank, "gather", "root");
    std::vector<at::Tensor> out = rooted_list(outputs, in, root, "gather", "output", "input");
    Route route = route_for(in);
    at::Tensor src = in.contiguous();
    at::Tensor flat = rank_ == root ? at::empty({size_ * in.numel()}, in.options()) : at::Tensor();
    Request r = translating([&] {
      return route.comm.igather(src.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count_of(in),
                                data_type_of(in), root, route.options());
    });
    auto unpack = [src, flat, out, n = in.numel()] {
      for (std::size_t k = 0; k < out.size(); ++k)
        out[k].copy_(flat.narrow(0, static_cast<std::int64_t>(k) * n, n).view_as(out[k]));
    };
    return enqueue(route, c10d::OpType::GATHER, "paro:gather", out, {{r, unpack}});
  }

  // dist.scatter: outputs[0] = the root's inputs[0][rank]; other ranks pass no inputs.
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    at::Tensor out = single(outputs, "scatter");
    const int root = checked_rank(opts.rootRank, "scatter", "root");
    std::vector<at::Tensor> in = rooted_list(inputs, out, root, "scatter", "input", "output");
    Route route = route_for(out);
    at::Tensor flat = in.empty() ? at::Tensor() : flatten(in);
    Staged s = staged(out);
    Request r = translating([&] {
      return route.comm.iscatter(flat.defined() ? flat.data_ptr() : nullptr, s.buffer.data_ptr(), count_of(out),
                                 data_type_of(out), root, route.options());
    });
    return enqueue(route, c10d::OpType::SCATTER, "paro:scatter", {out},
                   {{r, [flat, copy_back = s.copy_back] { copy_back(); }}});
  }

  // dist.send / recv / isend / irecv / batch_isend_irecv: paro's point-to-point messages, which match in
  // issue order per peer and tag and never wait for the group's collectives.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    at::Tensor t = single(tensors, "send");
    checked_rank(dst, "send", "destination");
    Route route = route_for(t);
    at::Tensor src = t.contiguous();
    Request r = translating([&] { return route.comm.isend(src.data_ptr(), count_of(t), data_type_of(t), dst, tag); });
    return enqueue(route, c10d::OpType::SEND, "paro:send", {}, {{r, [src] {}}});
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    at::Tensor t = single(tensors, "recv");
    checked_rank(src, "recv", "source");
    Route route = route_for(t);
    Staged s = staged(t);
    Request r =
        translating([&] { return route.comm.irecv(s.buffer.data_ptr(), count_of(t), data_type_of(t), src, tag); });
    return enqueue(route, c10d::OpType::RECV, "paro:recv", {t}, {{r, s.copy_back}});
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK_VALUE(false, "paro backend: recv from any source is not supported (paro matches messages by ",
                      "sender); give the source: dist.recv(tensor, src=rank)");
  }

  void monitoredBarrier(const c10d::BarrierOptions& = c10d::BarrierOptions(), bool = false) override {
    TORCH_CHECK_VALUE(false, "paro backend: monitored_barrier is not supported; use dist.barrier(), which fails ",
                      "after PARO_TIMEOUT seconds naming the rank it waits for");
  }

  // split_group and DeviceMesh: a child group over `ranks` (this group's ranks), connected through `store`,
  // with this group's settings (paro's options travel in GroupSettings, not in c10d's Options).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>&) override {
    const auto me = std::find(ranks.begin(), ranks.end(), rank_);
    TORCH_CHECK_VALUE(me != ranks.end(), "paro backend split: rank ", rank_, " is not among the ranks to split off");
    GroupSettings child = settings_;
    child.global_ranks.clear();
    for (int r : ranks) {
      checked_rank(r, "split", "member");
      child.global_ranks.push_back(
          settings_.global_ranks.empty() ? r : settings_.global_ranks[static_cast<std::size_t>(r)]);
    }
    if (child.world_size == 0) child.world_size = size_;
    return c10::make_intrusive<Backend>(store, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                                        std::move(child));
  }

  // An all-reduce of one byte: it completes on a rank only once every rank has contributed.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& = c10d::BarrierOptions()) override {
    at::Tensor token = at::zeros({1}, at::kByte);
    Route route = route_for(token);
    Request r = translating(
        [&] { return route.comm.iall_reduce(token.data_ptr(), token.data_ptr(), 1, DataType::u8, ReduceOp::max, {}); });
    return enqueue(route, c10d::OpType::BARRIER, "paro:barrier", {}, {{r, [token] {}}});
  }

 private:
  using Step = Completer::Step;

  // Where a collective on a tensor runs: the host communicator for CPU tensors; for CUDA tensors the device
  // one, after the work on the caller's current stream, its results staged back on that stream.
  struct Route {
    AnyCommunicator& comm;
    std::optional<c10::Stream> stream;
    // A call's Options: its inputs_ready waits for what the caller's stream has been given so far (staging
    // copies included).
    paro::Options options() const {  // paro's: inside the Backend, Options names c10d::Backend's
      paro::Options o;
#ifdef PARO_HAVE_CUDA
      if (stream) {
        c10::cuda::CUDAGuard guard(stream->device());
        o.inputs_ready = cuda::after_stream(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *stream).stream());
      }
#endif
      return o;
    }
  };

  Route route_for(const at::Tensor& t) {
    if (!t.device().is_cuda()) return {*comm_, std::nullopt};
#ifdef PARO_HAVE_CUDA
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

  // A rank of this group (a root, a peer), or a clear error.
  int checked_rank(std::int64_t r, const char* what, const char* role) const {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "paro backend ", what, ": ", role, " rank ", r, "; allowed: 0 .. ",
                      size_ - 1);
    return static_cast<int>(r);
  }

  // The root's list of a rooted collective (gather's outputs, scatter's inputs): a tensor per rank, each of
  // `single`'s type, device and length; elsewhere no list, or an empty one.
  std::vector<at::Tensor> rooted_list(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& single, int root,
                                      const char* what, const char* role, const char* single_role) const {
    if (rank_ == root) return per_rank(lists, single, what, role, single_role);
    TORCH_CHECK_VALUE(lists.empty() || (lists.size() == 1 && lists.front().empty()), "paro backend ", what, ": ", role,
                      " tensors on rank ", rank_, ", which is not the root (", root, "); only the root passes them");
    return {};
  }

  static Staged staged(const at::Tensor& t) {
    if (t.is_contiguous()) return {t, [t] {}};
    at::Tensor copy = t.contiguous();
    return {copy, [t, copy] { t.copy_(copy); }};
  }

  // Elements per row (dim 0) of t; a 0-d tensor is one row of one.
  static std::int64_t row_elements(const at::Tensor& t) {
    std::int64_t row = 1;
    for (std::int64_t d = 1; d < t.dim(); ++d) row *= t.size(d);
    return row;
  }

  // Rows per rank: the given split sizes, checked against t, or t's rows cut evenly.
  std::vector<std::int64_t> splits(const std::vector<std::int64_t>& given, const at::Tensor& t, const char* name,
                                   const char* what) const {
    const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (given.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "paro backend ", what, ": ", rows, " rows do not split evenly over ", size_,
                        " ranks; give ", name);
      return std::vector<std::int64_t>(static_cast<std::size_t>(size_), rows / size_);
    }
    TORCH_CHECK_VALUE(static_cast<int>(given.size()) == size_, "paro backend ", what, ": ", given.size(), " ", name,
                      " for a group of ", size_, "; one per rank");
    std::int64_t sum = 0;
    for (std::int64_t g : given) {
      TORCH_CHECK_VALUE(g >= 0, "paro backend ", what, ": ", name, " has ", g, "; sizes are >= 0");
      sum += g;
    }
    TORCH_CHECK_VALUE(sum == rows, "paro backend ", what, ": ", name, " add up to ", sum, " rows; the tensor has ",
                      rows);
    return given;
  }

  // send_counts[j] elements of src (in rank order) to rank j, recv_counts[j] from rank j into dst. `even`
  // (every rank's blocks alike, known to all): one all_to_all, whose algorithms include the hierarchical
  // one. Otherwise one all_to_allv: each block travels with its own length.
  Step exchange(const Route& route, const at::Tensor& src, const std::vector<std::int64_t>& send_counts,
                const at::Tensor& dst, const std::vector<std::int64_t>& recv_counts, bool even) {
    const DataType dt = data_type_of(src);
    auto packed = [](const std::vector<std::int64_t>& counts) {
      return Blocks::packed(std::vector<std::size_t>(counts.begin(), counts.end()));
    };
    Request r = translating([&] {
      if (even)
        return route.comm.iall_to_all(src.data_ptr(), dst.data_ptr(), static_cast<std::size_t>(send_counts.front()), dt,
                                      route.options());
      return route.comm.iall_to_allv(src.data_ptr(), packed(send_counts), dst.data_ptr(), packed(recv_counts), dt,
                                     route.options());
    });
    return {r, [src, dst] {}};  // the tensors live until the exchange is complete
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
      return route.comm.iall_gather(src.data_ptr(), s.buffer.data_ptr(), count_of(input), data_type_of(input),
                                    route.options());
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
    // The caller's input stays as it was: PREMUL_SUM multiplies a copy.
    at::Tensor src = premultiplies(opts.reduceOp) ? input.contiguous().clone() : input.contiguous();
    premultiply(src, opts.reduceOp);
    Staged s = staged(output);
    Request r = translating([&] {
      return route.comm.ireduce_scatter(src.data_ptr(), s.buffer.data_ptr(), count_of(output), data_type_of(output), op,
                                        route.options());
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
  c10::intrusive_ptr<c10d::Backend::Options> options_ = c10::make_intrusive<c10d::Backend::Options>("paro");
  std::unique_ptr<AnyCommunicator> comm_;
  std::unique_ptr<AnyCommunicator> device_comm_;  // CUDA tensors; made on the first
  c10::Device device_{c10::kCPU};                 // device_comm_'s GPU
  std::atomic<std::uint64_t> sequence_{0};
  // Last: destroyed first, so that it completes the Works issued while the communicator still exists.
  Completer completer_;
};

}  // namespace paro::torch_backend
