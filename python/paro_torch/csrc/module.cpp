// paro_torch._C: the one translation unit of the PyTorch package. It binds the "paro" c10d backend
// (backend.hpp), its scoped collectives for paro_torch.dp (scoped.hpp) and SEPARATE's step-wise form
// (separate.hpp) for the DDP communication hook.

#include <torch/extension.h>

#include <functional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "paro/dp/deepspeed_config.hpp"
#include "scoped.hpp"
#include "separate.hpp"

namespace py = pybind11;
using paro::torch_backend::Backend;

namespace {

c10::intrusive_ptr<Backend> create_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           const std::string& algorithms, const std::string& grouping,
                                           const std::string& transport, const std::vector<std::int64_t>& global_ranks,
                                           int world_size) {
  paro::torch_backend::GroupSettings settings{algorithms, grouping, transport, global_ranks, world_size};
  return c10::make_intrusive<Backend>(store, rank, size, std::move(settings));
}

// paro-topo's view of a process group: where each rank is, the groups and rails, and what said so.
py::dict topology_of(Backend& backend) {
  auto& comm = backend.communicator();
  const paro::Topology& t = comm.topology();
  const paro::Groups& g = comm.groups();
  py::list ranks;
  for (int r = 0; r < t.size(); ++r) {
    const auto& p = t.ranks[static_cast<std::size_t>(r)];
    py::dict d;
    d["rank"] = r;
    d["pod"] = p.pod;
    d["switch"] = p.switch_name;
    d["node"] = p.node;
    d["local"] = p.local;
    d["group"] = g.group_of[static_cast<std::size_t>(r)];
    ranks.append(d);
  }
  py::list levels;
  for (paro::Level l : t.known_levels) levels.append(paro::name_of(l));
  py::dict out;
  out["transport"] = comm.backend();
  out["ranks"] = ranks;
  out["levels"] = levels;
  out["grouping"] = comm.grouping().describe();
  out["groups"] = g.members;
  out["rails"] = g.rails;
  out["sources"] = t.sources;
  return out;
}

// One collective straight on paro's communicator, blocking; the group must have nothing outstanding that
// this could overtake (paro runs a group's collectives in issue order either way).
void direct(Backend& backend, const std::string& collective, at::Tensor& output, const at::Tensor& input) {
  using namespace paro::torch_backend;
  for (const at::Tensor& t : {std::cref(output), std::cref(input)}) {
    check_dense(t, "direct");
    TORCH_CHECK_VALUE(t.is_contiguous() && t.device().is_cpu(), "paro backend direct: contiguous CPU tensors only");
  }
  check_alike(output, input, "direct");
  paro::AnyCommunicator& comm = backend.communicator();
  const paro::DataType dt = data_type_of(output);
  const paro::Collective c = translating([&] { return paro::parse_collective(collective); });
  // The buffers per element of count (collective.hpp); where input and output are alike (all_reduce) the call
  // runs in place on output, else from input to output.
  const paro::BufferShape per = paro::buffer_shape(c, 1, comm.size(), comm.rank());
  const bool in_place = per.in == per.out;
  const std::size_t count = count_of(output) / per.out;
  TORCH_CHECK_VALUE(count * per.out == count_of(output) && (in_place || count * per.in == count_of(input)),
                    "paro backend direct ", collective, ": the output must hold ", per.out, " x and the input ", per.in,
                    " x the same count of elements");
  translating([&] {
    paro::Request r = comm.icollective(c, in_place ? output.data_ptr() : input.data_ptr(), output.data_ptr(), count, dt,
                                       paro::ReduceOp::sum, {});
    r.wait();
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "paro's c10d backend and SEPARATE for PyTorch";
  m.attr("with_cuda") = paro::torch_backend::built_with_cuda;  // CUDA tensors (setup.py's PARO_TORCH_CUDA=1)

  py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(m, "ParoBackend")
      .def("topology", &topology_of, "paro-topo's view of this group: ranks, levels, groups, rails, sources")
      .def(
          "algorithm_for",
          [](Backend& b, const std::string& collective, std::size_t bytes) {
            paro::AnyCommunicator& comm = b.communicator();
            return std::string(comm.name_of(comm.resolve(paro::parse_collective(collective), bytes)));
          },
          py::arg("collective"), py::arg("bytes"),
          "the algorithm a collective ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all') over a full buffer "
          "of this "
          "many bytes runs")
      .def("direct", &direct, py::arg("collective"), py::arg("output"), py::arg("input"),
           py::call_guard<py::gil_scoped_release>(),
           "runs a collective on the group's paro communicator and waits, without torch.distributed's layer (no "
           "Work, future or completion thread): what benchmarks compare the backend with. all_reduce, all_to_all: "
           "output in place (input unused); all_gather / reduce_scatter: input -> output. Dense contiguous tensors of "
           "one type");

  m.def("create_backend", &create_backend, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("algorithms"),
        py::arg("grouping"), py::arg("transport"), py::arg("global_ranks"), py::arg("world_size"),
        py::call_guard<py::gil_scoped_release>(), "a paro backend for one process group (collective over its ranks)");

  m.def(
      "wait_for_completions",
      [](double limit_s) {
        return paro::torch_backend::CompletionsInFlight::instance().wait_until_idle(
            std::chrono::milliseconds(static_cast<std::int64_t>(limit_s * 1000)));
      },
      py::arg("limit_s"), py::call_guard<py::gil_scoped_release>(),
      "waits up to limit_s seconds for the futures' completions still running on torch's inter-op pool; returns "
      "how many still run (paro_torch calls it at exit)");

  m.def(
      "read_deepspeed_config",
      [](const std::string& path) {
        const paro::dp::DeepSpeedConfig c =
            paro::torch_backend::translating([&] { return paro::dp::DeepSpeedConfig::read(path); });
        py::dict out;
        out["strategy"] = c.strategy ? py::cast(c.strategy->name()) : py::none();
        out["accumulation"] = c.accumulation ? py::cast(*c.accumulation) : py::none();
        out["micro_batch"] = c.micro_batch ? py::cast(*c.micro_batch) : py::none();
        out["lr"] = c.lr ? py::cast(*c.lr) : py::none();
        return out;
      },
      py::arg("path"), "paro's DeepSpeed config reader (include/paro/dp/deepspeed_config.hpp): the keys it takes");
  paro::torch_backend::bind_scoped(m);
  paro::torch_backend::bind_separate(m);
}
