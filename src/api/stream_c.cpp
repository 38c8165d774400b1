// C ABI: the stream-ordered calls (zc_*_on_stream, zcomm.h). The
// arguments are checked as in the plain calls; the communicator's
// StreamOrdered (gpu/stream_ordered.h) puts the staging copies, the ready
// event and the gate on the caller's stream; the host part runs on the
// communicator's queue of nonblocking collectives (collectives, in call
// order) or on its StreamP2p thread (send/recv, api/stream_p2p.h).
#include <zcomm/zcomm.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "api/checks.h"
#include "api/comm.h"
#include "api/plan.h"
#include "api/run_collective.h"
#include "api/stream_p2p.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "gpu/stream_ordered.h"
#include "p2p/messenger.h"

using namespace zc::api;
using zc::gpu::StreamOp;
using zc::gpu::StreamOrdered;

namespace {

zc::gpu::CuStream AsStream(void* s) { return static_cast<zc::gpu::CuStream>(s); }

#define ZC_CHECK_STREAM_REQ(comm, op, req) \
  do {                                     \
    ZC_CHECK_COMM(comm, op);               \
    if (req) *(req) = nullptr;             \
  } while (0)

zc_status CompletedRequest(zc_request** req) {
  if (req) {
    auto* r = new zc_request();
    r->done.store(1);
    *req = r;
  }
  return ZC_OK;
}

// The host part of a collective: fn(Collectives*, host buffers, offset,
// bytes) runs it on bytes [offset, offset + bytes) of each buffer (the
// whole buffers unless it is pipelined).
using HostCollective = std::function<zc::Status(zc::Collectives*, void* const* host, size_t offset, size_t bytes)>;

// Pipeline chunk of an elementwise collective (allreduce, broadcast,
// reduce): ZC_GPU_CHUNK_BYTES, a whole number of elements; the same on
// every rank, whatever memory each passes.
size_t Chunk(const zc_comm* comm, zc_dtype dtype) {
  const size_t es = zc::DtypeSize(dtype);
  const size_t c = comm->config.gpu_chunk_bytes / es * es;
  return c;
}

char* At(void* p, size_t offset) { return p ? static_cast<char*>(p) + offset : nullptr; }

// No CUDA in the process (a build without it, or no driver loaded) and
// stream NULL: nothing can be on the stream, so the call is the
// nonblocking collective on the buffers themselves (host memory: the
// argument checks refused device memory where it could exist).
using TaskPtr = std::shared_ptr<CollectiveQueue::Task>;

zc_status WithoutStream(zc_comm* comm, const char* op, std::vector<Buf> bufs, zc_request** req, HostCollective fn,
                        TaskPtr* task_out) {
  std::vector<void*> host;
  size_t total = 0;
  for (const Buf& b : bufs) {
    host.push_back(const_cast<void*>(b.ptr));
    total = std::max(total, b.bytes);
  }
  auto task = comm->queue->Submit([comm, op, host = std::move(host), total, fn = std::move(fn)] {
    return RunLocked(comm, op, [&](zc::Collectives* c) { return fn(c, host.data(), 0, total); });
  });
  if (task_out) *task_out = task;
  if (req) {
    auto* r = new zc_request();
    r->queue = comm->queue;
    r->task = std::move(task);
    *req = r;
  }
  return ZC_OK;
}

// Puts the collective's copies and gates on the stream and its host part on
// the communicator's queue (after the calls made before it, as on every
// rank). chunk > 0: pipelined in parts of chunk bytes, one host collective
// per part. *task_out (when given): the host part's task.
zc_status CollectiveOnStream(zc_comm* comm, const char* op, void* stream, std::vector<Buf> bufs, zc_request** req,
                             size_t chunk, HostCollective fn, TaskPtr* task_out = nullptr) {
  if (stream == nullptr && comm->gpu->NoStreams())
    return WithoutStream(comm, op, std::move(bufs), req, std::move(fn), task_out);
  StreamOrdered* so = nullptr;
  zc::Status st = comm->gpu->OnStream(&so);
  std::vector<void*> host(bufs.size());
  std::shared_ptr<StreamOp> sop;
  if (st.ok()) st = so->Begin(AsStream(stream), bufs.data(), bufs.size(), true, chunk, host.data(), &sop);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
  auto task = comm->queue->Submit([comm, op, so, sop, host = std::move(host), fn = std::move(fn)] {
    zc::Status s;
    for (size_t k = 0; k < sop->parts.size() && s.ok(); ++k) {
      const auto& part = sop->parts[k];
      s = so->WaitReady(sop.get(), k);
      if (s.ok()) s = RunLocked(comm, op, [&](zc::Collectives* c) { return fn(c, host.data(), part.offset, part.bytes); });
      else s = s.with_context(zc::Format("rank %d: %s", comm->rank, op));
      so->Complete(sop.get(), k, s);
    }
    so->CompleteRest(sop.get(), s);
    return s;
  });
  if (task_out) *task_out = task;
  if (req) {
    auto* r = new zc_request();
    r->queue = comm->queue;
    r->task = std::move(task);
    *req = r;
  }
  return ZC_OK;
}

// The communicator's StreamP2p, made on first use.
zc::Status StreamP2pOf(zc_comm* comm, StreamP2p** out) {
  std::lock_guard<std::mutex> lock(comm->stream_p2p_mu);
  if (!comm->stream_p2p) comm->stream_p2p = std::make_unique<StreamP2p>(comm->p2p.get(), comm->config.timeout_s);
  *out = comm->stream_p2p.get();
  return zc::Status::Ok();
}

std::string PeerContext(const zc_comm* comm, const char* op, bool send, int peer, int tag, size_t bytes) {
  if (!send && peer == ZC_ANY_SOURCE)
    return zc::Format("rank %d: %s from any source (tag %d, %zu bytes)", comm->rank, op, tag, bytes);
  return zc::Format("rank %d: %s %s %d (tag %d, %zu bytes)", comm->rank, op, send ? "to" : "from", peer, tag,
                    bytes);
}

zc_status PeerOnStream(zc_comm* comm, const char* op, bool send, void* buf, size_t bytes, int peer, int tag,
                       void* stream, zc_request** req) {
  std::string context = PeerContext(comm, op, send, peer, tag, bytes);
  StreamOrdered* so = nullptr;
  StreamP2p* sp = nullptr;
  // No CUDA and stream NULL: nothing to wait for (so stays null).
  const bool streamless = stream == nullptr && comm->gpu->NoStreams();
  zc::Status st = streamless ? zc::Status::Ok() : comm->gpu->OnStream(&so);
  if (st.ok()) st = StreamP2pOf(comm, &sp);
  const Buf arg{buf, bytes, send, !send, "buf"};
  void* host = buf;
  std::shared_ptr<StreamOp> sop;
  // A receive's gate holds the stream until the message is in; a send's
  // input is copied before the stream goes on, so it has none.
  if (st.ok() && so) st = so->Begin(AsStream(stream), &arg, 1, !send, 0, &host, &sop);
  std::shared_ptr<zc::P2pRequest> posted;
  if (st.ok() && !send) {
    st = comm->p2p->Irecv(host, bytes, peer, tag, &posted);
    if (!st.ok() && so) so->CompleteRest(sop.get(), st);  // opens the gate
  }
  if (!st.ok()) return Fail(st.with_context(context));
  zc_request* r = nullptr;
  if (req) *req = r = new zc_request();
  if (send) sp->AddSend(so, std::move(sop), host, bytes, peer, tag, r, std::move(context));
  else sp->AddRecv(so, std::move(sop), std::move(posted), r, std::move(context));
  return ZC_OK;
}

}  // namespace

namespace zc::api {

// zc_finalize: the stream p2p thread ends before the messenger goes.
void StopStreamP2p(zc_comm* comm) {
  std::lock_guard<std::mutex> lock(comm->stream_p2p_mu);
  if (comm->stream_p2p) comm->stream_p2p->Stop();
}

}  // namespace zc::api

extern "C" {

zc_status zc_allreduce_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                                 zc_op op, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "allreduce_on_stream", req);
  ZC_TRY(CheckAllreduceArgs(comm, "allreduce_on_stream", sendbuf, recvbuf, count, dtype, op));
  if (count == 0) return CompletedRequest(req);
  const size_t bytes = count * zc::DtypeSize(dtype);
  return CollectiveOnStream(comm, "allreduce_on_stream", stream,
                            {Buf{sendbuf, bytes, true, false, "sendbuf"}, Buf{recvbuf, bytes, false, true, "recvbuf"}},
                            req, Chunk(comm, dtype), [=](zc::Collectives* c, void* const* h, size_t off, size_t n) {
                              return c->Allreduce(At(h[0], off), At(h[1], off), n / zc::DtypeSize(dtype), dtype, op);
                            });
}

zc_status zc_broadcast_on_stream(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root, void* stream,
                                 zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "broadcast_on_stream", req);
  ZC_TRY(CheckBroadcastArgs(comm, "broadcast_on_stream", buf, count, dtype, root));
  if (count == 0) return CompletedRequest(req);
  const bool is_root = comm->rank == root;
  return CollectiveOnStream(comm, "broadcast_on_stream", stream,
                            {Buf{buf, count * zc::DtypeSize(dtype), is_root, !is_root, "buf"}}, req,
                            Chunk(comm, dtype), [=](zc::Collectives* c, void* const* h, size_t off, size_t n) {
                              return c->Broadcast(At(h[0], off), n / zc::DtypeSize(dtype), dtype, root);
                            });
}

zc_status zc_reduce_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                              zc_op op, int root, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "reduce_on_stream", req);
  ZC_TRY(CheckReduceArgs(comm, "reduce_on_stream", sendbuf, recvbuf, count, dtype, op, root));
  if (count == 0) return CompletedRequest(req);
  const size_t bytes = count * zc::DtypeSize(dtype);
  const bool is_root = comm->rank == root;
  return CollectiveOnStream(
      comm, "reduce_on_stream", stream,
      {Buf{sendbuf, bytes, true, false, "sendbuf"},
       Buf{is_root ? recvbuf : nullptr, is_root ? bytes : 0, false, true, "recvbuf"}},
      req, Chunk(comm, dtype), [=](zc::Collectives* c, void* const* h, size_t off, size_t n) {
        return c->Reduce(At(h[0], off), is_root ? At(h[1], off) : recvbuf, n / zc::DtypeSize(dtype), dtype, op, root);
      });
}

zc_status zc_allgather_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                 zc_dtype dtype, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "allgather_on_stream", req);
  ZC_TRY(CheckPerRankArgs(comm, "allgather_on_stream", sendbuf, recvbuf, sendcount, dtype));
  if (sendcount == 0) return CompletedRequest(req);
  const size_t bytes = sendcount * zc::DtypeSize(dtype);
  return CollectiveOnStream(
      comm, "allgather_on_stream", stream,
      {Buf{sendbuf, bytes, true, false, "sendbuf"}, Buf{recvbuf, bytes * comm->size, false, true, "recvbuf"}}, req,
      0, [=](zc::Collectives* c, void* const* h, size_t, size_t) { return c->Allgather(h[0], h[1], sendcount, dtype); });
}

zc_status zc_reduce_scatter_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                      zc_dtype dtype, zc_op op, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "reduce_scatter_on_stream", req);
  ZC_TRY(CheckReduceScatterArgs(comm, "reduce_scatter_on_stream", sendbuf, recvbuf, recvcount, dtype, op));
  if (recvcount == 0) return CompletedRequest(req);
  const size_t bytes = recvcount * zc::DtypeSize(dtype);
  return CollectiveOnStream(
      comm, "reduce_scatter_on_stream", stream,
      {Buf{sendbuf, bytes * comm->size, true, false, "sendbuf"}, Buf{recvbuf, bytes, false, true, "recvbuf"}}, req,
      0, [=](zc::Collectives* c, void* const* h, size_t, size_t) { return c->ReduceScatter(h[0], h[1], recvcount, dtype, op); });
}

zc_status zc_alltoall_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                                void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "alltoall_on_stream", req);
  ZC_TRY(CheckPerRankArgs(comm, "alltoall_on_stream", sendbuf, recvbuf, count, dtype));
  if (count == 0) return CompletedRequest(req);
  const size_t bytes = count * zc::DtypeSize(dtype) * comm->size;
  return CollectiveOnStream(
      comm, "alltoall_on_stream", stream,
      {Buf{sendbuf, bytes, true, false, "sendbuf"}, Buf{recvbuf, bytes, false, true, "recvbuf"}}, req,
      0, [=](zc::Collectives* c, void* const* h, size_t, size_t) { return c->Alltoall(h[0], h[1], count, dtype); });
}

zc_status zc_barrier_on_stream(zc_comm* comm, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "barrier_on_stream", req);
  return CollectiveOnStream(comm, "barrier_on_stream", stream, {}, req,
                            0, [](zc::Collectives* c, void* const*, size_t, size_t) { return c->Barrier(); });
}

zc_status zc_allgatherv_on_stream(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                  const size_t* recvcounts, const size_t* displs, zc_dtype dtype, void* stream,
                                  zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "allgatherv_on_stream", req);
  size_t extent = 0;
  ZC_TRY(CheckAllgathervArgs(comm, "allgatherv_on_stream", sendbuf, sendcount, recvbuf, recvcounts, displs, dtype,
                             &extent));
  if (extent == 0) return CompletedRequest(req);
  const size_t es = zc::DtypeSize(dtype);
  std::vector<size_t> counts(recvcounts, recvcounts + comm->size), offs(displs, displs + comm->size);
  return CollectiveOnStream(
      comm, "allgatherv_on_stream", stream,
      {Buf{sendbuf, sendcount * es, true, false, "sendbuf"}, Buf{recvbuf, extent * es, false, true, "recvbuf"}},
      req, 0, [=, counts = std::move(counts), offs = std::move(offs)](zc::Collectives* c, void* const* h, size_t, size_t) {
        return c->Allgatherv(h[0], sendcount, h[1], counts.data(), offs.data(), dtype);
      });
}

zc_status zc_alltoallv_on_stream(zc_comm* comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                                 void* recvbuf, const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype,
                                 void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "alltoallv_on_stream", req);
  size_t send_extent = 0, recv_extent = 0;
  ZC_TRY(CheckAlltoallvArgs(comm, "alltoallv_on_stream", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                            dtype, &send_extent, &recv_extent));
  if (comm->size == 1 && send_extent == 0) return CompletedRequest(req);
  const size_t n = static_cast<size_t>(comm->size), es = zc::DtypeSize(dtype);
  std::vector<size_t> sc(sendcounts, sendcounts + n), sd(sdispls, sdispls + n), rc(recvcounts, recvcounts + n),
      rd(rdispls, rdispls + n);
  return CollectiveOnStream(
      comm, "alltoallv_on_stream", stream,
      {Buf{sendbuf, send_extent * es, true, false, "sendbuf"}, Buf{recvbuf, recv_extent * es, false, true, "recvbuf"}},
      req,
      0, [=, sc = std::move(sc), sd = std::move(sd), rc = std::move(rc), rd = std::move(rd)](
             zc::Collectives* c, void* const* h, size_t, size_t) {
        return c->Alltoallv(h[0], sc.data(), sd.data(), h[1], rc.data(), rd.data(), dtype);
      });
}

zc_status zc_gather_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                              int root, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "gather_on_stream", req);
  ZC_TRY(CheckGatherArgs(comm, "gather_on_stream", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return CompletedRequest(req);
  const size_t bytes = count * zc::DtypeSize(dtype);
  const bool is_root = comm->rank == root;
  return CollectiveOnStream(
      comm, "gather_on_stream", stream,
      {Buf{sendbuf, bytes, true, false, "sendbuf"},
       Buf{is_root ? recvbuf : nullptr, is_root ? bytes * comm->size : 0, false, true, "recvbuf"}},
      req, 0, [=](zc::Collectives* c, void* const* h, size_t, size_t) {
        return c->Gather(h[0], is_root ? h[1] : nullptr, count, dtype, root);
      });
}

zc_status zc_scatter_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                               int root, void* stream, zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "scatter_on_stream", req);
  ZC_TRY(CheckScatterArgs(comm, "scatter_on_stream", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return CompletedRequest(req);
  const size_t bytes = count * zc::DtypeSize(dtype);
  const bool is_root = comm->rank == root;
  return CollectiveOnStream(
      comm, "scatter_on_stream", stream,
      {Buf{is_root ? sendbuf : nullptr, is_root ? bytes * comm->size : 0, true, false, "sendbuf"},
       Buf{recvbuf, bytes, false, true, "recvbuf"}},
      req, 0, [=](zc::Collectives* c, void* const* h, size_t, size_t) {
        return c->Scatter(is_root ? h[0] : nullptr, h[1], count, dtype, root);
      });
}

zc_status zc_send_on_stream(zc_comm* comm, const void* buf, size_t bytes, int peer, int tag, void* stream,
                            zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "zc_send_on_stream", req);
  ZC_TRY(CheckPeerArgs(comm, "zc_send_on_stream", true, buf, bytes, peer, tag));
  return PeerOnStream(comm, "send_on_stream", true, const_cast<void*>(buf), bytes, peer, tag, stream, req);
}

zc_status zc_recv_on_stream(zc_comm* comm, void* buf, size_t bytes, int peer, int tag, void* stream,
                            zc_request** req) {
  ZC_CHECK_STREAM_REQ(comm, "zc_recv_on_stream", req);
  ZC_TRY(CheckPeerArgs(comm, "zc_recv_on_stream", false, buf, bytes, peer, tag));
  return PeerOnStream(comm, "recv_on_stream", false, buf, bytes, peer, tag, stream, req);
}

zc_status zc_plan_start_on_stream(zc_plan* plan, const void* sendbuf, void* recvbuf, void* stream,
                                  zc_request** req) {
  if (req) *req = nullptr;
  if (!plan) return BadArg(nullptr, "plan_start_on_stream", "plan is NULL");
  zc_comm* comm = plan->comm;
  zc::AllreducePlan* p = plan->plan.get();
  if (!sendbuf || !recvbuf) return BadArg(comm, "plan_start_on_stream", "NULL buffer with count %zu", p->count());
  if (plan->started)
    return BadArg(comm, "plan_start_on_stream", "the plan was started (zc_plan_start) and not waited for");
  const size_t bytes = p->count() * zc::DtypeSize(p->dtype());
  ZC_TRY(CheckBuf(comm, "plan_start_on_stream", sendbuf, "sendbuf", bytes));
  ZC_TRY(CheckBuf(comm, "plan_start_on_stream", recvbuf, "recvbuf", bytes));
  // One part: a plan is made for its whole count. Its host part starts and
  // completes the plan on the queue, in call order with the other
  // stream-ordered and nonblocking collectives.
  return CollectiveOnStream(comm, "plan_start_on_stream", stream,
                            {Buf{sendbuf, bytes, true, false, "sendbuf"}, Buf{recvbuf, bytes, false, true, "recvbuf"}},
                            req, 0,
                            [p](zc::Collectives*, void* const* h, size_t, size_t) {
                              zc::Status st = p->Start(h[0], h[1]);
                              return st.ok() ? p->Wait() : st;
                            },
                            &plan->stream_task);
}

}  // extern "C"
