#include "engine/device_fusion.h"

#include <chrono>
#include <thread>

#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "common/deadline.h"
#include "common/log.h"
#include "gpu/device_path.h"
#include "gpu/ipc_exchange.h"

namespace zc::engine {

namespace {
constexpr size_t kMinBuffer = 64 << 10;

// The driver of the DevicePath (a test's fake) or the process's.
const gpu::DriverTable* DriverOf(gpu::DevicePath* path) {
  if (path == nullptr) return nullptr;
  const gpu::DriverTable* drv = path->options().drv ? path->options().drv : gpu::LoadedDriver();
  return drv != nullptr && drv->loaded ? drv : nullptr;
}

// What the device path calls; a driver without it (an old one, a test's
// minimal fake) leaves device tensors to the staging at submission.
bool HasStreams(const gpu::DriverTable* drv) {
  return drv->EventCreate && drv->EventRecord && drv->EventDestroy && drv->StreamCreate && drv->StreamQuery &&
         drv->StreamWaitEvent && drv->MemcpyAsync && drv->MemAlloc && drv->MemFree;
}
}  // namespace

DeviceFusion::DeviceFusion(gpu::DevicePath* path, double timeout_s) : path_(path), timeout_s_(timeout_s) {}

DeviceFusion::~DeviceFusion() { Release(); }

// Waits for what the stream still does with the buffer, then frees both.
// A destructor cannot report: a failure is logged.
void DeviceFusion::Release() {
  if (drv_ == nullptr || device_ < 0) return;
  if (Status st = gpu::EnsureContext(drv_, device_); !st.ok()) {
    ZC_WARN(kEngine, "engine: device fusion buffer not freed: %s", st.message().c_str());
    return;
  }
  if (stream_ != nullptr) {
    IgnoreError(Synchronize("engine shutdown"), "shutdown: best effort");
    if (drv_->StreamDestroy) drv_->StreamDestroy(stream_);
  }
  if (buf_ != 0) IgnoreError(gpu::CuCheck(drv_, drv_->MemFree(buf_), "cuMemFree"), "shutdown: best effort");
  stream_ = nullptr;
  buf_ = 0;
  bytes_ = 0;
  device_ = -1;
}

int DeviceFusion::DeviceOf(const void* input, const void* output, size_t bytes) const {
  if (path_ == nullptr || bytes == 0 || path_->NoStreams()) return -1;
  const gpu::DriverTable* drv = DriverOf(path_);
  if (drv == nullptr || !HasStreams(drv)) return -1;
  const gpu::IpcBuf bufs[2] = {{input, bytes}, {output, bytes}};
  int device = -1;
  return gpu::IpcEligible(path_->options().cache, bufs, 2, &device) ? device : -1;
}

Status DeviceFusion::RecordReady(int device, std::shared_ptr<void>* ready) {
  const gpu::DriverTable* drv = DriverOf(path_);
  if (drv == nullptr || !HasStreams(drv)) return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver lacks streams or events");
  // The submitting thread is the framework's: its current context is put
  // back if the tensor's device needed another.
  gpu::CuContext before = nullptr;
  ZC_RETURN_IF_ERROR(gpu::CuCheck(drv, drv->CtxGetCurrent(&before), "cuCtxGetCurrent"));
  Status st = gpu::EnsureContext(drv, device);
  gpu::CuEvent ev = nullptr;
  if (st.ok()) st = gpu::CuCheck(drv, drv->EventCreate(&ev, gpu::cu::kEventDisableTiming), "cuEventCreate");
  if (st.ok()) {
    std::shared_ptr<void> holder(ev, [drv](void* e) { drv->EventDestroy(static_cast<gpu::CuEvent>(e)); });
    st = gpu::CuCheck(drv, drv->EventRecord(ev, nullptr), "cuEventRecord on the legacy default stream");
    if (st.ok()) *ready = std::move(holder);
  }
  gpu::CuContext now = nullptr;
  if (before != nullptr && drv->CtxGetCurrent(&now) == gpu::cu::kSuccess && now != before)
    IgnoreError(gpu::CuCheck(drv, drv->CtxSetCurrent(before), "cuCtxSetCurrent"), "the caller's context back");
  return st;
}

Status DeviceFusion::Begin(int device) {
  if (device != device_) Release();
  drv_ = DriverOf(path_);
  if (drv_ == nullptr) return Error(ZC_ERR_UNSUPPORTED, "no CUDA driver in the process");
  if (!HasStreams(drv_)) return Error(ZC_ERR_UNSUPPORTED, "the CUDA driver lacks streams or events");
  ZC_RETURN_IF_ERROR(gpu::EnsureContext(drv_, device));
  device_ = device;
  if (stream_ == nullptr)
    ZC_RETURN_IF_ERROR(
        gpu::CuCheck(drv_, drv_->StreamCreate(&stream_, gpu::cu::kStreamNonBlocking), "cuStreamCreate"));
  return Status::Ok();
}

Status DeviceFusion::Reserve(size_t bytes, char** out) {
  if (bytes > bytes_) {
    size_t want = std::max(bytes_, kMinBuffer);
    while (want < bytes) want *= 2;
    if (buf_ != 0) {
      // The stream may still read the old buffer (the last unpacking).
      ZC_RETURN_IF_ERROR(Synchronize("before growing the device fusion buffer"));
      ZC_RETURN_IF_ERROR(gpu::CuCheck(drv_, drv_->MemFree(buf_), "cuMemFree of the device fusion buffer"));
    }
    buf_ = 0;
    bytes_ = 0;
    ZC_RETURN_IF_ERROR(gpu::CuCheck(drv_, drv_->MemAlloc(&buf_, want),
                                    Format("cuMemAlloc of a %zu-byte device fusion buffer", want).c_str()));
    bytes_ = want;
  }
  *out = reinterpret_cast<char*>(buf_);
  return Status::Ok();
}

Status DeviceFusion::WaitReady(const std::shared_ptr<void>& ready) {
  if (!ready) return Status::Ok();
  return gpu::CuCheck(drv_, drv_->StreamWaitEvent(stream_, static_cast<gpu::CuEvent>(ready.get()), 0),
                      "cuStreamWaitEvent for the tensor's ready event");
}

const gpu::DeviceReducer& DeviceFusion::reducer() const {
  const gpu::DeviceReducer* r = path_ ? path_->options().reducer : nullptr;
  return r ? *r : gpu::KernelReducer();
}

Status DeviceFusion::ScaledCopy(void* dst, const void* src, size_t count, zc_dtype dtype, double factor) {
  if (count == 0 || (dst == src && (factor == 1.0 || dtype == ZC_BOOL))) return Status::Ok();
  if (factor == 1.0 || dtype == ZC_BOOL)
    return gpu::CuCheck(drv_,
                        drv_->MemcpyAsync(reinterpret_cast<gpu::CuDevicePtr>(dst),
                                          reinterpret_cast<gpu::CuDevicePtr>(src), count * DtypeSize(dtype), stream_),
                        "cuMemcpyAsync device to device");
  const gpu::DeviceReducer& r = reducer();
  if (!r.scale) return Error(ZC_ERR_UNSUPPORTED, "no GPU scaling kernel for the scale factor %g", factor);
  return r.scale(dst, src, count, dtype, factor, stream_).with_context(Format("scale by %g on the GPU", factor));
}

// Polls instead of cuStreamSynchronize, which has no deadline.
Status DeviceFusion::Synchronize(const char* what) {
  const Deadline deadline(timeout_s_);
  for (int spins = 0;; ++spins) {
    const gpu::CuResult r = drv_->StreamQuery(stream_);
    if (r == gpu::cu::kSuccess) return Status::Ok();
    if (r != gpu::cu::kErrorNotReady) return gpu::CuCheck(drv_, r, Format("cuStreamQuery (%s)", what).c_str());
    if (deadline.expired())
      return Error(ZC_ERR_TIMEOUT, "the engine's CUDA stream did not finish in %.0f s (%s)", timeout_s_, what);
    if (spins < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status DeviceFusion::Allreduce(Collectives* coll, void* buf, size_t count, zc_dtype dtype, zc_op op, bool all_device,
                               const char** how) {
  *how = "staged";
  if (all_device) {
    bool used_ipc = false;
    Status st = path_->Allreduce(coll, buf, buf, count, dtype, op, &used_ipc);
    if (used_ipc) *how = "cuda_ipc";
    return st;
  }
  // Some rank passes host memory: CUDA IPC cannot meet it, so stage here.
  const gpu::StageArg arg[1] = {{buf, count * DtypeSize(dtype), true, true, "device fusion buffer"}};
  void* host = nullptr;
  std::unique_ptr<gpu::HostStaging> staging;
  ZC_RETURN_IF_ERROR(path_->Stage(arg, 1, &host, &staging));
  ZC_RETURN_IF_ERROR(coll->Allreduce(host, host, count, dtype, op));
  return staging ? staging->CopyOut() : Status::Ok();
}

}  // namespace zc::engine
