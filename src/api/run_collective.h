// What every C ABI collective entry point does around the work: the
// in-flight check, the communicator's collective lock, the error context
// ("rank R: OP #SEQ: ..."), the last algorithm, and handing the buffers to
// the communicator's DevicePath (gpu/device_path.h), which stages device
// memory in CUDA builds. Used by collective_calls.cpp and the blocking
// entry points.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <mutex>

#include "api/checks.h"
#include "api/comm.h"
#include "collectives/collectives.h"
#include "common/log.h"
#include "gpu/device_path.h"

namespace zc::api {

// The algorithm of the calling thread's last collective (zc_last_algorithm).
void SetLastAlgorithm(const char* name);
const char* LastAlgorithm();

// Runs a collective under the communicator's lock; its status with
// "rank R: OP #SEQ" in front (logged at INFO when it failed).
// fn(Collectives*) returns zc::Status. Runs on the caller's thread or on the
// thread that runs the communicator's queued work (api/collective_queue.h).
template <typename Fn>
Status RunLocked(zc_comm* comm, const char* op, Fn&& fn) {
  std::lock_guard<zc::SpinLock> lock(comm->coll_mu);
  const uint64_t seq = ++comm->op_seq;
  Status st = comm->coll ? fn(comm->coll.get()) : Error(ZC_ERR_INTERNAL, "collectives are not initialised");
  if (comm->coll) SetLastAlgorithm(comm->coll->last_algorithm());
  if (st.ok()) return st;
  Status ctx = st.with_context(Format("rank %d: %s #%llu", comm->rank, op, static_cast<unsigned long long>(seq)));
  ZC_INFO(kColl, "%s", ctx.message().c_str());
  if (comm->trace) comm->trace->DumpOnFailure(ctx);
  return ctx;
}

// A blocking entry point's work: refused while a nonblocking collective or a
// started plan is in flight; the status recorded as the last error.
template <typename Call>
zc_status RunBlocking(zc_comm* comm, const char* op, Call&& call) {
  ZC_TRY(CheckNothingInFlight(comm, op));
  Status st = call();
  return st.ok() ? ZC_OK : Fail(st);
}

// A buffer of one call, for Staged(): {ptr, bytes, in, out, name}.
using Buf = gpu::StageArg;

// Runs fn(host) where host[i] stands for bufs[i]: the communicator's
// DevicePath stages device buffers through pinned host memory (CUDA builds),
// so the host collectives and p2p see host memory only; host buffers pass
// through. Builds without CUDA: CheckBuf() has already refused device memory.
template <size_t N, typename Fn>
Status Staged(zc_comm* comm, const Buf (&bufs)[N], Fn&& fn) {
  return comm->gpu->Run(bufs, std::forward<Fn>(fn));
}

}  // namespace zc::api
