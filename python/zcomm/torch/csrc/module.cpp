// The Python module zcomm.torch._C: ProcessGroupZcomm as a subclass of
// torch's ProcessGroup, and the creator that zcomm/torch/__init__.py
// registers with torch.distributed.Backend.register_backend.
#include <pybind11/chrono.h>
#include <torch/python.h>
#include <zcomm/zcomm.h>

#include "process_group.hpp"

namespace py = pybind11;

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
  m.def("zcomm_version", [] {
    int a = 0, b = 0, c = 0;
    zc_version(&a, &b, &c);
    return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c);
  });
}
