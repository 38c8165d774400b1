// The work of every collective entry point once its arguments are checked,
// shared by the blocking call (zcomm_c.cpp, vector_collectives_c.cpp) and
// its nonblocking variant (nonblocking_c.cpp, which queues it on the
// communicator's CollectiveQueue): the collective under the communicator's
// lock, device buffers staged through its DevicePath, and the error with
// the call's context ("rank R: allreduce #SEQ: ..."). Each returns the
// Status; the C ABI records it as the calling thread's last error.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>

#include "common/status.h"

struct zc_comm;

namespace zc::api {

Status Allreduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, zc_op op);
Status Broadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root);
Status Reduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, zc_op op,
              int root);
Status Allgather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount, zc_dtype dtype);
// recvbufs: one buffer per rank (api/checks.h checked them).
Status AllgatherList(zc_comm* comm, const void* sendbuf, void* const* recvbufs, size_t sendcount, zc_dtype dtype);
Status ReduceScatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount, zc_dtype dtype,
                     zc_op op);
Status Alltoall(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype);
Status Barrier(zc_comm* comm);
// extent: the receive (allgatherv) or send and receive (alltoallv) extent
// in elements, from the argument checks.
Status Allgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                  const size_t* displs, zc_dtype dtype, size_t recv_extent);
Status Alltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                 const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype, size_t send_extent,
                 size_t recv_extent);
Status Gather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root);
Status Scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root);

}  // namespace zc::api
