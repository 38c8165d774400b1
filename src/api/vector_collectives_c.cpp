// The C ABI's vector collectives (zc_allgatherv, zc_alltoallv) and zc_gather,
// zc_scatter: argument checks (api/checks.h), then the collective under the
// communicator's lock with device buffers staged, as every collective of
// zcomm_c.cpp. None of the four is in place: overlapping send and receive
// buffers are ZC_ERR_INVALID_ARG.
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/comm.h"
#include "api/run_collective.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"

using namespace zc::api;

extern "C" {

zc_status zc_allgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                        const size_t* recvcounts, const size_t* displs, zc_dtype dtype) {
  ZC_CHECK_COMM(comm, "allgatherv");
  size_t extent = 0;
  ZC_TRY(CheckAllgathervArgs(comm, "allgatherv", sendbuf, sendcount, recvbuf, recvcounts, displs,
                             dtype, &extent));
  // Every block empty (the same on every rank when the counts agree).
  if (extent == 0) return ZC_OK;
  return RunCollective(comm, "allgatherv", [&](auto* c) {
    const size_t es = zc::DtypeSize(dtype);
    return Staged(comm, {Buf{sendbuf, sendcount * es, true, false, "sendbuf"},
                   Buf{recvbuf, extent * es, false, true, "recvbuf"}},
                  [&](void** h) {
                    return c->Allgatherv(h[0], sendcount, h[1], recvcounts, displs, dtype);
                  });
  });
}

zc_status zc_alltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts,
                       const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                       const size_t* rdispls, zc_dtype dtype) {
  ZC_CHECK_COMM(comm, "alltoallv");
  size_t send_extent = 0, recv_extent = 0;
  ZC_TRY(CheckAlltoallvArgs(comm, "alltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                            rdispls, dtype, &send_extent, &recv_extent));
  // No early return when this rank's counts are all 0: whether the others'
  // are is not known here, and every pair exchanges one (maybe empty)
  // message per step. One rank alone has nothing to exchange.
  if (comm->size == 1 && send_extent == 0) return ZC_OK;
  return RunCollective(comm, "alltoallv", [&](auto* c) {
    const size_t es = zc::DtypeSize(dtype);
    return Staged(comm, {Buf{sendbuf, send_extent * es, true, false, "sendbuf"},
                   Buf{recvbuf, recv_extent * es, false, true, "recvbuf"}},
                  [&](void** h) {
                    return c->Alltoallv(h[0], sendcounts, sdispls, h[1], recvcounts, rdispls,
                                        dtype);
                  });
  });
}

zc_status zc_gather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                    zc_dtype dtype, int root) {
  ZC_CHECK_COMM(comm, "gather");
  ZC_TRY(CheckGatherArgs(comm, "gather", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return ZC_OK;
  return RunCollective(comm, "gather", [&](auto* c) {
    const size_t bytes = count * zc::DtypeSize(dtype);
    const bool is_root = comm->rank == root;
    return Staged(comm, {Buf{sendbuf, bytes, true, false, "sendbuf"},
                   Buf{is_root ? recvbuf : nullptr, is_root ? bytes * comm->size : 0, false, true,
                       "recvbuf"}},
                  [&](void** h) {
                    return c->Gather(h[0], is_root ? h[1] : nullptr, count, dtype, root);
                  });
  });
}

zc_status zc_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                     zc_dtype dtype, int root) {
  ZC_CHECK_COMM(comm, "scatter");
  ZC_TRY(CheckScatterArgs(comm, "scatter", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return ZC_OK;
  return RunCollective(comm, "scatter", [&](auto* c) {
    const size_t bytes = count * zc::DtypeSize(dtype);
    const bool is_root = comm->rank == root;
    return Staged(comm, {Buf{is_root ? sendbuf : nullptr, is_root ? bytes * comm->size : 0, true, false,
                       "sendbuf"},
                   Buf{recvbuf, bytes, false, true, "recvbuf"}},
                  [&](void** h) {
                    return c->Scatter(is_root ? h[0] : nullptr, h[1], count, dtype, root);
                  });
  });
}

}  // extern "C"
