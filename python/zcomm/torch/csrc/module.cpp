// The Python module zcomm.torch._C: ProcessGroupZcomm as a subclass of
// torch's ProcessGroup, and the creator that zcomm/torch/__init__.py
// registers with torch.distributed.Backend.register_backend.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/python.h>
#include <zcomm/zcomm.h>

#include "engine_ops.hpp"
#include "process_group.hpp"

namespace py = pybind11;

// The Horovod-style API (zcomm/torch/mpi_ops.py) on zcomm's engine.
static void BindEngine(py::module& m) {
  namespace h = zcomm_torch::hvd;
  py::module e = m.def_submodule("engine", "Horovod-style named asynchronous collectives");
  // HorovodInternalError: the engine's failures. A caller's mistake found
  // before anything is queued is h::InvalidArgument, a ValueError.
  py::register_exception<h::EngineError>(e, "HorovodInternalError", PyExc_RuntimeError);
  e.attr("SUM") = static_cast<int>(ZC_SUM);
  e.attr("PROD") = static_cast<int>(ZC_PROD);
  e.attr("MIN") = static_cast<int>(ZC_MIN);
  e.attr("MAX") = static_cast<int>(ZC_MAX);
  e.attr("AVG") = static_cast<int>(ZC_AVG);
  e.def("init", [] { return h::Sets().Init(); });  // True: started an engine
  e.def("init_rank", [](py::bytes uid, int nranks, int rank) {
    return h::Sets().InitRank(std::string(uid), nranks, rank);
  }, py::arg("uid"), py::arg("nranks"), py::arg("rank"));
  e.def("shrink", [] {
    h::Sets().Shrink();
    h::ReapOrphans(true);
  });
  e.def("join_pending", [] { return h::Sets().JoinPending(); });
  e.def("grow", [] {
    h::Sets().Grow();
    h::ReapOrphans(true);
  });
  e.def("shutdown", [] {
    h::Sets().Shutdown();
    h::ReapOrphans(true);  // every operation has ended
  });
  e.def("is_initialized", [] { return h::Sets().Running(); });
  e.def("rank", [] { return h::Sets().Layout("rank").rank; });
  e.def("size", [] { return h::Sets().Layout("size").size; });
  e.def("local_rank", [] { return h::Sets().Layout("local_rank").local_rank; });
  e.def("local_size", [] { return h::Sets().Layout("local_size").local_size; });
  e.def("cross_rank", [] { return h::Sets().Layout("cross_rank").cross_rank; });
  e.def("cross_size", [] { return h::Sets().Layout("cross_size").cross_size; });
  e.def("add_process_set", [](std::vector<int> ranks) { return h::Sets().Add(std::move(ranks)); },
        py::arg("ranks"));
  e.def("remove_process_set", [](int32_t id) { return h::Sets().Remove(id); }, py::arg("id"));
  e.def("process_sets", [] { return h::Sets().List(); });
  e.def("process_set_rank", [](int32_t id) { return h::Sets().Get(id, "ProcessSet.rank", false)->rank; });
  e.def("process_set_size", [](int32_t id) { return h::Sets().Get(id, "ProcessSet.size", false)->size(); });
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
        py::arg("op"), py::arg("prescale"), py::arg("postscale"), py::arg("process_set") = 0);
  e.def("broadcast", &h::Broadcast, py::arg("tensor"), py::arg("name"), py::arg("root"),
        py::arg("process_set") = 0);
  e.def("allgather", &h::Allgather, py::arg("input"), py::arg("name"), py::arg("process_set") = 0);
  e.def("alltoall", &h::Alltoall, py::arg("input"), py::arg("splits"), py::arg("name"),
        py::arg("process_set") = 0);
  e.def("reducescatter", &h::Reducescatter, py::arg("input"), py::arg("name"), py::arg("op"),
        py::arg("prescale"), py::arg("postscale"), py::arg("process_set") = 0);
  e.def("barrier", &h::Barrier, py::arg("process_set") = 0);
  e.def("join", &h::Join);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "zcomm backend for torch.distributed";
  // torch's ProcessGroup type must be known to pybind11 first.
  py::module::import("torch.distributed");
  py::class_<zcomm_torch::ProcessGroupZcomm, c10d::ProcessGroup,
             c10::intrusive_ptr<zcomm_torch::ProcessGroupZcomm>>(m, "ProcessGroupZcomm")
      .def("_empty_registered",
           [](zcomm_torch::ProcessGroupZcomm& pg, std::vector<int64_t> sizes, py::object dtype) {
             if (!THPDtype_Check(dtype.ptr())) throw py::type_error("dtype must be a torch.dtype");
             const at::ScalarType type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
             py::gil_scoped_release nogil;
             return pg.EmptyRegistered(sizes, type);
           },
           py::arg("sizes"), py::arg("dtype"));
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
