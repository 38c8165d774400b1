#include "api/checks.h"

#include <cstdarg>
#include <cstdint>

#include "api/comm.h"
#include "collectives/dtype.h"
#include "zc_build_config.h"
#if !ZC_HAVE_CUDA
#include "gpu/pointer_cache.h"
#endif

namespace zc::api {
namespace {
thread_local std::string t_last_error;
thread_local bool t_on_worker = false;
}  // namespace

void MarkWorkerThread() { t_on_worker = true; }
bool OnWorkerThread() { return t_on_worker; }

const char* LastError() { return t_last_error.c_str(); }
void SetLastErrorText(std::string text) { t_last_error = std::move(text); }

zc_status Fail(const Status& st) {
  t_last_error = st.message();
  return st.code();
}

zc_status BadArg(const zc_comm* comm, const char* op, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string why = VFormat(fmt, ap);
  va_end(ap);
  t_last_error = Format("rank %d: %s: invalid argument: %s", comm ? comm->rank : -1, op, why.c_str());
  return ZC_ERR_INVALID_ARG;
}

zc_status CheckComm(const zc_comm* comm, const char* op) {
  if (comm) return ZC_OK;
  t_last_error = std::string(op) + ": invalid argument: comm is NULL";
  return ZC_ERR_INVALID_ARG;
}

zc_status CheckType(const zc_comm* comm, const char* op, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return BadArg(comm, op, "unknown dtype %d", static_cast<int>(dtype));
  return ZC_OK;
}

zc_status CheckOp(const zc_comm* comm, const char* op, zc_dtype dtype, zc_op rop) {
  if (rop < ZC_SUM || rop > ZC_AVG) return BadArg(comm, op, "unknown op %d", static_cast<int>(rop));
  if (rop == ZC_AVG && !IsFloating(dtype))
    return BadArg(comm, op, "avg needs a floating dtype (got dtype %d)", static_cast<int>(dtype));
  return ZC_OK;
}

zc_status CheckBuf(const zc_comm* comm, const char* op, const void* p, const char* name, size_t count) {
  if (count > 0 && !p) return BadArg(comm, op, "%s is NULL with count %zu", name, count);
#if !ZC_HAVE_CUDA
  if (count > 0 && gpu::IsDevicePointer(p)) {
    t_last_error = Format("rank %d: %s: %s is GPU memory, but zcomm was built without CUDA",
                          comm ? comm->rank : -1, op, name);
    return ZC_ERR_UNSUPPORTED;
  }
#endif
  return ZC_OK;
}

zc_status CheckBytes(const zc_comm* comm, const char* op, size_t count, zc_dtype dtype, size_t factor) {
  size_t es = DtypeSize(dtype);
  if (count && (count > SIZE_MAX / es / (factor ? factor : 1)))
    return BadArg(comm, op, "count %zu x %zu ranks overflows", count, factor);
  return ZC_OK;
}

zc_status CheckRoot(const zc_comm* comm, const char* op, int root) {
  if (root < 0 || root >= comm->size)
    return BadArg(comm, op, "root %d is out of range [0, %d)", root, comm->size);
  return ZC_OK;
}

zc_status CheckAllreduceArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                             const void* recvbuf, size_t count, zc_dtype dtype, zc_op rop) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckOp(comm, op, dtype, rop));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  return CheckBuf(comm, op, recvbuf, "recvbuf", count);
}

zc_status CheckBroadcastArgs(const zc_comm* comm, const char* op, const void* buf, size_t count,
                             zc_dtype dtype, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckRoot(comm, op, root));
  return CheckBuf(comm, op, buf, "buf", count);
}

zc_status CheckReduceArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                          const void* recvbuf, size_t count, zc_dtype dtype, zc_op rop, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckOp(comm, op, dtype, rop));
  ZC_TRY(CheckRoot(comm, op, root));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  return comm->rank == root ? CheckBuf(comm, op, recvbuf, "recvbuf", count) : ZC_OK;
}

zc_status CheckPerRankArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                           const void* recvbuf, size_t count, zc_dtype dtype) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckBytes(comm, op, count, dtype, comm->size));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  return CheckBuf(comm, op, recvbuf, "recvbuf", count);
}

zc_status CheckReduceScatterArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                                 const void* recvbuf, size_t recvcount, zc_dtype dtype, zc_op rop) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckOp(comm, op, dtype, rop));
  ZC_TRY(CheckBytes(comm, op, recvcount, dtype, comm->size));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", recvcount));
  return CheckBuf(comm, op, recvbuf, "recvbuf", recvcount);
}

zc_status CheckNothingInFlight(const zc_comm* comm, const char* op) {
  if (comm->inflight.load(std::memory_order_acquire) > 0 && !OnWorkerThread())
    return BadArg(comm, op,
                  "%d nonblocking collective(s) or started plan(s) still in flight: complete them "
                  "(zc_wait, zc_plan_wait) first; one collective at a time per communicator",
                  comm->inflight.load());
  return ZC_OK;
}

}  // namespace zc::api
