// CPU-side tests of the pointer cache against a fake CUDA driver: they run
// everywhere (no GPU, no CUDA toolkit).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpu/pointer_cache.h"
#include "gpu_fake_driver.h"

namespace zc::gpu {
namespace {

using testing::FakeDriver;

constexpr uintptr_t kBase = 0x700000000000ull;  // made-up device addresses

const void* P(uintptr_t a) { return reinterpret_cast<const void*>(a); }

class GpuPointerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { fake().Reset(); }
  static FakeDriver& fake() { return FakeDriver::Get(); }
};

TEST_F(GpuPointerCacheTest, NoDriverMeansHostWithoutCaching) {
  PointerCache cache(fake().absent());
  int x = 0;
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(&x, sizeof x, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  EXPECT_EQ(info.device, -1);
  EXPECT_EQ(info.buffer_id, 0u);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(fake().attr_calls(), 0u);
}

TEST_F(GpuPointerCacheTest, NullPointer) {
  PointerCache cache(fake().table());
  PointerInfo info;
  EXPECT_TRUE(cache.Classify(nullptr, 0, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  Status st = cache.Classify(nullptr, 8, &info);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("null"), std::string::npos) << st.message();
}

TEST_F(GpuPointerCacheTest, DeviceMissThenHit) {
  const uint64_t id = fake().Alloc(kBase, 1 << 20, cu::kMemoryTypeDevice, false, 3);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase + 100), 200, &info).ok());
  EXPECT_EQ(info.type, MemType::kDevice);
  EXPECT_EQ(info.device, 3);
  EXPECT_EQ(info.base, kBase);
  EXPECT_EQ(info.size, 1u << 20);
  EXPECT_EQ(info.buffer_id, id);
  EXPECT_EQ(fake().attr_calls(), 1u);

  for (int i = 0; i < 10; ++i) {
    PointerInfo again;
    ASSERT_TRUE(cache.Classify(P(kBase + 4096 * i), 4096, &again).ok());
    EXPECT_EQ(again.buffer_id, id);
    EXPECT_EQ(again.base, kBase);
  }
  EXPECT_EQ(fake().attr_calls(), 1u);  // all hits
  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 10u);
  EXPECT_EQ(s.entries, 1u);
}

TEST_F(GpuPointerCacheTest, HitFromAnotherThreadUsesTheSharedMap) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 1, &info).ok());
  std::thread([&] {
    PointerInfo other;
    ASSERT_TRUE(cache.Classify(P(kBase + 10), 10, &other).ok());
    EXPECT_EQ(other.type, MemType::kDevice);
  }).join();
  EXPECT_EQ(fake().attr_calls(), 1u);
}

TEST_F(GpuPointerCacheTest, MemoryTypes) {
  const uintptr_t dev = kBase, managed = kBase + (1 << 24),
                  pinned = kBase + (2 << 24);
  fake().Alloc(dev, 4096, cu::kMemoryTypeDevice, false, 1);
  fake().Alloc(managed, 4096, cu::kMemoryTypeDevice, true, 1);
  fake().Alloc(pinned, 4096, cu::kMemoryTypeHost, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(dev), 8, &info).ok());
  EXPECT_EQ(info.type, MemType::kDevice);
  ASSERT_TRUE(cache.Classify(P(managed), 8, &info).ok());
  EXPECT_EQ(info.type, MemType::kManaged);
  ASSERT_TRUE(cache.Classify(P(pinned), 8, &info).ok());
  EXPECT_EQ(info.type, MemType::kHostPinned);
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST_F(GpuPointerCacheTest, HostPointerIsNeverCachedFromTheDriver) {
  PointerCache cache(fake().table());
  std::vector<char> host(100);
  for (int i = 0; i < 3; ++i) {
    PointerInfo info;
    ASSERT_TRUE(cache.Classify(host.data(), host.size(), &info).ok());
    EXPECT_EQ(info.type, MemType::kHost);
    EXPECT_EQ(info.base, reinterpret_cast<uintptr_t>(host.data()));
    EXPECT_EQ(info.size, host.size());
  }
  EXPECT_EQ(fake().attr_calls(), 3u);  // asked every time
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(GpuPointerCacheTest, UninitialisedDriverMeansHost) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  fake().FailWith(cu::kErrorNotInitialized);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 8, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(GpuPointerCacheTest, DriverFailureIsAnError) {
  fake().FailWith(2);  // CUDA_ERROR_OUT_OF_MEMORY
  PointerCache cache(fake().table());
  PointerInfo info;
  Status st = cache.Classify(P(kBase), 8, &info);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("cuPointerGetAttributes"), std::string::npos);
  EXPECT_NE(st.message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
      << st.message();
}

TEST_F(GpuPointerCacheTest, RangePastAllocationEnd) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  EXPECT_TRUE(cache.Classify(P(kBase + 4000), 96, &info).ok());   // ends at end
  Status st = cache.Classify(P(kBase + 4000), 97, &info);          // one past
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("past the end"), std::string::npos) << st.message();
}

TEST_F(GpuPointerCacheTest, AdjacentNeighbours) {
  const uint64_t a = fake().Alloc(kBase, 0x1000, cu::kMemoryTypeDevice, false, 0);
  const uint64_t b = fake().Alloc(kBase + 0x1000, 0x1000, cu::kMemoryTypeDevice, false, 1);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 0x1000, &info).ok());
  ASSERT_TRUE(cache.Classify(P(kBase + 0x1000), 0x1000, &info).ok());
  const uint64_t calls = fake().attr_calls();
  ASSERT_TRUE(cache.Classify(P(kBase + 0xfff), 1, &info).ok());
  EXPECT_EQ(info.buffer_id, a);
  ASSERT_TRUE(cache.Classify(P(kBase + 0x1000), 1, &info).ok());
  EXPECT_EQ(info.buffer_id, b);
  EXPECT_EQ(info.device, 1);
  EXPECT_EQ(fake().attr_calls(), calls);
  // Spanning both allocations is not one buffer.
  EXPECT_EQ(cache.Classify(P(kBase + 0xff0), 0x20, &info).code(), ZC_ERR_INVALID_ARG);
}

TEST_F(GpuPointerCacheTest, InvalidateForgetsTheEntry) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase + 8), 8, &info).ok());  // also fills TLS
  cache.Invalidate(P(kBase));
  EXPECT_FALSE(cache.Lookup(P(kBase), &info));
  fake().Free(kBase);
  ASSERT_TRUE(cache.Classify(P(kBase + 8), 8, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);  // freed: the driver no longer knows it
}

TEST_F(GpuPointerCacheTest, InvalidateByInteriorPointerAndRange) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  fake().Alloc(kBase + 8192, 4096, cu::kMemoryTypeDevice, false, 0);
  fake().Alloc(kBase + 16384, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  for (uintptr_t off : {0, 8192, 16384}) {
    ASSERT_TRUE(cache.Classify(P(kBase + off), 1, &info).ok());
  }
  cache.Invalidate(P(kBase + 100));
  EXPECT_FALSE(cache.Lookup(P(kBase), &info));
  EXPECT_TRUE(cache.Lookup(P(kBase + 8192), &info));
  cache.InvalidateRange(P(kBase + 4096), 12288 + 1);  // [4096, 16385): 2nd, 3rd
  EXPECT_FALSE(cache.Lookup(P(kBase + 8192), &info));
  EXPECT_FALSE(cache.Lookup(P(kBase + 16384), &info));
  EXPECT_EQ(cache.stats().entries, 0u);
}

// The central safety property: free + re-allocation at the same address
// without notification must never be mistaken for the old buffer.
TEST_F(GpuPointerCacheTest, ReallocAtSameAddressFailsValidation) {
  const uint64_t old_id = fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo cached;
  ASSERT_TRUE(cache.Classify(P(kBase), 4096, &cached).ok());
  EXPECT_TRUE(cache.Validate(cached));

  fake().Free(kBase);  // no NotifyFree
  const uint64_t new_id = fake().Alloc(kBase, 8192, cu::kMemoryTypeDevice, false, 0);
  ASSERT_NE(old_id, new_id);
  PointerInfo stale;
  ASSERT_TRUE(cache.Classify(P(kBase), 4096, &stale).ok());
  EXPECT_EQ(stale.buffer_id, old_id);  // classification alone is a cache hit
  EXPECT_FALSE(cache.Validate(stale));
  // Validate dropped the stale entry: the next classification is fresh.
  PointerInfo fresh;
  ASSERT_TRUE(cache.Classify(P(kBase), 8192, &fresh).ok());
  EXPECT_EQ(fresh.buffer_id, new_id);
  EXPECT_EQ(fresh.size, 8192u);
  EXPECT_TRUE(cache.Validate(fresh));
}

TEST_F(GpuPointerCacheTest, LargerReallocReplacesOverlappingEntries) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  fake().Alloc(kBase + 4096, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 1, &info).ok());
  ASSERT_TRUE(cache.Classify(P(kBase + 4096), 1, &info).ok());
  EXPECT_EQ(cache.stats().entries, 2u);
  fake().Free(kBase);
  fake().Free(kBase + 4096);
  const uint64_t big = fake().Alloc(kBase, 3 * 4096, cu::kMemoryTypeDevice, false, 0);
  // A range neither old entry covers goes to the driver, whose answer
  // replaces both stale entries.
  ASSERT_TRUE(cache.Classify(P(kBase), 3 * 4096, &info).ok());
  EXPECT_EQ(info.buffer_id, big);
  EXPECT_EQ(cache.stats().entries, 1u);
  ASSERT_TRUE(cache.Classify(P(kBase + 4096), 1, &info).ok());
  EXPECT_EQ(info.buffer_id, big);
}

TEST_F(GpuPointerCacheTest, StaleEntryDroppedWhenDriverSaysHost) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 16, &info).ok());
  fake().Free(kBase);
  // Request overruns the stale entry: a miss; the driver says "not CUDA".
  ASSERT_TRUE(cache.Classify(P(kBase), 8192, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(GpuPointerCacheTest, DeclaredTypesNeedNoDriver) {
  PointerCache cache(fake().absent());
  std::vector<char> pool(1 << 16);
  cache.Declare(pool.data(), pool.size(), MemType::kHost, 5);
  cache.Declare(P(kBase), 1 << 20, MemType::kDevice, 2);
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(pool.data() + 100, 100, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  EXPECT_EQ(info.device, -1);  // host has no device
  EXPECT_EQ(info.base, reinterpret_cast<uintptr_t>(pool.data()));
  ASSERT_TRUE(cache.Classify(P(kBase + 10), 10, &info).ok());
  EXPECT_EQ(info.type, MemType::kDevice);
  EXPECT_EQ(info.device, 2);
  EXPECT_TRUE(cache.Validate(info));
  EXPECT_EQ(cache.stats().hits, 2u);
  // Overrunning a declared device range cannot be checked without a driver.
  EXPECT_EQ(cache.Classify(P(kBase + 10), 1 << 20, &info).code(),
            ZC_ERR_INVALID_ARG);
  cache.Invalidate(P(kBase));
  EXPECT_FALSE(cache.Validate(info));
  ASSERT_TRUE(cache.Classify(P(kBase + 10), 10, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
}

TEST_F(GpuPointerCacheTest, DeclareOverridesOverlappingEntries) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 16, &info).ok());  // TLS now holds it
  cache.Declare(P(kBase + 2048), 4096, MemType::kManaged, 0);
  EXPECT_FALSE(cache.Lookup(P(kBase), &info));
  ASSERT_TRUE(cache.Classify(P(kBase + 2048), 16, &info).ok());
  EXPECT_EQ(info.type, MemType::kManaged);
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST_F(GpuPointerCacheTest, InvalidationFromAnotherThreadReachesThreadCache) {
  const uint64_t old_id = fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache cache(fake().table());
  PointerInfo info;
  ASSERT_TRUE(cache.Classify(P(kBase), 16, &info).ok());
  ASSERT_TRUE(cache.Classify(P(kBase), 16, &info).ok());  // thread-local hit
  std::thread([&] {
    cache.Invalidate(P(kBase));
    fake().Free(kBase);
    fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  }).join();
  ASSERT_TRUE(cache.Classify(P(kBase), 16, &info).ok());
  EXPECT_NE(info.buffer_id, old_id);
}

TEST_F(GpuPointerCacheTest, TwoCachesDoNotShareThreadSlots) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache with_driver(fake().table());
  PointerCache without(fake().absent());
  PointerInfo info;
  ASSERT_TRUE(with_driver.Classify(P(kBase), 16, &info).ok());
  EXPECT_EQ(info.type, MemType::kDevice);
  ASSERT_TRUE(without.Classify(P(kBase), 16, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
}

// 4 threads classify 64 allocations while another thread keeps freeing and
// re-allocating some of them (with notification). Every answer must describe
// an allocation that existed at that base: right base, size, device, and a
// buffer id that the driver issued for that base.
TEST_F(GpuPointerCacheTest, ConcurrentClassifyAndInvalidate) {
  constexpr int kAllocs = 64;
  constexpr uintptr_t kStride = 1 << 16;
  for (int i = 0; i < kAllocs; ++i) {
    fake().Alloc(kBase + i * kStride, kStride / 2, cu::kMemoryTypeDevice,
                 false, i % 4);
  }
  PointerCache cache(fake().table());
  std::atomic<int> bad{0};
  std::atomic<bool> stop{false};
  auto reader = [&](unsigned seed) {
    for (int iter = 0; iter < 20000; ++iter) {
      seed = seed * 1103515245u + 12345u;
      const int i = static_cast<int>((seed >> 8) % kAllocs);
      const uintptr_t off = (seed >> 3) % (kStride / 2 - 64);
      PointerInfo info;
      Status st = cache.Classify(P(kBase + i * kStride + off), 64, &info);
      if (!st.ok()) {
        ++bad;
        continue;
      }
      // Between the churner's Free and Alloc the range is unknown to the
      // driver, hence host: fine.
      if (info.type == MemType::kHost) continue;
      if (info.type != MemType::kDevice || info.base != kBase + i * kStride ||
          info.size != kStride / 2 || info.device != i % 4 ||
          fake().BaseOf(info.buffer_id) != info.base) {
        ++bad;
      }
    }
  };
  std::thread churn([&] {
    unsigned seed = 7;
    while (!stop.load()) {
      seed = seed * 1103515245u + 12345u;
      const int i = static_cast<int>((seed >> 8) % 8);  // a few hot ones
      const uintptr_t base = kBase + i * kStride;
      fake().Free(base);
      cache.Invalidate(P(base));
      fake().Alloc(base, kStride / 2, cu::kMemoryTypeDevice, false, i % 4);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> readers;
  for (unsigned t = 0; t < 4; ++t) readers.emplace_back(reader, 1234 + t);
  for (auto& t : readers) t.join();
  stop = true;
  churn.join();
  EXPECT_EQ(bad.load(), 0);
  auto s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, 4u * 20000u);
  EXPECT_GT(s.hits, 0u);
}

TEST(GpuPointerCacheGlobal, RealProcessDriverOnHostMemory) {
  // On a machine without a GPU (or where nothing loaded libcuda) every
  // pointer is host memory; with a GPU, malloc memory is still host.
  void* p = std::malloc(64);
  ASSERT_NE(p, nullptr);
  PointerInfo info;
  ASSERT_TRUE(PointerCache::Global().Classify(p, 64, &info).ok());
  EXPECT_EQ(info.type, MemType::kHost);
  EXPECT_FALSE(IsDevicePointer(p));
  EXPECT_TRUE(RequireHostAccessible(p, 64, "allreduce: sendbuf").ok());
  std::free(p);
}

TEST(GpuPointerCacheGlobal, DeclaredDeviceMemoryIsRejectedByHostOnlyPaths) {
  // A made-up address declared as device memory stands for a cudaMalloc'ed
  // buffer handed to a host-only path.
  const void* fake_dev = P(0x7f0000000000ull);
  PointerCache::Global().Declare(fake_dev, 4096, MemType::kDevice, 0);
  EXPECT_TRUE(IsDevicePointer(fake_dev));
  Status st = RequireHostAccessible(fake_dev, 64, "allreduce: sendbuf");
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("allreduce: sendbuf"), std::string::npos);
  EXPECT_NE(st.message().find("CUDA device memory"), std::string::npos) << st.message();
  NotifyFree(fake_dev);
  EXPECT_FALSE(IsDevicePointer(fake_dev));
}

TEST(GpuCudaDriver, CuErrorTextNamesTheError) {
  const DriverTable* t = FakeDriver::Get().table();
  EXPECT_EQ(CuErrorText(t, 1), "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_EQ(CuErrorText(t, 777), "CUDA driver error 777");
  Status st = CuCheck(t, 3, "cuMemAlloc(64)");
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_EQ(st.message(), "cuMemAlloc(64): CUDA_ERROR_NOT_INITIALIZED (initialization error)");
  EXPECT_TRUE(CuCheck(t, 0, "x").ok());
}

TEST(GpuCudaDriver, LoadDriverFailsCleanlyOrLoads) {
  const DriverTable* drv = nullptr;
  Status st = LoadDriver(&drv);
  if (st.ok()) {
    ASSERT_NE(drv, nullptr);
    EXPECT_TRUE(drv->loaded);
    EXPECT_NE(drv->PointerGetAttributes, nullptr);
    EXPECT_EQ(LoadedDriver(), drv);
  } else {
    EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
    EXPECT_NE(st.message().find("no CUDA driver"), std::string::npos) << st.message();
    EXPECT_EQ(drv, nullptr);
    EXPECT_EQ(LoadedDriver(), nullptr);
    std::string why;
    EXPECT_EQ(DeviceCount(&why), 0);
    EXPECT_FALSE(why.empty());
    // A second attempt answers the same without searching again.
    EXPECT_EQ(LoadDriver(&drv).message(), st.message());
  }
}

}  // namespace
}  // namespace zc::gpu
