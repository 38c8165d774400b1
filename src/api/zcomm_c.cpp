// The C ABI (include/zcomm/zcomm.h): argument checks, error context and the
// calling thread's last error; the work is done by p2p and collectives.
#include <zcomm/zcomm.h>

#include <cstring>
#include <string>

#include "api/checks.h"
#include "api/collective_calls.h"
#include "api/comm.h"
#include "api/run_collective.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "common/log.h"
#include "gpu/device_path.h"

namespace zc::api {
namespace {
thread_local const char* t_last_algorithm = "";
}
void SetLastAlgorithm(const char* name) { t_last_algorithm = name; }
const char* LastAlgorithm() { return t_last_algorithm; }
}  // namespace zc::api

using namespace zc::api;

extern "C" {

const char* zc_status_string(zc_status s) {
  switch (s) {
    case ZC_OK: return "ok";
    case ZC_ERR_INVALID_ARG: return "invalid argument";
    case ZC_ERR_MISMATCH: return "mismatch between ranks";
    case ZC_ERR_TIMEOUT: return "timeout";
    case ZC_ERR_PEER_LOST: return "peer lost";
    case ZC_ERR_ABORTED: return "aborted";
    case ZC_ERR_NO_MEMORY: return "out of memory";
    case ZC_ERR_UNSUPPORTED: return "unsupported";
    case ZC_ERR_SYSTEM: return "system error";
    case ZC_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* zc_last_error(const zc_comm*) { return zc::api::LastError(); }
const char* zc_last_algorithm(const zc_comm*) { return LastAlgorithm(); }
size_t zc_dtype_size(zc_dtype dtype) { return zc::DtypeSize(dtype); }

zc_status zc_abort(zc_comm* comm) {
  ZC_CHECK_COMM(comm, "zc_abort");
  // A communicator that a shrink revoked is over already; the new epoch's
  // communicators are not its to abort.
  if (comm->group->stale()) return ZC_OK;
  zc::Status why(ZC_ERR_ABORTED, zc::Format("rank %d called zc_abort", comm->rank));
  comm->device->health().Abort(why);
  if (comm->trace) comm->trace->DumpOnFailure(why);
  return ZC_OK;
}

// -1 for NULL or a finalized handle (best effort, as CheckComm).
static bool Live(const zc_comm* comm) { return comm && comm->magic == zc_comm::kLive; }
int zc_rank(const zc_comm* comm) { return Live(comm) ? comm->rank : -1; }
int zc_size(const zc_comm* comm) { return Live(comm) ? comm->size : -1; }
int zc_local_rank(const zc_comm* comm) { return Live(comm) ? comm->local_rank : -1; }
int zc_local_size(const zc_comm* comm) { return Live(comm) ? comm->local_size : -1; }

zc_status zc_mem_alloc(zc_comm* comm, size_t bytes, void** ptr) {
  ZC_CHECK_COMM(comm, "zc_mem_alloc");
  if (!ptr) return BadArg(comm, "zc_mem_alloc", "ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0) return ZC_OK;
  zc::MemRegion* r;
  zc::Status st = comm->device->regions().Allocate(bytes, &r);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: zc_mem_alloc(%zu)", comm->rank, bytes)));
  *ptr = r->data();
  return ZC_OK;
}

zc_status zc_mem_free(zc_comm* comm, void* ptr) {
  ZC_CHECK_COMM(comm, "zc_mem_free");
  if (!ptr) return ZC_OK;
  zc::Status st = comm->device->regions().Free(ptr);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: zc_mem_free", comm->rank)));
  return ZC_OK;
}

zc_status zc_allreduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                       zc_dtype dtype, zc_op op) {
  ZC_CHECK_COMM(comm, "allreduce");
  ZC_TRY(CheckAllreduceArgs(comm, "allreduce", sendbuf, recvbuf, count, dtype, op));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "allreduce", [&] { return Allreduce(comm, sendbuf, recvbuf, count, dtype, op); });
}

zc_status zc_broadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root) {
  ZC_CHECK_COMM(comm, "broadcast");
  ZC_TRY(CheckBroadcastArgs(comm, "broadcast", buf, count, dtype, root));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "broadcast", [&] { return Broadcast(comm, buf, count, dtype, root); });
}

zc_status zc_reduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                    zc_dtype dtype, zc_op op, int root) {
  ZC_CHECK_COMM(comm, "reduce");
  ZC_TRY(CheckReduceArgs(comm, "reduce", sendbuf, recvbuf, count, dtype, op, root));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "reduce", [&] { return Reduce(comm, sendbuf, recvbuf, count, dtype, op, root); });
}

zc_status zc_allgather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                       zc_dtype dtype) {
  ZC_CHECK_COMM(comm, "allgather");
  ZC_TRY(CheckPerRankArgs(comm, "allgather", sendbuf, recvbuf, sendcount, dtype));
  if (sendcount == 0) return ZC_OK;
  return RunBlocking(comm, "allgather", [&] { return Allgather(comm, sendbuf, recvbuf, sendcount, dtype); });
}

zc_status zc_allgather_list(zc_comm* comm, const void* sendbuf, void* const* recvbufs, size_t sendcount,
                            zc_dtype dtype) {
  ZC_CHECK_COMM(comm, "allgather_list");
  ZC_TRY(CheckAllgatherListArgs(comm, "allgather_list", sendbuf, recvbufs, sendcount, dtype));
  if (sendcount == 0) return ZC_OK;
  return RunBlocking(comm, "allgather_list",
                     [&] { return AllgatherList(comm, sendbuf, recvbufs, sendcount, dtype); });
}

zc_status zc_reduce_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                            zc_dtype dtype, zc_op op) {
  ZC_CHECK_COMM(comm, "reduce_scatter");
  ZC_TRY(CheckReduceScatterArgs(comm, "reduce_scatter", sendbuf, recvbuf, recvcount, dtype, op));
  if (recvcount == 0) return ZC_OK;
  return RunBlocking(comm, "reduce_scatter",
                     [&] { return ReduceScatter(comm, sendbuf, recvbuf, recvcount, dtype, op); });
}

zc_status zc_alltoall(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                      zc_dtype dtype) {
  ZC_CHECK_COMM(comm, "alltoall");
  ZC_TRY(CheckPerRankArgs(comm, "alltoall", sendbuf, recvbuf, count, dtype));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "alltoall", [&] { return Alltoall(comm, sendbuf, recvbuf, count, dtype); });
}

zc_status zc_barrier(zc_comm* comm) {
  ZC_CHECK_COMM(comm, "barrier");
  return RunBlocking(comm, "barrier", [&] { return Barrier(comm); });
}

}  // extern "C"
