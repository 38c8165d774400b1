// The stream-faithful fake driver (fake_cuda.h) itself: streams run in
// order, events and cuStreamWaitEvent order streams, cuStreamWaitValue32
// and cuLaunchHostFunc run in stream order, and each misuse the fake is
// there to catch is caught: a host read of device memory (SIGSEGV), a
// copy on a stream that did not wait for the writer, a host copy before
// the stream was synchronised, a write racing a read.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda.h"

namespace {

using zc::gpu::CuDevicePtr;
using zc::gpu::CuEvent;
using zc::gpu::CuStream;
using zc::gpu::testing::FakeCuda;
namespace cu = zc::gpu::cu;

const zc::gpu::DriverTable& Drv() { return *FakeCuda::Get().table(); }

// A kernel that blocks its stream until Open() (bounded: 30 s).
struct Latch {
  std::atomic<bool> open{false};
  void Enqueue(CuStream s) {
    FakeCuda::Get().Launch(s, {}, [this](const std::vector<void*>&) {
      for (int i = 0; i < 30000 && !open.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  void Open() { open.store(true); }
};

void Fill(CuStream s, void* dev, size_t n, unsigned char v) {
  FakeCuda::Get().Launch(s, {{dev, n, true}}, [n, v](const std::vector<void*>& p) { std::memset(p[0], v, n); });
}

bool HasViolation(const std::string& what) {
  for (const auto& v : FakeCuda::Get().violations())
    if (v.find(what) != std::string::npos) return true;
  return false;
}

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeCuda::Get().ClearViolations(); }
};

TEST_F(FakeCudaTest, StreamRunsInOrderAndAsyncCopiesRunOnIt) {
  FakeCuda& f = FakeCuda::Get();
  CuStream s = f.NewStream();
  void* dev = f.Alloc(4099);
  std::vector<unsigned char> in(4099), out(4099, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
  Latch latch;
  latch.Enqueue(s);
  ASSERT_EQ(Drv().MemcpyHtoDAsync(reinterpret_cast<CuDevicePtr>(dev), in.data(), in.size(), s), cu::kSuccess);
  std::vector<int> order;
  f.Launch(s, {{dev, 4099, false}}, [&](const std::vector<void*>&) { order.push_back(1); });
  ASSERT_EQ(Drv().MemcpyDtoHAsync(out.data(), reinterpret_cast<CuDevicePtr>(dev), out.size(), s), cu::kSuccess);
  f.Launch(s, {}, [&](const std::vector<void*>&) { order.push_back(2); });
  EXPECT_EQ(Drv().StreamQuery(s), cu::kErrorNotReady);  // behind the latch
  EXPECT_EQ(out[5], 0);
  latch.Open();
  ASSERT_EQ(Drv().StreamSynchronize(s), cu::kSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_TRUE(f.violations().empty());
}

TEST_F(FakeCudaTest, EventsOrderStreams) {
  FakeCuda& f = FakeCuda::Get();
  CuStream a = f.NewStream(), b = f.NewStream();
  void* dev = f.Alloc(64);
  CuEvent e = nullptr;
  ASSERT_EQ(Drv().EventCreate(&e, cu::kEventDisableTiming), cu::kSuccess);
  EXPECT_EQ(Drv().EventQuery(e), cu::kSuccess);  // never recorded
  Latch latch;
  latch.Enqueue(a);
  Fill(a, dev, 64, 0x5a);
  ASSERT_EQ(Drv().EventRecord(e, a), cu::kSuccess);
  ASSERT_EQ(Drv().StreamWaitEvent(b, e, 0), cu::kSuccess);
  unsigned char seen = 0;
  f.Launch(b, {{dev, 64, false}}, [&](const std::vector<void*>& p) { seen = static_cast<unsigned char*>(p[0])[63]; });
  EXPECT_EQ(Drv().EventQuery(e), cu::kErrorNotReady);
  latch.Open();
  ASSERT_EQ(Drv().EventSynchronize(e), cu::kSuccess);
  ASSERT_EQ(Drv().StreamSynchronize(b), cu::kSuccess);
  EXPECT_EQ(seen, 0x5a);
  // The host learnt of the write through the event: its copy is ordered.
  unsigned char back[64];
  f.Download(back, dev, 64);
  EXPECT_EQ(back[0], 0x5a);
  EXPECT_TRUE(f.violations().empty());
  Drv().EventDestroy(e);
}

TEST_F(FakeCudaTest, ReadOnAnotherStreamWithoutWaitIsAMissingWait) {
  FakeCuda& f = FakeCuda::Get();
  CuStream a = f.NewStream(), b = f.NewStream();
  void* dev = f.Alloc(256);
  Latch latch;
  latch.Enqueue(a);
  Fill(a, dev, 256, 1);
  // The copy is issued on b, which never waited for a's write.
  std::vector<unsigned char> host(256);
  ASSERT_EQ(Drv().MemcpyDtoHAsync(host.data(), reinterpret_cast<CuDevicePtr>(dev), 256, b), cu::kSuccess);
  ASSERT_EQ(Drv().StreamSynchronize(b), cu::kSuccess);
  latch.Open();
  ASSERT_EQ(Drv().StreamSynchronize(a), cu::kSuccess);
  // Whichever ran first, the pair is unordered.
  EXPECT_TRUE(HasViolation("a missing wait")) << testing::PrintToString(f.violations());
}

TEST_F(FakeCudaTest, HostCopyBeforeSynchronizeIsAMissingWait) {
  FakeCuda& f = FakeCuda::Get();
  CuStream a = f.NewStream();
  void* dev = f.Alloc(32);
  Fill(a, dev, 32, 3);
  // Make sure the kernel ran: the violation is about order, not timing.
  for (int i = 0; i < 10000 && Drv().StreamQuery(a) == cu::kErrorNotReady; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  f.ClearViolations();
  // StreamQuery's success told the host: ordered. A fresh write is not.
  Fill(a, dev, 32, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  unsigned char back[32];
  f.Download(back, dev, 32);
  EXPECT_TRUE(HasViolation("a missing wait")) << testing::PrintToString(f.violations());
  ASSERT_EQ(Drv().StreamSynchronize(a), cu::kSuccess);
  f.ClearViolations();
  f.Download(back, dev, 32);
  EXPECT_EQ(back[31], 4);
  EXPECT_TRUE(f.violations().empty());
}

TEST_F(FakeCudaTest, WriteRacingAReadIsReported) {
  FakeCuda& f = FakeCuda::Get();
  CuStream a = f.NewStream(), b = f.NewStream();
  void* dev = f.Alloc(128);
  f.Upload(dev, std::vector<unsigned char>(128, 9).data(), 128);
  std::vector<unsigned char> host(128);
  ASSERT_EQ(Drv().MemcpyDtoHAsync(host.data(), reinterpret_cast<CuDevicePtr>(dev), 128, a), cu::kSuccess);
  ASSERT_EQ(Drv().StreamSynchronize(a), cu::kSuccess);  // a's read is done and known to the host...
  f.ClearViolations();
  Latch latch;
  latch.Enqueue(a);
  ASSERT_EQ(Drv().MemcpyDtoHAsync(host.data(), reinterpret_cast<CuDevicePtr>(dev), 128, a), cu::kSuccess);
  Fill(b, dev, 128, 2);  // ...but this one is not: b overwrites what a reads
  ASSERT_EQ(Drv().StreamSynchronize(b), cu::kSuccess);
  latch.Open();
  ASSERT_EQ(Drv().StreamSynchronize(a), cu::kSuccess);
  EXPECT_TRUE(HasViolation("a missing wait")) << testing::PrintToString(f.violations());
}

TEST_F(FakeCudaTest, WaitValueAndHostFuncRunInStreamOrder) {
  FakeCuda& f = FakeCuda::Get();
  CuStream s = f.NewStream();
  void* word_mem = nullptr;
  ASSERT_EQ(Drv().MemHostAlloc(&word_mem, 4, cu::kMemHostAllocDeviceMap), cu::kSuccess);
  auto* word = new (word_mem) std::atomic<uint32_t>(0);
  CuDevicePtr addr = 0;
  ASSERT_EQ(Drv().MemHostGetDevicePointer(&addr, word_mem, 0), cu::kSuccess);
  std::atomic<int> step{0};
  ASSERT_EQ(Drv().StreamWaitValue32(s, addr, 5, cu::kStreamWaitValueGeq), cu::kSuccess);
  auto fn = [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); };
  ASSERT_EQ(Drv().LaunchHostFunc(s, fn, &step), cu::kSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(step.load(), 0);
  word->store(4);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(step.load(), 0);  // 4 < 5
  word->store(5);
  ASSERT_EQ(Drv().StreamSynchronize(s), cu::kSuccess);
  EXPECT_EQ(step.load(), 1);
  EXPECT_GE(f.host_funcs(), 1u);
  EXPECT_GE(f.value_waits(), 1u);
  EXPECT_TRUE(f.violations().empty());
  word->~atomic();
  EXPECT_EQ(Drv().MemFreeHost(word_mem), cu::kSuccess);
}

TEST(FakeCudaDeathTest, HostReadOfDeviceMemoryFaults) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        void* dev = FakeCuda::Get().Alloc(64);
        std::printf("%d\n", *static_cast<volatile char*>(dev));
      },
      "");
}

}  // namespace
