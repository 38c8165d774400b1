// One rank's DevicePath over the stream-faithful fake CUDA driver
// (fake_cuda.h): the driver table (a test may patch entries to inject
// failures before the cache and pool see it), the pointer cache and pinned
// pool over it, and Install, which puts the DevicePath in place of the
// communicator's own. Each child keeps its rig (a static) until it exits:
// the communicator uses it up to zc_finalize.
#pragma once

#include <functional>
#include <memory>

#include "api/comm.h"
#include "fake_cuda.h"
#include "gpu/device_path.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "gpu_fake_driver.h"

namespace zc::gpu::testing {

struct FakeDeviceRig {
  DriverTable table;
  std::unique_ptr<PointerCache> cache;
  std::unique_ptr<PinnedPool> pool;

  explicit FakeDeviceRig(const std::function<void(DriverTable&)>& patch = {}) {
    FakeDriver::Get().Reset();
    table = *FakeCuda::Get().table();
    if (patch) patch(table);
    cache = std::make_unique<PointerCache>(&table);
    pool = std::make_unique<PinnedPool>(&table);
  }

  // What differs from test to test; the rest follows the communicator.
  struct Use {
    const char* ipc_mode = "0";             // ZC_GPU_IPC's value
    const DeviceReducer* reducer = nullptr;  // GPU reductions (fake kernels)
    bool config_chunks = false;              // parts of ZC_GPU_CHUNK_BYTES, not the default
  };

  void Install(zc_comm* comm, const Use& use) {
    DevicePathOptions o;
    o.enabled = true;
    o.ipc_mode = use.ipc_mode;
    o.ipc_reachable = comm->size > 1 && comm->local_size == comm->size;
    if (use.config_chunks) o.chunk_bytes = comm->config.gpu_chunk_bytes;
    o.drv = &table;
    o.cache = cache.get();
    o.pool = pool.get();
    o.reducer = use.reducer;
    o.timeout_s = comm->config.timeout_s;
    comm->gpu = std::make_unique<DevicePath>(o);
  }
};

}  // namespace zc::gpu::testing
