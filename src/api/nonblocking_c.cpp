// C ABI: nonblocking collectives (zc_iallreduce and the other zc_i*),
// zc_test / zc_wait, and persistent allreduce plans. Nonblocking calls are
// checked here, up front (a bad argument fails the call, never the wait),
// then queued in call order on the communicator's CollectiveQueue: its
// worker progresses them without the caller's help, and a zc_wait runs
// those not yet started itself. While any is in flight, a blocking
// collective is refused with ZC_ERR_INVALID_ARG instead of racing it
// (checks.h, CheckNothingInFlight).
#include <zcomm/zcomm.h>

#include <functional>
#include <memory>
#include <vector>

#include "api/checks.h"
#include "api/collective_calls.h"
#include "api/comm.h"
#include "api/plan.h"
#include "collectives/allreduce_plan.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "common/deadline.h"
#include "gpu/device_path.h"

using namespace zc::api;


namespace {

#define ZC_CHECK_REQ(comm, op, req)                      \
  do {                                                   \
    ZC_CHECK_COMM(comm, op);                             \
    if (!(req)) return BadArg(comm, op, "req is NULL");  \
    *(req) = nullptr;                                    \
  } while (0)

// Queues the collective's work (collective_calls.h) on the communicator's
// queue; *req completes with its status.
zc_status Enqueue(zc_comm* comm, zc_request** req, std::function<zc::Status()> work) {
  auto* r = new zc_request();
  r->queue = comm->queue;
  r->task = comm->queue->Submit(std::move(work));
  *req = r;
  return ZC_OK;
}

zc_status Completed(zc_request** req) {
  auto* r = new zc_request();
  r->done.store(1);
  *req = r;
  return ZC_OK;
}

}  // namespace

extern "C" {

zc_status zc_iallreduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                        zc_op op, zc_request** req) {
  ZC_CHECK_REQ(comm, "iallreduce", req);
  ZC_TRY(CheckAllreduceArgs(comm, "iallreduce", sendbuf, recvbuf, count, dtype, op));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Allreduce(comm, sendbuf, recvbuf, count, dtype, op); });
}

zc_status zc_ibroadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root, zc_request** req) {
  ZC_CHECK_REQ(comm, "ibroadcast", req);
  ZC_TRY(CheckBroadcastArgs(comm, "ibroadcast", buf, count, dtype, root));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Broadcast(comm, buf, count, dtype, root); });
}

zc_status zc_ireduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                     zc_op op, int root, zc_request** req) {
  ZC_CHECK_REQ(comm, "ireduce", req);
  ZC_TRY(CheckReduceArgs(comm, "ireduce", sendbuf, recvbuf, count, dtype, op, root));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Reduce(comm, sendbuf, recvbuf, count, dtype, op, root); });
}

zc_status zc_iallgather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount, zc_dtype dtype,
                        zc_request** req) {
  ZC_CHECK_REQ(comm, "iallgather", req);
  ZC_TRY(CheckPerRankArgs(comm, "iallgather", sendbuf, recvbuf, sendcount, dtype));
  if (sendcount == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Allgather(comm, sendbuf, recvbuf, sendcount, dtype); });
}

zc_status zc_iallgather_list(zc_comm* comm, const void* sendbuf, void* const* recvbufs, size_t sendcount,
                             zc_dtype dtype, zc_request** req) {
  ZC_CHECK_REQ(comm, "iallgather_list", req);
  ZC_TRY(CheckAllgatherListArgs(comm, "iallgather_list", sendbuf, recvbufs, sendcount, dtype));
  if (sendcount == 0) return Completed(req);
  std::vector<void*> blocks(recvbufs, recvbufs + comm->size);
  return Enqueue(comm, req, [=, blocks = std::move(blocks)] {
    return AllgatherList(comm, sendbuf, blocks.data(), sendcount, dtype);
  });
}

zc_status zc_ireduce_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                             zc_dtype dtype, zc_op op, zc_request** req) {
  ZC_CHECK_REQ(comm, "ireduce_scatter", req);
  ZC_TRY(CheckReduceScatterArgs(comm, "ireduce_scatter", sendbuf, recvbuf, recvcount, dtype, op));
  if (recvcount == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return ReduceScatter(comm, sendbuf, recvbuf, recvcount, dtype, op); });
}

zc_status zc_ialltoall(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                       zc_request** req) {
  ZC_CHECK_REQ(comm, "ialltoall", req);
  ZC_TRY(CheckPerRankArgs(comm, "ialltoall", sendbuf, recvbuf, count, dtype));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Alltoall(comm, sendbuf, recvbuf, count, dtype); });
}

zc_status zc_ibarrier(zc_comm* comm, zc_request** req) {
  ZC_CHECK_REQ(comm, "ibarrier", req);
  return Enqueue(comm, req, [=] { return Barrier(comm); });
}

zc_status zc_iallgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                         const size_t* recvcounts, const size_t* displs, zc_dtype dtype, zc_request** req) {
  ZC_CHECK_REQ(comm, "iallgatherv", req);
  size_t extent = 0;
  ZC_TRY(CheckAllgathervArgs(comm, "iallgatherv", sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, &extent));
  if (extent == 0) return Completed(req);
  std::vector<size_t> counts(recvcounts, recvcounts + comm->size), offs(displs, displs + comm->size);
  return Enqueue(comm, req, [=, counts = std::move(counts), offs = std::move(offs)] {
    return Allgatherv(comm, sendbuf, sendcount, recvbuf, counts.data(), offs.data(), dtype, extent);
  });
}

zc_status zc_ialltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                        void* recvbuf, const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype,
                        zc_request** req) {
  ZC_CHECK_REQ(comm, "ialltoallv", req);
  size_t send_extent = 0, recv_extent = 0;
  ZC_TRY(CheckAlltoallvArgs(comm, "ialltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype,
                            &send_extent, &recv_extent));
  if (comm->size == 1 && send_extent == 0) return Completed(req);
  const size_t n = static_cast<size_t>(comm->size);
  std::vector<size_t> sc(sendcounts, sendcounts + n), sd(sdispls, sdispls + n), rc(recvcounts, recvcounts + n),
      rd(rdispls, rdispls + n);
  return Enqueue(comm, req, [=, sc = std::move(sc), sd = std::move(sd), rc = std::move(rc), rd = std::move(rd)] {
    return Alltoallv(comm, sendbuf, sc.data(), sd.data(), recvbuf, rc.data(), rd.data(), dtype, send_extent,
                     recv_extent);
  });
}

zc_status zc_igather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root,
                     zc_request** req) {
  ZC_CHECK_REQ(comm, "igather", req);
  ZC_TRY(CheckGatherArgs(comm, "igather", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Gather(comm, sendbuf, recvbuf, count, dtype, root); });
}

zc_status zc_iscatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype, int root,
                      zc_request** req) {
  ZC_CHECK_REQ(comm, "iscatter", req);
  ZC_TRY(CheckScatterArgs(comm, "iscatter", sendbuf, recvbuf, count, dtype, root));
  if (count == 0) return Completed(req);
  return Enqueue(comm, req, [=] { return Scatter(comm, sendbuf, recvbuf, count, dtype, root); });
}

zc_status zc_comm_enqueue(zc_comm* comm, zc_status (*fn)(void* arg), void* arg, zc_request** req) {
  ZC_CHECK_REQ(comm, "zc_comm_enqueue", req);
  if (!fn) return BadArg(comm, "zc_comm_enqueue", "fn is NULL");
  return Enqueue(comm, req, [fn, arg] {
    // fn's failure detail is this thread's last error, read here, on the
    // thread that ran it.
    zc_status s = fn(arg);
    return s == ZC_OK ? zc::Status::Ok() : zc::Status(s, LastError());
  });
}

zc_status zc_request_notify(zc_request* req, void (*fn)(void* arg, zc_status status), void* arg) {
  if (!req || !fn) {
    SetLastErrorText("zc_request_notify: invalid argument: req or fn is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  if (!req->task) {
    SetLastErrorText("zc_request_notify: invalid argument: not a nonblocking collective or zc_comm_enqueue "
                     "request (point-to-point and parameter-server requests complete through zc_test/zc_wait)");
    return ZC_ERR_INVALID_ARG;
  }
  if (!req->queue->Notify(req->task.get(), [fn, arg](const zc::Status& st) { fn(arg, st.code()); })) {
    SetLastErrorText("zc_request_notify: invalid argument: the request has a function to notify already");
    return ZC_ERR_INVALID_ARG;
  }
  return ZC_OK;
}

zc_status zc_test(zc_request* req, int* done) {
  if (!req || !done) {
    SetLastErrorText("zc_test: invalid argument: req or done is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  if (req->p2p) return TestP2p(req, done);
  if (req->task) {
    *done = req->task->done.load(std::memory_order_acquire) ? 1 : 0;
    return *done && !req->task->status.ok() ? Fail(req->task->status) : ZC_OK;
  }
  if (req->ps_watch) req->ps_watch->Waiting();
  *done = req->done.load(std::memory_order_acquire);
  if (*done && !req->status.ok()) return Fail(req->status);
  return ZC_OK;
}

zc_status zc_wait(zc_request* req) {
  if (!req) {
    SetLastErrorText("zc_wait: invalid argument: req is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  if (req->p2p) return WaitP2p(req);
  // req->status is read only once done is set: another thread (the
  // parameter server's, the stream p2p thread) completes such requests.
  zc::Status st;
  if (req->task) {
    // Runs the queued collectives up to this one here if the worker has not
    // started them; every collective has its own deadlines.
    st = req->queue->Wait(req->task.get());
  } else {
    if (req->ps_watch) req->ps_watch->Waiting();
    zc::Backoff backoff(false, nullptr, req->spins);  // a parameter-server request, completed by its thread
    while (!req->done.load(std::memory_order_acquire)) backoff.Pause();
    st = req->status;
  }
  delete req;
  return st.ok() ? ZC_OK : Fail(st);
}

zc_status zc_allreduce_plan_init(zc_comm* comm, size_t count, zc_dtype dtype, zc_op op, zc_plan** plan) {
  ZC_CHECK_REQ(comm, "allreduce_plan_init", plan);
  ZC_TRY(CheckType(comm, "allreduce_plan_init", dtype));
  ZC_TRY(CheckOp(comm, "allreduce_plan_init", dtype, op));
  if (count == 0) return BadArg(comm, "allreduce_plan_init", "count is 0");
  ZC_TRY(CheckNothingInFlight(comm, "allreduce_plan_init"));
  auto p = std::make_unique<zc_plan>();
  p->comm = comm;
  zc::Status st;
  {
    std::lock_guard<zc::SpinLock> lock(comm->coll_mu);
    st = comm->coll->PlanAllreduce(count, dtype, op, &p->plan);
  }
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: allreduce_plan_init", comm->rank)));
  *plan = p.release();
  return ZC_OK;
}

zc_status zc_plan_start(zc_plan* plan, const void* sendbuf, void* recvbuf) {
  if (!plan) return BadArg(nullptr, "plan_start", "plan is NULL");
  zc_comm* comm = plan->comm;
  if (!sendbuf || !recvbuf) return BadArg(comm, "plan_start", "NULL buffer with count %zu", plan->plan->count());
  if (plan->started) return BadArg(comm, "plan_start", "the plan was started and not waited for");
  // Device buffers as in every other entry point: refused by builds without
  // CUDA, staged by the communicator's DevicePath in CUDA builds.
  const size_t bytes = plan->plan->count() * zc::DtypeSize(plan->plan->dtype());
  ZC_TRY(CheckBuf(comm, "plan_start", sendbuf, "sendbuf", bytes));
  ZC_TRY(CheckBuf(comm, "plan_start", recvbuf, "recvbuf", bytes));
  ZC_TRY(CheckNothingInFlight(comm, "plan_start"));
  const void* hsend = sendbuf;
  void* hrecv = recvbuf;
  zc::Status st = comm->gpu->StagePlan(sendbuf, recvbuf, bytes, &plan->staging, &hsend, &hrecv);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: plan_start", comm->rank)));
  comm->inflight.fetch_add(1, std::memory_order_acq_rel);
  st = plan->plan->Start(hsend, hrecv);
  if (!st.ok()) {
    plan->staging.reset();
    comm->inflight.fetch_sub(1, std::memory_order_acq_rel);
    return Fail(st.with_context(zc::Format("rank %d: plan_start", comm->rank)));
  }
  plan->started = true;
  return ZC_OK;
}

zc_status zc_plan_wait(zc_plan* plan) {
  if (!plan) return BadArg(nullptr, "plan_wait", "plan is NULL");
  if (!plan->started) return ZC_OK;
  zc::Status st = plan->plan->Wait();
  if (plan->staging) {
    if (st.ok()) st = plan->staging->CopyOut();
    plan->staging.reset();
  }
  plan->started = false;
  plan->comm->inflight.fetch_sub(1, std::memory_order_acq_rel);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: plan_wait", plan->comm->rank)));
  return ZC_OK;
}

zc_status zc_plan_free(zc_plan* plan) {
  if (!plan) return ZC_OK;
  zc_status s = zc_plan_wait(plan);  // a started plan finishes first
  // So does the host part of its last stream-ordered start (it runs the
  // plan); its status is the request's.
  if (plan->stream_task) (void)plan->comm->queue->Wait(plan->stream_task.get());
  delete plan;
  return s;
}

}  // extern "C"
