// libzcomm_cudahook.so: opt-in LD_PRELOAD shim that tells zcomm's pointer
// cache when the application frees CUDA memory (Awan et al. §V-B, the
// "interception" way of keeping the cache exact).
//
//   LD_PRELOAD=libzcomm_cudahook.so python train.py
//
// It wraps the free functions of the CUDA runtime and driver, calls the real
// one (next in symbol order), then reports the freed address through a
// callback that libzcomm registers when its pointer cache is created
// (zc_cudahook_set_free_callback). The shim does not link libzcomm, so
// preloading it costs nothing to a process that never loads zcomm, and it
// works when zcomm is loaded later with RTLD_LOCAL (Python).
//
// Limits: only calls that go through dynamic symbol lookup are seen (an
// application linked with the static CUDA runtime, or one that gets driver
// entry points through cuGetProcAddress, bypasses it). The cache stays safe
// without it: anything reused is validated by buffer id.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>

namespace {

using FreeCallback = void (*)(const void* ptr, size_t size);
std::atomic<FreeCallback> g_callback{nullptr};

void Report(const void* ptr, size_t size) {
  FreeCallback cb = g_callback.load(std::memory_order_acquire);
  if (cb != nullptr && ptr != nullptr) cb(ptr, size);
}

// The real function: next in lookup order, else from an already loaded
// libcuda / libcudart (when the application dlopen'ed them privately).
void* Real(const char* name, const char* lib) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (sym != nullptr) return sym;
  void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  sym = dlsym(h, name);
  dlclose(h);
  return sym;
}

template <class Fn>
Fn Lookup(std::atomic<void*>* slot, const char* name, const char* lib) {
  void* p = slot->load(std::memory_order_acquire);
  if (p == nullptr) {
    p = Real(name, lib);
    if (p != nullptr) slot->store(p, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(p);
}

constexpr const char* kCudart = "libcudart.so";
constexpr const char* kCuda = "libcuda.so.1";
constexpr int kCudaErrorUnknown = 999;           // cudaErrorUnknown
constexpr int kCuErrorNotInitialized = 3;        // CUDA_ERROR_NOT_INITIALIZED

using CuDevicePtr = unsigned long long;
using Stream = void*;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void zc_cudahook_set_free_callback(
    FreeCallback cb) {
  g_callback.store(cb, std::memory_order_release);
}

#define ZC_HOOK_SLOT(name) static std::atomic<void*> slot_##name{nullptr}

__attribute__((visibility("default"))) int cudaFree(void* p) {
  ZC_HOOK_SLOT(cudaFree);
  auto real = Lookup<int (*)(void*)>(&slot_cudaFree, "cudaFree", kCudart);
  const int r = real != nullptr ? real(p) : kCudaErrorUnknown;
  Report(p, 0);  // after the free: a racing re-insert would be the new one
  return r;
}

__attribute__((visibility("default"))) int cudaFreeAsync(void* p, Stream s) {
  ZC_HOOK_SLOT(cudaFreeAsync);
  auto real = Lookup<int (*)(void*, Stream)>(&slot_cudaFreeAsync,
                                             "cudaFreeAsync", kCudart);
  const int r = real != nullptr ? real(p, s) : kCudaErrorUnknown;
  Report(p, 0);
  return r;
}

__attribute__((visibility("default"))) int cudaFreeHost(void* p) {
  ZC_HOOK_SLOT(cudaFreeHost);
  auto real = Lookup<int (*)(void*)>(&slot_cudaFreeHost, "cudaFreeHost", kCudart);
  const int r = real != nullptr ? real(p) : kCudaErrorUnknown;
  Report(p, 0);
  return r;
}

__attribute__((visibility("default"))) int cudaHostUnregister(void* p) {
  ZC_HOOK_SLOT(cudaHostUnregister);
  auto real = Lookup<int (*)(void*)>(&slot_cudaHostUnregister,
                                     "cudaHostUnregister", kCudart);
  const int r = real != nullptr ? real(p) : kCudaErrorUnknown;
  Report(p, 0);
  return r;
}

__attribute__((visibility("default"))) int cuMemFree_v2(CuDevicePtr p) {
  ZC_HOOK_SLOT(cuMemFree_v2);
  auto real = Lookup<int (*)(CuDevicePtr)>(&slot_cuMemFree_v2, "cuMemFree_v2", kCuda);
  const int r = real != nullptr ? real(p) : kCuErrorNotInitialized;
  Report(reinterpret_cast<const void*>(p), 0);
  return r;
}

__attribute__((visibility("default"))) int cuMemFreeAsync(CuDevicePtr p, Stream s) {
  ZC_HOOK_SLOT(cuMemFreeAsync);
  auto real = Lookup<int (*)(CuDevicePtr, Stream)>(&slot_cuMemFreeAsync,
                                                   "cuMemFreeAsync", kCuda);
  const int r = real != nullptr ? real(p, s) : kCuErrorNotInitialized;
  Report(reinterpret_cast<const void*>(p), 0);
  return r;
}

__attribute__((visibility("default"))) int cuMemFreeHost(void* p) {
  ZC_HOOK_SLOT(cuMemFreeHost);
  auto real = Lookup<int (*)(void*)>(&slot_cuMemFreeHost, "cuMemFreeHost", kCuda);
  const int r = real != nullptr ? real(p) : kCuErrorNotInitialized;
  Report(p, 0);
  return r;
}

__attribute__((visibility("default"))) int cuMemHostUnregister(void* p) {
  ZC_HOOK_SLOT(cuMemHostUnregister);
  auto real = Lookup<int (*)(void*)>(&slot_cuMemHostUnregister,
                                     "cuMemHostUnregister", kCuda);
  const int r = real != nullptr ? real(p) : kCuErrorNotInitialized;
  Report(p, 0);
  return r;
}

// Virtual memory management (PyTorch expandable segments): a whole range.
__attribute__((visibility("default"))) int cuMemUnmap(CuDevicePtr p, size_t size) {
  ZC_HOOK_SLOT(cuMemUnmap);
  auto real = Lookup<int (*)(CuDevicePtr, size_t)>(&slot_cuMemUnmap, "cuMemUnmap", kCuda);
  const int r = real != nullptr ? real(p, size) : kCuErrorNotInitialized;
  Report(reinterpret_cast<const void*>(p), size);
  return r;
}

}  // extern "C"
