#include "gpu/cuda_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "gpu/load_watch.h"

namespace zc::gpu {
namespace {

constexpr const char* kLibName = "libcuda.so.1";

std::mutex g_mu;
DriverTable g_table;                       // filled once, then immutable
std::atomic<const DriverTable*> g_loaded{nullptr};
bool g_full_load_failed = false;           // guarded by g_mu
std::string g_full_load_error;             // guarded by g_mu

template <class Fn>
void Resolve(void* lib, Fn* slot, const char* name,
             const char* fallback = nullptr) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr && fallback != nullptr) sym = dlsym(lib, fallback);
  *slot = reinterpret_cast<Fn>(sym);
}

// Fills g_table from an open handle. Returns false (with g_table.error set)
// when a required symbol is missing. Caller holds g_mu.
bool FillTable(void* lib) {
  DriverTable& t = g_table;
  // Versioned names are the ones cuda.h maps the plain names to.
  Resolve(lib, &t.Init, "cuInit");
  Resolve(lib, &t.DriverGetVersion, "cuDriverGetVersion");
  Resolve(lib, &t.GetErrorName, "cuGetErrorName");
  Resolve(lib, &t.GetErrorString, "cuGetErrorString");
  Resolve(lib, &t.DeviceGet, "cuDeviceGet");
  Resolve(lib, &t.DeviceGetCount, "cuDeviceGetCount");
  Resolve(lib, &t.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  Resolve(lib, &t.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",
          "cuDevicePrimaryCtxRelease");
  Resolve(lib, &t.CtxGetCurrent, "cuCtxGetCurrent");
  Resolve(lib, &t.CtxSetCurrent, "cuCtxSetCurrent");
  Resolve(lib, &t.CtxGetDevice, "cuCtxGetDevice");
  Resolve(lib, &t.CtxSynchronize, "cuCtxSynchronize");
  Resolve(lib, &t.PointerGetAttribute, "cuPointerGetAttribute");
  Resolve(lib, &t.PointerGetAttributes, "cuPointerGetAttributes");
  Resolve(lib, &t.MemGetAddressRange, "cuMemGetAddressRange_v2");
  Resolve(lib, &t.IpcGetMemHandle, "cuIpcGetMemHandle");
  Resolve(lib, &t.IpcOpenMemHandle, "cuIpcOpenMemHandle_v2",
          "cuIpcOpenMemHandle");
  Resolve(lib, &t.IpcCloseMemHandle, "cuIpcCloseMemHandle");
  Resolve(lib, &t.MemAlloc, "cuMemAlloc_v2");
  Resolve(lib, &t.MemFree, "cuMemFree_v2");
  Resolve(lib, &t.MemAllocManaged, "cuMemAllocManaged");
  Resolve(lib, &t.MemAllocHost, "cuMemAllocHost_v2");
  Resolve(lib, &t.MemFreeHost, "cuMemFreeHost");
  Resolve(lib, &t.MemHostAlloc, "cuMemHostAlloc");
  Resolve(lib, &t.Memcpy, "cuMemcpy");
  Resolve(lib, &t.MemcpyAsync, "cuMemcpyAsync");
  Resolve(lib, &t.MemcpyHtoD, "cuMemcpyHtoD_v2");
  Resolve(lib, &t.MemcpyDtoH, "cuMemcpyDtoH_v2");
  Resolve(lib, &t.MemcpyDtoD, "cuMemcpyDtoD_v2");
  Resolve(lib, &t.MemsetD8, "cuMemsetD8_v2");
  Resolve(lib, &t.StreamSynchronize, "cuStreamSynchronize");
  // Plain (legacy default stream) names: zcomm passes explicit streams.
  Resolve(lib, &t.StreamCreate, "cuStreamCreate");
  Resolve(lib, &t.StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy");
  Resolve(lib, &t.StreamQuery, "cuStreamQuery");
  Resolve(lib, &t.StreamWaitEvent, "cuStreamWaitEvent");
  Resolve(lib, &t.StreamWaitValue32, "cuStreamWaitValue32_v2", "cuStreamWaitValue32");
  Resolve(lib, &t.LaunchHostFunc, "cuLaunchHostFunc");
  Resolve(lib, &t.EventCreate, "cuEventCreate");
  Resolve(lib, &t.EventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
  Resolve(lib, &t.EventRecord, "cuEventRecord");
  Resolve(lib, &t.EventQuery, "cuEventQuery");
  Resolve(lib, &t.EventSynchronize, "cuEventSynchronize");
  Resolve(lib, &t.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  Resolve(lib, &t.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  Resolve(lib, &t.MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");

  // Required for anything zcomm does; the rest is checked at use.
  const char* missing = nullptr;
  if (t.Init == nullptr) missing = "cuInit";
  else if (t.GetErrorName == nullptr) missing = "cuGetErrorName";
  else if (t.GetErrorString == nullptr) missing = "cuGetErrorString";
  else if (t.PointerGetAttributes == nullptr) missing = "cuPointerGetAttributes";
  else if (t.PointerGetAttribute == nullptr) missing = "cuPointerGetAttribute";
  if (missing != nullptr) {
    t.error = Format("no CUDA driver: %s lacks %s (driver too old)", kLibName,
                     missing);
    return false;
  }
  if (t.DriverGetVersion != nullptr) t.DriverGetVersion(&t.version);
  t.loaded = true;
  return true;
}

// Caller holds g_mu. lib is an open handle of libcuda.
const DriverTable* Publish(void* lib) {
  if (!FillTable(lib)) return nullptr;
  ZC_INFO(kGpu, "CUDA driver loaded (version %d)", g_table.version);
  g_loaded.store(&g_table, std::memory_order_release);
  return &g_table;
}

// Whether libcuda is among the loaded objects, asked on every collective
// on user memory. dlopen(RTLD_NOLOAD) cannot answer cheaply: glibc searches
// the library path on disk before it gives up (~0.5 ms). Each thread keeps
// a watch on the newest loaded object (load_watch.h): while nothing was
// loaded since its last "no", the answer costs two loads. A scan of the
// list runs again only after a load; where no watch can be held, the
// loader's load counter lets a repeated "no" cost one callback.
std::atomic<unsigned long long> g_adds_without_libcuda{~0ull};
thread_local NewestObjectWatch t_newest;

struct ScanState {
  bool may_stop_unchanged = false;  // stop when the counter says nothing was loaded
  bool first = true;
  bool unchanged = false;
  bool found = false;
  bool has_adds = false;
  unsigned long long adds = 0;
  char newest[512] = {};  // the last object's name (the list's newest); "" if longer
};

int ScanObject(struct dl_phdr_info* info, size_t size, void* data) {
  auto* s = static_cast<ScanState*>(data);
  if (s->first) {
    s->first = false;
    s->has_adds = LoaderAddsIn(info, size, &s->adds);
    if (s->has_adds) {
      if (s->may_stop_unchanged &&
          s->adds == g_adds_without_libcuda.load(std::memory_order_relaxed)) {
        s->unchanged = true;
        return 1;  // stop: nothing loaded since the last "no"
      }
    }
  }
  const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  // Copied: the name lives only as long as its object, which may be
  // unloaded once the loader's lock is dropped.
  const size_t len = std::strlen(name);
  if (len < sizeof(s->newest)) std::memcpy(s->newest, name, len + 1);
  else s->newest[0] = '\0';
  const char* slash = std::strrchr(name, '/');
  const char* base = slash != nullptr ? slash + 1 : name;
  if (std::strncmp(base, "libcuda.so", 10) == 0) {
    s->found = true;
    return 1;
  }
  return 0;
}

bool LibcudaInProcess() {
  NewestObjectWatch& watch = t_newest;
  if (watch.NothingLoadedSince()) return false;
  ScanState s;
  // A thread whose watch could not be held lives on the counter; one that
  // has none yet scans the whole list once to learn the newest object.
  s.may_stop_unchanged = watch.hold_failed();
  dl_iterate_phdr(&ScanObject, &s);
  if (s.found) return true;
  if (s.unchanged || !s.has_adds) return false;
  g_adds_without_libcuda.store(s.adds, std::memory_order_relaxed);
  watch.Hold(s.newest, s.adds);  // fails harmlessly if that object has gone
  return false;
}

}  // namespace

const DriverTable* LoadedDriver() {
  const DriverTable* t = g_loaded.load(std::memory_order_acquire);
  if (t != nullptr) return t;
  if (!LibcudaInProcess()) return nullptr;
  // Loaded: RTLD_NOLOAD now finds it by name without touching the disk.
  void* lib = dlopen(kLibName, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  t = g_loaded.load(std::memory_order_acquire);
  if (t != nullptr) {
    dlclose(lib);  // drop the extra reference; the table holds one
    return t;
  }
  t = Publish(lib);
  if (t == nullptr) dlclose(lib);
  return t;
}

Status LoadDriver(const DriverTable** out) {
  *out = nullptr;
  const DriverTable* t = g_loaded.load(std::memory_order_acquire);
  if (t != nullptr) {
    *out = t;
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(g_mu);
  t = g_loaded.load(std::memory_order_acquire);
  if (t != nullptr) {
    *out = t;
    return Status::Ok();
  }
  // A driver absent once stays absent: do not search the disk again.
  if (g_full_load_failed) {
    return Status(ZC_ERR_UNSUPPORTED, g_full_load_error);
  }
  void* lib = dlopen(kLibName, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    g_full_load_failed = true;
    g_full_load_error = Format("no CUDA driver: dlopen(%s): %s", kLibName,
                               why != nullptr ? why : "unknown error");
    return Status(ZC_ERR_UNSUPPORTED, g_full_load_error);
  }
  t = Publish(lib);
  if (t == nullptr) {
    g_full_load_failed = true;
    g_full_load_error = g_table.error;
    dlclose(lib);
    return Status(ZC_ERR_UNSUPPORTED, g_full_load_error);
  }
  *out = t;
  return Status::Ok();
}

std::string CuErrorText(const DriverTable* drv, CuResult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (drv != nullptr && drv->GetErrorName != nullptr) drv->GetErrorName(r, &name);
  if (drv != nullptr && drv->GetErrorString != nullptr) {
    drv->GetErrorString(r, &text);
  }
  if (name == nullptr) return Format("CUDA driver error %d", r);
  if (text == nullptr) return name;
  return Format("%s (%s)", name, text);
}

Status CuCheck(const DriverTable* drv, CuResult r, const char* what) {
  if (r == cu::kSuccess) return Status::Ok();
  return Status(ZC_ERR_SYSTEM, Format("%s: %s", what, CuErrorText(drv, r).c_str()),
                ErrorOrigin::kCuda, r);
}

Status EnsureContext(const DriverTable* drv, int device) {
  if (drv == nullptr || !drv->loaded) {
    return Error(ZC_ERR_UNSUPPORTED, "make CUDA device %d current: no CUDA driver",
                 device);
  }
  if (drv->CtxGetCurrent == nullptr || drv->CtxSetCurrent == nullptr ||
      drv->CtxGetDevice == nullptr || drv->DeviceGet == nullptr ||
      drv->DevicePrimaryCtxRetain == nullptr) {
    return Error(ZC_ERR_UNSUPPORTED,
                 "make CUDA device %d current: driver lacks context functions",
                 device);
  }
  ZC_RETURN_IF_ERROR(CuCheck(drv, drv->Init(0), "cuInit"));
  CuContext ctx = nullptr;
  ZC_RETURN_IF_ERROR(CuCheck(drv, drv->CtxGetCurrent(&ctx), "cuCtxGetCurrent"));
  if (ctx != nullptr) {
    CuDevice cur = -1;
    ZC_RETURN_IF_ERROR(CuCheck(drv, drv->CtxGetDevice(&cur), "cuCtxGetDevice"));
    if (cur == device) return Status::Ok();
  }
  CuDevice dev = 0;
  ZC_RETURN_IF_ERROR(CuCheck(drv, drv->DeviceGet(&dev, device),
                             Format("cuDeviceGet(%d)", device).c_str()));
  // The retained reference is kept for the life of the process on purpose:
  // releasing it could destroy a context that memory handles point into.
  CuContext primary = nullptr;
  ZC_RETURN_IF_ERROR(CuCheck(drv, drv->DevicePrimaryCtxRetain(&primary, dev),
                             Format("cuDevicePrimaryCtxRetain(%d)", device).c_str()));
  return CuCheck(drv, drv->CtxSetCurrent(primary), "cuCtxSetCurrent");
}

int DeviceCount(std::string* why) {
  const DriverTable* drv = nullptr;
  Status st = LoadDriver(&drv);
  if (!st.ok()) {
    if (why != nullptr) *why = st.message();
    return 0;
  }
  CuResult r = drv->Init(0);
  if (r != cu::kSuccess) {
    if (why != nullptr) *why = "cuInit: " + CuErrorText(drv, r);
    return 0;
  }
  int n = 0;
  if (drv->DeviceGetCount == nullptr) {
    if (why != nullptr) *why = "driver lacks cuDeviceGetCount";
    return 0;
  }
  r = drv->DeviceGetCount(&n);
  if (r != cu::kSuccess) {
    if (why != nullptr) *why = "cuDeviceGetCount: " + CuErrorText(drv, r);
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "the CUDA driver reports 0 devices";
  return n;
}

}  // namespace zc::gpu
