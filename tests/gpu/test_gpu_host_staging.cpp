// HostStaging against the fake driver, where "device memory" is ordinary
// memory the fake reports as device memory and cuMemcpy is memcpy: host
// buffers pass through untouched, device inputs are copied in and outputs
// out, aliased buffers share one copy, and CUDA failures become clean
// errors. Plus the C ABI in this build: host buffers take the host path and
// never load the CUDA driver.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_driver.h"
#include "gpu/host_staging.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "gpu_fake_driver.h"

namespace zc::gpu {
namespace {

using testing::FakeDriver;

int g_copies = 0;
CuResult g_copy_fail = 0;

CuResult FakeDtoH(void* dst, CuDevicePtr src, size_t n) {
  if (g_copy_fail != 0) return g_copy_fail;
  ++g_copies;
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return cu::kSuccess;
}
CuResult FakeHtoD(CuDevicePtr dst, const void* src, size_t n) {
  if (g_copy_fail != 0) return g_copy_fail;
  ++g_copies;
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return cu::kSuccess;
}

class HostStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeDriver::Get().Reset();
    table_ = FakeDriver::Get().StagingTable();
    table_.MemcpyDtoH = &FakeDtoH;
    table_.MemcpyHtoD = &FakeHtoD;
    g_copies = 0;
    g_copy_fail = 0;
    cache_ = std::make_unique<PointerCache>(&table_);
    pool_ = std::make_unique<PinnedPool>(&table_);
  }
  // Real memory that the fake driver calls device memory.
  char* DeviceBuffer(size_t bytes) {
    mem_.emplace_back(bytes);
    char* p = mem_.back().data();
    FakeDriver::Get().Alloc(reinterpret_cast<uintptr_t>(p), bytes, cu::kMemoryTypeDevice, false, 0);
    return p;
  }

  DriverTable table_;
  std::unique_ptr<PointerCache> cache_;
  std::unique_ptr<PinnedPool> pool_;
  std::vector<std::vector<char>> mem_;
};

TEST_F(HostStagingTest, HostBuffersPassThroughWithoutCopies) {
  std::vector<char> a(100), b(100);
  HostStaging s(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{a.data(), 100, true, false, "sendbuf"}, {b.data(), 100, false, true, "recvbuf"}};
  void* host[2];
  ASSERT_TRUE(s.Stage(args, 2, host).ok());
  EXPECT_FALSE(s.active());
  EXPECT_EQ(host[0], a.data());
  EXPECT_EQ(host[1], b.data());
  EXPECT_TRUE(s.CopyOut().ok());
  EXPECT_EQ(g_copies, 0);
  EXPECT_EQ(pool_->stats().allocs, 0u);
  EXPECT_EQ(FakeDriver::Get().current_context(), nullptr);  // no context was made for host memory
}

TEST_F(HostStagingTest, DeviceInputCopiedInOutputCopiedBack) {
  char* dsend = DeviceBuffer(4096);
  char* drecv = DeviceBuffer(4096);
  for (int i = 0; i < 4096; ++i) dsend[i] = static_cast<char>(i * 7);
  std::memset(drecv, 0, 4096);
  {
    HostStaging s(&table_, cache_.get(), pool_.get());
    StageArg args[] = {{dsend + 16, 1000, true, false, "sendbuf"},
                       {drecv + 8, 1000, false, true, "recvbuf"}};
    void* host[2];
    ASSERT_TRUE(s.Stage(args, 2, host).ok());
    EXPECT_TRUE(s.active());
    EXPECT_NE(host[0], dsend + 16);
    EXPECT_NE(host[1], drecv + 8);
    EXPECT_EQ(std::memcmp(host[0], dsend + 16, 1000), 0);  // input copied in
    EXPECT_EQ(g_copies, 1);                                // output not copied in
    // The "collective": recv = send + 1.
    for (int i = 0; i < 1000; ++i)
      static_cast<char*>(host[1])[i] = static_cast<char>(static_cast<char*>(host[0])[i] + 1);
    EXPECT_EQ(drecv[8], 0);  // nothing written back yet
    ASSERT_TRUE(s.CopyOut().ok());
    EXPECT_EQ(g_copies, 2);  // the input is not copied back
  }
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(drecv[8 + i], static_cast<char>(dsend[16 + i] + 1)) << i;
  EXPECT_EQ(drecv[7], 0);
  EXPECT_EQ(drecv[1008], 0);
  // Buffers went back to the pool and are reused.
  EXPECT_EQ(pool_->stats().allocs, 2u);
  HostStaging again(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{dsend, 64, true, false, "sendbuf"}};
  void* host[1];
  ASSERT_TRUE(again.Stage(args, 1, host).ok());
  EXPECT_EQ(pool_->stats().allocs, 2u);
  EXPECT_EQ(pool_->stats().reuses, 1u);
}

TEST_F(HostStagingTest, InPlaceAndNestedBuffersShareOneCopy) {
  char* d = DeviceBuffer(1 << 16);
  HostStaging s(&table_, cache_.get(), pool_.get());
  // sendbuf == recvbuf, and a third range inside them.
  StageArg args[] = {{d, 4000, true, false, "sendbuf"},
                     {d, 4000, false, true, "recvbuf"},
                     {d + 1000, 100, true, false, "block"}};
  void* host[3];
  ASSERT_TRUE(s.Stage(args, 3, host).ok());
  EXPECT_EQ(host[0], host[1]);
  EXPECT_EQ(static_cast<char*>(host[2]), static_cast<char*>(host[0]) + 1000);
  EXPECT_EQ(pool_->stats().allocs, 1u);
  static_cast<char*>(host[1])[3999] = 42;
  ASSERT_TRUE(s.CopyOut().ok());
  EXPECT_EQ(d[3999], 42);
}

TEST_F(HostStagingTest, MixedHostAndDevice) {
  std::vector<char> hsend(256, 5);
  char* drecv = DeviceBuffer(256);
  HostStaging s(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{hsend.data(), 256, true, false, "sendbuf"}, {drecv, 256, false, true, "recvbuf"}};
  void* host[2];
  ASSERT_TRUE(s.Stage(args, 2, host).ok());
  EXPECT_EQ(host[0], hsend.data());
  EXPECT_NE(host[1], drecv);
  std::memcpy(host[1], host[0], 256);
  ASSERT_TRUE(s.CopyOut().ok());
  EXPECT_EQ(drecv[255], 5);
}

TEST_F(HostStagingTest, CopyFailureIsSystemErrorWithCudaText) {
  char* d = DeviceBuffer(512);
  g_copy_fail = cu::kErrorInvalidValue;
  HostStaging s(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{d, 512, true, false, "sendbuf"}};
  void* host[1];
  Status st = s.Stage(args, 1, host);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("sendbuf"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << st.message();
}

TEST_F(HostStagingTest, RangePastAllocationIsInvalidArg) {
  char* d = DeviceBuffer(512);
  HostStaging s(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{d + 256, 512, true, false, "sendbuf"}};
  void* host[1];
  Status st = s.Stage(args, 1, host);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << st.message();
  EXPECT_NE(st.message().find("sendbuf"), std::string::npos) << st.message();
  EXPECT_EQ(g_copies, 0);
}

TEST_F(HostStagingTest, PinningFailureIsNoMemory) {
  char* d = DeviceBuffer(512);
  table_.MemHostAlloc = [](void**, size_t, unsigned) -> CuResult { return 2; };  // OUT_OF_MEMORY
  HostStaging s(&table_, cache_.get(), pool_.get());
  StageArg args[] = {{d, 512, true, false, "sendbuf"}};
  void* host[1];
  Status st = s.Stage(args, 1, host);
  EXPECT_EQ(st.code(), ZC_ERR_NO_MEMORY) << st.message();
}

// The C ABI of this build with host buffers on a communicator of one: the
// results are right and nothing loads the CUDA driver (a CPU-only user of a
// CUDA build pays one cheap check per buffer).
TEST(HostPathInCudaBuild, HostBuffersNeverLoadTheDriver) {
  if (LoadedDriver() != nullptr) GTEST_SKIP() << "libcuda already loaded in this process";
  zc_comm* comm = nullptr;
  ASSERT_EQ(zc_init(&comm), ZC_OK) << zc_last_error(nullptr);
  ASSERT_EQ(zc_size(comm), 1);
  std::vector<float> in(1001), out(1001, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  ASSERT_EQ(zc_allreduce(comm, in.data(), out.data(), in.size(), ZC_FLOAT32, ZC_SUM), ZC_OK)
      << zc_last_error(comm);
  EXPECT_EQ(out, in);
  ASSERT_EQ(zc_allreduce(comm, in.data(), in.data(), in.size(), ZC_FLOAT32, ZC_MAX), ZC_OK);
  std::vector<float> g(1001, 0.0f);
  ASSERT_EQ(zc_allgather(comm, in.data(), g.data(), in.size(), ZC_FLOAT32), ZC_OK);
  EXPECT_EQ(g, in);
  ASSERT_EQ(zc_broadcast(comm, in.data(), in.size(), ZC_FLOAT32, 0), ZC_OK);
  EXPECT_EQ(zc_allreduce(comm, nullptr, out.data(), 3, ZC_FLOAT32, ZC_SUM), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(LoadedDriver(), nullptr);
  EXPECT_EQ(PinnedPool::Global().stats().allocs, 0u);
  ASSERT_EQ(zc_finalize(comm), ZC_OK);
}

}  // namespace
}  // namespace zc::gpu
