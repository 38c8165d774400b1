// CUDA driver API, loaded lazily with dlopen("libcuda.so.1").
//
// Why not link libcuda: a CPU-only user must pay nothing (no library load,
// no cuInit), and a build without the CUDA toolkit must still recognise a
// device pointer handed to it. So this file declares the few driver types it
// needs itself (values from cuda.h, stable ABI) and never includes cuda.h.
//
// Two ways in:
//  - LoadedDriver(): the driver only if some code in this process already
//    loaded libcuda (the application, a framework, or us). If libcuda is not
//    in the process, no CUDA memory can exist, so callers classify every
//    pointer as host without loading anything.
//  - LoadDriver(): dlopen it now (IPC import, tests, benchmarks).
// Neither calls cuInit; EnsureContext() does, for code that needs a context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

struct CUctx_st;     // same incomplete types as cuda.h, so values interoperate
struct CUstream_st;
struct CUevent_st;

namespace zc::gpu {

using CuResult = int;
using CuDevice = int;
using CuDevicePtr = unsigned long long;
using CuContext = CUctx_st*;
using CuStream = CUstream_st*;
using CuEvent = CUevent_st*;
using CuHostFn = void (*)(void* user_data);  // CUhostFn
struct CuIpcMemHandle {
  char reserved[64];  // CU_IPC_HANDLE_SIZE
};

namespace cu {
// CUresult values zcomm looks at.
constexpr CuResult kSuccess = 0;
constexpr CuResult kErrorInvalidValue = 1;
constexpr CuResult kErrorNotInitialized = 3;
constexpr CuResult kErrorDeinitialized = 4;
constexpr CuResult kErrorNoDevice = 100;
constexpr CuResult kErrorInvalidContext = 201;
constexpr CuResult kErrorAlreadyMapped = 208;
constexpr CuResult kErrorNotReady = 600;
// CUpointer_attribute
constexpr int kPointerAttrContext = 1;
constexpr int kPointerAttrMemoryType = 2;
constexpr int kPointerAttrBufferId = 7;
constexpr int kPointerAttrIsManaged = 8;
constexpr int kPointerAttrDeviceOrdinal = 9;
constexpr int kPointerAttrRangeStartAddr = 11;
constexpr int kPointerAttrRangeSize = 12;
// CUmemorytype
constexpr unsigned kMemoryTypeHost = 1;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr unsigned kMemoryTypeArray = 3;
constexpr unsigned kMemoryTypeUnified = 4;
// Flags
constexpr unsigned kIpcMemLazyEnablePeerAccess = 1;
constexpr unsigned kMemAttachGlobal = 1;
constexpr unsigned kMemHostAllocPortable = 1;  // pinned for every context
constexpr unsigned kMemHostAllocDeviceMap = 2;  // mapped into the device's address space
constexpr unsigned kStreamNonBlocking = 1;      // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;     // CU_EVENT_DISABLE_TIMING
constexpr unsigned kStreamWaitValueGeq = 0;     // CU_STREAM_WAIT_VALUE_GEQ (cyclic >=)
}  // namespace cu

// The driver entry points zcomm uses. Members are null where the driver
// lacks the symbol. Tests build a table of fakes; `loaded` false means "no
// driver in this process".
struct DriverTable {
  bool loaded = false;
  int version = 0;        // cuDriverGetVersion, e.g. 12040
  std::string error;      // why loading failed, when !loaded

  CuResult (*Init)(unsigned flags) = nullptr;
  CuResult (*DriverGetVersion)(int* version) = nullptr;
  CuResult (*GetErrorName)(CuResult, const char** name) = nullptr;
  CuResult (*GetErrorString)(CuResult, const char** text) = nullptr;
  CuResult (*DeviceGet)(CuDevice* dev, int ordinal) = nullptr;
  CuResult (*DeviceGetCount)(int* count) = nullptr;
  CuResult (*DevicePrimaryCtxRetain)(CuContext* ctx, CuDevice dev) = nullptr;
  CuResult (*DevicePrimaryCtxRelease)(CuDevice dev) = nullptr;
  CuResult (*CtxGetCurrent)(CuContext* ctx) = nullptr;
  CuResult (*CtxSetCurrent)(CuContext ctx) = nullptr;
  CuResult (*CtxGetDevice)(CuDevice* dev) = nullptr;
  CuResult (*CtxSynchronize)() = nullptr;
  CuResult (*PointerGetAttribute)(void* data, int attr, CuDevicePtr p) = nullptr;
  CuResult (*PointerGetAttributes)(unsigned n, int* attrs, void** data,
                                   CuDevicePtr p) = nullptr;
  CuResult (*MemGetAddressRange)(CuDevicePtr* base, size_t* size,
                                 CuDevicePtr p) = nullptr;
  CuResult (*IpcGetMemHandle)(CuIpcMemHandle* handle, CuDevicePtr p) = nullptr;
  CuResult (*IpcOpenMemHandle)(CuDevicePtr* p, CuIpcMemHandle handle,
                               unsigned flags) = nullptr;
  CuResult (*IpcCloseMemHandle)(CuDevicePtr p) = nullptr;
  CuResult (*MemAlloc)(CuDevicePtr* p, size_t bytes) = nullptr;
  CuResult (*MemFree)(CuDevicePtr p) = nullptr;
  CuResult (*MemAllocManaged)(CuDevicePtr* p, size_t bytes,
                              unsigned flags) = nullptr;
  CuResult (*MemAllocHost)(void** p, size_t bytes) = nullptr;
  CuResult (*MemFreeHost)(void* p) = nullptr;
  CuResult (*MemHostAlloc)(void** p, size_t bytes, unsigned flags) = nullptr;
  CuResult (*Memcpy)(CuDevicePtr dst, CuDevicePtr src, size_t bytes) = nullptr;
  CuResult (*MemcpyAsync)(CuDevicePtr dst, CuDevicePtr src, size_t bytes,
                          CuStream s) = nullptr;
  CuResult (*MemcpyHtoD)(CuDevicePtr dst, const void* src,
                         size_t bytes) = nullptr;
  CuResult (*MemcpyDtoH)(void* dst, CuDevicePtr src, size_t bytes) = nullptr;
  CuResult (*MemcpyDtoD)(CuDevicePtr dst, CuDevicePtr src,
                         size_t bytes) = nullptr;
  CuResult (*MemsetD8)(CuDevicePtr dst, unsigned char v, size_t n) = nullptr;
  CuResult (*StreamSynchronize)(CuStream s) = nullptr;
  // Streams and events: the stream-ordered calls (stream_ordered.h).
  CuResult (*StreamCreate)(CuStream* s, unsigned flags) = nullptr;
  CuResult (*StreamDestroy)(CuStream s) = nullptr;
  CuResult (*StreamQuery)(CuStream s) = nullptr;
  CuResult (*StreamWaitEvent)(CuStream s, CuEvent e, unsigned flags) = nullptr;
  CuResult (*StreamWaitValue32)(CuStream s, CuDevicePtr addr, uint32_t value,
                                unsigned flags) = nullptr;
  CuResult (*LaunchHostFunc)(CuStream s, CuHostFn fn, void* user_data) = nullptr;
  CuResult (*EventCreate)(CuEvent* e, unsigned flags) = nullptr;
  CuResult (*EventDestroy)(CuEvent e) = nullptr;
  CuResult (*EventRecord)(CuEvent e, CuStream s) = nullptr;
  CuResult (*EventQuery)(CuEvent e) = nullptr;
  CuResult (*EventSynchronize)(CuEvent e) = nullptr;
  CuResult (*MemcpyHtoDAsync)(CuDevicePtr dst, const void* src, size_t bytes,
                              CuStream s) = nullptr;
  CuResult (*MemcpyDtoHAsync)(void* dst, CuDevicePtr src, size_t bytes,
                              CuStream s) = nullptr;
  CuResult (*MemHostGetDevicePointer)(CuDevicePtr* d, void* p,
                                      unsigned flags) = nullptr;
};

// The process driver if libcuda.so.1 is already loaded in this process,
// else nullptr. Cheap: one atomic load once found; while libcuda is absent,
// one dl_iterate_phdr callback per call (a full scan of the loaded objects
// only after a new library was loaded).
const DriverTable* LoadedDriver();

// Loads libcuda.so.1 if needed. ZC_ERR_UNSUPPORTED "no CUDA driver: ..."
// when it cannot be loaded or lacks a required symbol.
Status LoadDriver(const DriverTable** out);

// "CUDA_ERROR_INVALID_VALUE (invalid argument)" for r, using the table's
// cuGetErrorName/String where present.
std::string CuErrorText(const DriverTable* drv, CuResult r);

// OK for kSuccess; else ZC_ERR_SYSTEM "<what>: <CuErrorText>", origin kCuda, r.
Status CuCheck(const DriverTable* drv, CuResult r, const char* what);

// Makes a context of `device` current on the calling thread: keeps the
// current one if it is on that device, else retains and sets the device's
// primary context (the one the CUDA runtime uses). Calls cuInit.
Status EnsureContext(const DriverTable* drv, int device);

// Number of CUDA devices; 0 with a reason in *why when there is no driver or
// no device. Never fails.
int DeviceCount(std::string* why);

}  // namespace zc::gpu
