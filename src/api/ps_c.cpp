// C ABI: the parameter server (src/ps). A zc_ps keeps a duplicate of the
// caller's communicator (zc_comm_dup: a context id of its own over the same
// connections and pool, so its control messages never mix with the
// caller's) and the ps::Instance built over its Group.
#include <zcomm/zcomm.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "api/checks.h"
#include "api/comm.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "common/flight_recorder.h"
#include "gpu/device_path.h"
#include "ps/instance.h"

using namespace zc::api;

struct zc_ps {
  zc_comm* comm = nullptr;  // the duplicate
  std::unique_ptr<zc::ps::Instance> inst;
};

namespace {

// A failed call: its flight-recorder record (when it has one) ends with the
// failure, the PS communicator's recorder is dumped (ZC_TRACE_DIR), and the
// failure is returned.
zc_status PsFail(const zc_ps* ps, const char* op, uint64_t key, bool has_key, const zc::Status& st,
                 uint64_t record = 0) {
  std::string ctx = has_key ? zc::Format("rank %d: %s(key %llu)", ps->comm->rank, op,
                                         static_cast<unsigned long long>(key))
                            : zc::Format("rank %d: %s", ps->comm->rank, op);
  zc::Status full = st.with_context(ctx);
  zc::trace::FlightRecorder* trace = ps->comm->trace.get();
  if (trace && record) trace->End(record, full);
  if (trace) trace->DumpOnFailure(full);
  return Fail(full);
}

// The flight-recorder record of a PS call on the PS's communicator (0: the
// recorder is off): op "ps_push", "ps_pull", ..., the key, and the bytes a
// push reads or a pull writes (count is bytes: no dtype), or a declared
// key's count and dtype. The op names are literals: the record keeps them.
uint64_t PsRecord(zc_ps* ps, const char* op, uint64_t key, bool has_key, size_t count, int dtype,
                  zc::trace::State state) {
  zc::trace::FlightRecorder* trace = ps->comm->trace.get();
  if (!trace || !trace->enabled()) return 0;
  zc::trace::OpInfo info;
  info.op = op;
  info.has_key = has_key;
  info.key = key;
  info.dtype = dtype;
  info.count = count;
  if (has_key && dtype < 0 && !ps->inst->KeyBytes(key, &info.count).ok()) info.count = 0;
  return trace->Begin(info, state);
}

// Ends a record with the call's status (a blocking call that succeeded).
void PsEnd(zc_ps* ps, uint64_t record) {
  if (record) ps->comm->trace->End(record, zc::Status::Ok());
}

#define ZC_CHECK_PS(ps, op)                                                      \
  do {                                                                           \
    if (!(ps) || !(ps)->inst) {                                                  \
      SetLastErrorText(std::string(op) + ": invalid argument: ps is NULL");      \
      return ZC_ERR_INVALID_ARG;                                                 \
    }                                                                            \
  } while (0)

zc_status CheckWorkerBuf(zc_ps* ps, const char* op, uint64_t key, const void* buf) {
  if (!buf)
    return BadArg(ps->comm, op, "key %llu: buf is NULL", static_cast<unsigned long long>(key));
  return CheckBuf(ps->comm, op, buf, "buf", 1);
}

// A push's or pull's buffer through the communicator's DevicePath, the one
// decision every entry point takes: host memory as it is; device memory
// (CUDA builds) as a pinned host copy, a push's made now, a pull's copied
// to the device when the pull completes (copy_out); a build without CUDA
// has refused device memory in CheckBuf.
struct Staged {
  void* host = nullptr;
  std::function<zc::Status()> copy_out;  // empty for host memory
};

zc_status Stage(zc_ps* ps, const char* op, uint64_t key, const void* buf, bool push, Staged* out) {
  out->host = const_cast<void*>(buf);
  if (!ps->comm->gpu->options().enabled) return ZC_OK;  // no device memory (a build without CUDA)
  size_t bytes = 0;
  zc::Status st = ps->inst->KeyBytes(key, &bytes);
  if (!st.ok()) return PsFail(ps, op, key, true, st);
  const zc::gpu::StageArg arg{buf, bytes, push, !push, "buf"};
  std::unique_ptr<zc::gpu::HostStaging> staging;
  st = ps->comm->gpu->Stage(&arg, 1, &out->host, &staging);
  if (!st.ok()) return PsFail(ps, op, key, true, st);
  if (staging) {
    std::shared_ptr<zc::gpu::HostStaging> held(std::move(staging));
    out->copy_out = [held] { return held->CopyOut(); };
  }
  return ZC_OK;
}

// A zc_request completed by the PS's operation thread (after a pull's copy
// to the device).
// Its flight-recorder record (record != 0) ends there too.
zc::ps::Instance::DoneFn Completer(zc_request* r, std::string ctx, std::function<zc::Status()> copy_out,
                                   std::shared_ptr<zc::trace::FlightRecorder> trace, uint64_t record) {
  return [r, ctx = std::move(ctx), copy_out = std::move(copy_out), trace = std::move(trace),
          record](const zc::Status& done) {
    zc::Status st = done;
    if (st.ok() && copy_out) st = copy_out();
    r->status = st.ok() ? st : st.with_context(ctx);
    if (record) {
      trace->End(record, r->status);
      if (!st.ok()) trace->DumpOnFailure(r->status);
    }
    r->done.store(1, std::memory_order_release);
  };
}

}  // namespace

extern "C" {

zc_status zc_ps_create(zc_comm* comm, zc_ps_role role, const zc_ps_options* options, zc_ps** out) {
  const char* op = "zc_ps_create";
  ZC_CHECK_COMM(comm, op);
  if (!out) return BadArg(comm, op, "ps is NULL");
  *out = nullptr;
  if (role != ZC_PS_WORKER && role != ZC_PS_SERVER && role != ZC_PS_BOTH)
    return BadArg(comm, op, "unknown role %d", static_cast<int>(role));
  zc::ps::Options o;
  if (options) {
    if (options->async != 0 && options->async != 1)
      return BadArg(comm, op, "options->async is %d: must be 0 or 1", options->async);
    if (!std::isfinite(options->sgd_lr) || options->sgd_lr < 0)
      return BadArg(comm, op, "options->sgd_lr is %g: must be finite and >= 0", options->sgd_lr);
    o.async = options->async == 1;
    o.sgd_lr = options->sgd_lr;
  }
  o.server_threads = comm->config.ps_server_threads;
  o.lend_ms = comm->config.ps_lend_ms;
  // The name was checked when the configuration was read (ZC_PS_PLACEMENT).
  auto policy = zc::ps::PlacementPolicy::kBalanced;
  zc::ps::PolicyFromName(comm->config.ps_placement.c_str(), &policy);
  auto ps = std::make_unique<zc_ps>();
  ZC_TRY(zc_comm_dup(comm, &ps->comm));
  zc_comm* dup = ps->comm;
  auto allgather = [dup](const void* mine, void* all, size_t bytes) {
    std::lock_guard<zc::SpinLock> lock(dup->coll_mu);
    return dup->coll->Allgather(mine, all, bytes, ZC_UINT8);
  };
  zc::Status st = zc::ps::Instance::Create(dup->group.get(), static_cast<zc::ps::Role>(role), o,
                                           comm->config.ps_partition_bytes, policy, allgather, &ps->inst);
  if (!st.ok()) {
    zc_status s = Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
    std::string keep = LastError();
    zc_finalize(dup);
    SetLastErrorText(keep);
    return s;
  }
  *out = ps.release();
  return ZC_OK;
}

int zc_ps_num_workers(const zc_ps* ps) { return ps && ps->inst ? ps->inst->num_workers() : -1; }
int zc_ps_num_servers(const zc_ps* ps) { return ps && ps->inst ? ps->inst->num_servers() : -1; }

zc_status zc_ps_declare(zc_ps* ps, uint64_t key, size_t count, zc_dtype dtype, const void* init) {
  const char* op = "zc_ps_declare";
  ZC_CHECK_PS(ps, op);
  ZC_TRY(CheckType(ps->comm, op, dtype));
  if (count == 0) return BadArg(ps->comm, op, "key %llu: count is 0", static_cast<unsigned long long>(key));
  ZC_TRY(CheckBytes(ps->comm, op, count, dtype, 1));
  if (init) ZC_TRY(CheckBuf(ps->comm, op, init, "init", count));
  const zc::gpu::StageArg arg{init, init ? count * zc_dtype_size(dtype) : 0, true, false, "init"};
  void* host_init = nullptr;
  std::unique_ptr<zc::gpu::HostStaging> staging;
  zc::Status st = ps->comm->gpu->Stage(&arg, 1, &host_init, &staging);
  const uint64_t record = PsRecord(ps, "ps_declare", key, true, count, dtype, zc::trace::State::kStarted);
  if (st.ok()) st = ps->inst->Declare(key, count, dtype, host_init);
  if (!st.ok()) return PsFail(ps, op, key, true, st, record);
  PsEnd(ps, record);
  return ZC_OK;
}

zc_status zc_ps_push(zc_ps* ps, uint64_t key, const void* buf) {
  const char* op = "zc_ps_push";
  ZC_CHECK_PS(ps, op);
  ZC_TRY(CheckWorkerBuf(ps, op, key, buf));
  Staged staged;
  ZC_TRY(Stage(ps, op, key, buf, true, &staged));
  const uint64_t record = PsRecord(ps, "ps_push", key, true, 0, -1, zc::trace::State::kStarted);
  zc::Status st = ps->inst->Push(key, staged.host, nullptr);
  if (!st.ok()) return PsFail(ps, op, key, true, st, record);
  PsEnd(ps, record);
  return ZC_OK;
}

zc_status zc_ps_pull(zc_ps* ps, uint64_t key, void* buf) {
  const char* op = "zc_ps_pull";
  ZC_CHECK_PS(ps, op);
  ZC_TRY(CheckWorkerBuf(ps, op, key, buf));
  Staged staged;
  ZC_TRY(Stage(ps, op, key, buf, false, &staged));
  const uint64_t record = PsRecord(ps, "ps_pull", key, true, 0, -1, zc::trace::State::kStarted);
  zc::Status st = ps->inst->Pull(key, staged.host, nullptr);
  if (st.ok() && staged.copy_out) st = staged.copy_out();
  if (!st.ok()) return PsFail(ps, op, key, true, st, record);
  PsEnd(ps, record);
  return ZC_OK;
}

zc_status zc_ps_ipush(zc_ps* ps, uint64_t key, const void* buf, zc_request** req) {
  const char* op = "zc_ps_ipush";
  ZC_CHECK_PS(ps, op);
  if (!req) return BadArg(ps->comm, op, "req is NULL");
  *req = nullptr;
  ZC_TRY(CheckWorkerBuf(ps, op, key, buf));
  Staged staged;
  ZC_TRY(Stage(ps, op, key, buf, true, &staged));
  auto* r = new zc_request();
  r->spins = ps->comm->device->health().spins();
  std::string ctx = zc::Format("rank %d: %s(key %llu)", ps->comm->rank, op, static_cast<unsigned long long>(key));
  const uint64_t record = PsRecord(ps, "ps_ipush", key, true, 0, -1, zc::trace::State::kPosted);
  r->ps_watch = std::make_shared<zc::ps::WaitWatch>();
  zc::Status st = ps->inst->Push(key, staged.host,
                                 Completer(r, ctx, std::move(staged.copy_out), ps->comm->trace, record), r->ps_watch);
  if (!st.ok()) {
    delete r;
    return PsFail(ps, op, key, true, st, record);
  }
  *req = r;
  return ZC_OK;
}

zc_status zc_ps_ipull(zc_ps* ps, uint64_t key, void* buf, zc_request** req) {
  const char* op = "zc_ps_ipull";
  ZC_CHECK_PS(ps, op);
  if (!req) return BadArg(ps->comm, op, "req is NULL");
  *req = nullptr;
  ZC_TRY(CheckWorkerBuf(ps, op, key, buf));
  Staged staged;
  ZC_TRY(Stage(ps, op, key, buf, false, &staged));
  auto* r = new zc_request();
  r->spins = ps->comm->device->health().spins();
  std::string ctx = zc::Format("rank %d: %s(key %llu)", ps->comm->rank, op, static_cast<unsigned long long>(key));
  const uint64_t record = PsRecord(ps, "ps_ipull", key, true, 0, -1, zc::trace::State::kPosted);
  zc::Status st =
      ps->inst->Pull(key, staged.host, Completer(r, ctx, std::move(staged.copy_out), ps->comm->trace, record));
  if (!st.ok()) {
    delete r;
    return PsFail(ps, op, key, true, st, record);
  }
  *req = r;
  return ZC_OK;
}

zc_status zc_ps_lost_workers(zc_ps* ps, int* ranks, int* count) {
  const char* op = "zc_ps_lost_workers";
  ZC_CHECK_PS(ps, op);
  if (!count) return BadArg(ps->comm, op, "count is NULL");
  std::vector<int> lost = ps->inst->LostWorkers();
  for (size_t i = 0; ranks && i < lost.size(); ++i) ranks[i] = lost[i];
  *count = static_cast<int>(lost.size());
  return ZC_OK;
}

zc_status zc_ps_serve(zc_ps* ps) {
  const char* op = "zc_ps_serve";
  ZC_CHECK_PS(ps, op);
  const uint64_t record = PsRecord(ps, "ps_serve", 0, false, 0, -1, zc::trace::State::kStarted);
  zc::Status st = ps->inst->Serve();
  if (!st.ok()) return PsFail(ps, op, 0, false, st, record);
  PsEnd(ps, record);
  return ZC_OK;
}

zc_status zc_ps_free(zc_ps* ps) {
  if (!ps) return ZC_OK;
  const char* op = "zc_ps_free";
  zc_status result = ZC_OK;
  const bool left_together = ps->inst && ps->inst->left_together();
  if (ps->inst) {
    zc::Status st = ps->inst->Shutdown();
    if (!st.ok()) result = PsFail(ps, op, 0, false, st);
    // Nobody writes into this rank's slots any more once every rank is
    // here; then they can go.
    // After a failure (abort, a peer's alert, a lost peer) nobody comes.
    // (Asynchronous mode left together already: Instance::Shutdown.)
    if (ps->comm->size > 1 && !left_together && ps->comm->device->health().KnownHealth(-1).ok()) {
      std::lock_guard<zc::SpinLock> lock(ps->comm->coll_mu);
      zc::Status b = ps->comm->coll->Barrier();
      if (!b.ok() && result == ZC_OK) result = PsFail(ps, op, 0, false, b);
    }
    ps->inst.reset();
  }
  std::string keep = result == ZC_OK ? std::string() : std::string(LastError());
  // Asynchronous mode: the LeaveBarrier was the duplicate's last barrier
  // (its own would wait for a lost worker, and abort every survivor).
  zc_status f = FinalizeComm(ps->comm, !left_together);
  if (result == ZC_OK) result = f;
  else SetLastErrorText(keep);
  delete ps;
  return result;
}

}  // extern "C"
