// DeviceFusion: the engine's allreduces of device tensors, run on the
// device as Horovod's GPU allreduce does (horovod/common/ops/
// gpu_operations.cc): the tensors of a set are packed with device-to-device
// copies on the engine's own CUDA stream into a device fusion buffer,
// scaled there by the prescale factor, reduced by one collective on that
// device buffer (the communicator's DevicePath: CUDA IPC or staging through
// pinned host memory), scaled by the postscale factor and unpacked with
// device copies. A single tensor skips the fusion buffer and is reduced in
// its output.
//
// Ordering (no host wait on the caller's side):
//  - at submission, on the caller's thread, an event is recorded on the
//    legacy default stream; the engine's stream waits for it before its
//    first copy of the tensor, so work that wrote the input before the
//    submission (on the legacy stream, or on a blocking stream) comes
//    first, as with the host staging's synchronous copies;
//  - before the collective, the engine waits for its stream (the
//    collective's copies and peers' reads come after the packing);
//  - after the unpacking, it waits again before the handles are done, so a
//    done handle's output is complete for any stream.
// Every wait polls with the engine's deadline (ZC_TIMEOUT).
//
// Engine thread only, except RecordReady (any submitting thread).
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "gpu/cuda_driver.h"

namespace zc {
class Collectives;
}
namespace zc::gpu {
class DevicePath;
struct DeviceReducer;
}  // namespace zc::gpu

namespace zc::engine {

class DeviceFusion {
 public:
  // path: the engine communicator's DevicePath (null: no device path, every
  // device tensor is staged at submission). timeout_s: every wait's deadline.
  DeviceFusion(gpu::DevicePath* path, double timeout_s);
  ~DeviceFusion();
  DeviceFusion(const DeviceFusion&) = delete;
  DeviceFusion& operator=(const DeviceFusion&) = delete;

  // The CUDA device whose memory holds every non-empty one of the buffers
  // (-1: host memory, a mix, managed memory, or no driver in the process:
  // those are staged at submission). Never loads a driver.
  int DeviceOf(const void* input, const void* output, size_t bytes) const;

  // An event recorded now on the legacy default stream of `device` (the
  // submitting thread), waited for by the engine's stream before it reads
  // the tensor. The event is destroyed with the returned holder.
  Status RecordReady(int device, std::shared_ptr<void>* ready);

  // Makes `device` current on the engine thread and its stream ready.
  Status Begin(int device);
  // At least `bytes` of device memory (powers of two from 64 KiB, kept
  // until the engine shuts down).
  Status Reserve(size_t bytes, char** out);
  // The engine's stream waits for a tensor's ready event.
  Status WaitReady(const std::shared_ptr<void>& ready);
  // dst = src * factor (factor 1: a copy; dst == src and factor 1: nothing),
  // asynchronous on the engine's stream.
  Status ScaledCopy(void* dst, const void* src, size_t count, zc_dtype dtype, double factor);
  // Waits for the engine's stream (deadline). `what` names the step.
  Status Synchronize(const char* what);
  // Allreduce in place of buf (device memory): through the DevicePath when
  // every rank passes device memory (CUDA IPC or staging, its choice);
  // otherwise staged through pinned host memory, so that ranks with host
  // tensors meet it in the host collective. *how: "cuda_ipc" or "staged".
  Status Allreduce(Collectives* coll, void* buf, size_t count, zc_dtype dtype, zc_op op, bool all_device,
                   const char** how);

 private:
  void Release();
  const gpu::DeviceReducer& reducer() const;

  gpu::DevicePath* path_;
  const gpu::DriverTable* drv_ = nullptr;  // fixed by the DevicePath, else the process's (at Begin)
  double timeout_s_;
  int device_ = -1;
  gpu::CuStream stream_ = nullptr;
  gpu::CuDevicePtr buf_ = 0;
  size_t bytes_ = 0;
};

}  // namespace zc::engine
