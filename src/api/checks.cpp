#include "api/checks.h"

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "api/comm.h"
#include "collectives/dtype.h"
#include "zc_build_config.h"
#if !ZC_HAVE_CUDA
#include "gpu/pointer_cache.h"
#endif

namespace zc::api {
namespace {
thread_local std::string t_last_error;
}  // namespace


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
  if (comm && comm->magic == zc_comm::kLive) return ZC_OK;
  t_last_error = comm ? Format("%s: invalid argument: comm %p is not a live communicator (already "
                               "finalized, or not made by zcomm)",
                               op, static_cast<const void*>(comm))
                      : std::string(op) + ": invalid argument: comm is NULL";
  return ZC_ERR_INVALID_ARG;
}

zc_status CheckType(const zc_comm* comm, const char* op, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return BadArg(comm, op, "unknown dtype %d", static_cast<int>(dtype));
  return ZC_OK;
}

zc_status CheckOp(const zc_comm* comm, const char* op, zc_dtype dtype, zc_op rop) {
  if (rop < ZC_SUM || rop > ZC_BXOR) return BadArg(comm, op, "unknown op %d", static_cast<int>(rop));
  if (rop == ZC_AVG && !IsFloating(dtype))
    return BadArg(comm, op, "avg needs a floating dtype, not %s", DtypeName(dtype));
  if (IsBitwise(rop) && IsFloating(dtype))
    return BadArg(comm, op, "bitwise op %s is for integer dtypes and bool only, not %s", OpName(rop),
                  DtypeName(dtype));
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
  if (count && (count > SIZE_MAX / es / (factor ? factor : 1))) {
    // Name the operands, never their (wrapped) product.
    if (factor > 1)
      return BadArg(comm, op, "count %zu of %zu-byte elements x %zu ranks overflows size_t",
                    count, es, factor);
    return BadArg(comm, op, "count %zu of %zu-byte elements overflows size_t", count, es);
  }
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
  ZC_TRY(CheckBytes(comm, op, count, dtype, 1));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  return CheckBuf(comm, op, recvbuf, "recvbuf", count);
}

zc_status CheckBroadcastArgs(const zc_comm* comm, const char* op, const void* buf, size_t count,
                             zc_dtype dtype, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckRoot(comm, op, root));
  ZC_TRY(CheckBytes(comm, op, count, dtype, 1));
  return CheckBuf(comm, op, buf, "buf", count);
}

zc_status CheckReduceArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                          const void* recvbuf, size_t count, zc_dtype dtype, zc_op rop, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckOp(comm, op, dtype, rop));
  ZC_TRY(CheckRoot(comm, op, root));
  ZC_TRY(CheckBytes(comm, op, count, dtype, 1));
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

namespace {

// The extent in elements of `size` blocks (counts[i] elements at displs[i]):
// max(displs[i] + counts[i]) over the non-empty blocks; refuses NULL arrays
// and sums or byte sizes that overflow.
zc_status Extent(const zc_comm* comm, const char* op, const size_t* counts, const char* cname,
                 const size_t* displs, const char* dname, zc_dtype dtype, size_t* extent) {
  if (!counts) return BadArg(comm, op, "%s is NULL", cname);
  if (!displs) return BadArg(comm, op, "%s is NULL", dname);
  const size_t limit = SIZE_MAX / DtypeSize(dtype);
  size_t e = 0;
  for (int p = 0; p < comm->size; ++p) {
    if (counts[p] == 0) continue;
    if (counts[p] > limit || displs[p] > limit - counts[p])
      return BadArg(comm, op, "%s[%d] + %s[%d] = %zu + %zu elements of %zu bytes overflows", dname,
                    p, cname, p, displs[p], counts[p], DtypeSize(dtype));
    e = std::max(e, displs[p] + counts[p]);
  }
  *extent = e;
  return ZC_OK;
}

// [a, a + abytes) and [b, b + bbytes) share a byte.
bool Overlap(const void* a, size_t abytes, const void* b, size_t bbytes) {
  if (!abytes || !bbytes) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bbytes && y < x + abytes;
}

zc_status CheckNoOverlap(const zc_comm* comm, const char* op, const void* sendbuf, size_t sbytes,
                         const void* recvbuf, size_t rbytes) {
  if (Overlap(sendbuf, sbytes, recvbuf, rbytes))
    return BadArg(comm, op, "sendbuf and recvbuf overlap (%s is not in place)", op);
  return ZC_OK;
}

}  // namespace

zc_status CheckAllgatherListArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                                 void* const* recvbufs, size_t sendcount, zc_dtype dtype) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckBytes(comm, op, sendcount, dtype, comm->size));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", sendcount));
  if (!recvbufs) return BadArg(comm, op, "recvbufs is NULL");
  if (sendcount == 0) return ZC_OK;
  const size_t bytes = sendcount * DtypeSize(dtype);
  std::vector<int> order(static_cast<size_t>(comm->size));
  for (int k = 0; k < comm->size; ++k) {
    if (CheckBuf(comm, op, recvbufs[k], "recvbufs", sendcount) != ZC_OK) {
      char name[32];  // named only when refused: the check runs on every call
      std::snprintf(name, sizeof name, "recvbufs[%d]", k);
      return CheckBuf(comm, op, recvbufs[k], name, sendcount);
    }
    if (k != comm->rank && Overlap(sendbuf, bytes, recvbufs[k], bytes))
      return BadArg(comm, op, "sendbuf overlaps recvbufs[%d] (only recvbufs[%d], this rank's block, may "
                    "be sendbuf)", k, comm->rank);
    order[static_cast<size_t>(k)] = k;
  }
  if (sendbuf != recvbufs[comm->rank] && Overlap(sendbuf, bytes, recvbufs[comm->rank], bytes))
    return BadArg(comm, op, "sendbuf overlaps recvbufs[%d] without being it (in place is sendbuf == "
                  "recvbufs[%d])", comm->rank, comm->rank);
  // Sorted by address, each block must end before the next begins.
  auto addr = [&](int k) { return reinterpret_cast<uintptr_t>(recvbufs[k]); };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return addr(a) < addr(b); });
  for (size_t i = 1; i < order.size(); ++i)
    if (addr(order[i - 1]) + bytes > addr(order[i]))
      return BadArg(comm, op, "recvbufs[%d] and recvbufs[%d] overlap (%zu bytes each)", order[i - 1],
                    order[i], bytes);
  return ZC_OK;
}

zc_status CheckAllgathervArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                              size_t sendcount, const void* recvbuf, const size_t* recvcounts,
                              const size_t* displs, zc_dtype dtype, size_t* recv_extent) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(Extent(comm, op, recvcounts, "recvcounts", displs, "displs", dtype, recv_extent));
  if (recvcounts[comm->rank] != sendcount)
    return BadArg(comm, op, "sendcount %zu differs from recvcounts[%d] = %zu (this rank's block)",
                  sendcount, comm->rank, recvcounts[comm->rank]);
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", sendcount));
  ZC_TRY(CheckBuf(comm, op, recvbuf, "recvbuf", *recv_extent));
  const size_t es = DtypeSize(dtype);
  return CheckNoOverlap(comm, op, sendbuf, sendcount * es, recvbuf, *recv_extent * es);
}

zc_status CheckAlltoallvArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                             const size_t* sendcounts, const size_t* sdispls, const void* recvbuf,
                             const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype,
                             size_t* send_extent, size_t* recv_extent) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(Extent(comm, op, sendcounts, "sendcounts", sdispls, "sdispls", dtype, send_extent));
  ZC_TRY(Extent(comm, op, recvcounts, "recvcounts", rdispls, "rdispls", dtype, recv_extent));
  if (sendcounts[comm->rank] != recvcounts[comm->rank])
    return BadArg(comm, op, "sendcounts[%d] = %zu differs from recvcounts[%d] = %zu (the block to "
                  "itself)", comm->rank, sendcounts[comm->rank], comm->rank,
                  recvcounts[comm->rank]);
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", *send_extent));
  ZC_TRY(CheckBuf(comm, op, recvbuf, "recvbuf", *recv_extent));
  const size_t es = DtypeSize(dtype);
  return CheckNoOverlap(comm, op, sendbuf, *send_extent * es, recvbuf, *recv_extent * es);
}

zc_status CheckGatherArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                          const void* recvbuf, size_t count, zc_dtype dtype, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckRoot(comm, op, root));
  ZC_TRY(CheckBytes(comm, op, count, dtype, comm->size));
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  if (comm->rank != root) return ZC_OK;
  ZC_TRY(CheckBuf(comm, op, recvbuf, "recvbuf", count));
  const size_t bytes = count * DtypeSize(dtype);
  return CheckNoOverlap(comm, op, sendbuf, bytes, recvbuf, bytes * comm->size);
}

zc_status CheckScatterArgs(const zc_comm* comm, const char* op, const void* sendbuf,
                           const void* recvbuf, size_t count, zc_dtype dtype, int root) {
  ZC_TRY(CheckType(comm, op, dtype));
  ZC_TRY(CheckRoot(comm, op, root));
  ZC_TRY(CheckBytes(comm, op, count, dtype, comm->size));
  ZC_TRY(CheckBuf(comm, op, recvbuf, "recvbuf", count));
  if (comm->rank != root) return ZC_OK;
  ZC_TRY(CheckBuf(comm, op, sendbuf, "sendbuf", count));
  const size_t bytes = count * DtypeSize(dtype);
  return CheckNoOverlap(comm, op, sendbuf, bytes * comm->size, recvbuf, bytes);
}

zc_status CheckNothingInFlight(const zc_comm* comm, const char* op) {
  // A zc_comm_enqueue function runs in the queue's order: its blocking
  // collectives come after everything queued before it.
  if (api::CollectiveQueue::Running() == comm->queue.get()) return ZC_OK;
  const int n = comm->inflight.load(std::memory_order_acquire) + comm->queue->pending();
  if (n > 0)
    return BadArg(comm, op,
                  "%d nonblocking collective(s) or started plan(s) still in flight: complete them "
                  "(zc_wait, zc_plan_wait) first; one collective at a time per communicator", n);
  return ZC_OK;
}

}  // namespace zc::api
