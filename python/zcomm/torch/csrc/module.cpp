// The Python module zcomm.torch._C: ProcessGroupZcomm as a subclass of
// torch's ProcessGroup, and the creator that zcomm/torch/__init__.py
// registers with torch.distributed.Backend.register_backend.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/python.h>
#include <zcomm/zcomm.h>

#include "engine_ops.hpp"
#include "process_group.hpp"

namespace py = pybind11;

// The Horovod-style API (zcomm/torch/mpi_ops.py) on zcomm's engine.
static void BindEngine(py::module& m) {
  namespace h = zcomm_torch::hvd;
  py::module e = m.def_submodule("engine", "Horovod-style named asynchronous collectives");
  py::register_exception<h::EngineError>(e, "HorovodInternalError", PyExc_RuntimeError);
  e.attr("SUM") = static_cast<int>(ZC_SUM);
  e.attr("PROD") = static_cast<int>(ZC_PROD);
  e.attr("MIN") = static_cast<int>(ZC_MIN);
  e.attr("MAX") = static_cast<int>(ZC_MAX);
  e.attr("AVG") = static_cast<int>(ZC_AVG);
  e.def("init", &h::Init);
  e.def("shutdown", &h::Shutdown);
  e.def("is_initialized", &h::IsInitialized);
  e.def("rank", &h::Rank);
  e.def("size", &h::Size);
  e.def("local_rank", &h::LocalRank);
  e.def("local_size", &h::LocalSize);
  e.def("cross_rank", &h::CrossRank);
  e.def("cross_size", &h::CrossSize);
  e.def("stats", [] {
    py::dict d;
    for (auto& kv : h::Stats()) d[py::str(kv.first)] = kv.second;
    return d;
  });
  e.def("error", &h::EngineErrorString);
  py::class_<h::Handle, std::shared_ptr<h::Handle>>(e, "Handle")
      .def("poll", &h::Handle::Poll)
      .def("wait", &h::Handle::Wait)  // lets go of the GIL inside
      .def("output", &h::Handle::Output)
      .def("received_splits", &h::Handle::ReceivedSplits)
      .def("join_result", &h::Handle::JoinResult)
      .def_property_readonly("name", &h::Handle::name);
  e.def("allreduce", &h::Allreduce, py::arg("input"), py::arg("output"), py::arg("name"),
        py::arg("op"), py::arg("prescale"), py::arg("postscale"));
  e.def("broadcast", &h::Broadcast, py::arg("tensor"), py::arg("name"), py::arg("root"));
  e.def("allgather", &h::Allgather, py::arg("input"), py::arg("name"));
  e.def("alltoall", &h::Alltoall, py::arg("input"), py::arg("splits"), py::arg("name"));
  e.def("reducescatter", &h::Reducescatter, py::arg("input"), py::arg("name"), py::arg("op"),
        py::arg("prescale"), py::arg("postscale"));
  e.def("barrier", &h::Barrier);
  e.def("join", &h::Join);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "zcomm backend for torch.distributed";
  // torch's ProcessGroup type must be known to pybind11 first.
  py::module::import("torch.distributed");
  py::class_<zcomm_torch::ProcessGroupZcomm, c10d::ProcessGroup,
             c10::intrusive_ptr<zcomm_torch::ProcessGroupZcomm>>(m, "ProcessGroupZcomm");
  m.def("create_process_group", &zcomm_torch::ProcessGroupZcomm::Create, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "creator(store, rank, size, timeout) for torch.distributed.Backend.register_backend");
  BindEngine(m);
  m.def("zcomm_version", [] {
    int a = 0, b = 0, c = 0;
    zc_version(&a, &b, &c);
    return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c);
  });
}
