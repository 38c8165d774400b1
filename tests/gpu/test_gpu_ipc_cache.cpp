// CPU-side tests of the CUDA IPC handle cache against the fake driver.
#include <gtest/gtest.h>

#include <cstring>

#include "gpu/ipc_cache.h"
#include "gpu_fake_driver.h"

namespace zc::gpu {
namespace {

using testing::FakeDriver;

constexpr uintptr_t kBase = 0x710000000000ull;
const void* P(uintptr_t a) { return reinterpret_cast<const void*>(a); }

class GpuIpcCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { fake().Reset(); }
  static FakeDriver& fake() { return FakeDriver::Get(); }
};

TEST_F(GpuIpcCacheTest, ExportIsCachedAndValidated) {
  const uint64_t id = fake().Alloc(kBase, 1 << 20, cu::kMemoryTypeDevice, false, 1);
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  IpcDescriptor d1, d2;
  ASSERT_TRUE(ipc.Export(P(kBase + 256), 1024, &d1).ok());
  EXPECT_EQ(d1.buffer_id, id);
  EXPECT_EQ(d1.base, kBase);
  EXPECT_EQ(d1.size, 1u << 20);
  EXPECT_EQ(d1.offset, 256u);
  EXPECT_EQ(d1.device, 1);
  ASSERT_TRUE(ipc.Export(P(kBase + 512), 16, &d2).ok());
  EXPECT_EQ(d2.offset, 512u);
  EXPECT_EQ(0, std::memcmp(&d1.handle, &d2.handle, sizeof d1.handle));
  EXPECT_EQ(fake().ipc_gets(), 1u);
  auto s = ipc.stats();
  EXPECT_EQ(s.exports, 1u);
  EXPECT_EQ(s.export_reuses, 1u);
}

TEST_F(GpuIpcCacheTest, ReallocatedRangeGetsANewHandle) {
  const uint64_t old_id = fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  IpcDescriptor d;
  ASSERT_TRUE(ipc.Export(P(kBase), 4096, &d).ok());
  EXPECT_EQ(d.buffer_id, old_id);
  fake().Free(kBase);  // the application frees and re-allocates, no notice
  const uint64_t new_id = fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, false, 0);
  ASSERT_TRUE(ipc.Export(P(kBase), 4096, &d).ok());
  EXPECT_EQ(d.buffer_id, new_id);
  uint64_t in_handle = 0;
  std::memcpy(&in_handle, d.handle.reserved, sizeof in_handle);
  EXPECT_EQ(in_handle, new_id);  // a fresh handle, not the cached one
  EXPECT_EQ(fake().ipc_gets(), 2u);
}

TEST_F(GpuIpcCacheTest, ExportRejectsNonDeviceMemory) {
  fake().Alloc(kBase, 4096, cu::kMemoryTypeDevice, true, 0);  // managed
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  IpcDescriptor d;
  Status st = ipc.Export(P(kBase), 16, &d);
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("managed"), std::string::npos) << st.message();
  int host = 0;
  EXPECT_EQ(ipc.Export(&host, sizeof host, &d).code(), ZC_ERR_UNSUPPORTED);
}

TEST_F(GpuIpcCacheTest, NoDriver) {
  PointerCache pc(fake().absent());
  IpcCache ipc(fake().absent(), &pc);
  IpcDescriptor d{};
  int host = 0;
  Status st = ipc.Export(&host, sizeof host, &d);
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("no CUDA driver"), std::string::npos) << st.message();
  void* mapped = nullptr;
  d.buffer_id = 1;
  d.size = 64;
  EXPECT_EQ(ipc.Open(1, d, 0, &mapped).code(), ZC_ERR_UNSUPPORTED);
}

// Builds what a peer would send for an allocation of its own.
IpcDescriptor PeerDescriptor(uint64_t id, uint64_t base, uint64_t size,
                             uint64_t offset) {
  IpcDescriptor d{};
  std::memcpy(d.handle.reserved, &id, sizeof id);
  d.buffer_id = id;
  d.base = base;
  d.size = size;
  d.offset = offset;
  d.device = 0;
  return d;
}

TEST_F(GpuIpcCacheTest, OpenOncePerPeerBuffer) {
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  void* m1 = nullptr;
  void* m2 = nullptr;
  ASSERT_TRUE(ipc.Open(2, PeerDescriptor(900, kBase, 8192, 0), 0, &m1).ok());
  ASSERT_TRUE(ipc.Open(2, PeerDescriptor(900, kBase, 8192, 4096), 0, &m2).ok());
  EXPECT_EQ(static_cast<char*>(m2) - static_cast<char*>(m1), 4096);
  EXPECT_EQ(fake().ipc_opens(), 1u);
  auto s = ipc.stats();
  EXPECT_EQ(s.opens, 1u);
  EXPECT_EQ(s.open_reuses, 1u);
}

TEST_F(GpuIpcCacheTest, ReplacedPeerBufferClosesTheOldMapping) {
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  void* m = nullptr;
  ASSERT_TRUE(ipc.Open(3, PeerDescriptor(901, kBase, 8192, 0), 0, &m).ok());
  // Another peer's buffer at the same address is unrelated.
  ASSERT_TRUE(ipc.Open(4, PeerDescriptor(950, kBase, 8192, 0), 0, &m).ok());
  // Peer 3 freed and re-allocated over the same range: new buffer id.
  ASSERT_TRUE(ipc.Open(3, PeerDescriptor(902, kBase + 4096, 8192, 0), 0, &m).ok());
  EXPECT_EQ(fake().ipc_closes(), 1u);
  EXPECT_EQ(fake().open_mappings(), 2u);
  EXPECT_EQ(ipc.stats().closes, 1u);
}

TEST_F(GpuIpcCacheTest, ClosePeerAndCloseAll) {
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  void* m = nullptr;
  ASSERT_TRUE(ipc.Open(1, PeerDescriptor(10, kBase, 4096, 0), 0, &m).ok());
  ASSERT_TRUE(ipc.Open(1, PeerDescriptor(11, kBase + 8192, 4096, 0), 0, &m).ok());
  ASSERT_TRUE(ipc.Open(2, PeerDescriptor(12, kBase, 4096, 0), 0, &m).ok());
  ASSERT_TRUE(ipc.ClosePeer(1).ok());
  EXPECT_EQ(fake().open_mappings(), 1u);
  ASSERT_TRUE(ipc.CloseAll().ok());
  EXPECT_EQ(fake().open_mappings(), 0u);
  EXPECT_EQ(fake().ipc_closes(), 3u);
}

TEST_F(GpuIpcCacheTest, DestructorClosesMappings) {
  {
    PointerCache pc(fake().table());
    IpcCache ipc(fake().table(), &pc);
    void* m = nullptr;
    ASSERT_TRUE(ipc.Open(1, PeerDescriptor(20, kBase, 4096, 0), 0, &m).ok());
    EXPECT_EQ(fake().open_mappings(), 1u);
  }
  EXPECT_EQ(fake().open_mappings(), 0u);
}

TEST_F(GpuIpcCacheTest, MalformedDescriptor) {
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  void* m = nullptr;
  Status st = ipc.Open(1, PeerDescriptor(0, kBase, 4096, 0), 0, &m);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("peer 1"), std::string::npos) << st.message();
  EXPECT_EQ(ipc.Open(1, PeerDescriptor(5, kBase, 4096, 4096), 0, &m).code(),
            ZC_ERR_INVALID_ARG);
}

TEST_F(GpuIpcCacheTest, OpenFailureNamesPeerAndCause) {
  PointerCache pc(fake().table());
  IpcCache ipc(fake().table(), &pc);
  void* m = nullptr;
  ASSERT_TRUE(ipc.Open(1, PeerDescriptor(30, kBase, 4096, 0), 0, &m).ok());
  // Same handle from another peer: the driver refuses a second mapping.
  Status st = ipc.Open(2, PeerDescriptor(30, kBase, 4096, 0), 0, &m);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("peer 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cuIpcOpenMemHandle"), std::string::npos);
}

}  // namespace
}  // namespace zc::gpu
