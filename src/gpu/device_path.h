// DevicePath: what a communicator does with device memory. Every C ABI
// entry point that takes buffers hands them here: blocking collectives
// (the nonblocking ones run those on the communicator's worker thread),
// persistent plans, send/recv, the engine's operations (zc_engine_*) and
// the parameter server's declare, push and pull (zc_ps_*).
//  - Host memory passes through untouched.
//  - Device memory takes same-host CUDA IPC where it applies: allreduce
//    (ipc_allreduce.h), broadcast, allgather, reduce-scatter and alltoall
//    (ipc_collectives.h), sharing one IPC cache. Its memory path travels in the collective's
//    signature (collectives/signature.h, MemPath), so a rank that passed
//    device buffers and one that passed host buffers fail together with
//    ZC_ERR_MISMATCH instead of waiting on different channels.
//  - Otherwise device memory is staged through pinned host memory around
//    the host call (host_staging.h): inputs copied in before, outputs out
//    after (send/recv: at completion; plans: at zc_plan_wait). Allreduce,
//    broadcast and reduce larger than one part (ZC_GPU_CHUNK_BYTES) are
//    staged in pipelined parts instead (pipelined_staging.h), with memory
//    path kStagedParts in their signature.
// Builds without CUDA make it disabled: buffers pass through without even a
// pointer classification, and the C ABI's argument checks (api/checks.h)
// have already refused device memory.
//
// One per communicator. Collectives and plans use it under the
// communicator's collective lock; StageRequest is safe from any thread.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "collectives/signature.h"
#include "gpu/cuda_driver.h"
#include "gpu/host_staging.h"
#include "gpu/ipc_exchange.h"

namespace zc {
class Collectives;
}

namespace zc::gpu {

class IpcAllreduce;
class IpcCache;
class IpcCollectives;
struct DeviceReducer;
class PinnedPool;
class PipelinedStaging;
class PointerCache;
class StreamOrdered;

struct DevicePathOptions {
  // Stage and IPC device memory (CUDA builds); false: pass everything through.
  bool enabled = false;
  std::string ipc_mode = "auto";    // ZC_GPU_IPC: auto | 0 | 1
  size_t ipc_min_bytes = 4u << 20;  // ZC_GPU_IPC_MIN_BYTES (auto mode)
  // ZC_GPU_CHUNK_BYTES: staged allreduce, broadcast and reduce larger than
  // this are pipelined in parts of this size (pipelined_staging.h); 0: the
  // whole buffer at once.
  size_t chunk_bytes = 1u << 20;
  // More than one rank and every rank on this host: CUDA IPC can reach them.
  bool ipc_reachable = false;
  // Memory known to be host memory without asking the driver (the
  // communicator's pool, zc_mem_alloc). Empty: none.
  std::function<bool(const void* ptr, size_t bytes)> known_host;
  // The driver, pointer cache and pinned pool; nullptr: the process's own.
  // Tests pass fakes.
  const DriverTable* drv = nullptr;
  PointerCache* cache = nullptr;
  PinnedPool* pool = nullptr;
  // The CUDA IPC collectives' GPU reductions; nullptr: the kernels (tests
  // pass fake kernels that run on the fake driver's streams).
  const DeviceReducer* reducer = nullptr;
  // Deadline of the stream-ordered calls' waits (ZC_TIMEOUT).
  double timeout_s = 300.0;
};

class DevicePath {
 public:
  explicit DevicePath(const DevicePathOptions& opts);
  ~DevicePath();
  DevicePath(const DevicePath&) = delete;
  DevicePath& operator=(const DevicePath&) = delete;

  // Runs the host call fn(host), where host[i] stands for bufs[i]: the
  // buffer itself, or its pinned copy when it is device memory.
  template <size_t N, typename Fn>
  Status Run(const StageArg (&bufs)[N], Fn&& fn) {
    if (PassThrough(bufs, N)) {
      void* host[N];
      for (size_t i = 0; i < N; ++i) host[i] = const_cast<void*>(bufs[i].ptr);
      return fn(host);
    }
    return RunStaged(bufs, std::forward<Fn>(fn));
  }

  // Allreduce on c: over CUDA IPC when it applies (*used_ipc set), else the
  // host allreduce on the buffers or their pinned copies.
  Status Allreduce(Collectives* c, const void* send, void* recv, size_t count, zc_dtype dtype,
                   zc_op op, bool* used_ipc);

  // Broadcast, allgather, reduce-scatter and alltoall on c: over CUDA IPC
  // when it applies (*used_ipc set), else the host collective on the
  // buffers or their pinned copies.
  Status Broadcast(Collectives* c, void* buf, size_t count, zc_dtype dtype, int root, bool* used_ipc);
  // Reduce on c: the host reduce on the buffers or their pinned copies
  // (in pipelined parts above one part).
  Status Reduce(Collectives* c, const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op,
                int root);
  Status Allgather(Collectives* c, const void* send, void* recv, size_t sendcount, zc_dtype dtype,
                   bool* used_ipc);
  Status ReduceScatter(Collectives* c, const void* send, void* recv, size_t recvcount, zc_dtype dtype,
                       zc_op op, bool* used_ipc);
  // Allgather into one buffer per rank (recvs[k]: rank k's block): the
  // host collective on the buffers or their pinned copies, never CUDA IPC.
  Status AllgatherList(Collectives* c, const void* send, void* const* recvs, size_t sendcount,
                       zc_dtype dtype);
  Status Alltoall(Collectives* c, const void* send, void* recv, size_t count, zc_dtype dtype,
                  bool* used_ipc);

  // A point-to-point request's buffer: *host is what p2p moves; *finish is
  // empty for host memory, else it completes the staging (a receive's copy
  // to the device) and holds the pinned copy until it runs.
  Status StageRequest(void* buf, size_t bytes, bool send, void** host,
                      std::function<Status()>* finish);

  // The buffers of a call that completes later (a persistent plan's start,
  // an engine operation, a parameter-server push or pull): host[i] is what
  // the host side runs on for args[i]; *staging holds the pinned copies of
  // device buffers (null when every buffer is host memory) until the
  // operation is done and its CopyOut has run.
  Status Stage(const StageArg* args, size_t n, void** host, std::unique_ptr<HostStaging>* staging);
  // A persistent plan's start: Stage() of its send and receive buffers.
  Status StagePlan(const void* send, void* recv, size_t bytes,
                   std::unique_ptr<HostStaging>* staging, const void** hsend, void** hrecv);

  // What it was made with: the communicators split or duplicated from this
  // one take the same driver, caches and modes.
  const DevicePathOptions& options() const { return opts_; }

  // The stream-ordered calls' state (stream_ordered.h), made on first use.
  // ZC_ERR_UNSUPPORTED when disabled (a build without CUDA) or when no CUDA
  // driver is loaded in the process (no stream can exist then).
  Status OnStream(StreamOrdered** out);
  // True when no CUDA stream can exist in this process (disabled, or no
  // driver loaded): a stream-ordered call on stream NULL has nothing to
  // wait for.
  bool NoStreams() const {
    if (!opts_.enabled) return true;
    const DriverTable* drv = opts_.drv ? opts_.drv : LoadedDriver();
    return drv == nullptr || !drv->loaded;
  }
  // The first failure of a stream-ordered call (ok if none).
  Status StreamAsyncError() const;

  // Closes the mappings of peers' buffers and waits (deadline) until the
  // streams are past the stream-ordered calls (zc_finalize).
  void Close();

 private:
  // True when this collective (kind, `bytes` in all: the same on every
  // rank) takes CUDA IPC; *device: the buffers' device.
  bool UseIpc(Collectives* c, coll::Kind kind, const StageArg* bufs, size_t n, size_t bytes, zc_op op,
              int* device);
  // The pipeline part of an elementwise call of `bytes` (a whole number
  // of elements of dtype) on bufs, or 0 when it is not pipelined: one part
  // or less, ZC_GPU_CHUNK_BYTES=0, a driver without what the pipeline
  // needs, or no buffer to stage (host memory runs the host call whole).
  // Decided from the count and the rank's own buffers: a rank with host
  // buffers and one with device buffers differ above one part, which the
  // exchange's memory path turns into ZC_ERR_MISMATCH.
  size_t PartBytes(const StageArg* bufs, size_t n, size_t bytes, zc_dtype dtype) const;
  // The staged call in parts (made on first use).
  PipelinedStaging* Pipeline();
  // The host group of one CUDA IPC call: its first exchange travels as
  // the caller's collective (kind, count, dtype, op, root).
  HostGroup IpcGroup(Collectives* c, coll::Kind kind, size_t count, zc_dtype dtype, zc_op op, int root);

  // Nothing of this call can be device memory: disabled, every buffer
  // known host memory (pool memory, or empty), or no CUDA driver loaded in
  // the process (no device pointer exists before libcuda does). One
  // loaded-driver check per call instead of one pointer classification per
  // buffer: the small-message path of a CUDA build pays no more.
  bool PassThrough(const StageArg* bufs, size_t n) const {
    if (!opts_.enabled) return true;
    bool all_known = true;
    for (size_t i = 0; i < n && all_known; ++i)
      all_known = bufs[i].bytes == 0 || (opts_.known_host && opts_.known_host(bufs[i].ptr, bufs[i].bytes));
    if (all_known) return true;
    return opts_.drv ? !opts_.drv->loaded : LoadedDriver() == nullptr;
  }

  // Run() once PassThrough() has said no: each device buffer staged.
  template <size_t N, typename Fn>
  Status RunStaged(const StageArg (&bufs)[N], Fn&& fn) {
    void* host[N];
    return RunStaged(bufs, N, host, std::forward<Fn>(fn));
  }
  // The same for n buffers; host has room for n pointers.
  template <typename Fn>
  Status RunStaged(const StageArg* bufs, size_t n, void** host, Fn&& fn) {
    HostStaging staging(opts_.drv, opts_.cache, opts_.pool);
    ZC_RETURN_IF_ERROR(staging.Stage(bufs, n, host));
    Status st = fn(host);
    if (st.ok() && staging.active()) st = staging.CopyOut();
    return st;
  }

  DevicePathOptions opts_;
  // Made on first use; ipc_cache_ is shared by both (a peer's allocation
  // may be opened once per process).
  std::unique_ptr<IpcCache> ipc_cache_;
  std::unique_ptr<IpcAllreduce> ipc_;
  std::unique_ptr<IpcCollectives> ipc_coll_;
  std::unique_ptr<PipelinedStaging> pipe_;  // made on first use
  mutable std::mutex stream_mu_;
  std::unique_ptr<StreamOrdered> stream_;  // made on first use (stream_mu_)
};

}  // namespace zc::gpu
