// A fake CUDA driver for CPU-side tests of the pointer and IPC caches: an
// allocation table behind cuPointerGetAttributes & co., with call counters.
// Addresses are made up (never dereferenced). One fake per process; tests
// call Reset() first.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "gpu/cuda_driver.h"

namespace zc::gpu::testing {

struct FakeAlloc {
  uintptr_t base;
  size_t size;
  unsigned mem_type;  // cu::kMemoryType*
  bool managed;
  int device;
  uint64_t buffer_id;
};

class FakeDriver {
 public:
  static FakeDriver& Get();

  // The table handed to PointerCache / IpcCache.
  const DriverTable* table() const { return &table_; }
  // A table that says "no driver".
  const DriverTable* absent() const { return &absent_; }
  // table() plus what staging needs besides copies: one fake context
  // (current_context(), cleared by Reset()) and pinned host memory from
  // operator new. Tests add their own cuMemcpy fakes.
  DriverTable StagingTable() const;
  CuContext current_context() const;

  void Reset();
  // Adds an allocation and returns its (new, unique) buffer id.
  uint64_t Alloc(uintptr_t base, size_t size, unsigned mem_type, bool managed,
                 int device);
  void Free(uintptr_t base);
  // The base an id was issued for (0: never issued). Kept across frees.
  uintptr_t BaseOf(uint64_t buffer_id) const;
  // Makes cuPointerGetAttributes fail with this result (0: succeed).
  void FailWith(CuResult r);

  uint64_t attr_calls() const;    // cuPointerGetAttributes + cuPointerGetAttribute
  uint64_t ipc_gets() const;
  uint64_t ipc_opens() const;
  uint64_t ipc_closes() const;
  size_t open_mappings() const;

 private:
  FakeDriver();
  static CuResult PointerGetAttributes(unsigned n, int* attrs, void** data,
                                       CuDevicePtr p);
  static CuResult PointerGetAttribute(void* data, int attr, CuDevicePtr p);
  static CuResult GetErrorName(CuResult r, const char** s);
  static CuResult GetErrorString(CuResult r, const char** s);
  static CuResult IpcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p);
  static CuResult IpcOpenMemHandle(CuDevicePtr* p, CuIpcMemHandle h,
                                   unsigned flags);
  static CuResult IpcCloseMemHandle(CuDevicePtr p);
  static CuResult Init(unsigned);
  static CuResult HostAlloc(void** p, size_t bytes, unsigned flags);
  static CuResult FreeHost(void* p);
  static CuResult CtxGetCurrent(CuContext* c);
  static CuResult CtxSetCurrent(CuContext c);
  static CuResult CtxGetDevice(CuDevice* d);
  static CuResult DeviceGet(CuDevice* d, int ordinal);
  static CuResult PrimaryCtxRetain(CuContext* c, CuDevice d);

  const FakeAlloc* FindLocked(uintptr_t p) const;

  DriverTable table_, absent_;
  mutable std::mutex mu_;
  std::map<uintptr_t, FakeAlloc> allocs_;
  std::map<CuDevicePtr, uint64_t> mappings_;  // mapped address -> buffer id
  std::map<uint64_t, uintptr_t> id_base_;  // buffer id -> base, forever
  uint64_t next_id_ = 1;
  CuDevicePtr next_map_ = 0x7e0000000000ull;
  CuResult fail_ = 0;
  CuContext ctx_ = nullptr;
  uint64_t attr_calls_ = 0, ipc_gets_ = 0, ipc_opens_ = 0, ipc_closes_ = 0;
};

}  // namespace zc::gpu::testing
