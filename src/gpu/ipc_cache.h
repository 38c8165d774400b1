// IpcCache: CUDA IPC handles for same-host GPU-to-GPU transfers, cached on
// both sides, because cuIpcGetMemHandle and cuIpcOpenMemHandle cost
// system calls and a handle may be opened only once per process.
//
// Exporter: Export(ptr) returns a descriptor of the allocation that contains
// ptr. The handle is cached by the allocation's buffer id and reused only
// after PointerCache::Validate() confirms the id (a freed and re-allocated
// range gets a new id, hence a new handle).
// Importer: Open(peer, desc) maps the peer's allocation once per
// (peer, exporter buffer id). A descriptor from the same peer with a new
// buffer id for an overlapping range means the peer freed the old one: the
// old mapping is closed first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "common/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/pointer_cache.h"

namespace zc::gpu {

// Sent to the peer once per allocation; plain bytes, same layout on both
// sides (same host).
struct IpcDescriptor {
  CuIpcMemHandle handle;
  uint64_t buffer_id;  // exporter's buffer id of the allocation
  uint64_t base;       // exporter's allocation base address
  uint64_t size;       // allocation size
  uint64_t offset;     // the exported pointer minus base
  int32_t device;      // exporter's device ordinal
  uint32_t reserved;
};
static_assert(sizeof(IpcDescriptor) == 104, "IpcDescriptor layout is ABI");

class IpcCache {
 public:
  // drv == nullptr: the process driver, loaded on first use. cache ==
  // nullptr: PointerCache::Global().
  IpcCache(const DriverTable* drv, PointerCache* cache);
  ~IpcCache();  // closes every mapping
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;

  // [ptr, ptr+bytes) must be device memory (not managed or host):
  // else ZC_ERR_UNSUPPORTED.
  Status Export(const void* ptr, size_t bytes, IpcDescriptor* out);

  // Maps the peer's allocation on local_device (made current on this thread
  // if it is not) and returns the address of desc.offset inside it.
  Status Open(int peer, const IpcDescriptor& desc, int local_device,
              void** mapped);

  // Closes the mappings of one peer (peer gone) or all of them.
  Status ClosePeer(int peer);
  Status CloseAll();

  struct Stats {
    uint64_t exports = 0, export_reuses = 0, opens = 0, open_reuses = 0,
             closes = 0;
  };
  Stats stats() const;

 private:
  struct Import {
    uint64_t base, size;   // exporter's range, to spot replaced allocations
    CuDevicePtr mapped;
  };
  using ImportKey = std::pair<int, uint64_t>;  // (peer, exporter buffer id)

  Status Driver(const DriverTable** drv);
  Status CloseLocked(const DriverTable* drv,
                     std::map<ImportKey, Import>::iterator it);

  const DriverTable* fixed_driver_;
  PointerCache* cache_;
  mutable std::mutex mu_;
  std::map<uint64_t, CuIpcMemHandle> exports_;   // key: local buffer id
  std::map<ImportKey, Import> imports_;
  Stats stats_;
};

}  // namespace zc::gpu
