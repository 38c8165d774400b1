// The C ABI's calling thread's last error, and the argument checks every
// entry point makes before anything is sent (a bad argument fails locally
// with ZC_ERR_INVALID_ARG and the communicator stays usable).
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace zc::api {

// The detail zc_last_error() returns on this thread.
const char* LastError();
void SetLastErrorText(std::string text);
// Records st's message as the last error; returns its code.
zc_status Fail(const Status& st);
// "rank R: OP: invalid argument: WHY" as the last error; ZC_ERR_INVALID_ARG.
zc_status BadArg(const zc_comm* comm, const char* op, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// comm is not NULL.
zc_status CheckComm(const zc_comm* comm, const char* op);
zc_status CheckType(const zc_comm* comm, const char* op, zc_dtype dtype);
// Known op; avg only on floating types, band/bor/bxor only on integer types.
zc_status CheckOp(const zc_comm* comm, const char* op, zc_dtype dtype, zc_op rop);
// Not NULL when count > 0; in a build without CUDA, not GPU memory.
zc_status CheckBuf(const zc_comm* comm, const char* op, const void* p, const char* name, size_t count);
// count x factor elements fit in size_t bytes.
zc_status CheckBytes(const zc_comm* comm, const char* op, size_t count, zc_dtype dtype, size_t factor);
// Point to point: buf, a peer of the communicator other than this rank (or
// ZC_ANY_SOURCE for a receive), a tag >= 0.
zc_status CheckPeerArgs(zc_comm* comm, const char* op, bool send, const void* buf, size_t bytes, int peer,
                        int tag);
zc_status CheckRoot(const zc_comm* comm, const char* op, int root);
// Each collective's whole argument check, shared by its blocking and
// nonblocking entry points (op names the entry point in messages).
zc_status CheckAllreduceArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                             const void* recvbuf, size_t count, zc_dtype dtype, zc_op rop);
zc_status CheckBroadcastArgs(const zc_comm* comm, const char* op, const void* buf, size_t count,
                             zc_dtype dtype, int root);
// recvbuf is checked on the root only.
zc_status CheckReduceArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                          const void* recvbuf, size_t count, zc_dtype dtype, zc_op rop, int root);
// Allgather and alltoall: count elements per rank, count x size must fit.
zc_status CheckPerRankArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                           const void* recvbuf, size_t count, zc_dtype dtype);
// Allgather into one buffer per rank: recvbufs not NULL, each of its size
// buffers not NULL when sendcount > 0; the buffers do not overlap one
// another, and sendbuf overlaps none but recvbufs[rank], which it may equal
// (in place).
zc_status CheckAllgatherListArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                                 void* const* recvbufs, size_t sendcount, zc_dtype dtype);
zc_status CheckReduceScatterArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                                 const void* recvbuf, size_t recvcount, zc_dtype dtype, zc_op rop);
// Vector collectives, gather and scatter. Each computes the extent (in
// elements: the largest displacement + count, 0 when every count is 0) of
// the buffers it checks, for staging, and refuses: NULL count or
// displacement arrays, a count x element size or displacement + count that
// overflows, a NULL buffer whose extent is not 0, a root out of range, and
// send and receive buffers that overlap (these four are not in place).
// Allgatherv: recvcounts[rank] must equal sendcount.
zc_status CheckAllgathervArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                              size_t sendcount, const void* recvbuf, const size_t* recvcounts,
                              const size_t* displs, zc_dtype dtype, size_t* recv_extent);
// Alltoallv: sendcounts[rank] must equal recvcounts[rank].
zc_status CheckAlltoallvArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                             const size_t* sendcounts, const size_t* sdispls, const void* recvbuf,
                             const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype,
                             size_t* send_extent, size_t* recv_extent);
// Gather: recvbuf (size x count) checked at the root only. Scatter: sendbuf
// (size x count) at the root only.
zc_status CheckGatherArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                          const void* recvbuf, size_t count, zc_dtype dtype, int root);
zc_status CheckScatterArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                           const void* recvbuf, size_t count, zc_dtype dtype, int root);
// No nonblocking collective or started plan may be in flight when a
// blocking collective starts (one collective at a time per communicator).
zc_status CheckNothingInFlight(const zc_comm* comm, const char* op);
// zc_test / zc_wait of a point-to-point request (p2p_c.cpp).
zc_status TestP2p(zc_request* req, int* done);
zc_status WaitP2p(zc_request* req);

}  // namespace zc::api

#define ZC_CHECK_COMM(comm, op) ZC_TRY(zc::api::CheckComm(comm, op))

#define ZC_TRY(expr)                 \
  do {                               \
    zc_status _s = (expr);           \
    if (_s != ZC_OK) return _s;      \
  } while (0)
