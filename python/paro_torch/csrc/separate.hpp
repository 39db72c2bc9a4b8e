#pragma once
// SEPARATE's step-wise form for Python (paro_torch.SeparateState): project into a wire tensor, let the
// caller all-reduce it with any process group, reconstruct. One compressor per parameter, found by the
// index Python gave it: a parameter's state (error buffer, step, width, beta) follows it whatever DDP bucket
// holds it, and DDP rebuilds its buckets after a model's first iteration. A bucket's reconstruction may run
// on another thread while the next bucket projects; they touch different compressors.

#include <torch/extension.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "paro/compression/separate.hpp"
#include "types.hpp"

namespace py = pybind11;

namespace paro::torch_backend {

class SeparateParameters {
 public:
  explicit SeparateParameters(compression::SeparateOptions options) : options_(options) { options_.validate(); }

  // Registers a parameter's gradient as tensor `index` (the next free one): the first dimension is the
  // rows, the rest the columns (a vector is one row). Its projections come from its own seed.
  void add(std::size_t index, const std::vector<std::int64_t>& shape, at::ScalarType type, std::uint64_t seed) {
    const std::optional<DataType> dt = paro_type_of(type);
    TORCH_CHECK_TYPE(dt == DataType::f32 || dt == DataType::f16 || dt == DataType::bf16, "SEPARATE: gradients of type ",
                     type, "; allowed: float32 float16 bfloat16");
    std::size_t rows = 1, cols = 1;
    if (!shape.empty()) rows = static_cast<std::size_t>(shape.front());
    for (std::size_t d = 1; d < shape.size(); ++d) cols *= static_cast<std::size_t>(shape[d]);
    if (shape.size() <= 1) std::swap(rows, cols);
    compression::SeparateOptions o = options_;
    o.seed = seed;
    auto separate = std::make_unique<compression::Separate>(o);
    separate->add("parameter " + std::to_string(index), rows, cols, *dt);
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK_VALUE(index == compressors_.size(), "SEPARATE: parameter index ", index, " registered out of order (",
                      compressors_.size(), " so far)");
    compressors_.push_back(std::move(separate));
  }

  // Why the options are known to diverge, or "" (SeparateOptions::divergence_risk).
  std::string divergence_risk() const { return options_.divergence_risk(); }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return compressors_.size();
  }

  // The wire's length in floats for these parameters' gradients.
  std::size_t wire_floats(const std::vector<std::size_t>& indices, const std::vector<at::Tensor>& grads) const {
    std::size_t floats = 0;
    for (const Part& p : parts(indices, grads, grads)) floats += p.separate->wire_floats({p.gradient});
    return floats;
  }

  void project(const std::vector<std::size_t>& indices, const std::vector<at::Tensor>& grads, const at::Tensor& wire) {
    std::vector<Part> ps = parts(indices, grads, grads);
    std::size_t floats = 0;
    for (const Part& p : ps) floats += p.separate->wire_floats({p.gradient});
    check_wire(wire, floats);
    float* at = wire.data_ptr<float>();
    for (const Part& p : ps) {
      p.separate->project({p.gradient}, at);
      at += p.separate->wire_floats({p.gradient});
    }
  }

  // Writes the estimate of the ranks' mean into outs (may be grads). Returns the indices of the parameters
  // that adapt at this step and their cosines (float64), to be summed over the ranks and handed to adapt().
  std::pair<std::vector<std::size_t>, at::Tensor> reconstruct(const std::vector<std::size_t>& indices,
                                                              const std::vector<at::Tensor>& grads,
                                                              const std::vector<at::Tensor>& outs,
                                                              const at::Tensor& summed_wire, int ranks) {
    std::vector<Part> ps = parts(indices, grads, outs);
    // A width changes only when its step completes, so each wire is as long as when it was projected.
    std::vector<std::size_t> floats(ps.size());
    for (std::size_t k = 0; k < ps.size(); ++k) floats[k] = ps[k].separate->wire_floats({ps[k].gradient});
    check_wire(summed_wire, std::accumulate(floats.begin(), floats.end(), std::size_t{0}));
    const float* at = summed_wire.data_ptr<float>();
    std::vector<std::size_t> adapting;
    std::vector<double> cosines;
    for (std::size_t k = 0; k < ps.size(); ++k) {
      const std::size_t floats_k = floats[k];
      for (double c : ps[k].separate->reconstruct({ps[k].gradient}, at, ranks)) {
        adapting.push_back(indices[k]);
        cosines.push_back(c);
      }
      at += floats_k;
    }
    at::Tensor out = at::empty({static_cast<std::int64_t>(cosines.size())}, at::kDouble);
    std::copy(cosines.begin(), cosines.end(), out.data_ptr<double>());
    return {adapting, out};
  }

  void adapt(const std::vector<std::size_t>& indices, const at::Tensor& summed_cosines) {
    TORCH_CHECK_VALUE(
        summed_cosines.scalar_type() == at::kDouble && summed_cosines.is_contiguous() &&
            summed_cosines.device().is_cpu() && static_cast<std::size_t>(summed_cosines.numel()) == indices.size(),
        "SEPARATE adapt: the cosines must be a contiguous float64 CPU tensor of ", indices.size(), " elements");
    const double* c = summed_cosines.data_ptr<double>();
    for (std::size_t k = 0; k < indices.size(); ++k) compressor(indices[k]).adapt({c[k]});
  }

  // What these parameters' last completed step moved: (wire bytes, dense bytes).
  std::pair<std::size_t, std::size_t> traffic(const std::vector<std::size_t>& indices) const {
    std::size_t wire = 0, dense = 0;
    for (std::size_t i : indices) {
      const compression::Traffic& t = compressor(i).last_call();
      wire += t.wire_bytes;
      dense += t.dense_bytes;
    }
    return {wire, dense};
  }

  py::bytes save(std::size_t index) const {
    std::ostringstream out;
    compressor(index).save(out);
    return py::bytes(out.str());
  }
  void load(std::size_t index, const std::string& bytes) {
    std::istringstream in(bytes);
    compressor(index).load(in);
  }

 private:
  struct Part {
    compression::Separate* separate;
    compression::Separate::Gradient gradient;
  };

  static void check_wire(const at::Tensor& wire, std::size_t floats) {
    TORCH_CHECK_VALUE(wire.scalar_type() == at::kFloat && wire.is_contiguous() && wire.device().is_cpu() &&
                          static_cast<std::size_t>(wire.numel()) == floats,
                      "SEPARATE: the wire must be a contiguous float32 CPU tensor of ", floats, " elements, got ",
                      wire.scalar_type(), " with ", wire.numel());
  }

  compression::Separate& compressor(std::size_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK_VALUE(index < compressors_.size(), "SEPARATE: parameter index ", index, " is not registered (",
                      compressors_.size(), " are)");
    return *compressors_[index];
  }

  // Each parameter's compressor and its gradient's buffers, checked against what was registered.
  std::vector<Part> parts(const std::vector<std::size_t>& indices, const std::vector<at::Tensor>& grads,
                          const std::vector<at::Tensor>& outs) const {
    TORCH_CHECK_VALUE(indices.size() == grads.size() && grads.size() == outs.size(), "SEPARATE: ", indices.size(),
                      " parameters, ", grads.size(), " gradients and ", outs.size(), " outputs");
    std::vector<Part> ps;
    for (std::size_t k = 0; k < indices.size(); ++k) {
      compression::Separate& s = compressor(indices[k]);
      const compression::Separate::Tensor& t = s.tensor(0);
      for (const at::Tensor* x : {&grads[k], &outs[k]}) {
        TORCH_CHECK_VALUE(x->device().is_cpu() && x->is_contiguous() && paro_type_of(x->scalar_type()) == t.dtype &&
                              static_cast<std::size_t>(x->numel()) == t.rows * t.cols,
                          "SEPARATE: ", t.name, " is registered as ", t.rows, " x ", t.cols, " ", name_of(t.dtype),
                          "; got a ", x->scalar_type(), " tensor of ", x->numel(),
                          " elements (contiguous CPU tensors only)");
      }
      ps.push_back({&s, {0, grads[k].data_ptr(), outs[k].data_ptr()}});
    }
    return ps;
  }

  compression::SeparateOptions options_;
  mutable std::mutex mutex_;  // guards the list, not the compressors: each is used by one bucket at a time
  std::vector<std::unique_ptr<compression::Separate>> compressors_;
};

inline void bind_separate(py::module_& m) {
  using compression::SeparateOptions;
  py::class_<SeparateParameters>(m, "SeparateParameters")
      .def(py::init([](int ratio, bool error_feedback, double beta, const std::string& error_rule,
                       std::uint32_t reset_every, bool adaptive, std::uint32_t adapt_every, std::size_t min_elements,
                       std::size_t block_cols) {
             SeparateOptions o;
             o.ratio = ratio;
             o.error_feedback = error_feedback;
             o.beta = beta;
             o.error_rule = compression::parse_error_rule(error_rule);
             o.reset_every = reset_every;
             o.adaptive = adaptive;
             o.adapt_every = adapt_every;
             o.min_elements = min_elements;
             o.block_cols = block_cols;
             return std::make_unique<SeparateParameters>(o);
           }),
           py::arg("ratio"), py::arg("error_feedback"), py::arg("beta"), py::arg("error_rule"), py::arg("reset_every"),
           py::arg("adaptive"), py::arg("adapt_every"), py::arg("min_elements"), py::arg("block_cols"))
      .def("add", &SeparateParameters::add, py::arg("index"), py::arg("shape"), py::arg("dtype"), py::arg("seed"))
      .def("__len__", &SeparateParameters::size)
      .def("divergence_risk", &SeparateParameters::divergence_risk)
      .def("wire_floats", &SeparateParameters::wire_floats, py::arg("indices"), py::arg("grads"))
      .def("project", &SeparateParameters::project, py::arg("indices"), py::arg("grads"), py::arg("wire"),
           py::call_guard<py::gil_scoped_release>())
      .def("reconstruct", &SeparateParameters::reconstruct, py::arg("indices"), py::arg("grads"), py::arg("outs"),
           py::arg("summed_wire"), py::arg("ranks"), py::call_guard<py::gil_scoped_release>())
      .def("adapt", &SeparateParameters::adapt, py::arg("indices"), py::arg("summed_cosines"))
      .def("traffic", &SeparateParameters::traffic, py::arg("indices"))
      .def("save", &SeparateParameters::save, py::arg("index"))
      .def("load", &SeparateParameters::load, py::arg("index"), py::arg("state"));
}

}  // namespace paro::torch_backend
