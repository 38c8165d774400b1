// What every C ABI collective entry point does around the work: the
// in-flight check, the communicator's collective lock, the error context
// ("rank R: OP #SEQ: ..."), the last algorithm, and the staging of device
// buffers through pinned host memory in CUDA builds. Shared by every file of
// src/api that implements a collective.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <mutex>

#include "api/checks.h"
#include "api/comm.h"
#include "collectives/collectives.h"
#include "common/log.h"
#include "zc_build_config.h"
// CUDA builds stage device buffers through pinned host memory; other builds
// refuse device memory in CheckBuf().
#if ZC_HAVE_CUDA
#include "gpu/host_staging.h"
#define ZC_STAGE_DEVICE_POINTERS 1
#else
#define ZC_STAGE_DEVICE_POINTERS 0
#endif

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
  std::lock_guard<std::mutex> lock(comm->coll_mu);
  uint64_t seq = ++comm->op_seq;
  if (!comm->coll)
    return Done(comm, op, seq, Error(ZC_ERR_INTERNAL, "collectives are not initialised"));
  Status st = fn(comm->coll.get());
  SetLastAlgorithm(comm->coll->last_algorithm());
  return Done(comm, op, seq, st);
}

// A buffer of one call, for Staged().
struct Buf {
  const void* ptr;
  size_t bytes;
  bool in, out;
  const char* name;
};

// Runs fn(host) where host[i] stands for bufs[i]. CUDA builds: device
// buffers are staged through pinned host memory (gpu/host_staging.h), so the
// host collectives and p2p see host memory only; host buffers pass through.
// Other builds: CheckBuf() has already refused device memory.
template <size_t N, typename Fn>
Status Staged(const Buf (&bufs)[N], Fn&& fn) {
  void* host[N];
#if ZC_STAGE_DEVICE_POINTERS
  gpu::StageArg args[N];
  for (size_t i = 0; i < N; ++i)
    args[i] = gpu::StageArg{bufs[i].ptr, bufs[i].bytes, bufs[i].in, bufs[i].out, bufs[i].name};
  gpu::HostStaging staging;
  ZC_RETURN_IF_ERROR(staging.Stage(args, N, host));
  Status st = fn(host);
  if (st.ok() && staging.active()) st = staging.CopyOut();
  return st;
#else
  for (size_t i = 0; i < N; ++i) host[i] = const_cast<void*>(bufs[i].ptr);
  return fn(host);
#endif
}

}  // namespace zc::api
