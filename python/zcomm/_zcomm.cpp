// _zcomm: the C ABI (zcomm.h) for numpy arrays, through libzcomm.so only.
// Private: the public API is the Python package around it (communicator.py),
// which maps dtypes and ops, shapes outputs and stages arrays that are not
// C-contiguous; this module takes prepared arrays and integer enums.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <zcomm/zcomm.h>

#include "comm_handle.h"
#include "failure.h"
#include "pool_memory.h"
#include "ps_handle.h"
#include "request_handle.h"

namespace py = pybind11;
using zcpy::CommHandle;
using zcpy::PoolMemory;
using zcpy::PsHandle;
using zcpy::RequestHandle;

PYBIND11_MODULE(_zcomm, m) {
  m.doc() = "zcomm's C ABI for numpy arrays (private; use the zcomm package)";

  // Failures become zcomm.Error(status, message) (errors.py).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const zcpy::Failure& f) {
      py::object cls = py::module_::import("zcomm.errors").attr("error_for");
      py::object err = cls(static_cast<int>(f.status), f.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });

  m.def("trace_set_label", [](const std::string& label) { zc_trace_set_label(label.c_str()); });
  m.def("version", [] {
    int a, b, c;
    zc_version(&a, &b, &c);
    return py::make_tuple(a, b, c);
  });
  m.def("status_string", [](int s) { return std::string(zc_status_string(zc_status(s))); });
  m.def("dtype_size", [](int d) { return zc_dtype_size(zc_dtype(d)); });
  m.def("get_unique_id", [] {
    zc_unique_id id;
    {
      py::gil_scoped_release nogil;
      zcpy::Check(zc_get_unique_id(&id), nullptr);
    }
    return py::bytes(id.internal, sizeof id.internal);
  });
  m.attr("UNIQUE_ID_BYTES") = sizeof(zc_unique_id);
  m.attr("ANY_SOURCE") = ZC_ANY_SOURCE;
  m.attr("SPLIT_NONE") = ZC_SPLIT_NONE;

  py::class_<RequestHandle, std::shared_ptr<RequestHandle>>(m, "RequestHandle")
      .def("test", &RequestHandle::Test)
      .def("wait", &RequestHandle::Wait)
      .def_property_readonly("done", &RequestHandle::done)
      .def_property_readonly("source", &RequestHandle::source);

  py::class_<PoolMemory, std::shared_ptr<PoolMemory>>(m, "PoolMemory", py::buffer_protocol())
      .def_buffer(&PoolMemory::Info);

  using C = CommHandle;
  py::class_<C, std::shared_ptr<C>>(m, "CommHandle")
      .def_static("init", &C::Init)
      .def_static("init_rank", &C::InitRank)
      .def("split", &C::Split)
      .def("dup", &C::Dup)
      .def("finalize", &C::Finalize)
      .def("abort", &C::Abort)
      .def("dump_trace", &C::DumpTrace)
      .def("revoke", &C::Revoke)
      .def("is_revoked", &C::IsRevoked)
      .def("failed_ranks", &C::FailedRanks)
      .def("agree", &C::Agree)
      .def("shrink", &C::Shrink)
      .def("join_pending", &C::JoinPending)
      .def("grow", &C::Grow)
      .def_static("join", &C::Join)
      .def("async_error", &C::AsyncError)
      .def("deregister", &C::Deregister)
      .def("mem_alloc", [](const std::shared_ptr<C>& c, size_t bytes) { return PoolMemory::Allocate(c, bytes); })
      .def_property_readonly("rank", &C::rank)
      .def_property_readonly("size", &C::size)
      .def_property_readonly("local_rank", &C::local_rank)
      .def_property_readonly("local_size", &C::local_size)
      .def_property_readonly("finalized", &C::finalized)
      .def("allreduce", &C::Allreduce)
      .def("broadcast", &C::Broadcast)
      .def("reduce", &C::Reduce)
      .def("allgather", &C::Allgather)
      .def("reduce_scatter", &C::ReduceScatter)
      .def("alltoall", &C::Alltoall)
      .def("barrier", &C::Barrier)
      .def("allgatherv", &C::Allgatherv)
      .def("alltoallv", &C::Alltoallv)
      .def("gather", &C::Gather)
      .def("scatter", &C::Scatter)
      .def("send", &C::Send)
      .def("recv", &C::Recv)
      .def("isend", &C::Isend)
      .def("irecv", &C::Irecv)
      .def("iallreduce", &C::Iallreduce)
      .def("ibroadcast", &C::Ibroadcast)
      .def("ireduce", &C::Ireduce)
      .def("iallgather", &C::Iallgather)
      .def("ireduce_scatter", &C::IreduceScatter)
      .def("ialltoall", &C::Ialltoall)
      .def("ibarrier", &C::Ibarrier)
      .def("allreduce_on_stream", &C::AllreduceOnStream)
      .def("broadcast_on_stream", &C::BroadcastOnStream)
      .def("allgather_on_stream", &C::AllgatherOnStream);

  // The parameter server (zc_ps_*); ps.py is its public face.
  py::class_<PsHandle, std::shared_ptr<PsHandle>>(m, "PsHandle")
      .def_static("create", &PsHandle::Create)
      .def_property_readonly("num_workers", &PsHandle::num_workers)
      .def_property_readonly("num_servers", &PsHandle::num_servers)
      .def_property_readonly("rank", &PsHandle::rank)
      .def_property_readonly("role", &PsHandle::role)
      .def_property_readonly("freed", &PsHandle::freed)
      .def("declare", &PsHandle::Declare)
      .def("push", &PsHandle::Push)
      .def("pull", &PsHandle::Pull)
      .def("ipush", &PsHandle::Ipush)
      .def("ipull", &PsHandle::Ipull)
      .def("serve", &PsHandle::Serve)
      .def("free", &PsHandle::Free);
  m.def("is_joiner", [] {
    int joining = 0;
    zcpy::Check(zc_is_joiner(&joining), nullptr);
    return joining != 0;
  });
  m.attr("PS_WORKER") = static_cast<int>(ZC_PS_WORKER);
  m.attr("PS_SERVER") = static_cast<int>(ZC_PS_SERVER);
  m.attr("PS_BOTH") = static_cast<int>(ZC_PS_BOTH);
}
