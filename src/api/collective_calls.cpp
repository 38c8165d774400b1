#include "api/collective_calls.h"

#include "api/comm.h"
#include "api/run_collective.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"

namespace zc::api {

Status Allreduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, zc_op op) {
  bool used_ipc = false;
  Status st = RunLocked(comm, "allreduce", [&](Collectives* c) {
    return comm->gpu->Allreduce(c, sendbuf, recvbuf, count, dtype, op, &used_ipc);
  });
  if (used_ipc) SetLastAlgorithm("cuda_ipc");
  return st;
}

Status Broadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root) {
  bool used_ipc = false;
  Status st = RunLocked(comm, "broadcast", [&](Collectives* c) {
    return comm->gpu->Broadcast(c, buf, count, dtype, root, &used_ipc);
  });
  if (used_ipc) SetLastAlgorithm("cuda_ipc");
  return st;
}

Status Reduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, zc_op op,
              int root) {
  return RunLocked(comm, "reduce",
                   [&](Collectives* c) { return comm->gpu->Reduce(c, sendbuf, recvbuf, count, dtype, op, root); });
}

Status Allgather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount, zc_dtype dtype) {
  bool used_ipc = false;
  Status st = RunLocked(comm, "allgather", [&](Collectives* c) {
    return comm->gpu->Allgather(c, sendbuf, recvbuf, sendcount, dtype, &used_ipc);
  });
  if (used_ipc) SetLastAlgorithm("cuda_ipc");
  return st;
}

Status AllgatherList(zc_comm* comm, const void* sendbuf, void* const* recvbufs, size_t sendcount,
                     zc_dtype dtype) {
  return RunLocked(comm, "allgather_list", [&](Collectives* c) {
    return comm->gpu->AllgatherList(c, sendbuf, recvbufs, sendcount, dtype);
  });
}

Status ReduceScatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount, zc_dtype dtype,
                     zc_op op) {
  bool used_ipc = false;
  Status st = RunLocked(comm, "reduce_scatter", [&](Collectives* c) {
    return comm->gpu->ReduceScatter(c, sendbuf, recvbuf, recvcount, dtype, op, &used_ipc);
  });
  if (used_ipc) SetLastAlgorithm("cuda_ipc");
  return st;
}

Status Alltoall(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype) {
  bool used_ipc = false;
  Status st = RunLocked(comm, "alltoall", [&](Collectives* c) {
    return comm->gpu->Alltoall(c, sendbuf, recvbuf, count, dtype, &used_ipc);
  });
  if (used_ipc) SetLastAlgorithm("cuda_ipc");
  return st;
}

Status Barrier(zc_comm* comm) {
  return RunLocked(comm, "barrier", [&](Collectives* c) { return c->Barrier(); });
}

Status Allgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                  const size_t* displs, zc_dtype dtype, size_t recv_extent) {
  return RunLocked(comm, "allgatherv", [&](Collectives* c) {
    const size_t es = DtypeSize(dtype);
    return Staged(comm, {Buf{sendbuf, sendcount * es, true, false, "sendbuf"},
                         Buf{recvbuf, recv_extent * es, false, true, "recvbuf"}},
                  [&](void** h) { return c->Allgatherv(h[0], sendcount, h[1], recvcounts, displs, dtype); });
  });
}

Status Alltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                 const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype, size_t send_extent,
                 size_t recv_extent) {
  return RunLocked(comm, "alltoallv", [&](Collectives* c) {
    const size_t es = DtypeSize(dtype);
    return Staged(comm, {Buf{sendbuf, send_extent * es, true, false, "sendbuf"},
                         Buf{recvbuf, recv_extent * es, false, true, "recvbuf"}},
                  [&](void** h) {
                    return c->Alltoallv(h[0], sendcounts, sdispls, h[1], recvcounts, rdispls, dtype);
                  });
  });
}

Status Gather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root) {
  return RunLocked(comm, "gather", [&](Collectives* c) {
    const size_t bytes = count * DtypeSize(dtype);
    const bool is_root = comm->rank == root;
    return Staged(comm, {Buf{sendbuf, bytes, true, false, "sendbuf"},
                         Buf{is_root ? recvbuf : nullptr, is_root ? bytes * comm->size : 0, false, true, "recvbuf"}},
                  [&](void** h) { return c->Gather(h[0], is_root ? h[1] : nullptr, count, dtype, root); });
  });
}

Status Scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root) {
  return RunLocked(comm, "scatter", [&](Collectives* c) {
    const size_t bytes = count * DtypeSize(dtype);
    const bool is_root = comm->rank == root;
    return Staged(comm, {Buf{is_root ? sendbuf : nullptr, is_root ? bytes * comm->size : 0, true, false, "sendbuf"},
                         Buf{recvbuf, bytes, false, true, "recvbuf"}},
                  [&](void** h) { return c->Scatter(is_root ? h[0] : nullptr, h[1], count, dtype, root); });
  });
}

}  // namespace zc::api
