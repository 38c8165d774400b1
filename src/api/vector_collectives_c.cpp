// The C ABI's vector collectives (zc_allgatherv, zc_alltoallv) and zc_gather,
// zc_scatter: argument checks (api/checks.h), then the work of
// collective_calls.h, as every collective of zcomm_c.cpp. None of the four
// is in place: overlapping send and receive buffers are ZC_ERR_INVALID_ARG.
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/collective_calls.h"
#include "api/comm.h"
#include "api/run_collective.h"

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
  return RunBlocking(comm, "allgatherv", [&] {
    return Allgatherv(comm, sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, extent);
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
  return RunBlocking(comm, "alltoallv", [&] {
    return Alltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, send_extent,
                     recv_extent);
  });
}

zc_status zc_gather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                    zc_dtype dtype, int root) {
  ZC_CHECK_COMM(comm, "gather");
  ZC_TRY(CheckGatherArgs(comm, "gather", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "gather", [&] { return Gather(comm, sendbuf, recvbuf, count, dtype, root); });
}

zc_status zc_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                     zc_dtype dtype, int root) {
  ZC_CHECK_COMM(comm, "scatter");
  ZC_TRY(CheckScatterArgs(comm, "scatter", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return ZC_OK;
  return RunBlocking(comm, "scatter", [&] { return Scatter(comm, sendbuf, recvbuf, count, dtype, root); });
}

}  // extern "C"
