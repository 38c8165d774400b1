// HostStaging: how a CUDA build runs a host collective on device buffers.
// Each device (or managed) buffer of one call is replaced by a pinned host
// copy from PinnedPool: inputs are copied device-to-host before the call,
// outputs host-to-device after it. Host buffers pass through untouched, at
// the cost of one pointer classification each (no driver call while libcuda
// is not loaded or not initialised).
//
// Device buffers of one call that overlap (in place: sendbuf == recvbuf, or
// a block inside recvbuf) share one pinned copy at the same offsets, so the
// host collective sees exactly the aliasing the caller made.
//
// Synchronisation (as in CUDA-aware MPI): the copies are the driver's
// synchronous cuMemcpyDtoH/HtoD on the legacy default stream, so work the
// caller queued on blocking streams is finished before sendbuf is read, and
// recvbuf holds the result when the call returns. Work on non-blocking
// streams must be synchronised by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"

namespace zc::gpu {

struct StageArg {
  const void* ptr;
  size_t bytes;
  bool in;           // read by the collective: copied to the host first
  bool out;          // written by the collective: copied back after
  const char* name;  // "sendbuf", for messages
};

class HostStaging {
 public:
  // nullptr: the process driver, PointerCache::Global(), PinnedPool::Global().
  explicit HostStaging(const DriverTable* drv = nullptr, PointerCache* cache = nullptr,
                       PinnedPool* pool = nullptr);
  ~HostStaging();  // returns the pinned copies to the pool
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // host[i] is what the host collective gets for args[i]: args[i].ptr for
  // host memory, the pinned copy for device memory. Errors: a range that
  // runs past its CUDA allocation (ZC_ERR_INVALID_ARG), pinning
  // (ZC_ERR_NO_MEMORY), a failed copy (ZC_ERR_SYSTEM with the CUDA error).
  Status Stage(const StageArg* args, size_t n, void** host);

  // The same for a stream-ordered call, without copies: the pinned copies
  // are filled and emptied by CopyInOnStream / CopyOutOnStream.
  Status PlanOnStream(const StageArg* args, size_t n, void** host);
  // Enqueues on `stream` the copies of bytes [offset, offset + len) of
  // every staged input (device to host) or output (host to device),
  // counted from the start of each (clipped to its end). The pinned copies
  // must stay (this object alive) until the stream has run them.
  Status CopyInOnStream(CuStream stream, size_t offset = 0, size_t len = SIZE_MAX);
  Status CopyOutOnStream(CuStream stream, size_t offset = 0, size_t len = SIZE_MAX);

  // True when some buffer is device memory (the call is staged).
  bool active() const { return !items_.empty(); }
  // The device of the first staged buffer (-1: none).
  int device() const { return items_.empty() ? -1 : items_[0].device; }

  // Copies every staged output back to its device buffer.
  Status CopyOut();

 private:
  struct Item {
    uintptr_t lo, hi;  // device range [lo, hi), the union of overlapping args
    int device;
    bool in, out;
    const char* name;
    void* host = nullptr;
    size_t cap = 0;
  };

  const DriverTable* driver() const;
  // Stage()'s common part: classifies, merges, makes a context current,
  // takes the pinned copies and points host[] at them; *drv the driver.
  Status Plan(const StageArg* args, size_t n, void** host, const DriverTable** drv);
  Status CopyError(const DriverTable* drv, const Item& it, bool to_host, CuResult r) const;

  const DriverTable* fixed_driver_;
  PointerCache* cache_;
  PinnedPool* pool_;
  std::vector<Item> items_;
};

}  // namespace zc::gpu
