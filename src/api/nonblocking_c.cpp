// C ABI extensions: nonblocking variants of every collective (beyond
// zc_iallreduce) and persistent allreduce plans. Nonblocking calls run, in
// order, on the communicator's worker thread, which progresses them without
// the caller's help; zc_test / zc_wait complete them.
#include <zcomm/zcomm.h>

#include <functional>
#include <memory>

#include "api/comm.h"
#include "collectives/collectives.h"
#include "common/status.h"

namespace zc::api {
zc_status SetLastError(const zc::Status& st);
}

struct zc_plan {
  zc_comm* comm;
  std::unique_ptr<zc::AllreducePlan> plan;
};

namespace {

zc_status BadArg(const zc_comm* comm, const char* op, const char* why) {
  return zc::api::SetLastError(zc::Status(
      ZC_ERR_INVALID_ARG, zc::Format("rank %d: %s: invalid argument: %s", comm ? comm->rank : -1, op, why)));
}

// Queues `call` (a blocking C ABI call) on the worker; *req completes with
// its status and message.
zc_status Enqueue(zc_comm* comm, const char* op, zc_request** req, std::function<zc_status()> call) {
  if (!comm) return BadArg(comm, op, "comm is NULL");
  if (!req) return BadArg(comm, op, "req is NULL");
  auto* r = new zc_request();
  {
    std::lock_guard<std::mutex> lock(comm->work_mu);
    comm->work.push_back([comm, r, call = std::move(call)] {
      zc_status s = call();
      r->status = s == ZC_OK ? zc::Status::Ok() : zc::Status(s, zc_last_error(comm));
      r->done.store(1, std::memory_order_release);
    });
  }
  comm->work_cv.notify_one();
  *req = r;
  return ZC_OK;
}

}  // namespace

zc_status zc_ibroadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root, zc_request** req) {
  return Enqueue(comm, "ibroadcast", req, [=] { return zc_broadcast(comm, buf, count, dtype, root); });
}

zc_status zc_ireduce(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                     zc_op op, int root, zc_request** req) {
  return Enqueue(comm, "ireduce", req,
                 [=] { return zc_reduce(comm, sendbuf, recvbuf, count, dtype, op, root); });
}

zc_status zc_iallgather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount, zc_dtype dtype,
                        zc_request** req) {
  return Enqueue(comm, "iallgather", req, [=] { return zc_allgather(comm, sendbuf, recvbuf, sendcount, dtype); });
}

zc_status zc_ireduce_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                             zc_dtype dtype, zc_op op, zc_request** req) {
  return Enqueue(comm, "ireduce_scatter", req,
                 [=] { return zc_reduce_scatter(comm, sendbuf, recvbuf, recvcount, dtype, op); });
}

zc_status zc_ialltoall(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count, zc_dtype dtype,
                       zc_request** req) {
  return Enqueue(comm, "ialltoall", req, [=] { return zc_alltoall(comm, sendbuf, recvbuf, count, dtype); });
}

zc_status zc_ibarrier(zc_comm* comm, zc_request** req) {
  return Enqueue(comm, "ibarrier", req, [=] { return zc_barrier(comm); });
}

zc_status zc_allreduce_plan_init(zc_comm* comm, size_t count, zc_dtype dtype, zc_op op, zc_plan** plan) {
  if (!comm) return BadArg(comm, "allreduce_plan_init", "comm is NULL");
  if (!plan) return BadArg(comm, "allreduce_plan_init", "plan is NULL");
  *plan = nullptr;
  if (zc_dtype_size(dtype) == 0) return BadArg(comm, "allreduce_plan_init", "unknown dtype");
  if (op < ZC_SUM || op > ZC_AVG) return BadArg(comm, "allreduce_plan_init", "unknown op");
  auto p = std::make_unique<zc_plan>();
  p->comm = comm;
  zc::Status st;
  {
    std::lock_guard<std::mutex> lock(comm->coll_mu);
    st = comm->coll->PlanAllreduce(count, dtype, op, &p->plan);
  }
  if (!st.ok())
    return zc::api::SetLastError(st.with_context(zc::Format("rank %d: allreduce_plan_init", comm->rank)));
  *plan = p.release();
  return ZC_OK;
}

zc_status zc_plan_start(zc_plan* plan, const void* sendbuf, void* recvbuf) {
  if (!plan) return BadArg(nullptr, "plan_start", "plan is NULL");
  if (plan->plan->count() > 0 && (!sendbuf || !recvbuf))
    return BadArg(plan->comm, "plan_start", "NULL buffer with count > 0");
  zc::Status st = plan->plan->Start(sendbuf, recvbuf);
  if (!st.ok())
    return zc::api::SetLastError(st.with_context(zc::Format("rank %d: plan_start", plan->comm->rank)));
  return ZC_OK;
}

zc_status zc_plan_wait(zc_plan* plan) {
  if (!plan) return BadArg(nullptr, "plan_wait", "plan is NULL");
  zc::Status st = plan->plan->Wait();
  if (!st.ok())
    return zc::api::SetLastError(st.with_context(zc::Format("rank %d: plan_wait", plan->comm->rank)));
  return ZC_OK;
}

zc_status zc_plan_free(zc_plan* plan) {
  delete plan;
  return ZC_OK;
}
