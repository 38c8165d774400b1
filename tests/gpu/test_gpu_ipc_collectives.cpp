// The CUDA IPC broadcast, allgather, reduce-scatter and alltoall (and the
// allreduce) through the C ABI, on the stream-faithful fake driver
// (fake_cuda.h), whose CUDA IPC maps a peer process's "device memory"
// (a memfd) into this one: each rank reads its peers' buffers directly,
// as on a GPU. Each rank installs a DevicePath over the fake with the IPC
// path forced (ZC_GPU_IPC=1) and fake reduction kernels (the CPU
// reference run as kernels on the fake's streams).
//
// EveryCollective: counts 1, 7, 4099; the same buffers twice with new
// values; rank-, index- and (for alltoall) destination-dependent data; in
// place and out of place; broadcast from every root; reduce-scatter sum,
// avg and int32 max; allreduce in and out of place. Inputs are written by
// kernels on a stream of the test's, and the call comes with no host
// synchronisation in between: the fake reports any copy or kernel of the
// call that is not ordered after those writes. Every call must report
// algorithm "cuda_ipc" and leave the fake without a violation.
// MixedIsMismatch: rank 0 passes host buffers, the others device buffers:
// every rank fails (ZC_ERR_MISMATCH naming both memory paths on at least
// one), none times out.
// CudaFailureFailsAll: one rank's cuCtxSynchronize fails; every rank fails
// with ZC_ERR_SYSTEM, none times out.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/comm.h"
#include "fake_cuda.h"
#include "gpu/device_path.h"
#include "gpu/ipc_exchange.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "fake_device_rig.h"
#include "gpu_fake_driver.h"
#include "gpu_reduce_reference.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
namespace gpu = zc::gpu;
using gpu::CuStream;
using gpu::testing::FakeCuda;
using gpu::testing::FakeDriver;

gpu::CuResult g_sync_result = 0;  // what the fake cuCtxSynchronize returns (CudaFailure)
gpu::CuResult (*g_real_sync)() = nullptr;
gpu::CuResult FailingCtxSynchronize() { return g_sync_result ? g_sync_result : g_real_sync(); }

// The reductions as kernels on the fake's streams (CPU reference inside).
gpu::DeviceReducer FakeKernels() {
  gpu::DeviceReducer r;
  r.reduce = [](void* c, const void* a, const void* b, size_t n, zc_dtype d, zc_op op, void* s) {
    const size_t bytes = n * gpu::testing::RefDtypeSize(d);
    FakeCuda::Get().Launch(static_cast<CuStream>(s), {{a, bytes, false}, {b, bytes, false}, {c, bytes, true}},
                           [=](const std::vector<void*>& v) { gpu::testing::RefReduce(v[2], v[0], v[1], n, d, op); });
    return zc::Status::Ok();
  };
  r.scale_div = [](void* a, size_t n, zc_dtype d, double div, void* s) {
    const size_t bytes = n * gpu::testing::RefDtypeSize(d);
    FakeCuda::Get().Launch(static_cast<CuStream>(s), {{a, bytes, true}},
                           [=](const std::vector<void*>& v) { gpu::testing::RefScaleDiv(v[0], n, d, div); });
    return zc::Status::Ok();
  };
  r.synchronize = [](void* s, const char* what) {
    const gpu::CuResult res = FakeCuda::Get().table()->StreamSynchronize(static_cast<CuStream>(s));
    return res == 0 ? zc::Status::Ok() : zc::Error(ZC_ERR_SYSTEM, "%s: fake stream failed", what);
  };
  return r;
}

// CUDA IPC forced, cuCtxSynchronize behind FailingCtxSynchronize, fake
// kernels for the GPU reductions.
struct Rig : gpu::testing::FakeDeviceRig {
  gpu::DeviceReducer reducer = FakeKernels();
  Rig() : FakeDeviceRig([](gpu::DriverTable& t) {
      g_real_sync = t.CtxSynchronize;
      t.CtxSynchronize = &FailingCtxSynchronize;
    }) {}
  void Install(zc_comm* comm) { FakeDeviceRig::Install(comm, {"1", &reducer}); }
};

Env BaseEnv(const char* transport) {
  return {{"ZC_TRANSPORT", transport}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "30"}};
}

// Element i of what `rank` contributes in round `round` (to rank `to` for
// alltoall): exact in float32 for every sum below.
float Value(int rank, size_t i, int round, int to = 0) {
  return static_cast<float>((rank + 1) * 1000 + to * 100 + static_cast<int>(i % 97) + round * 7);
}
std::vector<float> Series(int rank, size_t n, int round, int to = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Value(rank, i, round, to);
  return v;
}

// One rank's view of the fake device: buffers, a stream whose kernels
// write the inputs, host reads after the call.
class Device {
 public:
  Device(zc_comm* comm) : comm_(comm), rank_(zc_rank(comm)), s_(FakeCuda::Get().NewStream()) {}
  float* Alloc(size_t count) { return static_cast<float*>(FakeCuda::Get().Alloc(count * sizeof(float) + 4)); }
  // A kernel on the test's stream writes v at dev (no host wait after it).
  void Write(float* dev, std::vector<float> v) {
    const size_t bytes = v.size() * sizeof(float);
    FakeCuda::Get().Launch(s_, {{dev, bytes, true}}, [v = std::move(v), bytes](const std::vector<void*>& p) {
      std::memcpy(p[0], v.data(), bytes);
    });
  }
  std::vector<float> Read(const float* dev, size_t count) {
    std::vector<float> v(count);
    FakeCuda::Get().Download(v.data(), dev, count * sizeof(float));
    return v;
  }
  int Expect(const char* what, size_t count, const float* dev, const std::vector<float>& want) {
    zc_comm* comm = comm_;
    const char* algo = zc_last_algorithm(comm);
    CHILD_CHECK(std::strcmp(algo, "cuda_ipc") == 0, "rank %d: %s (count %zu) ran as %s, not cuda_ipc", rank_,
                what, count, algo);
    const std::vector<float> got = Read(dev, want.size());
    for (size_t i = 0; i < want.size(); ++i)
      CHILD_CHECK(got[i] == want[i], "rank %d: %s (count %zu): [%zu] = %g, want %g", rank_, what, count, i,
                  static_cast<double>(got[i]), static_cast<double>(want[i]));
    const auto v = FakeCuda::Get().violations();
    CHILD_CHECK(v.empty(), "rank %d: %s (count %zu): the fake driver saw %zu violations, the first: %s", rank_,
                what, count, v.size(), v.empty() ? "" : v[0].c_str());
    return 0;
  }

 private:
  zc_comm* comm_;
  int rank_;
  CuStream s_;
};

#define CHILD_RUN(call)                      \
  do {                                       \
    if (int r_ = (call); r_ != 0) return r_; \
  } while (0)

int EveryCollectiveBody(int rank) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  Device D(comm);
  for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) {
    const size_t all = count * n;
    float *b = D.Alloc(count), *gs = D.Alloc(count), *gr = D.Alloc(all), *rs = D.Alloc(all),
          *rr = D.Alloc(count), *as = D.Alloc(all), *ar = D.Alloc(all), *ri = D.Alloc(count);
    for (int round = 0; round < 2; ++round) {
      // Broadcast from every root.
      for (int root = 0; root < n; ++root) {
        D.Write(b, rank == root ? Series(root, count, round + root) : std::vector<float>(count, -1.0f));
        CHILD_OK(zc_broadcast(comm, b, count, ZC_FLOAT32, root));
        CHILD_RUN(D.Expect("broadcast", count, b, Series(root, count, round + root)));
      }
      // Allgather out of place, then in place (sendbuf = own block of recvbuf).
      std::vector<float> gathered;
      for (int r = 0; r < n; ++r) {
        const auto v = Series(r, count, round);
        gathered.insert(gathered.end(), v.begin(), v.end());
      }
      D.Write(gs, Series(rank, count, round));
      CHILD_OK(zc_allgather(comm, gs, gr, count, ZC_FLOAT32));
      CHILD_RUN(D.Expect("allgather", count, gr, gathered));
      std::vector<float> junk(all, -3.0f);
      std::copy_n(gathered.begin() + rank * count, count, junk.begin() + rank * count);
      D.Write(gr, junk);
      CHILD_OK(zc_allgather(comm, gr + rank * count, gr, count, ZC_FLOAT32));
      CHILD_RUN(D.Expect("allgather in place", count, gr, gathered));
      // Reduce-scatter: block b of rank r's input is Series(r, count, round + b).
      std::vector<float> in, sum(count, 0.0f), avg(count), imax(count);
      for (int blk = 0; blk < n; ++blk) {
        const auto v = Series(rank, count, round + blk);
        in.insert(in.end(), v.begin(), v.end());
      }
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i, round + rank);
      for (size_t i = 0; i < count; ++i) avg[i] = sum[i] / static_cast<float>(n);
      D.Write(rs, in);
      CHILD_OK(zc_reduce_scatter(comm, rs, rr, count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(D.Expect("reduce_scatter sum", count, rr, sum));
      D.Write(rs, in);
      CHILD_OK(zc_reduce_scatter(comm, rs, rs + rank * count, count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(D.Expect("reduce_scatter in place", count, rs + rank * count, sum));
      D.Write(rs, in);
      CHILD_OK(zc_reduce_scatter(comm, rs, rr, count, ZC_FLOAT32, ZC_AVG));
      CHILD_RUN(D.Expect("reduce_scatter avg", count, rr, avg));
      // int32 max: rank-dependent signs, so the winner changes with i.
      std::vector<int32_t> iin(all), iwant(count, INT32_MIN);
      auto ival = [&](int r, size_t i, int blk) {
        return static_cast<int32_t>(((i + r) % 2 ? -1 : 1) * (r * 100000 + static_cast<int>(i) + blk * 7 + round));
      };
      for (int blk = 0; blk < n; ++blk)
        for (size_t i = 0; i < count; ++i) iin[blk * count + i] = ival(rank, i, blk);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) iwant[i] = std::max(iwant[i], ival(r, i, rank));
      std::vector<float> iin_bits(all), iwant_bits(count);
      std::memcpy(iin_bits.data(), iin.data(), all * 4);
      std::memcpy(iwant_bits.data(), iwant.data(), count * 4);
      D.Write(rs, iin_bits);
      CHILD_OK(zc_reduce_scatter(comm, rs, rr, count, ZC_INT32, ZC_MAX));
      {
        const auto got = D.Read(rr, count);
        CHILD_CHECK(std::memcmp(got.data(), iwant_bits.data(), count * 4) == 0,
                    "rank %d: reduce_scatter int32 max (count %zu): wrong result", rank, count);
      }
      // Alltoall: block p of rank r's input goes to rank p.
      std::vector<float> ain, awant;
      for (int p = 0; p < n; ++p) {
        const auto v = Series(rank, count, round, p);
        ain.insert(ain.end(), v.begin(), v.end());
        const auto w = Series(p, count, round, rank);
        awant.insert(awant.end(), w.begin(), w.end());
      }
      D.Write(as, ain);
      CHILD_OK(zc_alltoall(comm, as, ar, count, ZC_FLOAT32));
      CHILD_RUN(D.Expect("alltoall", count, ar, awant));
      D.Write(ar, ain);
      CHILD_OK(zc_alltoall(comm, ar, ar, count, ZC_FLOAT32));
      CHILD_RUN(D.Expect("alltoall in place", count, ar, awant));
      // Allreduce out of place and in place (the same exchange and cache).
      std::vector<float> asum(count, 0.0f);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) asum[i] += Value(r, i, round);
      D.Write(ri, Series(rank, count, round));
      CHILD_OK(zc_allreduce(comm, ri, rr, count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(D.Expect("allreduce", count, rr, asum));
      CHILD_OK(zc_allreduce(comm, ri, ri, count, ZC_FLOAT32, ZC_SUM));
      CHILD_RUN(D.Expect("allreduce in place", count, ri, asum));
    }
  }
  CHILD_CHECK(FakeCuda::Get().ipc_opens() > 0, "rank %d: no peer buffer was opened", rank);
  CHILD_OK(zc_finalize(comm));
  CHILD_CHECK(FakeCuda::Get().ipc_mappings() == 0, "rank %d: %zu peer mappings left open after zc_finalize", rank,
              FakeCuda::Get().ipc_mappings());
  return 0;
}

TEST(IpcCollectives, EveryCollective2Shm) {
  auto res = RunRanks(2, EveryCollectiveBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(IpcCollectives, EveryCollective3Shm) {
  auto res = RunRanks(3, EveryCollectiveBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(IpcCollectives, EveryCollective4Shm) {
  auto res = RunRanks(4, EveryCollectiveBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(IpcCollectives, EveryCollective3Tcp) {
  auto res = RunRanks(3, EveryCollectiveBody, BaseEnv("tcp"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// Exit codes of the mismatch body.
constexpr int kMismatchNamed = 10;  // ZC_ERR_MISMATCH naming both paths
constexpr int kMismatch = 11;       // ZC_ERR_MISMATCH, another text
constexpr int kOtherFailure = 12;   // aborted by a peer's mismatch

enum class Call { kBroadcast, kAllgather, kReduceScatter, kAlltoall };

int MixedBody(int rank, Call call) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  const size_t count = 1000;
  // Rank 0: host memory; the others: device memory.
  std::vector<float> host_send(count * n, 1.0f), host_recv(count * n, 0.0f);
  float* send = rank == 0 ? host_send.data() : static_cast<float*>(FakeCuda::Get().Alloc(count * n * 4));
  float* recv = rank == 0 ? host_recv.data() : static_cast<float*>(FakeCuda::Get().Alloc(count * n * 4));
  zc_status s = ZC_OK;
  switch (call) {
    case Call::kBroadcast: s = zc_broadcast(comm, send, count, ZC_FLOAT32, 1); break;  // root: device
    case Call::kAllgather: s = zc_allgather(comm, send, recv, count, ZC_FLOAT32); break;
    case Call::kReduceScatter: s = zc_reduce_scatter(comm, send, recv, count, ZC_FLOAT32, ZC_SUM); break;
    case Call::kAlltoall: s = zc_alltoall(comm, send, recv, count, ZC_FLOAT32); break;
  }
  const std::string err = zc_last_error(comm);
  printf("rank %d: %s: %s\n", rank, zc_status_string(s), err.c_str());
  CHILD_CHECK(s != ZC_OK, "rank %d: mixed device/host call succeeded", rank);
  CHILD_CHECK(s != ZC_ERR_TIMEOUT, "rank %d: timed out instead of a mismatch: %s", rank, err.c_str());
  zc_finalize(comm);
  if (s == ZC_ERR_MISMATCH && err.find("device memory over CUDA IPC") != std::string::npos &&
      err.find("host memory") != std::string::npos)
    return kMismatchNamed;
  return s == ZC_ERR_MISMATCH ? kMismatch : kOtherFailure;
}

void Mixed(int n, const char* transport, Call call) {
  auto res = RunRanks(n, [call](int rank) { return MixedBody(rank, call); }, BaseEnv(transport), 90);
  int named = 0;
  for (const auto& r : res) {
    EXPECT_EQ(r.signal, 0) << Describe(res);
    EXPECT_TRUE(r.exit_code >= kMismatchNamed && r.exit_code <= kOtherFailure) << Describe(res);
    named += r.exit_code == kMismatchNamed;
  }
  EXPECT_GT(named, 0) << "no rank named both memory paths\n" << Describe(res);
}

TEST(IpcCollectives, MixedIsMismatchBroadcast3Shm) { Mixed(3, "shm", Call::kBroadcast); }
TEST(IpcCollectives, MixedIsMismatchAllgather3Shm) { Mixed(3, "shm", Call::kAllgather); }
TEST(IpcCollectives, MixedIsMismatchReduceScatter2Tcp) { Mixed(2, "tcp", Call::kReduceScatter); }
TEST(IpcCollectives, MixedIsMismatchAlltoall4Shm) { Mixed(4, "shm", Call::kAlltoall); }

// Rank 1's cuCtxSynchronize fails: every rank fails with ZC_ERR_SYSTEM at
// once (rank 1 naming the call, the others rank 1), none waits for the
// deadline. Broadcast from root 0 (rank 1's failure travels in the
// agreement, not the exchange) and alltoall (in the exchange).
int CudaFailureBody(int rank, Call call) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  const size_t count = 1000;
  float* send = static_cast<float*>(FakeCuda::Get().Alloc(count * n * 4));
  float* recv = static_cast<float*>(FakeCuda::Get().Alloc(count * n * 4));
  g_sync_result = rank == 1 ? 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */ : 0;
  zc_status s = call == Call::kBroadcast ? zc_broadcast(comm, send, count, ZC_FLOAT32, 0)
                                         : zc_alltoall(comm, send, recv, count, ZC_FLOAT32);
  const std::string err = zc_last_error(comm);
  CHILD_CHECK(s == ZC_ERR_SYSTEM, "rank %d: %s: %s", rank, zc_status_string(s), err.c_str());
  if (rank == 1) CHILD_CHECK(err.find("cuCtxSynchronize") != std::string::npos, "rank 1: %s", err.c_str());
  else CHILD_CHECK(err.find("rank 1") != std::string::npos, "rank %d: %s", rank, err.c_str());
  zc_finalize(comm);
  return 0;
}

TEST(IpcCollectives, CudaFailureFailsAllBroadcast3Shm) {
  auto res = RunRanks(3, [](int rank) { return CudaFailureBody(rank, Call::kBroadcast); }, BaseEnv("shm"), 90);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(IpcCollectives, CudaFailureFailsAllAlltoall3Shm) {
  auto res = RunRanks(3, [](int rank) { return CudaFailureBody(rank, Call::kAlltoall); }, BaseEnv("shm"), 90);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
