#pragma once
// SEPARATE on the GPU: the host compressor's all-reduce (paro/compression/separate.hpp, steps 1-6) on
// gradients in device memory, over a device transport (the nccl backend, the threads backend over GPUs).
// R is generated on the GPU from the shared seed (random.cuh), P = h R and the estimate P R^T / (n w) are
// cuBLAS GEMMs (projection.cuh), the error update, the output's conversion and the cosine's sums one
// elementwise kernel. Registration, widths, clamps and G-SEPARATE's rule are the host's
// (separate_math.hpp), so both compressors give the same estimate up to float summation order.
//
// What the host compressor has and this one does not: the sharded form (reduce_scatter), the step-wise
// form (project / reconstruct for a caller's all-reduce), checkpoints, and the pipelining of projection,
// all-reduce and reconstruction (here they follow each other on one stream). Needs nvcc; link
// paro::cuda_compression.
//
//   paro::compression::gpu::Separate sep(options);
//   auto id = sep.add("layer1.weight", 4096, 1024, paro::DataType::bf16);
//   sep.all_reduce(comm, {{id, d_grad, d_grad}}, stream);   // stream: where d_grad was written

#if !defined(__CUDACC__)
#error \
    "paro/compression/gpu/separate.cuh contains CUDA kernels: compile this file with nvcc (a .cu file or LANGUAGE CUDA)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/compression/gpu/projection.cuh"
#include "paro/compression/gpu/random.cuh"
#include "paro/compression/random_stream.hpp"
#include "paro/compression/separate_math.hpp"
#include "paro/compression/separate_options.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/cuda/kernels.cuh"
#include "paro/cuda/runtime.hpp"

namespace paro::compression::gpu {

namespace separate_kernels {

template <class T>
__device__ float to_float(T v) {
  return static_cast<float>(v);
}
template <class T>
__device__ T from_float(float f) {
  if constexpr (std::is_same_v<T, float>) {
    return f;
  } else {
    return T(f);  // paro's conversion: the host's rounding, bit for bit
  }
}

#define PARO_GRID_STRIDE(i, n)                                                                   \
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

// Step 1: h = g + e as f32 (e may be null: no error feedback).
template <class T>
__global__ void form_h(const T* g, const float* e, float* h, std::size_t n) {
  PARO_GRID_STRIDE(k, n) { h[k] = to_float(g[k]) + (e != nullptr ? e[k] : 0.0f); }
}

// An uncompressed tensor's values into the wire, and its mean back out of it.
template <class T>
__global__ void to_f32(const T* g, float* out, std::size_t n) {
  PARO_GRID_STRIDE(k, n) { out[k] = to_float(g[k]); }
}
template <class T>
__global__ void average(const float* sum, std::size_t n, int ranks, T* out) {
  PARO_GRID_STRIDE(k, n) { out[k] = from_float<T>(sum[k] / static_cast<float>(ranks)); }
}

__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// Steps 4-5 after the reconstruction: out = the estimate, e <- the error rule (or 0 on a reset step), and
// where this step adapts, the cosine's sums (estimate . g, |estimate|^2, |g|^2) added to cosine[0..2].
// Needs a block of a multiple of 32 threads, at most 1024.
template <class T>
__global__ void emit(const float* estimate, const T* g, float* e, T* out, std::size_t n, ErrorRule rule, double beta,
                     bool reset, double* cosine) {
  double dot = 0, est2 = 0, g2 = 0;
  PARO_GRID_STRIDE(k, n) {
    const float hk = estimate[k];
    if (e != nullptr || cosine != nullptr) {
      const float gk = to_float(g[k]);
      if (e != nullptr) e[k] = reset ? 0.0f : separate_detail::next_error(rule, e[k], gk + e[k], hk, beta);
      if (cosine != nullptr) {
        dot += static_cast<double>(hk) * gk;
        est2 += static_cast<double>(hk) * hk;
        g2 += static_cast<double>(gk) * gk;
      }
    }
    out[k] = from_float<T>(hk);
  }
  if (cosine == nullptr) return;
  __shared__ double partial[3][32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  dot = warp_sum(dot), est2 = warp_sum(est2), g2 = warp_sum(g2);
  if (lane == 0) partial[0][warp] = dot, partial[1][warp] = est2, partial[2][warp] = g2;
  __syncthreads();
  if (warp != 0) return;
  for (int s = 0; s < 3; ++s) {
    const double v = warp_sum(lane < warps ? partial[s][lane] : 0.0);
    if (lane == 0) atomicAdd(cosine + s, v);
  }
}

#undef PARO_GRID_STRIDE

}  // namespace separate_kernels

class Separate {
 public:
  using TensorId = std::size_t;
  using Tensor = SeparateTensor;
  using Gradient = SeparateGradient;

  explicit Separate(SeparateOptions o = {}) : o_(o) { o_.validate(); }

  const SeparateOptions& options() const { return o_; }

  // As the host compressor's add(); the error buffer is allocated (zeroed) on the GPU of the first call.
  TensorId add(std::string name, std::size_t rows, std::size_t cols, DataType dt) {
    paro::detail::require(errors_.empty(), "gpu::Separate add: tensors are registered before the first all_reduce");
    tensors_.push_back(separate_detail::make_tensor(o_, std::move(name), rows, cols, dt));
    return tensors_.size() - 1;
  }

  const Tensor& tensor(TensorId id) const { return separate_detail::tensor_at(tensors_, id); }

  // This rank's error buffer of a tensor, copied to the host (empty without error feedback, compression, or
  // before the first call).
  std::vector<float> error(TensorId id) const {
    const Tensor& t = tensor(id);
    if (errors_.empty() || !has_error(t)) return {};
    std::vector<float> host(t.rows * t.cols);
    paro::cuda::check(cudaMemcpy(host.data(), errors_[id].get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost),
                      "cudaMemcpy (SEPARATE error buffer)");
    return host;
  }

  const Traffic& last_call() const { return traffic_; }

  // Every rank's out (device memory, may equal grad) becomes the same estimate of the ranks' mean gradient.
  // inputs: the stream whose work writes the gradients (the legacy default stream unless given); the call
  // returns when the outputs are complete. The transport must move device memory (its device() is the GPU
  // of the buffers).
  template <class Transport>
  void all_reduce(Communicator<Transport>& comm, const std::vector<Gradient>& grads, cudaStream_t inputs = nullptr) {
    Transport& scoped = comm.transport(o_.collective.scope);
    const int n = scoped.size();
    separate_detail::validate_gradients(tensors_, grads, "all_reduce", n, false);
    bind(comm.transport().device());
    timeout_ = env::timeout_seconds();
    ready_->record(inputs);
    paro::cuda::check(cudaStreamWaitEvent(stream_->get(), ready_->get(), 0), "cudaStreamWaitEvent (SEPARATE inputs)");

    // The wire: each gradient's P (rows x w) or its plain values, one after another; each R the same way.
    std::vector<std::size_t> wire_at(grads.size()), random_at(grads.size());
    std::size_t wire_floats = 0, random_floats = 0, scratch_floats = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor& t = tensors_[grads[i].id];
      wire_at[i] = wire_floats;
      wire_floats += separate_detail::payload(t);
      random_at[i] = random_floats;
      if (!t.compressed) continue;
      random_floats += t.shape.random_count();
      scratch_floats = std::max(scratch_floats, t.rows * t.cols);
    }
    float* wire = floats(wire_, wire_floats);
    float* randoms = floats(randoms_, random_floats);
    float* scratch = floats(scratch_, scratch_floats);
    double* cosines = reinterpret_cast<double*>(floats(cosines_, 2 * 3 * grads.size()));
    if (!grads.empty())
      paro::cuda::check(cudaMemsetAsync(cosines, 0, 3 * grads.size() * sizeof(double), stream_->get()),
                        "cudaMemsetAsync");

    // Steps 1-2 on the stream.
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor& t = tensors_[grads[i].id];
      float* p = wire + wire_at[i];
      separate_detail::visit_grad(t, [&](auto g0) {
        using T = decltype(g0);
        const T* g = static_cast<const T*>(grads[i].grad);
        const std::size_t count = t.rows * t.cols;
        if (!t.compressed) return launch(separate_kernels::to_f32<T>, count, g, p, count);
        float* r = randoms + random_at[i];
        fill_async(o_.distribution, separate_detail::key(o_, t, grads[i].id), 0, r, t.shape.random_count(),
                   stream_->get());
        const float* h = reinterpret_cast<const float*>(g);
        if (!std::is_same_v<T, float> || has_error(t)) {
          launch(separate_kernels::form_h<T>, count, g, error_of(grads[i].id), scratch, count);
          h = scratch;
        }
        project(*blas_, t.shape, r, h, t.cols, t.rows, p, t.shape.projected_cols());
      });
    }
    finish("SEPARATE's projection");

    // Step 3.
    comm.all_reduce(wire, wire, wire_floats, DataType::f32, ReduceOp::sum, o_.collective);

    // Steps 4-5.
    std::vector<bool> measured(grads.size(), false);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor& t = tensors_[grads[i].id];
      const float* p = wire + wire_at[i];
      separate_detail::visit_grad(t, [&](auto g0) {
        using T = decltype(g0);
        T* out = static_cast<T*>(grads[i].out);
        const std::size_t count = t.rows * t.cols;
        if (!t.compressed) return launch(separate_kernels::average<T>, count, p, count, n, out);
        reconstruct(*blas_, t.shape, randoms + random_at[i], p, t.shape.projected_cols(), t.rows,
                    1.0f / static_cast<float>(n), scratch, t.cols);
        measured[i] = separate_detail::adapts(o_, t);
        launch(separate_kernels::emit<T>, count, scratch, static_cast<const T*>(grads[i].grad), error_of(grads[i].id),
               out, count, o_.error_rule, t.beta, separate_detail::resets(o_, t),
               measured[i] ? cosines + 3 * i : nullptr);
      });
    }
    finish("SEPARATE's reconstruction");
    adapt(comm, grads, measured, cosines);

    traffic_ = separate_detail::complete_step(tensors_, separate_detail::ids_of(grads), wire_floats);
  }

 private:
  bool has_error(const Tensor& t) const { return t.compressed && o_.error_feedback; }
  float* error_of(TensorId id) { return has_error(tensors_[id]) ? static_cast<float*>(errors_[id].get()) : nullptr; }

  // The GPU of the first call: its stream, cuBLAS handle, events and zeroed error buffers. Later calls
  // must come with buffers on the same GPU.
  void bind(int device) {
    paro::cuda::set_device(device);
    if (stream_) {
      paro::detail::require(device == device_, "gpu::Separate: called with a transport on GPU ", device,
                            "; its error buffers are on GPU ", device_);
      return;
    }
    device_ = device;
    stream_ = std::make_unique<paro::cuda::Stream>(device);
    ready_ = std::make_unique<paro::cuda::Event>(device);
    done_ = std::make_unique<paro::cuda::Event>(device);
    blas_ = std::make_unique<Blas>(stream_->get());
    errors_.resize(tensors_.size());
    for (std::size_t id = 0; id < tensors_.size(); ++id) {
      if (!has_error(tensors_[id])) continue;
      const std::size_t bytes = tensors_[id].rows * tensors_[id].cols * sizeof(float);
      errors_[id] = allocate(bytes);
      paro::cuda::check(cudaMemsetAsync(errors_[id].get(), 0, bytes, stream_->get()),
                        "cudaMemsetAsync (SEPARATE error buffer)");
    }
  }

  // G-SEPARATE's step 6 where this step adapts: the ranks' mean cosine, summed by a tree all-reduce (the
  // same bits on every rank), drives the same width and beta everywhere.
  template <class Transport>
  void adapt(Communicator<Transport>& comm, const std::vector<Gradient>& grads, const std::vector<bool>& measured,
             double* cosines) {
    std::vector<std::size_t> adapting;  // indices into grads
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (measured[i]) adapting.push_back(i);
    if (adapting.empty()) return;
    std::vector<double> sums(3 * grads.size()), values;
    std::vector<TensorId> ids;
    paro::cuda::check(cudaMemcpy(sums.data(), cosines, sums.size() * sizeof(double), cudaMemcpyDeviceToHost),
                      "cudaMemcpy (SEPARATE cosines)");
    for (std::size_t i : adapting) {
      separate_detail::Cosine c;
      c.dot = sums[3 * i], c.estimate = sums[3 * i + 1], c.grad = sums[3 * i + 2];
      values.push_back(c.value());
      ids.push_back(grads[i].id);
    }
    paro::cuda::check(cudaMemcpy(cosines, values.data(), values.size() * sizeof(double), cudaMemcpyHostToDevice),
                      "cudaMemcpy (SEPARATE cosines)");
    comm.all_reduce(cosines, cosines, values.size(), DataType::f64, ReduceOp::sum,
                    {Algorithm::tree, o_.collective.scope});
    paro::cuda::check(cudaMemcpy(values.data(), cosines, values.size() * sizeof(double), cudaMemcpyDeviceToHost),
                      "cudaMemcpy (SEPARATE cosines)");
    separate_detail::adapt_all(o_, tensors_, ids, values, comm.transport(o_.collective.scope).size());
  }

  struct DeviceFree {
    void operator()(void* p) const { cudaFree(p); }  // errors ignored: at exit the driver may be gone
  };
  using Owned = std::unique_ptr<void, DeviceFree>;

  static Owned allocate(std::size_t bytes) {
    void* p = nullptr;
    if (bytes > 0) paro::cuda::check(cudaMalloc(&p, bytes), "cudaMalloc (SEPARATE)");
    return Owned(p);
  }

  // A device buffer of at least count floats, grown (never shrunk) as calls need.
  struct Growing {
    Owned memory;
    std::size_t floats = 0;
  };
  static float* floats(Growing& g, std::size_t count) {
    if (count > g.floats) {
      g.memory.reset();
      g.memory = allocate(count * sizeof(float));
      g.floats = count;
    }
    return static_cast<float*>(g.memory.get());
  }

  template <class... Params, class... Args>
  void launch(void (*kernel)(Params...), std::size_t count, Args&&... args) {
    if (count == 0) return;
    kernel<<<paro::cuda::launch_detail::blocks_for(count), paro::cuda::launch_detail::threads_per_block, 0,
             stream_->get()>>>(std::forward<Args>(args)...);
    paro::cuda::launch_detail::check_launch("SEPARATE", DataType::f32, count);
  }

  // Blocks until the stream's work so far is done, or throws after PARO_TIMEOUT.
  void finish(const char* what) {
    done_->record(stream_->get());
    paro::cuda::wait_event(*done_, timeout_, what);
  }

  SeparateOptions o_;
  std::vector<Tensor> tensors_;
  Traffic traffic_;
  int device_ = -1;
  double timeout_ = 300.0;
  std::unique_ptr<paro::cuda::Stream> stream_;
  std::unique_ptr<paro::cuda::Event> ready_, done_;
  std::unique_ptr<Blas> blas_;
  std::vector<Owned> errors_;                   // per tensor, rows x cols f32 where it has one
  Growing wire_, randoms_, scratch_, cosines_;  // this call's P, R, h / estimate, cosine sums
};

}  // namespace paro::compression::gpu
