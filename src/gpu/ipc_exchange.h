// The steps every same-host CUDA IPC collective shares (ipc_allreduce.h,
// ipc_collectives.h): the host group it synchronises through, the GPU
// reductions it runs, and the exchange that maps every peer's buffers.
//
// MapPeerBuffers, in order:
//  1. exports this rank's buffers (IpcCache: handles cached and validated
//     by buffer id), unless an earlier local step (context, synchronise,
//     snapshot) already failed;
//  2. exchanges the descriptors with each rank's status in one allgather
//     that travels as the caller's collective marked "device memory over
//     CUDA IPC" (HostGroup::exchange), so a rank that passed host buffers
//     meets it on the channel of its host collective and both fail with
//     ZC_ERR_MISMATCH; a rank that failed alone before this point fails
//     every rank here ("rank R could not prepare its buffers"), none waits
//     for a deadline;
//  3. maps every peer's buffers (cached: one open per peer allocation);
//  4. agrees (an allgather of status codes, also the barrier after which
//     every rank's inputs are complete and mapped).
// Synchronisation is host-side only: flags stay in host memory.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "common/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/ipc_cache.h"

namespace zc::gpu {

class PointerCache;

// What the algorithms need from the communicator: its rank and size, the
// call's first exchange (an allgather of `bytes` per rank carrying the
// caller's collective, Collectives::IpcExchange), an allgather of `bytes`
// per rank over host memory, and a barrier.
struct HostGroup {
  int rank = 0, size = 1;
  std::function<Status(const void* send, void* recv, size_t bytes)> exchange;
  std::function<Status(const void* send, void* recv, size_t bytes)> allgather;
  std::function<Status()> barrier;
};

// The GPU reductions the IPC collectives run: the kernels of
// reduce_kernels.h (KernelReducer) or, in tests, fake kernels on the fake
// driver's streams. stream: a CUstream as void*, nullptr = the NULL stream.
struct DeviceReducer {
  // c = op(a, b) over n elements (c may be a); asynchronous on the stream.
  std::function<Status(void* c, const void* a, const void* b, size_t n, zc_dtype dtype, zc_op op,
                       void* stream)>
      reduce;
  // a = a / divisor (the last step of ZC_AVG).
  std::function<Status(void* a, size_t n, zc_dtype dtype, double divisor, void* stream)> scale_div;
  // Waits for the stream; `what` names the step in the message.
  std::function<Status(void* stream, const char* what)> synchronize;
  // dst = src * factor with Horovod's numerics (ScaleCopy in
  // reduce_kernels.h): the engine's prescale and postscale of device
  // tensors. Empty: scaling device tensors is ZC_ERR_UNSUPPORTED.
  std::function<Status(void* dst, const void* src, size_t n, zc_dtype dtype, double factor, void* stream)> scale;
};
const DeviceReducer& KernelReducer();

// Whether a collective of `bytes` (the same on every rank) takes CUDA IPC.
// mode (ZC_GPU_IPC) "0": never; "1": always; "auto": from min_bytes
// (ZC_GPU_IPC_MIN_BYTES, default 4 MiB) up. Below that, host staging was
// faster on the only GPU measured (one H100 shared by all ranks, where
// every GPU step waits for a context switch between processes). Empty
// calls never do.
bool IpcWanted(size_t bytes, const std::string& mode, size_t min_bytes);

// A buffer of one call: {ptr, bytes}. Empty buffers are skipped.
struct IpcBuf {
  const void* ptr;
  size_t bytes;
};
// True when every non-empty buffer is device memory (not managed) of one
// device and at least one is; *device is its ordinal.
bool IpcEligible(PointerCache* cache, const IpcBuf* bufs, size_t n, int* device);

// Every rank agrees on st (an allgather of status codes, also a barrier):
// a failure on one rank fails the call on all of them, "CUDA IPC <what>
// failed on rank R (...)", instead of leaving peers with missing data.
Status IpcAgree(const HostGroup& g, const Status& st, const char* what);

// Where every rank's buffers are in this process after MapPeerBuffers.
class PeerBuffers {
 public:
  static constexpr int kMaxBufs = 2;
  // Buffer k (in the order passed) of rank r: its own for r == rank, else
  // the mapping of the peer's; nullptr when rank r passed none there.
  char* at(int k, int r) const { return at_[k][r]; }

 private:
  friend Status MapPeerBuffers(const HostGroup&, IpcCache*, int, const IpcBuf*, int,
                               const Status&, const char*, PeerBuffers*);
  std::vector<char*> at_[kMaxBufs];
};

// Steps 1-4 above for up to kMaxBufs buffers of this rank (ranks may pass
// different numbers, e.g. broadcast: the root one, the others none).
// `before`: the status of this rank's local steps so far (carried to every
// rank when it is a failure). `what` names the collective in messages.
Status MapPeerBuffers(const HostGroup& g, IpcCache* ipc, int device, const IpcBuf* mine, int n,
                      const Status& before, const char* what, PeerBuffers* out);

// Makes the device's context current and waits for the work already queued
// on it (the caller's writes of the inputs, any stream): what the blocking
// CUDA IPC calls do first. *drv: the driver (fixed, or the process's).
Status PrepareDevice(const DriverTable* fixed, int device, const char* what,
                     const DriverTable** drv);

}  // namespace zc::gpu
