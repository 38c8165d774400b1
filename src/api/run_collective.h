// What every C ABI collective entry point does around the work: the
// in-flight check, the communicator's collective lock, the error context
// ("rank R: OP #SEQ: ..."), the last algorithm, and handing the buffers to
// the communicator's DevicePath (gpu/device_path.h), which stages device
// memory in CUDA builds. Shared by every file of src/api that implements a
// collective.
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

// OK, or st with "rank R: OP #SEQ" in front recorded as the last error.
inline zc_status Done(const zc_comm* comm, const char* op, uint64_t seq, const Status& st) {
  if (st.ok()) return ZC_OK;
  Status ctx = st.with_context(Format("rank %d: %s #%llu", comm ? comm->rank : -1, op,
                                      static_cast<unsigned long long>(seq)));
  ZC_INFO(kColl, "%s", ctx.message().c_str());
  return Fail(ctx);
}

// Runs a collective under the communicator's lock with the standard error
// context. fn(Collectives*) returns zc::Status.
template <typename Fn>
zc_status RunCollective(zc_comm* comm, const char* op, Fn&& fn) {
  ZC_TRY(CheckNothingInFlight(comm, op));
  std::lock_guard<zc::SpinLock> lock(comm->coll_mu);
  uint64_t seq = ++comm->op_seq;
  if (!comm->coll)
    return Done(comm, op, seq, Error(ZC_ERR_INTERNAL, "collectives are not initialised"));
  Status st = fn(comm->coll.get());
  SetLastAlgorithm(comm->coll->last_algorithm());
  return Done(comm, op, seq, st);
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
