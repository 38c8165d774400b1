// The LD_PRELOAD shim libzcomm_cudahook.so: run with it preloaded (meson
// sets LD_PRELOAD), a free through the CUDA free functions must drop the
// pointer cache's entry. Runs without a GPU: the shim reports the free even
// when the real driver call fails.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "gpu/pointer_cache.h"

namespace zc::gpu {
namespace {

bool ShimLoaded() {
  return dlsym(RTLD_DEFAULT, "zc_cudahook_set_free_callback") != nullptr;
}

TEST(GpuCudaHook, ShimIsPreloaded) {
  ASSERT_TRUE(ShimLoaded()) << "run with LD_PRELOAD=libzcomm_cudahook.so";
}

TEST(GpuCudaHook, DriverFreeInvalidates) {
  if (!ShimLoaded()) GTEST_SKIP() << "shim not preloaded";
  PointerCache& cache = PointerCache::Global();  // registers with the shim
  const uintptr_t addr = 0x7d0000000000ull;      // made up, never touched
  cache.Declare(reinterpret_cast<const void*>(addr), 1 << 20, MemType::kDevice, 0);
  PointerInfo info;
  ASSERT_TRUE(cache.Lookup(reinterpret_cast<const void*>(addr), &info));
  using MemFreeFn = int (*)(unsigned long long);
  auto fn = reinterpret_cast<MemFreeFn>(dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
  ASSERT_NE(fn, nullptr);
  (void)fn(addr);  // fails in the real driver (or there is none): fine
  EXPECT_FALSE(cache.Lookup(reinterpret_cast<const void*>(addr), &info));
}

TEST(GpuCudaHook, RuntimeFreeAndUnmapInvalidate) {
  if (!ShimLoaded()) GTEST_SKIP() << "shim not preloaded";
  PointerCache& cache = PointerCache::Global();
  const uintptr_t a = 0x7d1000000000ull, b = 0x7d2000000000ull;
  cache.Declare(reinterpret_cast<const void*>(a), 4096, MemType::kDevice, 0);
  cache.Declare(reinterpret_cast<const void*>(b), 4096, MemType::kDevice, 0);
  cache.Declare(reinterpret_cast<const void*>(b + 8192), 4096, MemType::kDevice, 0);
  PointerInfo info;
  using FreeFn = int (*)(void*);
  auto cuda_free = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "cudaFree"));
  ASSERT_NE(cuda_free, nullptr);
  (void)cuda_free(reinterpret_cast<void*>(a + 100));  // interior pointer
  EXPECT_FALSE(cache.Lookup(reinterpret_cast<const void*>(a), &info));
  using UnmapFn = int (*)(unsigned long long, size_t);
  auto unmap = reinterpret_cast<UnmapFn>(dlsym(RTLD_DEFAULT, "cuMemUnmap"));
  ASSERT_NE(unmap, nullptr);
  (void)unmap(b, 3 * 4096);
  EXPECT_FALSE(cache.Lookup(reinterpret_cast<const void*>(b), &info));
  EXPECT_FALSE(cache.Lookup(reinterpret_cast<const void*>(b + 8192), &info));
}

}  // namespace
}  // namespace zc::gpu
