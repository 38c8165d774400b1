// The communicator's DevicePath (gpu/device_path.h) behind every C ABI
// entry point, on any machine: each rank installs a DevicePath over the fake
// driver (gpu_fake_driver.h) in its communicator, and its "device memory" is
// ordinary memory mapped PROT_NONE, which only the fake cuMemcpy may open.
// Host code that touched a device buffer instead of its staged copy would
// die of SIGSEGV, and the copy counters show that each call staged.
//  - EveryEntryPointStages: blocking and nonblocking collectives, a
//    persistent plan (twice on the same buffers), send/recv and isend/irecv
//    with rank 0's buffers on the "device" and the others' on the host give
//    the reference results.
//  - MixedIpcAndHostIsMismatch: with the CUDA IPC path forced, a rank with
//    device buffers and ranks with host buffers fail with ZC_ERR_MISMATCH
//    naming both memory paths (the path travels in the signature), never
//    with a timeout.
//  - EngineAndPsStage: the engine's operations and the parameter server's
//    declare/push/pull with device buffers on rank 0 (the engine and the PS
//    run on duplicates of the communicator, which keep its DevicePath).
//  - PoolMemorySkipsTheDriver: zc_mem_alloc memory is host memory without
//    a pointer query; other host memory is classified.
//  - IpcFailureBeforeExchangeFailsAll: one rank's CUDA failure before the
//    IPC exchange reaches every rank through the exchange, no timeout.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/comm.h"
#include "gpu/device_path.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "gpu_fake_driver.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
namespace gpu = zc::gpu;
using gpu::CuResult;
using gpu::CuDevicePtr;
using gpu::testing::FakeDriver;

// ---- the fake device: PROT_NONE memory opened only by the fake copies ----

uint64_t g_copies = 0;
CuResult g_sync_result = 0;

void Protect(uintptr_t p, size_t n, int prot) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = p & ~(page - 1), hi = (p + n + page - 1) & ~(page - 1);
  if (mprotect(reinterpret_cast<void*>(lo), hi - lo, prot) != 0) abort();
}
CuResult FakeDtoH(void* dst, CuDevicePtr src, size_t n) {
  ++g_copies;
  Protect(src, n, PROT_READ);
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  Protect(src, n, PROT_NONE);
  return 0;
}
CuResult FakeHtoD(CuDevicePtr dst, const void* src, size_t n) {
  ++g_copies;
  Protect(dst, n, PROT_WRITE);
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  Protect(dst, n, PROT_NONE);
  return 0;
}
CuResult FakeCtxSynchronize() { return g_sync_result; }

// One rank's fake GPU (lives until the child exits: the communicator's
// DevicePath uses it up to zc_finalize).
struct FakeGpu {
  gpu::DriverTable table;
  std::unique_ptr<gpu::PointerCache> cache;
  std::unique_ptr<gpu::PinnedPool> pool;

  FakeGpu() {
    FakeDriver::Get().Reset();
    table = FakeDriver::Get().StagingTable();
    table.MemcpyDtoH = &FakeDtoH;
    table.MemcpyHtoD = &FakeHtoD;
    table.CtxSynchronize = &FakeCtxSynchronize;
    cache = std::make_unique<gpu::PointerCache>(&table);
    pool = std::make_unique<gpu::PinnedPool>(&table);
  }

  // Puts a DevicePath over this fake in place of the communicator's own.
  void Install(zc_comm* comm, const char* ipc_mode) {
    gpu::DevicePathOptions o;
    o.enabled = true;
    o.ipc_mode = ipc_mode;
    o.ipc_reachable = comm->size > 1 && comm->local_size == comm->size;
    o.drv = &table;
    o.cache = cache.get();
    o.pool = pool.get();
    zc::Device* dev = comm->device.get();
    o.known_host = [dev](const void* p, size_t bytes) { return dev->regions().IsPoolMemory(p, bytes); };
    comm->gpu = std::make_unique<gpu::DevicePath>(o);
  }

  // `bytes` of device memory (never freed: the child exits).
  void* Alloc(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = (bytes + page - 1) / page * page + page;
    void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) abort();
    FakeDriver::Get().Alloc(reinterpret_cast<uintptr_t>(p), bytes, gpu::cu::kMemoryTypeDevice,
                            false, 0);
    return p;
  }
  void Upload(void* dev, const void* host, size_t n) {
    if (n) FakeHtoD(reinterpret_cast<CuDevicePtr>(dev), host, n);
  }
  void Download(void* host, const void* dev, size_t n) {
    if (n) FakeDtoH(host, reinterpret_cast<CuDevicePtr>(dev), n);
  }
};

Env BaseEnv(const char* transport) {
  return {{"ZC_TRANSPORT", transport}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "30"}};
}

float Value(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + i % 997); }

// A buffer of `count` floats on the device (rank 0) or the host (others).
struct Buf {
  FakeGpu* g;
  bool device;
  size_t count;
  std::vector<float> host;
  void* dev = nullptr;

  Buf(FakeGpu* g_, bool device_, size_t count_) : g(g_), device(device_), count(count_) {
    host.assign(count, -1.0f);
    if (device) {
      dev = g->Alloc(count * sizeof(float) + 1);
      g->Upload(dev, host.data(), count * sizeof(float));
    }
  }
  void* ptr() { return device ? dev : host.data(); }
  void Set(const std::vector<float>& v) {
    host = v;
    if (device) g->Upload(dev, host.data(), count * sizeof(float));
  }
  const std::vector<float>& Get() {
    if (device) g->Download(host.data(), dev, count * sizeof(float));
    return host;
  }
};

// Checks got == want; names the call.
int Expect(const char* what, int rank, const std::vector<float>& got, const std::vector<float>& want) {
  CHILD_CHECK(got.size() == want.size(), "rank %d: %s: %zu values, want %zu", rank, what,
              got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHILD_CHECK(got[i] == want[i], "rank %d: %s: [%zu] = %g, want %g", rank, what, i,
                static_cast<double>(got[i]), static_cast<double>(want[i]));
  return 0;
}

// The calls since `before` staged on a device rank, and never on a host one.
int ExpectStaged(const char* what, int rank, bool device, uint64_t before) {
  if (device) CHILD_CHECK(g_copies > before, "rank %d: %s: device buffers were not staged", rank, what);
  else CHILD_CHECK(g_copies == before, "rank %d: %s: host buffers were copied", rank, what);
  return 0;
}

#define CHILD_RUN(call)            \
  do {                             \
    if (int r_ = (call); r_ != 0) return r_; \
  } while (0)

int EveryEntryPointBody(int rank) {
  static FakeGpu g;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  g.Install(comm, "0");
  const int n = zc_size(comm);
  const bool device = rank == 0;

  for (size_t count : {size_t{1}, size_t{7}, size_t{65537}}) {
    std::vector<float> mine(count), sum(count, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      mine[i] = Value(rank, i);
      for (int r = 0; r < n; ++r) sum[i] += Value(r, i);
    }
    Buf send(&g, device, count), recv(&g, device, count);
    // Allreduce, out of place then in place, the same buffers twice.
    for (int round = 0; round < 2; ++round) {
      send.Set(mine);
      uint64_t c0 = g_copies;
      CHILD_OK(zc_allreduce(comm, send.ptr(), recv.ptr(), count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(ExpectStaged("allreduce", rank, device, c0));
      CHILD_RUN(Expect("allreduce", rank, recv.Get(), sum));
      recv.Set(mine);
      c0 = g_copies;
      CHILD_OK(zc_allreduce(comm, recv.ptr(), recv.ptr(), count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(ExpectStaged("allreduce in place", rank, device, c0));
      CHILD_RUN(Expect("allreduce in place", rank, recv.Get(), sum));
    }
    // Nonblocking.
    send.Set(mine);
    zc_request* req = nullptr;
    uint64_t c0 = g_copies;
    CHILD_OK(zc_iallreduce(comm, send.ptr(), recv.ptr(), count, ZC_FLOAT32, ZC_SUM, &req));
    CHILD_OK(zc_wait(req));
    CHILD_RUN(ExpectStaged("iallreduce", rank, device, c0));
    CHILD_RUN(Expect("iallreduce", rank, recv.Get(), sum));
    // A persistent plan, started twice on the same buffers.
    zc_plan* plan = nullptr;
    CHILD_OK(zc_allreduce_plan_init(comm, count, ZC_FLOAT32, ZC_SUM, &plan));
    for (int round = 0; round < 2; ++round) {
      recv.Set(std::vector<float>(count, -1.0f));
      c0 = g_copies;
      CHILD_OK(zc_plan_start(plan, send.ptr(), recv.ptr()));
      CHILD_OK(zc_plan_wait(plan));
      CHILD_RUN(ExpectStaged("plan", rank, device, c0));
      CHILD_RUN(Expect("plan", rank, recv.Get(), sum));
    }
    CHILD_OK(zc_plan_free(plan));
    // Broadcast from the device rank and from a host rank.
    for (int root : {0, n - 1}) {
      Buf b(&g, device, count);
      b.Set(rank == root ? mine : std::vector<float>(count, 0.0f));
      c0 = g_copies;
      CHILD_OK(zc_broadcast(comm, b.ptr(), count, ZC_FLOAT32, root));
      CHILD_RUN(ExpectStaged("broadcast", rank, device, c0));
      std::vector<float> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = Value(root, i);
      CHILD_RUN(Expect("broadcast", rank, b.Get(), want));
    }
    // Allgather.
    Buf all(&g, device, count * n);
    c0 = g_copies;
    CHILD_OK(zc_allgather(comm, send.ptr(), all.ptr(), count, ZC_FLOAT32));
    CHILD_RUN(ExpectStaged("allgather", rank, device, c0));
    std::vector<float> want(count * n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want[r * count + i] = Value(r, i);
    CHILD_RUN(Expect("allgather", rank, all.Get(), want));
    // Send/recv between the device rank and the last rank, both ways,
    // blocking and nonblocking.
    if (rank == 0 || rank == n - 1) {
      const int peer = n - 1 - rank;
      Buf in(&g, device, count);
      c0 = g_copies;
      if (rank == 0) {
        CHILD_OK(zc_send(comm, send.ptr(), count * 4, peer, 1));
        CHILD_OK(zc_recv(comm, in.ptr(), count * 4, peer, 2));
      } else {
        CHILD_OK(zc_recv(comm, in.ptr(), count * 4, peer, 1));
        CHILD_OK(zc_send(comm, send.ptr(), count * 4, peer, 2));
      }
      CHILD_RUN(ExpectStaged("send/recv", rank, device, c0));
      std::vector<float> from(count);
      for (size_t i = 0; i < count; ++i) from[i] = Value(peer, i);
      CHILD_RUN(Expect("send/recv", rank, in.Get(), from));
      in.Set(std::vector<float>(count, 0.0f));
      zc_request* reqs[2] = {nullptr, nullptr};
      c0 = g_copies;
      CHILD_OK(zc_irecv(comm, in.ptr(), count * 4, peer, 3, &reqs[0]));
      CHILD_OK(zc_isend(comm, send.ptr(), count * 4, peer, 3, &reqs[1]));
      CHILD_OK(zc_wait(reqs[1]));
      CHILD_OK(zc_wait(reqs[0]));
      CHILD_RUN(ExpectStaged("isend/irecv", rank, device, c0));
      CHILD_RUN(Expect("isend/irecv", rank, in.Get(), from));
    }
  }
  CHILD_OK(zc_finalize(comm));
  return 0;
}

void EveryEntryPoint(int n, const char* transport) {
  auto res = RunRanks(n, EveryEntryPointBody, BaseEnv(transport), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

TEST(DevicePath, EveryEntryPointStages2Shm) { EveryEntryPoint(2, "shm"); }
TEST(DevicePath, EveryEntryPointStages3Shm) { EveryEntryPoint(3, "shm"); }
TEST(DevicePath, EveryEntryPointStages2Tcp) { EveryEntryPoint(2, "tcp"); }

// The engine (zc_engine_*) and the parameter server (zc_ps_*) take buffers
// too: they run on duplicates of the communicator, which keep its
// DevicePath, and stage device buffers at submission (the result copied to
// the device when the operation completes).
int EngineAndPsBody(int rank) {
  static FakeGpu g;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  g.Install(comm, "0");
  const int n = zc_size(comm);
  const bool device = rank == 0;
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) {
    std::vector<float> mine(count), sum(count, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      mine[i] = Value(rank, i);
      for (int r = 0; r < n; ++r) sum[i] += Value(r, i);
    }
    const int64_t shape[] = {static_cast<int64_t>(count)};
    // Allreduce out of place and in place, twice (the second through the
    // engine's response cache), and a broadcast from the device rank.
    for (int round = 0; round < 2; ++round) {
      Buf in(&g, device, count), out(&g, device, count), same(&g, device, count), b(&g, device, count);
      in.Set(mine);
      same.Set(mine);
      b.Set(rank == 0 ? mine : std::vector<float>(count, 0.0f));
      const uint64_t c0 = g_copies;
      zc_engine_handle *h1, *h2, *h3;
      CHILD_OK(zc_engine_allreduce(eng, "ar", in.ptr(), out.ptr(), 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h1));
      CHILD_OK(zc_engine_allreduce(eng, "ar.inplace", same.ptr(), same.ptr(), 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1,
                                   &h2));
      CHILD_OK(zc_engine_broadcast(eng, "bc", b.ptr(), 1, shape, ZC_FLOAT32, 0, &h3));
      for (auto* h : {h1, h2, h3}) CHILD_OK(zc_engine_wait(h));
      const void* data = nullptr;
      CHILD_OK(zc_engine_output(h1, &data, nullptr, nullptr));
      CHILD_CHECK(data == out.ptr(), "rank %d: zc_engine_output is not the caller's output", rank);
      for (auto* h : {h1, h2, h3}) zc_engine_handle_free(h);
      CHILD_RUN(ExpectStaged("engine allreduce/broadcast", rank, device, c0));
      CHILD_RUN(Expect("engine allreduce", rank, out.Get(), sum));
      CHILD_RUN(Expect("engine allreduce in place", rank, same.Get(), sum));
      std::vector<float> root(count);
      for (size_t i = 0; i < count; ++i) root[i] = Value(0, i);
      CHILD_RUN(Expect("engine broadcast", rank, b.Get(), root));
    }
    // Allgather: the input is staged, the result is the engine's (host).
    Buf in(&g, device, count);
    in.Set(mine);
    const uint64_t c0 = g_copies;
    zc_engine_handle* h;
    CHILD_OK(zc_engine_allgather(eng, "ag", in.ptr(), 1, shape, ZC_FLOAT32, &h));
    CHILD_OK(zc_engine_wait(h));
    CHILD_RUN(ExpectStaged("engine allgather", rank, device, c0));
    const void* data = nullptr;
    CHILD_OK(zc_engine_output(h, &data, nullptr, nullptr));
    const float* got = static_cast<const float*>(data);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        CHILD_CHECK(got[r * count + i] == Value(r, i), "rank %d: engine allgather [%d][%zu] = %g", rank, r, i,
                    static_cast<double>(got[r * count + i]));
    zc_engine_handle_free(h);
  }
  CHILD_OK(zc_engine_destroy(eng));

  // The parameter server: declare from device memory, push and pull,
  // blocking and nonblocking, every rank a worker and a server.
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, ZC_PS_BOTH, nullptr, &ps));
  const size_t count = 3001;
  std::vector<float> init(count), mine(count), sum(count);
  for (size_t i = 0; i < count; ++i) {
    init[i] = static_cast<float>(i % 13);
    mine[i] = Value(rank, i);
    sum[i] = 0;
    for (int r = 0; r < n; ++r) sum[i] += Value(r, i);
  }
  Buf binit(&g, device, count), push(&g, device, count), pull(&g, device, count);
  binit.Set(init);
  push.Set(mine);
  CHILD_OK(zc_ps_declare(ps, 7, count, ZC_FLOAT32, binit.ptr()));
  for (int round = 0; round < 2; ++round) {
    pull.Set(std::vector<float>(count, -1.0f));
    const uint64_t c0 = g_copies;
    if (round == 0) {
      CHILD_OK(zc_ps_push(ps, 7, push.ptr()));
      CHILD_OK(zc_ps_pull(ps, 7, pull.ptr()));
    } else {
      zc_request *r1, *r2;
      CHILD_OK(zc_ps_ipush(ps, 7, push.ptr(), &r1));
      CHILD_OK(zc_ps_ipull(ps, 7, pull.ptr(), &r2));
      CHILD_OK(zc_wait(r1));
      CHILD_OK(zc_wait(r2));
    }
    CHILD_RUN(ExpectStaged(round ? "ps ipush/ipull" : "ps push/pull", rank, device, c0));
    CHILD_RUN(Expect(round ? "ps ipull" : "ps pull", rank, pull.Get(), sum));
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(DevicePath, EngineAndPsStage2Shm) {
  auto res = RunRanks(2, EngineAndPsBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(DevicePath, EngineAndPsStage3Tcp) {
  auto res = RunRanks(3, EngineAndPsBody, BaseEnv("tcp"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

int PoolBody(int rank) {
  static FakeGpu g;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  g.Install(comm, "auto");
  const size_t count = 1000;
  float* pool = nullptr;
  CHILD_OK(zc_mem_alloc(comm, 2 * count * sizeof(float), reinterpret_cast<void**>(&pool)));
  std::vector<float> heap(2 * count);
  for (size_t i = 0; i < count; ++i) pool[i] = heap[i] = static_cast<float>(rank + i);
  const uint64_t q0 = FakeDriver::Get().attr_calls();
  CHILD_OK(zc_send(comm, pool, 64, 1 - rank, 5));
  CHILD_OK(zc_recv(comm, pool + count, 64, 1 - rank, 5));
  CHILD_CHECK(pool[count + 1] == static_cast<float>(1 - rank + 1), "rank %d: recv got %g", rank,
              static_cast<double>(pool[count + 1]));
  CHILD_OK(zc_allreduce(comm, pool, pool + count, count, ZC_FLOAT32, ZC_SUM));
  const uint64_t q1 = FakeDriver::Get().attr_calls();
  CHILD_CHECK(q1 == q0, "rank %d: pool memory was classified through the driver (%llu queries)",
              rank, static_cast<unsigned long long>(q1 - q0));
  CHILD_OK(zc_allreduce(comm, heap.data(), heap.data() + count, count, ZC_FLOAT32, ZC_SUM));
  CHILD_CHECK(FakeDriver::Get().attr_calls() > q1, "rank %d: heap memory was not classified", rank);
  for (size_t i = 0; i < count; ++i)
    CHILD_CHECK(pool[count + i] == heap[count + i] && heap[count + i] == static_cast<float>(2 * i + 1),
                "rank %d: [%zu] pool %g heap %g", rank, i, static_cast<double>(pool[count + i]),
                static_cast<double>(heap[count + i]));
  CHILD_OK(zc_mem_free(comm, pool));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(DevicePath, PoolMemorySkipsTheDriver) {
  auto res = RunRanks(2, PoolBody, BaseEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// Exit codes of the mismatch body.
constexpr int kMismatchNamed = 10;  // ZC_ERR_MISMATCH naming both paths
constexpr int kMismatch = 11;       // ZC_ERR_MISMATCH, another text
constexpr int kOtherFailure = 12;   // aborted by a peer's mismatch

int MixedBody(int rank, size_t count) {
  static FakeGpu g;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  g.Install(comm, "1");  // the IPC path at every size
  const bool device = rank == 0;
  Buf send(&g, device, count), recv(&g, device, count);
  send.Set(std::vector<float>(count, 1.0f));
  zc_status s = zc_allreduce(comm, send.ptr(), recv.ptr(), count, ZC_FLOAT32, ZC_SUM);
  const std::string err = zc_last_error(comm);
  printf("rank %d: %s: %s\n", rank, zc_status_string(s), err.c_str());
  CHILD_CHECK(s != ZC_OK, "rank %d: mixed device/host allreduce succeeded", rank);
  CHILD_CHECK(s != ZC_ERR_TIMEOUT, "rank %d: timed out instead of a mismatch: %s", rank, err.c_str());
  zc_finalize(comm);
  if (s == ZC_ERR_MISMATCH && err.find("device memory over CUDA IPC") != std::string::npos &&
      err.find("host memory") != std::string::npos)
    return kMismatchNamed;
  return s == ZC_ERR_MISMATCH ? kMismatch : kOtherFailure;
}

void Mixed(int n, const char* transport, size_t count) {
  auto res = RunRanks(n, [count](int rank) { return MixedBody(rank, count); }, BaseEnv(transport), 90);
  int named = 0;
  for (const auto& r : res) {
    EXPECT_EQ(r.signal, 0) << Describe(res);
    EXPECT_TRUE(r.exit_code >= kMismatchNamed && r.exit_code <= kOtherFailure) << Describe(res);
    named += r.exit_code == kMismatchNamed;
  }
  EXPECT_GT(named, 0) << "no rank named both memory paths\n" << Describe(res);
  for (const auto& r : res) std::printf("%s", r.output.c_str());
}

TEST(DevicePath, MixedIpcAndHostIsMismatch2Shm) { Mixed(2, "shm", 4096); }
TEST(DevicePath, MixedIpcAndHostIsMismatch3Shm) { Mixed(3, "shm", 100003); }
TEST(DevicePath, MixedIpcAndHostIsMismatch2Tcp) { Mixed(2, "tcp", 4096); }
TEST(DevicePath, MixedIpcAndHostIsMismatch3Tcp) { Mixed(3, "tcp", 1 << 20); }

int IpcFailureBody(int rank) {
  static FakeGpu g;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  g.Install(comm, "1");
  // Rank 1's cuCtxSynchronize fails: it cannot take part, and says so in
  // the exchange instead of leaving its peers waiting.
  g_sync_result = rank == 1 ? 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */ : 0;
  const size_t count = 1000;
  Buf send(&g, true, count), recv(&g, true, count);
  zc_status s = zc_allreduce(comm, send.ptr(), recv.ptr(), count, ZC_FLOAT32, ZC_SUM);
  const std::string err = zc_last_error(comm);
  printf("rank %d: %s: %s\n", rank, zc_status_string(s), err.c_str());
  CHILD_CHECK(s == ZC_ERR_SYSTEM, "rank %d: %s: %s", rank, zc_status_string(s), err.c_str());
  if (rank == 1) CHILD_CHECK(err.find("cuCtxSynchronize") != std::string::npos, "rank 1: %s", err.c_str());
  else CHILD_CHECK(err.find("rank 1 could not prepare") != std::string::npos, "rank %d: %s", rank, err.c_str());
  zc_finalize(comm);
  return 0;
}

TEST(DevicePath, IpcFailureBeforeExchangeFailsAll) {
  auto res = RunRanks(3, IpcFailureBody, BaseEnv("shm"), 90);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  for (const auto& r : res) std::printf("%s", r.output.c_str());
}

}  // namespace
