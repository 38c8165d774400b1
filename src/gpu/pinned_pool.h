// PinnedPool: page-locked host memory for staging device buffers through the
// host collectives. Pinning costs far more than a copy (cuMemHostAlloc maps
// and locks every page), so buffers are kept and reused; copies between
// device and pinned memory run at full PCIe/NVLink-C2C speed, unlike copies
// to pageable memory, which the driver bounces through its own buffer.
//
// Sizes are rounded up to a power of two (at least 1 MiB) so that a few
// buffers serve every message size. At most kMaxCachedBytes stay cached;
// beyond that a released buffer is freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/status.h"
#include "gpu/cuda_driver.h"

namespace zc::gpu {

class PinnedPool {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;

  // drv == nullptr: the process driver (which must be loaded: device memory
  // exists only then). Tests pass a table of fakes.
  explicit PinnedPool(const DriverTable* drv) : fixed_driver_(drv) {}
  // Frees the cached buffers. (Global() is never destroyed: at process exit
  // the CUDA driver may already be gone.)
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // The process-wide pool (never destroyed).
  static PinnedPool& Global();

  // A pinned buffer of at least bytes (> 0); *cap is its real size, to hand
  // back with Release. A CUDA context must be current on this thread.
  // ZC_ERR_NO_MEMORY when the driver cannot pin that much.
  Status Acquire(size_t bytes, void** out, size_t* cap);
  void Release(void* p, size_t cap);

  struct Stats {
    uint64_t allocs = 0, reuses = 0, frees = 0, cached_bytes = 0;
  };
  Stats stats() const;

 private:
  const DriverTable* driver() const;

  const DriverTable* fixed_driver_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // capacity -> buffer
  Stats stats_;
};

}  // namespace zc::gpu
