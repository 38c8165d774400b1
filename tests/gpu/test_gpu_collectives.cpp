// CUDA-aware collectives through the C ABI: 2, 3 and 4 processes sharing
// one GPU pass device pointers to every collective. Allreduce (CUDA IPC, and
// host staging with ZC_GPU_IPC=0) of every dtype
// and op at counts 0, 1, 7, 65537 with rank- and index-dependent data, in
// place and out of place, blocking and nonblocking, the same buffers reused
// on every call; broadcast, reduce, allgather, reduce-scatter, alltoall;
// send/recv between host and device buffers in every combination; and the
// errors of a bad device range and a freed buffer.
//
// The parent never touches CUDA (a forked child of a CUDA process cannot use
// CUDA): whether a GPU exists is asked in a forked child, and without one
// every test prints "SKIPPED: no CUDA device (...)" and skips.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/coll_check.h"
#include "gpu/cuda_driver.h"
#include "gpu/ipc_allreduce.h"
#include "gpu_device.h"
#include "common/config.h"
#include "harness/multiproc.h"
#include "zc_build_config.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;
namespace gpu = zc::gpu;

#define CU_OK(call)                                                                     \
  do {                                                                                  \
    gpu::CuResult r_ = (call);                                                          \
    CHILD_CHECK(r_ == 0, "%s: %s", #call, gpu::CuErrorText(drv, r_).c_str());          \
  } while (0)

#define SKIP_WITHOUT_GPU()                                                           \
  do {                                                                               \
    static const std::string why = gpu::testing::NoDeviceReasonForked(true);         \
    ZC_SKIP_WITHOUT_DEVICE(why);                                                     \
  } while (0)

Env GpuEnv() { return {{"ZC_TIMEOUT", "60"}, {"ZC_CHUNK", "64k"}}; }

// Device memory of one rank, freed at scope exit.
struct DeviceMem {
  const gpu::DriverTable* drv = nullptr;
  gpu::CuDevicePtr p = 0;
  ~DeviceMem() {
    if (p) drv->MemFree(p);
  }
  char* get() const { return reinterpret_cast<char*>(p); }
};

int InitGpu(const gpu::DriverTable** drv) {
  zc::Status st = gpu::testing::OpenDevice0(drv);
  CHILD_CHECK(st.ok(), "device 0: %s", st.message().c_str());
  return 0;
}

int Alloc(const gpu::DriverTable* drv, DeviceMem* m, size_t bytes) {
  m->drv = drv;
  CU_OK(drv->MemAlloc(&m->p, bytes));
  return 0;
}

// What the C ABI should choose for device buffers on one host.
bool ExpectIpc(size_t bytes) {
  const char* v = getenv("ZC_GPU_IPC");
  if (v != nullptr && strcmp(v, "auto") != 0) return strcmp(v, "0") != 0;
  return bytes >= zc::Config().gpu_ipc_min_bytes;
}

int AllreduceBody(int rank) {
  const gpu::DriverTable* drv = nullptr;
  if (InitGpu(&drv)) return 1;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const size_t counts[] = {0, 1, 7, 65537};
  const size_t max_bytes = 65537 * 8 + 64;
  DeviceMem dsend, drecv;
  if (Alloc(drv, &dsend, max_bytes) || Alloc(drv, &drecv, max_bytes)) return 1;
  // Not the allocation base: an offset inside it (8 keeps every dtype aligned).
  char* sb = dsend.get() + 8;
  char* rb = drecv.get() + 24;
  std::vector<char> host(max_bytes), fill(max_bytes, 0x7f);
  int it = 0;
  for (zc_dtype d : kAllDtypes) {
    const size_t es = DtypeSize(d);
    for (zc_op op : OpsFor(d)) {
      for (size_t count : counts) {
        for (int mode = 0; mode < 3; ++mode) {  // out of place, in place, nonblocking
          ++it;
          const bool inplace = mode == 1;
          FillInput(d, op, host.data(), count, rank, it);
          if (count) CU_OK(drv->MemcpyHtoD(reinterpret_cast<gpu::CuDevicePtr>(sb), host.data(), count * es));
          if (!inplace) CU_OK(drv->MemcpyHtoD(reinterpret_cast<gpu::CuDevicePtr>(rb), fill.data(), max_bytes - 32));
          char* out = inplace ? sb : rb;
          if (mode == 2) {
            zc_request* req = nullptr;
            CHILD_OK(zc_iallreduce(comm, sb, out, count, d, op, &req));
            CHILD_OK(zc_wait(req));
          } else {
            CHILD_OK(zc_allreduce(comm, sb, out, count, d, op));
            const bool ipc = ExpectIpc(count * es);
            if (count > 0)
              CHILD_CHECK((strcmp(zc_last_algorithm(comm), "cuda_ipc") == 0) == ipc,
                          "%zu bytes: algorithm %s, ZC_GPU_IPC %s", count * es,
                          zc_last_algorithm(comm), getenv("ZC_GPU_IPC") ? getenv("ZC_GPU_IPC") : "unset");
          }
          std::memset(host.data(), 0, max_bytes);
          CU_OK(drv->MemcpyDtoH(host.data(), reinterpret_cast<gpu::CuDevicePtr>(out), count * es + 8));
          {
            std::string err = CheckReducedRange(d, op, host.data(), count, 0, n, it);
            CHILD_CHECK(err.empty(), "rank %d %s %s count %zu mode %d: %s", rank, DtypeName(d),
                        zc_status_string(ZC_OK), count, mode, err.c_str());
          }
          // Nothing written past the end of recvbuf.
          if (!inplace)
            for (size_t i = count * es; i < count * es + 8; ++i)
              CHILD_CHECK(host[i] == 0x7f, "rank %d %s count %zu: byte %zu past recvbuf written",
                          rank, DtypeName(d), count, i);
        }
      }
    }
  }
  // Above the automatic CUDA IPC threshold, in place and not.
  {
    const size_t count = (4u << 20) / 4 + 5;
    DeviceMem big;
    if (Alloc(drv, &big, count * 4 * 2)) return 1;
    char* bs = big.get();
    char* br = big.get() + count * 4;
    std::vector<char> hb(count * 4);
    for (int inplace = 0; inplace < 2; ++inplace) {
      ++it;
      FillInput(ZC_FLOAT32, ZC_AVG, hb.data(), count, rank, it);
      CU_OK(drv->MemcpyHtoD(reinterpret_cast<gpu::CuDevicePtr>(bs), hb.data(), count * 4));
      char* out = inplace ? bs : br;
      CHILD_OK(zc_allreduce(comm, bs, out, count, ZC_FLOAT32, ZC_AVG));
      CHILD_CHECK((strcmp(zc_last_algorithm(comm), "cuda_ipc") == 0) == ExpectIpc(count * 4),
                  "large: algorithm %s", zc_last_algorithm(comm));
      CU_OK(drv->MemcpyDtoH(hb.data(), reinterpret_cast<gpu::CuDevicePtr>(out), count * 4));
      {
        std::string err = CheckReducedRange(ZC_FLOAT32, ZC_AVG, hb.data(), count, 0, n, it);
        CHILD_CHECK(err.empty(), "large allreduce inplace %d: %s", inplace, err.c_str());
      }
    }
  }
  // Host sendbuf, device recvbuf and the reverse.
  for (int dir = 0; dir < 2; ++dir) {
    ++it;
    const size_t count = 4099;
    std::vector<char> hbuf(count * 4);
    FillInput(ZC_FLOAT32, ZC_SUM, hbuf.data(), count, rank, it);
    if (dir == 0) {
      CHILD_OK(zc_allreduce(comm, hbuf.data(), rb, count, ZC_FLOAT32, ZC_SUM));
      CU_OK(drv->MemcpyDtoH(hbuf.data(), reinterpret_cast<gpu::CuDevicePtr>(rb), count * 4));
    } else {
      CU_OK(drv->MemcpyHtoD(reinterpret_cast<gpu::CuDevicePtr>(sb), hbuf.data(), count * 4));
      std::memset(hbuf.data(), 0, hbuf.size());
      CHILD_OK(zc_allreduce(comm, sb, hbuf.data(), count, ZC_FLOAT32, ZC_SUM));
    }
    CHILD_CHECK(strcmp(zc_last_algorithm(comm), "cuda_ipc") != 0, "mixed buffers took CUDA IPC");
    {
      std::string err = CheckReducedRange(ZC_FLOAT32, ZC_SUM, hbuf.data(), count, 0, n, it);
      CHILD_CHECK(err.empty(), "mixed allreduce dir %d: %s", dir, err.c_str());
    }
  }
  CHILD_OK(zc_finalize(comm));
  return 0;
}

int OthersBody(int rank) {
  const gpu::DriverTable* drv = nullptr;
  if (InitGpu(&drv)) return 1;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const size_t maxc = 65537;
  const size_t cap = maxc * 8 * n + 64;
  DeviceMem da, db;
  if (Alloc(drv, &da, cap) || Alloc(drv, &db, cap)) return 1;
  char* sa = da.get();
  char* sb = db.get() + 8;
  auto H2D = [&](char* dst, const void* src, size_t bytes) {
    return drv->MemcpyHtoD(reinterpret_cast<gpu::CuDevicePtr>(dst), src, bytes);
  };
  auto D2H = [&](void* dst, const char* src, size_t bytes) {
    return drv->MemcpyDtoH(dst, reinterpret_cast<gpu::CuDevicePtr>(src), bytes);
  };
  std::vector<char> h(cap), ref(cap);
  // Broadcast, allgather, reduce-scatter and alltoall take CUDA IPC when
  // ExpectIpc says so for the call's whole size (ZC_GPU_IPC=1: always).
  auto path_ok = [&](const char* what, size_t bytes) {
    const bool ipc = strcmp(zc_last_algorithm(comm), "cuda_ipc") == 0;
    if (ipc == ExpectIpc(bytes)) return 0;
    fprintf(stderr, "rank %d: %s of %zu bytes ran as %s (ZC_GPU_IPC %s)\n", rank, what, bytes,
            zc_last_algorithm(comm), getenv("ZC_GPU_IPC") ? getenv("ZC_GPU_IPC") : "unset");
    return 1;
  };
  int it = 0;
  for (zc_dtype d : {ZC_INT8, ZC_UINT32, ZC_FLOAT16, ZC_FLOAT32, ZC_FLOAT64, ZC_INT16, ZC_BOOL}) {
    const size_t es = DtypeSize(d);
    for (size_t count : {size_t{1}, size_t{7}, maxc}) {
      ++it;
      for (int root = 0; root < n; ++root) {
        if (rank == root) FillInput(d, ZC_SUM, h.data(), count, root, it);
        else std::memset(h.data(), 0x5a, count * es);
        CU_OK(H2D(sa, h.data(), count * es));
        CHILD_OK(zc_broadcast(comm, sa, count, d, root));
        if (path_ok("broadcast", count * es)) return 1;
        CU_OK(D2H(h.data(), sa, count * es));
        FillInput(d, ZC_SUM, ref.data(), count, root, it);
        CHILD_CHECK(std::memcmp(h.data(), ref.data(), count * es) == 0,
                    "broadcast %s count %zu root %d: wrong data", DtypeName(d), count, root);
      }
      for (int root = 0; root < n; ++root) {
        for (zc_op op : {ZC_SUM, ZC_MAX}) {
          const bool inplace = (root + it) % 2 == 1;
          FillInput(d, op, h.data(), count, rank, it);
          CU_OK(H2D(sa, h.data(), count * es));
          char* out = rank == root ? (inplace ? sa : sb) : nullptr;
          CHILD_OK(zc_reduce(comm, sa, out, count, d, op, root));
          if (rank == root) {
            CU_OK(D2H(h.data(), out, count * es));
            {
              std::string err = CheckReducedRange(d, op, h.data(), count, 0, n, it);
              CHILD_CHECK(err.empty(), "reduce root %d count %zu: %s", root, count, err.c_str());
            }
          }
        }
      }
      // Allgather, out of place and in place (my block inside recvbuf).
      for (int inplace = 0; inplace < 2; ++inplace) {
        char* mine = inplace ? sb + rank * count * es : sa;
        FillInput(d, ZC_SUM, h.data(), count, rank, it);
        CU_OK(H2D(mine, h.data(), count * es));
        CHILD_OK(zc_allgather(comm, mine, sb, count, d));
        if (path_ok("allgather", n * count * es)) return 1;
        CU_OK(D2H(h.data(), sb, n * count * es));
        for (int r = 0; r < n; ++r) {
          FillInput(d, ZC_SUM, ref.data(), count, r, it);
          CHILD_CHECK(std::memcmp(h.data() + r * count * es, ref.data(), count * es) == 0,
                      "allgather %s count %zu inplace %d: block of rank %d wrong", DtypeName(d),
                      count, inplace, r);
        }
      }
      for (zc_op op : {ZC_SUM, ZC_MIN}) {
        FillInput(d, op, h.data(), count * n, rank, it);
        CU_OK(H2D(sa, h.data(), count * n * es));
        CHILD_OK(zc_reduce_scatter(comm, sa, sb, count, d, op));
        if (path_ok("reduce_scatter", n * count * es)) return 1;
        CU_OK(D2H(h.data(), sb, count * es));
        {
          std::string err = CheckReducedRange(d, op, h.data(), count, rank * count, n, it);
          CHILD_CHECK(err.empty(), "reduce_scatter count %zu: %s", count, err.c_str());
        }
      }
      for (int inplace = 0; inplace < 2; ++inplace) {
        for (int dst = 0; dst < n; ++dst)
          FillInput(d, ZC_SUM, h.data() + dst * count * es, count, rank * n + dst, it);
        CU_OK(H2D(sa, h.data(), n * count * es));
        char* out = inplace ? sa : sb;
        CHILD_OK(zc_alltoall(comm, sa, out, count, d));
        if (path_ok("alltoall", n * count * es)) return 1;
        CU_OK(D2H(h.data(), out, n * count * es));
        for (int src = 0; src < n; ++src) {
          FillInput(d, ZC_SUM, ref.data(), count, src * n + rank, it);
          CHILD_CHECK(std::memcmp(h.data() + src * count * es, ref.data(), count * es) == 0,
                      "alltoall %s count %zu: block from rank %d wrong", DtypeName(d), count, src);
        }
      }
    }
  }
  // Send/recv around the ring in every host/device combination.
  const size_t bytes = 100003;
  std::vector<char> hs(bytes), hr(bytes);
  for (int combo = 0; combo < 4; ++combo) {
    const bool send_dev = combo & 1, recv_dev = combo & 2;
    const int to = (rank + 1) % n, from = (rank + n - 1) % n;
    for (size_t i = 0; i < bytes; ++i) hs[i] = static_cast<char>(i * 31 + rank * 7 + combo);
    if (send_dev) CU_OK(H2D(sa, hs.data(), bytes));
    const void* src = send_dev ? static_cast<const void*>(sa) : hs.data();
    void* dst = recv_dev ? static_cast<void*>(sb) : hr.data();
    std::memset(hr.data(), 0, bytes);
    // Even ranks send first, odd ranks receive first (no deadlock with any n).
    if (rank % 2 == 0) {
      CHILD_OK(zc_send(comm, src, bytes, to, combo));
      CHILD_OK(zc_recv(comm, dst, bytes, from, combo));
    } else {
      CHILD_OK(zc_recv(comm, dst, bytes, from, combo));
      CHILD_OK(zc_send(comm, src, bytes, to, combo));
    }
    if (recv_dev) CU_OK(D2H(hr.data(), sb, bytes));
    for (size_t i = 0; i < bytes; ++i)
      CHILD_CHECK(hr[i] == static_cast<char>(i * 31 + from * 7 + combo),
                  "send/recv combo %d (send %s, recv %s): byte %zu wrong", combo,
                  send_dev ? "device" : "host", recv_dev ? "device" : "host", i);
  }
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

// Runs body on 2, 3 and 4 processes sharing the GPU, with ZC_GPU_IPC set to
// ipc (unset when null).
void RunOnTwoToFourRanks(int (*body)(int), const char* ipc) {
  for (int ranks : {2, 3, 4}) {
    Env env = GpuEnv();
    if (ipc) env.push_back({"ZC_GPU_IPC", ipc});
    auto res = RunRanks(ranks, body, env, 300);
    EXPECT_TRUE(AllOk(res)) << ranks << " ranks, ZC_GPU_IPC " << (ipc ? ipc : "unset") << "\n"
                            << Describe(res);
  }
}

// Same host, device buffers, ZC_GPU_IPC=1: the CUDA IPC allreduce at every size.
TEST(GpuCollectives, AllreduceEveryDtypeOp) {
  SKIP_WITHOUT_GPU();
  RunOnTwoToFourRanks(AllreduceBody, "1");
}

// ZC_GPU_IPC unset: staging for small messages, CUDA IPC from 4 MiB.
TEST(GpuCollectives, AllreduceAutoEveryDtypeOp) {
  SKIP_WITHOUT_GPU();
  RunOnTwoToFourRanks(AllreduceBody, nullptr);
}

// ZC_GPU_IPC=0: host staging through pinned memory.
TEST(GpuCollectives, AllreduceStagedEveryDtypeOp) {
  SKIP_WITHOUT_GPU();
  RunOnTwoToFourRanks(AllreduceBody, "0");
}

TEST(GpuCollectives, OtherCollectivesAndSendRecv) {
  SKIP_WITHOUT_GPU();
  RunOnTwoToFourRanks(OthersBody, nullptr);
}

// ZC_GPU_IPC=1: broadcast, allgather, reduce-scatter and alltoall over
// CUDA IPC at every size (reduce and send/recv stage).
TEST(GpuCollectives, OtherCollectivesOverIpc) {
  SKIP_WITHOUT_GPU();
  RunOnTwoToFourRanks(OthersBody, "1");
}

// Device buffers on rank 0, host buffers on rank 1, CUDA IPC forced: the
// ranks take different memory paths, which the signature turns into
// ZC_ERR_MISMATCH on both (or ABORTED from the peer's mismatch), never a
// timeout and never a wrong result as success.
TEST(GpuCollectives, MixedAcrossRanksFails) {
  SKIP_WITHOUT_GPU();
  Env env = {{"ZC_TIMEOUT", "10"}, {"ZC_GPU_IPC", "1"}};
  auto res = RunRanks(2, [](int rank) {
    const gpu::DriverTable* drv = nullptr;
    if (InitGpu(&drv)) return 1;
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    const size_t count = 1 << 16;
    DeviceMem d;
    if (Alloc(drv, &d, count * 4)) return 1;
    std::vector<float> h(count, 1.0f);
    void* buf = rank == 0 ? static_cast<void*>(d.get()) : h.data();
    zc_status s = zc_allreduce(comm, buf, buf, count, ZC_FLOAT32, ZC_SUM);
    fprintf(stderr, "mixed across ranks: rank %d: %s: %s\n", rank, zc_status_string(s),
            zc_last_error(comm));
    CHILD_CHECK(s == ZC_ERR_MISMATCH || s == ZC_ERR_ABORTED,
                "mixed host/device across ranks: %s: %s", zc_status_string(s), zc_last_error(comm));
    zc_finalize(comm);
    return 0;
  }, env, 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  for (const auto& r : res) std::printf("%s", r.output.c_str());
}

// A persistent allreduce plan on device buffers (staged at start, copied
// out at wait), started three times on the same buffers, in place and out
// of place, against the CPU reference.
// The engine's device fusion buffer on the real driver: 8 float32 device
// tensors (1 to 65537 elements, the 2nd in place) per step, sum with
// prescale 0.5 and postscale 3, three steps on the same buffers; the
// values are small integers, so every result is exact.
int EngineBody(int rank) {
  const gpu::DriverTable* drv = nullptr;
  if (InitGpu(&drv)) return 1;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  const size_t sizes[8] = {1, 2, 3, 5, 17, 31, 101, 65537};
  DeviceMem in[8], out[8];
  for (int k = 0; k < 8; ++k)
    if (Alloc(drv, &in[k], sizes[k] * 4) || Alloc(drv, &out[k], sizes[k] * 4)) return 1;
  auto value = [](int r, size_t i, int k, int step) { return static_cast<float>((r * 7 + i * 3 + k * 5 + step) % 11); };
  for (int step = 0; step < 3; ++step) {
    zc_engine_handle* hs[8] = {};
    for (int k = 0; k < 8; ++k) {
      std::vector<float> mine(sizes[k]);
      for (size_t i = 0; i < sizes[k]; ++i) mine[i] = value(rank, i, k, step);
      CU_OK(drv->MemcpyHtoD(in[k].p, mine.data(), sizes[k] * 4));
      const int64_t shape[1] = {static_cast<int64_t>(sizes[k])};
      const std::string name = "t" + std::to_string(k);
      void* o = k == 1 ? in[k].get() : out[k].get();
      CHILD_OK(zc_engine_allreduce(eng, name.c_str(), in[k].get(), o, 1, shape, ZC_FLOAT32, ZC_SUM, 0.5, 3.0, &hs[k]));
    }
    for (int k = 0; k < 8; ++k) {
      CHILD_OK(zc_engine_wait(hs[k]));
      zc_engine_handle_free(hs[k]);
      std::vector<float> got(sizes[k]);
      CU_OK(drv->MemcpyDtoH(got.data(), k == 1 ? in[k].p : out[k].p, sizes[k] * 4));
      for (size_t i = 0; i < sizes[k]; ++i) {
        float want = 0.0f;
        for (int r = 0; r < n; ++r) want += value(r, i, k, step) * 0.5f;
        want *= 3.0f;
        CHILD_CHECK(got[i] == want, "rank %d step %d tensor %d: [%zu] = %g, want %g", rank, step, k, i,
                    static_cast<double>(got[i]), static_cast<double>(want));
      }
    }
  }
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(GpuCollectives, EngineDeviceFusion) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3}) {
    for (const char* ipc : {"1", "0"}) {
      Env env = GpuEnv();
      env.push_back({"ZC_GPU_IPC", ipc});
      auto res = RunRanks(n, EngineBody, env, 120);
      EXPECT_TRUE(AllOk(res)) << n << " ranks, ZC_GPU_IPC=" << ipc << "\n" << Describe(res);
    }
  }
}

TEST(GpuCollectives, PlanOnDeviceBuffers) {
  SKIP_WITHOUT_GPU();
  auto res = RunRanks(2, [](int rank) {
    const gpu::DriverTable* drv = nullptr;
    if (InitGpu(&drv)) return 1;
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    const int n = zc_size(comm);
    for (size_t count : {size_t{1}, size_t{7}, size_t{65537}}) {
      DeviceMem ds, dr;
      if (Alloc(drv, &ds, count * 4) || Alloc(drv, &dr, count * 4)) return 1;
      std::vector<float> mine(count), want(count, 0.0f), got(count);
      zc_plan* plan = nullptr;
      CHILD_OK(zc_allreduce_plan_init(comm, count, ZC_FLOAT32, ZC_SUM, &plan));
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < count; ++i) {
          mine[i] = static_cast<float>((rank + 1) * (round + 1) + i % 101);
          want[i] = 0.0f;
          for (int r = 0; r < n; ++r) want[i] += static_cast<float>((r + 1) * (round + 1) + i % 101);
        }
        const bool in_place = round == 2;
        CU_OK(drv->MemcpyHtoD(ds.p, mine.data(), count * 4));
        if (in_place) CU_OK(drv->MemcpyHtoD(dr.p, mine.data(), count * 4));
        CHILD_OK(zc_plan_start(plan, in_place ? dr.get() : ds.get(), dr.get()));
        CHILD_OK(zc_plan_wait(plan));
        CU_OK(drv->MemcpyDtoH(got.data(), dr.p, count * 4));
        for (size_t i = 0; i < count; ++i)
          CHILD_CHECK(got[i] == want[i], "rank %d count %zu round %d: [%zu] = %g, want %g", rank,
                      count, round, i, static_cast<double>(got[i]), static_cast<double>(want[i]));
      }
      CHILD_OK(zc_plan_free(plan));
    }
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, GpuEnv(), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// The stream-ordered calls on the real driver: on a non-blocking stream,
// an async copy writes the input, the call is made, an async copy reads the
// output, with no host synchronisation until the end (allreduce in 64 KiB
// pipeline parts, broadcast, allgather, send/recv around the ring).
int OnStreamBody(int rank) {
  const gpu::DriverTable* drv = nullptr;
  if (InitGpu(&drv)) return 1;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  gpu::CuStream s = nullptr;
  CU_OK(drv->StreamCreate(&s, gpu::cu::kStreamNonBlocking));
  for (size_t count : {size_t{1}, size_t{7}, size_t{65537}}) {
    const size_t bytes = count * 4;
    DeviceMem in, out, all, pin, pout;
    if (Alloc(drv, &in, bytes) || Alloc(drv, &out, bytes) || Alloc(drv, &all, bytes * n) ||
        Alloc(drv, &pin, bytes) || Alloc(drv, &pout, bytes))
      return 1;
    float *hin = nullptr, *hout = nullptr, *hall = nullptr, *hp = nullptr;
    CU_OK(drv->MemHostAlloc(reinterpret_cast<void**>(&hin), bytes, 0));
    CU_OK(drv->MemHostAlloc(reinterpret_cast<void**>(&hout), bytes, 0));
    CU_OK(drv->MemHostAlloc(reinterpret_cast<void**>(&hall), bytes * n, 0));
    CU_OK(drv->MemHostAlloc(reinterpret_cast<void**>(&hp), bytes, 0));
    for (size_t i = 0; i < count; ++i) hin[i] = static_cast<float>((rank + 1) * 1000 + i % 997);
    CU_OK(drv->MemcpyHtoDAsync(in.p, hin, bytes, s));
    CU_OK(drv->MemcpyHtoDAsync(pin.p, hin, bytes, s));
    zc_request* reqs[5] = {};
    CHILD_OK(zc_allreduce_on_stream(comm, in.get(), out.get(), count, ZC_FLOAT32, ZC_SUM, s, &reqs[0]));
    CU_OK(drv->MemcpyDtoHAsync(hout, out.p, bytes, s));
    CHILD_OK(zc_allgather_on_stream(comm, in.get(), all.get(), count, ZC_FLOAT32, s, &reqs[1]));
    CU_OK(drv->MemcpyDtoHAsync(hall, all.p, bytes * n, s));
    CHILD_OK(zc_broadcast_on_stream(comm, in.get(), count, ZC_FLOAT32, n - 1, s, &reqs[2]));
    // Around the ring: even ranks receive first, odd ranks send first. In
    // stream order a receive holds back what follows it on the stream, the
    // send's input copy too, so a ring where every rank receives first
    // deadlocks (as with NCCL outside a group); zc_wait names it by timeout.
    if (rank % 2 == 0) {
      CHILD_OK(zc_recv_on_stream(comm, pout.get(), bytes, (rank + n - 1) % n, 3, s, &reqs[3]));
      CHILD_OK(zc_send_on_stream(comm, pin.get(), bytes, (rank + 1) % n, 3, s, &reqs[4]));
    } else {
      CHILD_OK(zc_send_on_stream(comm, pin.get(), bytes, (rank + 1) % n, 3, s, &reqs[4]));
      CHILD_OK(zc_recv_on_stream(comm, pout.get(), bytes, (rank + n - 1) % n, 3, s, &reqs[3]));
    }
    CU_OK(drv->MemcpyDtoHAsync(hp, pout.p, bytes, s));
    CU_OK(drv->StreamSynchronize(s));
    for (zc_request* r : reqs) CHILD_OK(zc_wait(r));
    std::vector<float> bc(count);
    CU_OK(drv->MemcpyDtoH(bc.data(), in.p, bytes));
    const int prev = (rank + n - 1) % n;
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += static_cast<float>((r + 1) * 1000 + i % 997);
      CHILD_CHECK(hout[i] == sum, "rank %d count %zu: allreduce [%zu] = %g", rank, count, i, double(hout[i]));
      for (int r = 0; r < n; ++r)
        CHILD_CHECK(hall[r * count + i] == static_cast<float>((r + 1) * 1000 + i % 997),
                    "rank %d count %zu: allgather [%d][%zu]", rank, count, r, i);
      CHILD_CHECK(bc[i] == static_cast<float>(n * 1000 + i % 997), "rank %d: broadcast [%zu] = %g", rank, i,
                  double(bc[i]));
      CHILD_CHECK(hp[i] == static_cast<float>((prev + 1) * 1000 + i % 997), "rank %d: recv [%zu] = %g", rank, i,
                  double(hp[i]));
    }
    for (float* h : {hin, hout, hall, hp}) drv->MemFreeHost(h);
  }
  zc_status e = ZC_OK;
  CHILD_OK(zc_comm_get_async_error(comm, &e));
  CHILD_CHECK(e == ZC_OK, "rank %d: async error %s", rank, zc_status_string(e));
  CHILD_OK(zc_finalize(comm));
  drv->StreamDestroy(s);
  return 0;
}

TEST(GpuCollectives, OnStream) {
  SKIP_WITHOUT_GPU();
  for (int ranks : {2, 3, 4}) {
    Env env = GpuEnv();
    env.push_back({"ZC_GPU_CHUNK_BYTES", "64k"});
    auto res = RunRanks(ranks, OnStreamBody, env, 300);
    EXPECT_TRUE(AllOk(res)) << ranks << " ranks\n" << Describe(res);
  }
}

// On one rank (no peer to hang): a device range past its allocation is
// ZC_ERR_INVALID_ARG; a buffer freed behind zcomm's back fails cleanly with
// the rank, the operation and the CUDA error.
TEST(GpuCollectives, Errors) {
  SKIP_WITHOUT_GPU();
  auto res = RunRanks(1, [](int) {
    const gpu::DriverTable* drv = nullptr;
    if (InitGpu(&drv)) return 1;
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    gpu::CuDevicePtr p = 0;
    CU_OK(drv->MemAlloc(&p, 1 << 20));
    char* d = reinterpret_cast<char*>(p);
    zc_status s = zc_allreduce(comm, d, d, (1 << 20) / 4 + 1, ZC_FLOAT32, ZC_SUM);
    CHILD_CHECK(s == ZC_ERR_INVALID_ARG, "overrun: %s: %s", zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(strstr(zc_last_error(comm), "allreduce") && strstr(zc_last_error(comm), "rank 0"),
                "overrun message: %s", zc_last_error(comm));
    CHILD_OK(zc_allreduce(comm, d, d, 1000, ZC_FLOAT32, ZC_SUM));  // now cached as device
    CU_OK(drv->MemFree(p));
    s = zc_allreduce(comm, d, d, 1000, ZC_FLOAT32, ZC_SUM);
    fprintf(stderr, "freed buffer: %s: %s\n", zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(s == ZC_ERR_SYSTEM || s == ZC_ERR_INVALID_ARG, "freed buffer: %s: %s",
                zc_status_string(s), zc_last_error(comm));
    if (s == ZC_ERR_SYSTEM)
      CHILD_CHECK(strstr(zc_last_error(comm), "CUDA_ERROR") && strstr(zc_last_error(comm), "rank 0") &&
                      strstr(zc_last_error(comm), "allreduce"),
                  "freed buffer message: %s", zc_last_error(comm));
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, GpuEnv(), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  for (const auto& r : res) std::printf("%s", r.output.c_str());
}

}  // namespace

namespace {

// A build without CUDA on a machine with a GPU: device buffers are refused
// with ZC_ERR_UNSUPPORTED and a message that says why, host buffers work.
TEST(GpuCollectives, RefusedInBuildWithoutCuda) {
  if (ZC_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA";
  ZC_SKIP_WITHOUT_DEVICE(gpu::testing::NoDeviceReasonForked(false));
  auto res = RunRanks(2, [](int rank) {
    const gpu::DriverTable* drv = nullptr;
    if (InitGpu(&drv)) return 1;
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    DeviceMem d;
    if (Alloc(drv, &d, 4096)) return 1;
    std::vector<float> h(100, 1.0f), out(100);
    zc_status s = zc_allreduce(comm, d.get(), out.data(), 100, ZC_FLOAT32, ZC_SUM);
    CHILD_CHECK(s == ZC_ERR_UNSUPPORTED, "allreduce: %s: %s", zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(strstr(zc_last_error(comm), "GPU memory") && strstr(zc_last_error(comm), "without CUDA"),
                "message: %s", zc_last_error(comm));
    s = zc_send(comm, d.get(), 16, 1 - rank, 0);
    CHILD_CHECK(s == ZC_ERR_UNSUPPORTED, "send: %s: %s", zc_status_string(s), zc_last_error(comm));
    zc_plan* plan = nullptr;
    CHILD_OK(zc_allreduce_plan_init(comm, 100, ZC_FLOAT32, ZC_SUM, &plan));
    s = zc_plan_start(plan, d.get(), out.data());
    CHILD_CHECK(s == ZC_ERR_UNSUPPORTED, "plan_start: %s: %s", zc_status_string(s), zc_last_error(comm));
    CHILD_OK(zc_plan_free(plan));
    fprintf(stderr, "refused: %s\n", zc_last_error(comm));
    CHILD_OK(zc_allreduce(comm, h.data(), out.data(), 100, ZC_FLOAT32, ZC_SUM));
    CHILD_CHECK(out[99] == 2.0f, "host allreduce: %g", out[99]);
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, GpuEnv(), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  for (const auto& r : res) std::printf("%s", r.output.c_str());
}

}  // namespace
