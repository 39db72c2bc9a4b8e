#pragma once
// paro's scoped collectives for paro_torch.dp: all-gather, reduce-scatter and all-reduce of contiguous CPU
// tensors inside the group (intra), along the rail (inter) or over every rank (global), started on a
// group's communicator and waited for from Python. They run in issue order with the group's other
// collectives (one progress thread per communicator), so a collective that reads another's output may be
// issued before that one completes. And the bytes this process sent over each emulated link class.

#include <torch/extension.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "errors.hpp"
#include "paro/transport/paced.hpp"
#include "types.hpp"

namespace paro::torch_backend {

// A started scoped collective; its tensors live until it completes.
class Started {
 public:
  Started(Request r, std::vector<at::Tensor> tensors) : request_(std::move(r)), tensors_(std::move(tensors)) {}
  void wait() {
    translating([&] { request_.wait(); });
    tensors_.clear();
  }
  bool test() const { return request_.test(); }

 private:
  Request request_;
  std::vector<at::Tensor> tensors_;
};

// output and input as paro's verbs take them: all_gather input (count) -> output (count x scope size);
// reduce_scatter input (count x scope size) -> output (count), summed; all_reduce input -> output (count),
// summed. In place when input is this rank's block of output (all_gather), output this rank's block of
// input (reduce_scatter), or the same tensor (all_reduce).
inline Started start_scoped(Backend& backend, const std::string& collective, const std::string& scope_name,
                            const std::string& algorithm, at::Tensor output, at::Tensor input) {
  const char* what = "scoped collective";
  for (const at::Tensor& t : {std::cref(output), std::cref(input)}) {
    check_dense(t, what);
    TORCH_CHECK_VALUE(t.is_contiguous() && t.device().is_cpu(), "paro backend ", what, ": contiguous CPU tensors only");
  }
  check_alike(output, input, what);
  AnyCommunicator& comm = backend.communicator();
  const Collective c = translating([&] { return parse_collective(collective); });
  const Scope scope = translating([&] { return parse_scope(scope_name); });
  Options o{translating([&] { return parse_algorithm(algorithm); }), scope};
  TORCH_CHECK_VALUE(c == Collective::all_gather || c == Collective::reduce_scatter || c == Collective::all_reduce,
                    "paro backend ", what, ": ", collective, "; allowed: all_gather reduce_scatter all_reduce");
  const std::size_t k = static_cast<std::size_t>(comm.transport(scope).size());
  const std::size_t count = c == Collective::all_gather ? count_of(input) : count_of(output);
  const std::size_t in = c == Collective::reduce_scatter ? count * k : count;
  const std::size_t out = c == Collective::all_gather ? count * k : count;
  TORCH_CHECK_VALUE(count_of(input) == in && count_of(output) == out, "paro backend ", what, " ", collective,
                    " over the ", scope_name, " scope of ", k, " ranks: input of ", input.numel(), " and output of ",
                    output.numel(), " elements; they must be ", in, " and ", out);
  Request r = translating([&] {
    return comm.icollective(c, input.data_ptr(), output.data_ptr(), count, data_type_of(output), ReduceOp::sum,
                            std::move(o));
  });
  return Started(std::move(r), {output, input});
}

// Bytes world rank `rank` of this process sent inside nodes and across them since the last call, counted
// from the emulated links' trace (PARO_TRACE=1 with PARO_EMULATE; zero without).
inline std::pair<std::uint64_t, std::uint64_t> take_link_bytes(int rank) {
  std::uint64_t intra = 0, inter = 0;
  for (const paced::TraceEvent& e : paced::TraceLog::process().take_rank(rank)) (e.inter ? inter : intra) += e.bytes;
  return {intra, inter};
}

inline void bind_scoped(pybind11::module_& m) {
  namespace py = pybind11;
  py::class_<Started>(m, "Started", "a scoped collective in flight")
      .def("wait", &Started::wait, py::call_guard<py::gil_scoped_release>(), "until complete; raises its error")
      .def("test", &Started::test, "complete yet?");
  m.def("start_scoped", &start_scoped, py::arg("backend"), py::arg("collective"), py::arg("scope"),
        py::arg("algorithm"), py::arg("output"), py::arg("input"), py::call_guard<py::gil_scoped_release>(),
        "starts all_gather / reduce_scatter / all_reduce (sum) on the group's 'global', 'intra' or 'inter' scope");
  m.def(
      "scope_of",
      [](Backend& b, const std::string& scope) {
        AnyTransport& t = b.communicator().transport(translating([&] { return parse_scope(scope); }));
        return std::make_pair(t.rank(), t.size());
      },
      py::arg("backend"), py::arg("scope"), "(this rank's index, the rank count) in the group's scope");
  m.def("take_link_bytes", &take_link_bytes, py::arg("rank"),
        "(intra, inter) bytes world rank `rank` sent since the last call (PARO_TRACE=1 under PARO_EMULATE)");
}

}  // namespace paro::torch_backend
