// C ABI of the engine (include/zcomm/zcomm_engine.h): argument checks, the
// engine's own communicator (a zc_comm_dup of the caller's), handles. The
// engine itself is src/engine/engine.h.
#include <zcomm/zcomm_engine.h>

#include <cstring>
#include <memory>

#include "api/checks.h"
#include "api/comm.h"
#include "engine/engine.h"
#include "gpu/device_path.h"

struct zc_engine {
  zc_comm* comm = nullptr;  // the engine's duplicate of the caller's communicator
  int rank = 0;
  std::unique_ptr<zc::engine::Engine> engine;
};

struct zc_engine_handle {
  std::shared_ptr<zc::engine::Op> op;
};

namespace {

using namespace zc::api;
using zc::engine::Op;
using zc::engine::OpType;

zc_status EngineBad(const zc_engine* e, const char* op, const std::string& why) {
  SetLastErrorText(zc::Format("rank %d: zc_engine_%s: invalid argument: %s", e ? e->rank : -1, op, why.c_str()));
  return ZC_ERR_INVALID_ARG;
}

// Checks what every tensor operation shares and fills the request.
zc_status Prepare(zc_engine* e, const char* opname, const char* name, const void* input, const void* output,
                  int ndims, const int64_t* shape, int min_dims, std::shared_ptr<Op>* out) {
  if (!e || !e->engine) {
    SetLastErrorText(zc::Format("zc_engine_%s: invalid argument: engine is NULL", opname));
    return ZC_ERR_INVALID_ARG;
  }
  if (!name || !*name) return EngineBad(e, opname, "name is NULL or empty");
  size_t len = strnlen(name, ZC_ENGINE_MAX_NAME + 1);
  if (len > ZC_ENGINE_MAX_NAME)
    return EngineBad(e, opname, zc::Format("name longer than %d bytes", ZC_ENGINE_MAX_NAME));
  if (ndims < min_dims || ndims > ZC_ENGINE_MAX_DIMS)
    return EngineBad(e, opname, zc::Format("'%s': ndims %d out of range [%d, %d]", name, ndims, min_dims,
                                           ZC_ENGINE_MAX_DIMS));
  if (ndims > 0 && !shape) return EngineBad(e, opname, zc::Format("'%s': shape is NULL", name));
  auto op = std::make_shared<Op>();
  op->req.name.assign(name, len);
  __int128 elements = 1;
  for (int i = 0; i < ndims; ++i) {
    if (shape[i] < 0)
      return EngineBad(e, opname, zc::Format("'%s': dimension %d is negative (%lld)", name, i,
                                             static_cast<long long>(shape[i])));
    elements *= shape[i];
    if (elements > (static_cast<__int128>(1) << 56))
      return EngineBad(e, opname, zc::Format("'%s': too many elements", name));
    op->req.shape.push_back(shape[i]);
  }
  if (elements > 0 && !input) return EngineBad(e, opname, zc::Format("'%s': input is NULL", name));
  if (elements > 0 && output == nullptr && input != output)
    return EngineBad(e, opname, zc::Format("'%s': output is NULL", name));
  op->input = input;
  op->output = const_cast<void*>(output);
  *out = std::move(op);
  return ZC_OK;
}

// The operation's buffers through the communicator's DevicePath, the one
// decision every entry point takes: host memory as it is; device memory
// (CUDA builds) as pinned host copies, the input copied now and the result
// copied to the caller's output when the engine completes the operation
// (Op::copy_out); a build without CUDA refuses device memory.
zc_status StageBuffers(zc_engine* e, Op* op) {
  const OpType t = op->req.type;
  op->caller_output = op->output;
  if (t == OpType::kBarrier || t == OpType::kJoin) return ZC_OK;
  const char* what = OpTypeName(t);
  const size_t bytes = static_cast<size_t>(op->req.elements()) * zc_dtype_size(op->req.dtype);
  ZC_TRY(CheckBuf(e->comm, what, op->input, "input", bytes));
  // allreduce and broadcast write the caller's buffer; the others' results
  // are the engine's own (zc_engine_output).
  const bool writes_caller = t == OpType::kAllreduce || t == OpType::kBroadcast;
  if (writes_caller) ZC_TRY(CheckBuf(e->comm, what, op->output, "output", bytes));
  // An allreduce of one device's memory stays there: the engine fuses it
  // in its device fusion buffer (engine/device_fusion.h).
  if (t == OpType::kAllreduce && (op->req.device = e->engine->DeviceOf(op->input, op->output, bytes)) >= 0)
    return ZC_OK;
  const zc::gpu::StageArg args[2] = {{op->input, bytes, true, false, "input"},
                                     {op->output, bytes, false, true, "output"}};
  void* host[2];
  std::unique_ptr<zc::gpu::HostStaging> staging;
  zc::Status st = e->comm->gpu->Stage(args, writes_caller ? 2 : 1, host, &staging);
  if (!st.ok())
    return Fail(st.with_context(zc::Format("rank %d: zc_engine_%s '%s'", e->rank, what, op->req.name.c_str())));
  op->input = host[0];
  if (writes_caller) op->output = host[1];
  if (staging) {
    std::shared_ptr<zc::gpu::HostStaging> held(std::move(staging));
    op->copy_out = [held] { return held->CopyOut(); };
  }
  return ZC_OK;
}

zc_status Submit(zc_engine* e, const std::shared_ptr<Op>& op, zc_engine_handle** handle) {
  ZC_TRY(StageBuffers(e, op.get()));
  op->wait_timeout_s = e->engine->timeout_s();
  zc::Status st = e->engine->Submit(op);
  if (!st.ok()) return Fail(st.code() == ZC_ERR_INVALID_ARG ? st.with_context(zc::Format("rank %d", e->rank)) : st);
  *handle = new zc_engine_handle{op};
  return ZC_OK;
}

#define ZC_CHECK_HANDLE_OUT(e, opname, handle)                                    \
  do {                                                                           \
    if (!(handle)) return EngineBad(e, opname, "handle is NULL");                \
    *(handle) = nullptr;                                                         \
  } while (0)

}  // namespace

extern "C" {

zc_status zc_engine_create(zc_comm* comm, zc_engine** engine) {
  ZC_CHECK_COMM(comm, "zc_engine_create");
  if (!engine) return BadArg(comm, "zc_engine_create", "engine is NULL");
  *engine = nullptr;
  auto e = std::make_unique<zc_engine>();
  e->rank = comm->rank;
  // The engine's knobs are read now (not at zc_init), so that each engine
  // of a process may have its own.
  zc::Config env;
  zc::Status st = zc::Config::FromEnv(&env);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: zc_engine_create", comm->rank)));
  zc::Config config = comm->config;
  config.fusion_threshold = env.fusion_threshold;
  config.cycle_time_ms = env.cycle_time_ms;
  config.cache_capacity = env.cache_capacity;
  config.timeline = env.timeline;
  config.stall_warning_s = env.stall_warning_s;
  config.stall_shutdown_s = env.stall_shutdown_s;
  ZC_TRY(zc_comm_dup(comm, &e->comm));
  st = zc::engine::Engine::Create(e->comm->coll.get(), e->comm->group.get(), e->comm->gpu.get(), config,
                                  &e->engine);
  if (!st.ok()) {
    zc_finalize(e->comm);
    return Fail(st.with_context(zc::Format("rank %d: zc_engine_create", comm->rank)));
  }
  *engine = e.release();
  return ZC_OK;
}

zc_status zc_engine_destroy(zc_engine* engine) {
  if (!engine) return ZC_OK;
  zc::Status st = engine->engine->Shutdown();
  engine->engine.reset();
  zc_status fin = zc_finalize(engine->comm);
  delete engine;
  // A stop requested by some rank's destroy is the normal end, not an error.
  if (!st.ok() && st.code() != ZC_ERR_ABORTED) return Fail(st);
  if (!st.ok() && st.message().find("zc_engine_destroy") == std::string::npos) return Fail(st);
  return fin;
}

zc_status zc_engine_error(zc_engine* engine, zc_status* error) {
  if (!engine || !error) return EngineBad(engine, "error", "engine or error is NULL");
  zc::Status st = engine->engine->error();
  *error = st.code();
  if (!st.ok()) Fail(st);
  return ZC_OK;
}

zc_status zc_engine_allreduce(zc_engine* engine, const char* name, const void* input, void* output, int ndims,
                              const int64_t* shape, zc_dtype dtype, zc_op op, double prescale, double postscale,
                              zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "allreduce", handle);
  std::shared_ptr<Op> o;
  ZC_TRY(Prepare(engine, "allreduce", name, input, output, ndims, shape, 0, &o));
  o->req.type = OpType::kAllreduce;
  o->req.dtype = dtype;
  o->req.op = op;
  o->req.prescale = prescale;
  o->req.postscale = postscale;
  return Submit(engine, o, handle);
}

zc_status zc_engine_broadcast(zc_engine* engine, const char* name, void* buf, int ndims, const int64_t* shape,
                              zc_dtype dtype, int root, zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "broadcast", handle);
  std::shared_ptr<Op> o;
  ZC_TRY(Prepare(engine, "broadcast", name, buf, buf, ndims, shape, 0, &o));
  o->req.type = OpType::kBroadcast;
  o->req.dtype = dtype;
  o->req.root = root;
  return Submit(engine, o, handle);
}

zc_status zc_engine_allgather(zc_engine* engine, const char* name, const void* input, int ndims,
                              const int64_t* shape, zc_dtype dtype, zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "allgather", handle);
  std::shared_ptr<Op> o;
  ZC_TRY(Prepare(engine, "allgather", name, input, input, ndims, shape, 1, &o));
  o->req.type = OpType::kAllgather;
  o->req.dtype = dtype;
  return Submit(engine, o, handle);
}

zc_status zc_engine_alltoall(zc_engine* engine, const char* name, const void* input, int ndims,
                             const int64_t* shape, zc_dtype dtype, const int64_t* splits,
                             zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "alltoall", handle);
  std::shared_ptr<Op> o;
  ZC_TRY(Prepare(engine, "alltoall", name, input, input, ndims, shape, 1, &o));
  o->req.type = OpType::kAlltoall;
  o->req.dtype = dtype;
  if (splits) o->req.splits.assign(splits, splits + engine->engine->size());
  return Submit(engine, o, handle);
}

zc_status zc_engine_reducescatter(zc_engine* engine, const char* name, const void* input, int ndims,
                                  const int64_t* shape, zc_dtype dtype, zc_op op, double prescale,
                                  double postscale, zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "reducescatter", handle);
  std::shared_ptr<Op> o;
  ZC_TRY(Prepare(engine, "reducescatter", name, input, input, ndims, shape, 1, &o));
  o->req.type = OpType::kReducescatter;
  o->req.dtype = dtype;
  o->req.op = op;
  o->req.prescale = prescale;
  o->req.postscale = postscale;
  return Submit(engine, o, handle);
}

zc_status zc_engine_barrier(zc_engine* engine, zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "barrier", handle);
  if (!engine) return EngineBad(engine, "barrier", "engine is NULL");
  auto o = std::make_shared<Op>();
  o->req.type = OpType::kBarrier;
  return Submit(engine, o, handle);
}

zc_status zc_engine_join(zc_engine* engine, zc_engine_handle** handle) {
  ZC_CHECK_HANDLE_OUT(engine, "join", handle);
  if (!engine) return EngineBad(engine, "join", "engine is NULL");
  auto o = std::make_shared<Op>();
  o->req.type = OpType::kJoin;
  return Submit(engine, o, handle);
}

zc_status zc_engine_poll(zc_engine_handle* handle, int* done) {
  if (!handle || !done) return EngineBad(nullptr, "poll", "handle or done is NULL");
  *done = handle->op->done.load(std::memory_order_acquire) ? 1 : 0;
  return *done ? Fail(handle->op->result_status()) : ZC_OK;
}

zc_status zc_engine_wait(zc_engine_handle* handle) {
  if (!handle) return EngineBad(nullptr, "wait", "handle is NULL");
  const double timeout = handle->op->wait_timeout_s;
  if (!handle->op->Wait(timeout))
    return Fail(zc::Error(ZC_ERR_TIMEOUT, "zc_engine_wait: %s '%s' not done after %g s (ZC_TIMEOUT); still pending",
                          OpTypeName(handle->op->req.type), handle->op->req.name.c_str(), timeout));
  return Fail(handle->op->result_status());
}

zc_status zc_engine_output(const zc_engine_handle* handle, const void** data, int* ndims, int64_t* shape) {
  if (!handle) return EngineBad(nullptr, "output", "handle is NULL");
  Op& o = *handle->op;
  if (!o.done.load(std::memory_order_acquire)) return EngineBad(nullptr, "output", "the operation is not done");
  if (zc::Status st = o.result_status(); !st.ok()) return Fail(st);
  const bool own = o.req.type == OpType::kAllgather || o.req.type == OpType::kAlltoall ||
                   o.req.type == OpType::kReducescatter;
  const bool none = o.req.type == OpType::kBarrier || o.req.type == OpType::kJoin;
  const std::vector<int64_t>& s = own ? o.out_shape : o.req.shape;
  if (data) *data = none ? nullptr : own ? static_cast<const void*>(o.result.data()) : o.caller_output;
  if (ndims) *ndims = none ? 0 : static_cast<int>(s.size());
  if (shape && !none) std::copy(s.begin(), s.end(), shape);
  return ZC_OK;
}

zc_status zc_engine_received_splits(const zc_engine_handle* handle, int64_t* splits) {
  if (!handle || !splits) return EngineBad(nullptr, "received_splits", "handle or splits is NULL");
  Op& o = *handle->op;
  if (o.req.type != OpType::kAlltoall) return EngineBad(nullptr, "received_splits", "not an alltoall");
  if (!o.done.load(std::memory_order_acquire)) return EngineBad(nullptr, "received_splits", "the operation is not done");
  if (zc::Status st = o.result_status(); !st.ok()) return Fail(st);
  std::copy(o.received_splits.begin(), o.received_splits.end(), splits);
  return ZC_OK;
}

zc_status zc_engine_join_result(const zc_engine_handle* handle, int* last_rank) {
  if (!handle || !last_rank) return EngineBad(nullptr, "join_result", "handle or last_rank is NULL");
  Op& o = *handle->op;
  if (o.req.type != OpType::kJoin) return EngineBad(nullptr, "join_result", "not a join");
  if (!o.done.load(std::memory_order_acquire)) return EngineBad(nullptr, "join_result", "the join is not done");
  if (zc::Status st = o.result_status(); !st.ok()) return Fail(st);
  *last_rank = o.last_joined;
  return ZC_OK;
}

zc_status zc_engine_handle_free(zc_engine_handle* handle) {
  delete handle;
  return ZC_OK;
}

zc_status zc_engine_get_stats(zc_engine* engine, zc_engine_stats* stats, size_t bytes) {
  if (!engine || !stats) return EngineBad(engine, "get_stats", "engine or stats is NULL");
  const zc::engine::Stats& s = engine->engine->stats();
  zc_engine_stats out{s.cycles, s.negotiation_collectives, s.cache_hits, s.cache_misses, s.fused_sets,
                      s.fused_tensors, s.data_collectives, s.plan_reuses, s.operations_done, s.stall_warnings,
                      s.cache_entries};
  memcpy(stats, &out, std::min(bytes, sizeof out));
  return ZC_OK;
}

}  // extern "C"
