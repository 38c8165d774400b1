#include "gpu/pipelined_staging.h"

#include <string>

#include "gpu/stream_ordered.h"

namespace zc::gpu {
namespace {

// The legacy default stream: it starts after the work already queued on
// blocking streams, as the synchronous copies of whole-buffer staging do.
constexpr CuStream kLegacyStream = nullptr;

// "sendbuf", "sendbuf and recvbuf": the call's staged inputs (in) or
// outputs, for messages.
std::string Names(const StageArg* args, size_t n, bool in) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (args[i].bytes == 0 || (in ? !args[i].in : !args[i].out)) continue;
    s += (s.empty() ? "" : " and ") + std::string(args[i].name);
  }
  return s;
}

}  // namespace

PipelinedStaging::PipelinedStaging(const DriverTable* drv, PointerCache* cache, PinnedPool* pool,
                                   double timeout_s)
    : stream_(std::make_unique<StreamOrdered>(drv, cache, pool, timeout_s)) {}

PipelinedStaging::~PipelinedStaging() = default;

bool PipelinedStaging::Supported(const DriverTable* drv) {
  return drv != nullptr && drv->loaded && drv->EventCreate != nullptr && drv->EventRecord != nullptr &&
         drv->EventQuery != nullptr && drv->EventDestroy != nullptr && drv->MemcpyDtoHAsync != nullptr &&
         drv->MemcpyHtoDAsync != nullptr && drv->MemHostAlloc != nullptr &&
         ((drv->StreamWaitValue32 != nullptr && drv->MemHostGetDevicePointer != nullptr) ||
          drv->LaunchHostFunc != nullptr);
}

Status PipelinedStaging::Run(const StageArg* args, size_t n, size_t chunk_bytes, const Hooks& hooks) {
  void* host[4] = {nullptr, nullptr, nullptr, nullptr};
  if (n > 4) return Error(ZC_ERR_INTERNAL, "%s: %zu buffers to stage in parts", hooks.what, n);
  std::shared_ptr<StreamOp> op;
  const Status begun = stream_->Begin(kLegacyStream, args, n, true, chunk_bytes, host, &op);
  Told told;
  const Status exchanged = hooks.exchange(!begun.ok(), &told);
  // This rank's own failure first: it is the cause of what peers report.
  Status st = begun.ok() ? exchanged : begun;
  if (st.ok() && told.any) {
    st = told.who >= 0 ? Error(ZC_ERR_SYSTEM, "%s staged in parts: rank %d could not stage its device buffers",
                               hooks.what, told.who)
                       : Error(ZC_ERR_SYSTEM, "%s staged in parts: a rank could not stage its device buffers",
                               hooks.what);
  }
  // A failure the exchange did not tell every peer (a failed exchange has
  // aborted already): abort, so that none waits in a part's collective.
  if (exchanged.ok() && !st.ok() && !told.everyone) hooks.abort(st);
  if (op == nullptr) return st;  // Begin failed: it left nothing waiting on the stream
  if (st.ok()) st = RunParts(op.get(), host, Names(args, n, true), hooks);
  stream_->CompleteRest(op.get(), st);  // opens every gate still closed
  const Status copied = stream_->WaitDone(op.get());
  if (st.ok() && !copied.ok())
    st = copied.with_context(
        Format("%s: copy of the results from host to GPU %d", Names(args, n, false).c_str(), op->device));
  stream_->Reap();
  return st;
}

Status PipelinedStaging::RunParts(StreamOp* op, void* const* host, const std::string& inputs, const Hooks& hooks) {
  const size_t parts = op->parts.size();
  for (size_t k = 0; k < parts; ++k) {
    const StreamOp::Part& part = op->parts[k];
    Status st = stream_->WaitReady(op, k);
    if (!st.ok()) {
      st = st.with_context(Format("%s: copy of part %zu of %zu (bytes [%zu, %zu)) from GPU %d to host", inputs.c_str(),
                                  k + 1, parts, part.offset, part.offset + part.bytes, op->device));
      hooks.abort(st);
      return st;
    }
    st = hooks.part(host, part.offset, part.bytes);  // a failed collective has aborted
    stream_->Complete(op, k, st);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

void PipelinedStaging::Close() { stream_->Close(); }

}  // namespace zc::gpu
