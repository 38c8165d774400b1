// C ABI: the flight recorder (common/flight_recorder.h): dumps on request
// and the calling thread's label.
#include <sys/stat.h>
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/comm.h"
#include "common/flight_recorder.h"

using namespace zc::api;

extern "C" {

zc_status zc_comm_dump_trace(zc_comm* comm, const char* path) {
  const char* op = "zc_comm_dump_trace";
  ZC_CHECK_COMM(comm, op);
  if (!comm->trace) return Fail(zc::Error(ZC_ERR_INTERNAL, "%s: the communicator has no recorder", op));
  std::string target;
  if (path && *path) {
    target = path;
  } else {
    if (comm->trace->dump_dir().empty())
      return BadArg(comm, op, "path is NULL and ZC_TRACE_DIR is not set (no folder to write into)");
    mkdir(comm->trace->dump_dir().c_str(), 0700);  // as the automatic dumps do; EEXIST is fine
    target = comm->trace->dump_dir() + "/" + comm->trace->FileName();
  }
  zc::Status st = comm->trace->DumpTo(target, "request");
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
  return ZC_OK;
}

zc_status zc_trace_set_label(const char* label) {
  zc::trace::SetThreadLabel(label);
  return ZC_OK;
}

}  // extern "C"
