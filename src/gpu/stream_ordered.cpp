#include "gpu/stream_ordered.h"

#include <algorithm>

#include "common/deadline.h"
#include "common/log.h"

namespace zc::gpu {
namespace {

constexpr size_t kWordsPerPage = 1024;  // one 4 KiB page of completion words

// True when the stream has passed `word >= number` (CUDA's cyclic >=).
bool Reached(const std::atomic<uint32_t>* word, uint32_t number) {
  return static_cast<int32_t>(word->load(std::memory_order_acquire) - number) >= 0;
}

// The fallback gate (no stream memory operations): a host function that
// waits for the word, never past the deadline.
struct HostGateArg {
  std::atomic<uint32_t>* word;
  uint32_t number;
  double timeout_s;
};

void HostGate(void* p) {
  std::unique_ptr<HostGateArg> a(static_cast<HostGateArg*>(p));
  Deadline deadline(a->timeout_s);
  Backoff backoff;
  while (!Reached(a->word, a->number) && !deadline.expired()) backoff.Pause();
}

// A context for enqueuing on the stream when no buffer names a device:
// the current one, else device 0's primary context.
Status CurrentDevice(const DriverTable* drv, int* device) {
  *device = 0;
  CuContext ctx = nullptr;
  if (drv->CtxGetCurrent != nullptr && drv->CtxGetCurrent(&ctx) == cu::kSuccess && ctx != nullptr) {
    CuDevice d = 0;
    if (drv->CtxGetDevice != nullptr && drv->CtxGetDevice(&d) == cu::kSuccess) *device = d;
    return Status::Ok();
  }
  return EnsureContext(drv, 0);
}

}  // namespace

struct StreamOrdered::SlotPage {
  void* host = nullptr;
  CuDevicePtr dev = 0;
  std::atomic<uint32_t>* words() { return static_cast<std::atomic<uint32_t>*>(host); }
};

StreamOrdered::StreamOrdered(const DriverTable* drv, PointerCache* cache, PinnedPool* pool, double timeout_s)
    : drv_(drv), cache_(cache), pool_(pool), timeout_s_(timeout_s) {}

StreamOrdered::~StreamOrdered() {
  Close();
  if (leak_pages_ || drv_->MemFreeHost == nullptr) return;
  for (auto& p : pages_) drv_->MemFreeHost(p->host);
}

Status StreamOrdered::TakeSlot(StreamOp::Part* part) {
  if (free_slots_.empty()) {
    auto page = std::make_unique<SlotPage>();
    if (drv_->MemHostAlloc == nullptr) return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver lacks cuMemHostAlloc");
    CuResult r = drv_->MemHostAlloc(&page->host, kWordsPerPage * sizeof(uint32_t),
                                    cu::kMemHostAllocPortable | cu::kMemHostAllocDeviceMap);
    if (r != cu::kSuccess) return Status(ZC_ERR_NO_MEMORY, "completion words: cuMemHostAlloc: " + CuErrorText(drv_, r));
    for (size_t i = 0; i < kWordsPerPage; ++i) new (&page->words()[i]) std::atomic<uint32_t>(0);
    if (waits_on_value()) {
      if (drv_->MemHostGetDevicePointer == nullptr)
        return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver lacks cuMemHostGetDevicePointer");
      ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->MemHostGetDevicePointer(&page->dev, page->host, 0),
                                 "completion words: cuMemHostGetDevicePointer"));
    }
    const size_t first = pages_.size() * kWordsPerPage;
    pages_.push_back(std::move(page));
    for (size_t i = kWordsPerPage; i-- > 0;) free_slots_.push_back(first + i);
  }
  part->slot = free_slots_.back();
  free_slots_.pop_back();
  part->word = &pages_[part->slot / kWordsPerPage]->words()[part->slot % kWordsPerPage];
  if (++next_number_ == 0) ++next_number_;  // 0 is every word's first value
  part->number = next_number_;
  return Status::Ok();
}

Status StreamOrdered::EnqueueGate(CuStream stream, StreamOp::Part* part) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ZC_RETURN_IF_ERROR(TakeSlot(part));
  }
  if (waits_on_value()) {
    CuDevicePtr addr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      addr = pages_[part->slot / kWordsPerPage]->dev + (part->slot % kWordsPerPage) * sizeof(uint32_t);
    }
    ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->StreamWaitValue32(stream, addr, part->number, cu::kStreamWaitValueGeq),
                               "cuStreamWaitValue32"));
    part->gated = true;
    return Status::Ok();
  }
  if (drv_->LaunchHostFunc == nullptr)
    return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver has neither cuStreamWaitValue32 nor cuLaunchHostFunc");
  auto* arg = new HostGateArg{part->word, part->number, timeout_s_};
  CuResult r = drv_->LaunchHostFunc(stream, &HostGate, arg);
  if (r != cu::kSuccess) delete arg;
  ZC_RETURN_IF_ERROR(CuCheck(drv_, r, "cuLaunchHostFunc"));
  part->gated = true;
  return Status::Ok();
}

// Every part's input copies and ready event, then every part's gate and
// output copies, then `done`.
Status StreamOrdered::Enqueue(StreamOp* op, bool gate) {
  for (StreamOp::Part& p : op->parts) {
    ZC_RETURN_IF_ERROR(op->staging.CopyInOnStream(op->stream, p.offset, p.bytes));
    ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->EventCreate(&p.ready, cu::kEventDisableTiming), "cuEventCreate"));
    ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->EventRecord(p.ready, op->stream), "cuEventRecord"));
  }
  if (gate) {
    for (StreamOp::Part& p : op->parts) {
      ZC_RETURN_IF_ERROR(EnqueueGate(op->stream, &p));
      ZC_RETURN_IF_ERROR(op->staging.CopyOutOnStream(op->stream, p.offset, p.bytes));
    }
  }
  ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->EventCreate(&op->done, cu::kEventDisableTiming), "cuEventCreate"));
  return CuCheck(drv_, drv_->EventRecord(op->done, op->stream), "cuEventRecord");
}

Status StreamOrdered::Begin(CuStream stream, const StageArg* args, size_t n, bool gate, size_t chunk_bytes,
                            void** host, std::shared_ptr<StreamOp>* out) {
  Reap();
  if (drv_->EventCreate == nullptr || drv_->EventRecord == nullptr || drv_->EventQuery == nullptr ||
      drv_->EventDestroy == nullptr)
    return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver lacks the event functions");
  auto op = std::make_shared<StreamOp>(drv_, cache_, pool_);
  op->stream = stream;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total = std::max(total, args[i].bytes);
  const size_t chunk = chunk_bytes > 0 && chunk_bytes < total ? chunk_bytes : std::max<size_t>(total, 1);
  for (size_t off = 0; off < std::max<size_t>(total, 1); off += chunk) {
    StreamOp::Part p;
    p.offset = off;
    p.bytes = std::min(chunk, total - std::min(total, off));
    op->parts.push_back(p);
  }
  Status st = op->staging.PlanOnStream(args, n, host);
  if (st.ok()) {
    if (op->staging.active()) op->device = std::max(op->staging.device(), 0);
    else st = CurrentDevice(drv_, &op->device);
  }
  if (st.ok()) st = Enqueue(op.get(), gate);
  if (!st.ok()) {
    Abandon(op);
    return st;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.push_back(op);
  }
  *out = std::move(op);
  return Status::Ok();
}

// Begin failed: opens the gates already on the stream, and keeps the pinned
// copies until the stream is past them (copies may be queued on them).
void StreamOrdered::Abandon(const std::shared_ptr<StreamOp>& op) {
  for (StreamOp::Part& p : op->parts) {
    if (p.gated) p.word->store(p.number, std::memory_order_release);
    p.completed = true;
  }
  op->completed.store(true, std::memory_order_release);
  if (op->done == nullptr && drv_->EventCreate(&op->done, cu::kEventDisableTiming) != cu::kSuccess) {
    op->done = nullptr;
  }
  if (op->done != nullptr && drv_->EventRecord(op->done, op->stream) == cu::kSuccess) {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.push_back(op);
    return;
  }
  // No way to know when the stream is past the copies: never give the
  // pinned memory back (a rare error path, logged).
  ZC_WARN(kGpu, "a stream-ordered call failed and its pinned copies are not reused");
  new std::shared_ptr<StreamOp>(op);
}

Status StreamOrdered::WaitReady(StreamOp* op, size_t part) {
  Deadline deadline(timeout_s_);
  Backoff backoff;
  for (;;) {
    bool ready = false;
    ZC_RETURN_IF_ERROR(PollReady(op, part, &ready));
    if (ready) return Status::Ok();
    if (deadline.expired())
      return Error(ZC_ERR_TIMEOUT,
                   "the stream did not reach the call in %.0f s (the work queued on it before the call has "
                   "not finished)",
                   deadline.elapsed_s());
    backoff.Pause();
  }
}

Status StreamOrdered::PollReady(StreamOp* op, size_t part, bool* ready) {
  *ready = false;
  ZC_RETURN_IF_ERROR(EnsureContext(drv_, op->device));
  const CuResult r = drv_->EventQuery(op->parts[part].ready);
  if (r == cu::kErrorNotReady) return Status::Ok();
  *ready = r == cu::kSuccess;
  return CuCheck(drv_, r, "cuEventQuery (the stream's work before the call)");
}

Status StreamOrdered::WaitDone(StreamOp* op) {
  Deadline deadline(timeout_s_);
  Backoff backoff;
  ZC_RETURN_IF_ERROR(EnsureContext(drv_, op->device));
  for (;;) {
    const CuResult r = drv_->EventQuery(op->done);
    if (r != cu::kErrorNotReady) return CuCheck(drv_, r, "cuEventQuery (the copies of the results to the device)");
    if (deadline.expired())
      return Error(ZC_ERR_TIMEOUT, "the copies of the results to the device did not finish in %.0f s",
                   deadline.elapsed_s());
    backoff.Pause();
  }
}

void StreamOrdered::Complete(StreamOp* op, size_t part, const Status& st) {
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (async_error_.ok()) async_error_ = st;
  }
  StreamOp::Part& p = op->parts[part];
  if (p.completed) return;
  p.completed = true;
  if (p.gated) p.word->store(p.number, std::memory_order_release);
  for (const StreamOp::Part& q : op->parts)
    if (!q.completed) return;
  op->completed.store(true, std::memory_order_release);
}

void StreamOrdered::CompleteRest(StreamOp* op, const Status& st) {
  for (size_t i = 0; i < op->parts.size(); ++i) Complete(op, i, st);
}

bool StreamOrdered::Finished(StreamOp* op) {
  if (!op->completed.load(std::memory_order_acquire)) return false;
  if (drv_->EventQuery(op->done) == cu::kErrorNotReady) return false;
  for (StreamOp::Part& p : op->parts) {
    if (p.ready != nullptr) drv_->EventDestroy(p.ready);
    p.ready = nullptr;
    if (p.word != nullptr) free_slots_.push_back(p.slot);
    p.word = nullptr;
  }
  drv_->EventDestroy(op->done);
  op->done = nullptr;
  return true;
}

void StreamOrdered::Reap() {
  std::vector<std::shared_ptr<StreamOp>> finished;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::stable_partition(inflight_.begin(), inflight_.end(),
                                  [this](const std::shared_ptr<StreamOp>& op) { return !Finished(op.get()); });
  finished.assign(std::make_move_iterator(it), std::make_move_iterator(inflight_.end()));
  inflight_.erase(it, inflight_.end());
}

void StreamOrdered::Close() {
  Deadline deadline(timeout_s_);
  Backoff backoff;
  for (;;) {
    Reap();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (inflight_.empty()) return;
      if (deadline.expired()) {
        ZC_WARN(kGpu, "%zu stream-ordered operations did not finish in %.0f s: their memory is not freed",
                inflight_.size(), deadline.elapsed_s());
        leak_pages_ = true;
        for (auto& op : inflight_) new std::shared_ptr<StreamOp>(op);
        inflight_.clear();
        return;
      }
    }
    backoff.Pause();
  }
}

Status StreamOrdered::async_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return async_error_;
}

}  // namespace zc::gpu
