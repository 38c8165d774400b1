// The engine's allreduces of device tensors (engine/device_fusion.h) on the
// stream-faithful fake driver (fake_cuda.h): each rank installs a DevicePath
// over the fake with fake kernels (the CPU reference run on the fake's
// streams, ScaledCopy for the engine's scale factors) and runs the engine
// through its C ABI.
//
// EveryDtypeOp: every dtype with sum, min and max, and avg on the floating
// ones; per step 7 tensors of odd sizes (1 to 101 elements, some in place),
// with prescale 0.5 and postscale 3 (bool: 1), submitted in a rank-dependent
// order; a host tensor of the same dtype and op among them (fused apart, in
// the host fusion buffer); a device broadcast and a device allgather (staged
// at submission, as before); three
// steps on the same names and buffers with new values. Inputs are written
// by fake kernels on the legacy default stream right before the
// submission, with no host wait: the fake reports any engine copy not
// ordered after them. Results must equal a reference computed with the
// CPU reference (bit for bit), every device tensor must have been packed
// and unpacked by device copies (async copy counter), the fake must report
// no violation. Placements: every rank device (CUDA IPC forced, or staged),
// rank 0 host and the others device (CUDA IPC forced: the engine must stage
// instead, since rank 0 meets it in the host collective).
// ThresholdBoundaries: ZC_FUSION_THRESHOLD 0 (off), one byte below the
// smallest tensor (nothing fuses: no fused set), the sum of the step's
// tensors and one byte less; a 40000-element float64 tensor grows the device
// fusion buffer past its first 64 KiB.
// JoinedRankAmongDeviceRanks: the last rank joins, the others' device
// tensors are reduced with its zeros (staged, since it passes host memory).
// PackFailure: rank 1's cuMemcpyAsync of one tensor fails: every rank's
// handles fail (rank 1's naming the tensor, the rank and the CUDA error),
// none by timeout.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/comm.h"
#include "collectives/dtype.h"
#include "engine/fusion.h"
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
namespace ref = zc::gpu::testing;
using gpu::CuStream;
using gpu::testing::FakeCuda;
using gpu::testing::FakeDriver;

// A pack failure: cuMemcpyAsync from this source fails (PackFailure).
gpu::CuDevicePtr g_fail_src = 0;
gpu::CuResult (*g_real_memcpy_async)(gpu::CuDevicePtr, gpu::CuDevicePtr, size_t, CuStream) = nullptr;
gpu::CuResult FailingMemcpyAsync(gpu::CuDevicePtr dst, gpu::CuDevicePtr src, size_t n, CuStream s) {
  if (g_fail_src != 0 && src == g_fail_src) return gpu::cu::kErrorInvalidValue;
  return g_real_memcpy_async(dst, src, n, s);
}

// Scaling kernels launched (the engine's prescale and postscale).
std::atomic<uint64_t> g_scale_launches{0};

// The GPU kernels as fake kernels: the CPU reference on the fake's streams.
gpu::DeviceReducer FakeKernels() {
  gpu::DeviceReducer r;
  r.reduce = [](void* c, const void* a, const void* b, size_t n, zc_dtype d, zc_op op, void* s) {
    const size_t bytes = n * ref::RefDtypeSize(d);
    FakeCuda::Get().Launch(static_cast<CuStream>(s), {{a, bytes, false}, {b, bytes, false}, {c, bytes, true}},
                           [=](const std::vector<void*>& v) { ref::RefReduce(v[2], v[0], v[1], n, d, op); });
    return zc::Status::Ok();
  };
  r.scale_div = [](void* a, size_t n, zc_dtype d, double div, void* s) {
    const size_t bytes = n * ref::RefDtypeSize(d);
    FakeCuda::Get().Launch(static_cast<CuStream>(s), {{a, bytes, true}},
                           [=](const std::vector<void*>& v) { ref::RefScaleDiv(v[0], n, d, div); });
    return zc::Status::Ok();
  };
  r.synchronize = [](void* s, const char* what) {
    const gpu::CuResult res = FakeCuda::Get().table()->StreamSynchronize(static_cast<CuStream>(s));
    return res == 0 ? zc::Status::Ok() : zc::Error(ZC_ERR_SYSTEM, "%s: fake stream failed", what);
  };
  r.scale = [](void* dst, const void* src, size_t n, zc_dtype d, double f, void* s) {
    const size_t bytes = n * ref::RefDtypeSize(d);
    ++g_scale_launches;
    FakeCuda::Get().Launch(static_cast<CuStream>(s), {{src, bytes, false}, {dst, bytes, true}},
                           [=](const std::vector<void*>& v) { zc::engine::ScaledCopy(d, v[0], v[1], n, f); });
    return zc::Status::Ok();
  };
  return r;
}

// The fake driver's cuMemcpyAsync behind FailingMemcpyAsync (pack failures),
// and fake kernels for the GPU reductions.
struct Rig : gpu::testing::FakeDeviceRig {
  gpu::DeviceReducer reducer = FakeKernels();
  Rig() : FakeDeviceRig([](gpu::DriverTable& t) {
      g_real_memcpy_async = t.MemcpyAsync;
      t.MemcpyAsync = &FailingMemcpyAsync;
    }) {}
  void Install(zc_comm* comm, const char* ipc_mode) { FakeDeviceRig::Install(comm, {ipc_mode, &reducer}); }
};

Env BaseEnv(const char* transport, const char* threshold = nullptr) {
  Env env{{"ZC_TRANSPORT", transport}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "30"}};
  if (threshold) env.push_back({"ZC_FUSION_THRESHOLD", threshold});
  return env;
}

bool Floating(zc_dtype d) { return d == ZC_FLOAT16 || d == ZC_BFLOAT16 || d == ZC_FLOAT32 || d == ZC_FLOAT64; }
bool Unsigned(zc_dtype d) { return d == ZC_UINT8 || d == ZC_UINT16 || d == ZC_UINT32 || d == ZC_UINT64; }

// Element i of v (a small integer: every sum below is exact in every dtype).
void Put(zc_dtype d, void* buf, size_t i, int v) {
  switch (d) {
    case ZC_INT8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case ZC_UINT8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case ZC_INT16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); break;
    case ZC_UINT16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(v); break;
    case ZC_INT32: static_cast<int32_t*>(buf)[i] = v; break;
    case ZC_UINT32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case ZC_INT64: static_cast<int64_t*>(buf)[i] = v; break;
    case ZC_UINT64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case ZC_FLOAT16: static_cast<uint16_t*>(buf)[i] = ref::RefFloatToHalf(static_cast<float>(v)); break;
    case ZC_BFLOAT16: static_cast<uint16_t*>(buf)[i] = ref::RefFloatToBf16(static_cast<float>(v)); break;
    case ZC_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case ZC_FLOAT64: static_cast<double*>(buf)[i] = v; break;
    case ZC_BOOL: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v & 1); break;
  }
}

// What `rank` contributes to tensor t at step: rank-, index-, tensor- and
// step-dependent, negative too for signed types.
std::vector<char> Input(zc_dtype d, size_t n, int rank, int t, int step) {
  std::vector<char> v(n * ref::RefDtypeSize(d));
  for (size_t i = 0; i < n; ++i) {
    int x = static_cast<int>((rank * 7 + i * 3 + t * 5 + step * 11) % 11);
    if (!Unsigned(d) && d != ZC_BOOL) x -= 5;
    Put(d, v.data(), i, x);
  }
  return v;
}

// The engine's result, from the CPU reference: postscale(reduce over ranks
// of prescale(input)), AVG dividing the sum once.
std::vector<char> Expected(zc_dtype d, zc_op op, size_t n, int ranks, int t, int step, double pre, double post) {
  std::vector<char> acc, x;
  for (int r = 0; r < ranks; ++r) {
    x = Input(d, n, r, t, step);
    zc::engine::ScaledCopy(d, x.data(), x.data(), n, pre);
    if (r == 0) acc = x;
    else ref::RefReduce(acc.data(), acc.data(), x.data(), n, d, op);
  }
  if (op == ZC_AVG) ref::RefScaleDiv(acc.data(), n, d, ranks);
  zc::engine::ScaledCopy(d, acc.data(), acc.data(), n, post);
  return acc;
}

// A buffer of the rank's: fake device memory, or host memory.
struct Buf {
  bool device;
  size_t bytes;
  std::vector<char> host;
  void* dev = nullptr;
  Buf(bool device_, size_t bytes_) : device(device_), bytes(bytes_), host(bytes_ + 1) {
    if (device) dev = FakeCuda::Get().Alloc(bytes + 1);
  }
  void* ptr() { return device ? dev : host.data(); }
  // A kernel on the legacy default stream writes v (no host wait after it).
  void Write(std::vector<char> v) {
    if (!device) {
      std::memcpy(host.data(), v.data(), v.size());
      return;
    }
    const size_t n = v.size();
    if (n == 0) return;
    FakeCuda::Get().Launch(nullptr, {{dev, n, true}},
                           [v = std::move(v), n](const std::vector<void*>& p) { std::memcpy(p[0], v.data(), n); });
  }
  std::vector<char> Read() {
    std::vector<char> v(bytes);
    if (device) FakeCuda::Get().Download(v.data(), dev, bytes);
    else std::memcpy(v.data(), host.data(), bytes);
    return v;
  }
};

// One allreduce tensor of a step: its buffers (in place or not) and name.
struct Tensor {
  std::string name;
  size_t n;
  bool in_place;
  std::unique_ptr<Buf> in, out;
};

#define CHILD_RUN(call)                      \
  do {                                       \
    if (int r_ = (call); r_ != 0) return r_; \
  } while (0)

int NoViolations(int rank, const char* what) {
  const auto v = FakeCuda::Get().violations();
  CHILD_CHECK(v.empty(), "rank %d: %s: the fake driver saw %zu violations, the first: %s", rank, what, v.size(),
              v.empty() ? "" : v[0].c_str());
  return 0;
}

int Compare(int rank, const std::string& name, zc_dtype d, size_t n, const std::vector<char>& got,
            const std::vector<char>& want) {
  const size_t i = ref::RefFirstMismatch(got.data(), want.data(), n, d);
  CHILD_CHECK(i == n, "rank %d: '%s' (%zu elements): element %zu differs from the reference", rank, name.c_str(), n, i);
  return 0;
}

struct Options {
  const char* ipc_mode = "1";
  bool rank0_host = false;  // rank 0 passes host tensors, the others device
  bool every_op = true;     // every dtype x op, else float32/int32 sum and float64 avg
  bool others = true;       // a broadcast and an allgather per step
  bool big = false;         // a 40000-element float64 tensor
  int expect_fused = 1;     // 0: no fused set may run; 1: some must; -1: no check
};

// Allreduces of the given sizes, one set per (dtype, op), three steps.
int AllreduceSteps(zc_comm* comm, zc_engine* eng, const Options& o) {
  const int rank = zc_rank(comm), n = zc_size(comm);
  const bool device = !(o.rank0_host && rank == 0);
  std::vector<std::pair<zc_dtype, zc_op>> combos;
  const zc_dtype all[] = {ZC_INT8,  ZC_UINT8,   ZC_INT32,   ZC_UINT32,  ZC_INT64, ZC_UINT64, ZC_FLOAT16,
                          ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64, ZC_INT16, ZC_UINT16, ZC_BOOL};
  if (o.every_op) {
    for (zc_dtype d : all) {
      for (zc_op op : {ZC_SUM, ZC_MIN, ZC_MAX}) combos.push_back({d, op});
      if (Floating(d)) combos.push_back({d, ZC_AVG});
    }
  } else {
    combos = {{ZC_FLOAT32, ZC_SUM}, {ZC_INT32, ZC_SUM}, {ZC_FLOAT64, ZC_AVG}};
  }
  std::vector<size_t> sizes = {1, 2, 3, 5, 17, 31, 101};
  if (o.big) sizes.push_back(40000);
  for (auto [d, op] : combos) {
    const size_t es = ref::RefDtypeSize(d);
    const double pre = d == ZC_BOOL ? 1.0 : 0.5, post = d == ZC_BOOL ? 1.0 : 3.0;
    std::vector<Tensor> ts;
    for (size_t k = 0; k < sizes.size(); ++k) {
      Tensor t;
      t.name = zc::Format("%s.%s.%zu", zc::DtypeName(d), zc::OpName(op), k);
      t.n = sizes[k];
      t.in_place = k % 3 == 1;
      t.in = std::make_unique<Buf>(device, t.n * es);
      if (!t.in_place) t.out = std::make_unique<Buf>(device, t.n * es);
      ts.push_back(std::move(t));
    }
    // A host tensor of the same dtype and op on every rank: fused apart.
    Tensor h{zc::Format("%s.%s.host", zc::DtypeName(d), zc::OpName(op)), 13, false,
             std::make_unique<Buf>(false, 13 * es), std::make_unique<Buf>(false, 13 * es)};
    const int hidx = static_cast<int>(sizes.size());
    for (int step = 0; step < 3; ++step) {
      const uint64_t copies0 = FakeCuda::Get().async_copies() + g_scale_launches;
      std::vector<zc_engine_handle*> hs(ts.size() + 1, nullptr);
      for (size_t j = 0; j < ts.size(); ++j) {
        // Rank-dependent order of submission.
        const size_t k = (rank % 2) ? ts.size() - 1 - j : j;
        Tensor& t = ts[k];
        t.in->Write(Input(d, t.n, rank, static_cast<int>(k), step));
        void* out = t.in_place ? t.in->ptr() : t.out->ptr();
        const int64_t shape[1] = {static_cast<int64_t>(t.n)};
        CHILD_OK(zc_engine_allreduce(eng, t.name.c_str(), t.in->ptr(), out, 1, shape, d, op, pre, post, &hs[k]));
        if (j == 2) {
          h.in->Write(Input(d, h.n, rank, hidx, step));
          const int64_t hshape[1] = {static_cast<int64_t>(h.n)};
          CHILD_OK(zc_engine_allreduce(eng, h.name.c_str(), h.in->ptr(), h.out->ptr(), 1, hshape, d, op, pre, post,
                                       &hs.back()));
        }
      }
      for (auto* hd : hs) CHILD_OK(zc_engine_wait(hd));
      for (auto* hd : hs) zc_engine_handle_free(hd);
      for (size_t k = 0; k < ts.size(); ++k) {
        Tensor& t = ts[k];
        CHILD_RUN(Compare(rank, t.name, d, t.n, (t.in_place ? t.in : t.out)->Read(),
                          Expected(d, op, t.n, n, static_cast<int>(k), step, pre, post)));
      }
      CHILD_RUN(Compare(rank, h.name, d, h.n, h.out->Read(), Expected(d, op, h.n, n, hidx, step, pre, post)));
      const uint64_t copies = FakeCuda::Get().async_copies() + g_scale_launches - copies0;
      if (device) {
        // Every device tensor packed and unpacked on the device (copies or
        // scaling kernels; in place without scaling, alone: none), not
        // staged at submission.
        CHILD_CHECK(copies >= ts.size(), "rank %d: %s %s step %d: %llu device copies and kernels for %zu device tensors", rank,
                    zc::DtypeName(d), zc::OpName(op), step, static_cast<unsigned long long>(copies), ts.size());
      } else {
        CHILD_CHECK(copies == 0, "rank %d: host tensors made %llu device copies or kernels", rank,
                    static_cast<unsigned long long>(copies));
      }
      CHILD_RUN(NoViolations(rank, "allreduce"));
    }
  }
  zc_engine_stats st{};
  CHILD_OK(zc_engine_get_stats(eng, &st, sizeof st));
  if (o.expect_fused == 0)
    CHILD_CHECK(st.fused_sets == 0, "rank %d: %llu fused sets with a threshold below every tensor", rank,
                static_cast<unsigned long long>(st.fused_sets));
  // Host tensors never fuse here (one per set of a dtype and op): fused
  // sets are device ones. Of the many steps, some submit their tensors
  // within one cycle.
  if (o.expect_fused > 0)
    CHILD_CHECK(st.fused_sets > 0, "rank %d: no fused set in %llu cycles", rank,
                static_cast<unsigned long long>(st.cycles));
  return 0;
}

// A device broadcast from every root and a device allgather of rank-sized
// inputs (both staged at submission: the inputs' writes are waited for
// first), three steps.
int OtherSteps(zc_comm* comm, zc_engine* eng, const Options& o) {
  const int rank = zc_rank(comm), n = zc_size(comm);
  const bool device = !(o.rank0_host && rank == 0);
  Buf b(device, 13 * sizeof(float));
  const size_t rows = static_cast<size_t>(rank) + 1, cols = 3;
  Buf g(device, rows * cols * sizeof(float));
  for (int step = 0; step < 3; ++step) {
    const int root = step % n;
    b.Write(Input(ZC_FLOAT32, 13, rank, 0, step));
    g.Write(Input(ZC_FLOAT32, rows * cols, rank, 1, step));
    // These are staged at submission with synchronous copies, which (as in
    // CUDA-aware MPI) need the writes finished.
    CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(nullptr) == 0, "rank %d: stream sync", rank);
    const int64_t bshape[1] = {13}, gshape[2] = {static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
    zc_engine_handle *hb = nullptr, *hg = nullptr;
    CHILD_OK(zc_engine_broadcast(eng, "bcast", b.ptr(), 1, bshape, ZC_FLOAT32, root, &hb));
    CHILD_OK(zc_engine_allgather(eng, "gather", g.ptr(), 2, gshape, ZC_FLOAT32, &hg));
    CHILD_OK(zc_engine_wait(hb));
    CHILD_OK(zc_engine_wait(hg));
    CHILD_RUN(Compare(rank, "bcast", ZC_FLOAT32, 13, b.Read(), Input(ZC_FLOAT32, 13, root, 0, step)));
    const void* data = nullptr;
    int nd = 0;
    int64_t shape[ZC_ENGINE_MAX_DIMS] = {};
    CHILD_OK(zc_engine_output(hg, &data, &nd, shape));
    std::vector<char> want;
    for (int r = 0; r < n; ++r) {
      auto v = Input(ZC_FLOAT32, (static_cast<size_t>(r) + 1) * cols, r, 1, step);
      want.insert(want.end(), v.begin(), v.end());
    }
    const size_t total = want.size() / sizeof(float);
    CHILD_CHECK(nd == 2 && shape[0] == static_cast<int64_t>(total / cols), "rank %d: allgather shape", rank);
    CHILD_RUN(Compare(rank, "gather", ZC_FLOAT32, total,
                      std::vector<char>(static_cast<const char*>(data), static_cast<const char*>(data) + want.size()),
                      want));
    zc_engine_handle_free(hb);
    zc_engine_handle_free(hg);
    CHILD_RUN(NoViolations(rank, "broadcast/allgather"));
  }
  return 0;
}

int Body(int rank, const Options& o) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm, o.ipc_mode);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  CHILD_RUN(AllreduceSteps(comm, eng, o));
  if (o.others) CHILD_RUN(OtherSteps(comm, eng, o));
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_RUN(NoViolations(rank, "engine shutdown"));
  const bool all_device = !o.rank0_host;
  if (all_device && std::strcmp(o.ipc_mode, "1") == 0 && zc_size(comm) > 1)
    CHILD_CHECK(FakeCuda::Get().ipc_opens() > 0, "rank %d: no CUDA IPC mapping: the collectives did not run on the "
                "device fusion buffer", rank);
  CHILD_OK(zc_finalize(comm));
  return 0;
}

void RunCase(int ranks, const char* transport, const Options& o, const char* threshold = nullptr) {
  auto res = RunRanks(ranks, [o](int rank) { return Body(rank, o); }, BaseEnv(transport, threshold), 280);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

TEST(EngineDeviceFusion, EveryDtypeOpIpc2Shm) { RunCase(2, "shm", Options{}); }
TEST(EngineDeviceFusion, EveryDtypeOpIpc4Shm) { RunCase(4, "shm", Options{}); }
TEST(EngineDeviceFusion, EveryDtypeOpStaged3Tcp) {
  Options o;
  o.ipc_mode = "0";
  RunCase(3, "tcp", o);
}
TEST(EngineDeviceFusion, EveryDtypeOpRank0Host3Shm) {
  Options o;
  o.rank0_host = true;
  RunCase(3, "shm", o);
}
TEST(EngineDeviceFusion, EveryDtypeOpRank0Host2Tcp) {
  Options o;
  o.rank0_host = true;
  o.ipc_mode = "0";
  RunCase(2, "tcp", o);
}

Options Boundary() {
  Options o;
  o.every_op = false;
  o.others = false;
  o.expect_fused = -1;
  return o;
}
TEST(EngineDeviceFusion, ThresholdOff3Shm) { RunCase(3, "shm", Boundary(), "0"); }
TEST(EngineDeviceFusion, ThresholdBelowEveryTensor3Shm) {
  Options o = Boundary();
  o.expect_fused = 0;
  RunCase(3, "shm", o, "3");  // the smallest tensor: one int32 or float32, 4 bytes
}
// 1+2+3+5+17+31+101 = 160 elements: 640 bytes of float32/int32.
TEST(EngineDeviceFusion, ThresholdExactlyTheSet2Tcp) { RunCase(2, "tcp", Boundary(), "640"); }
TEST(EngineDeviceFusion, ThresholdOneBelowTheSet2Shm) { RunCase(2, "shm", Boundary(), "639"); }
TEST(EngineDeviceFusion, ThresholdGrowsTheBuffer4Shm) {
  Options o = Boundary();
  o.big = true;
  RunCase(4, "shm", o, "1048576");
}

// ---- a joined rank among device ranks ----

// The last rank joins at once; the others allreduce device tensors (fused,
// sum and avg) for three steps, the joined rank contributing zeros from host
// memory (so the device ranks stage), then join too.
int JoinBody(int rank) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm, "1");
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  zc_engine_handle* join = nullptr;
  if (rank == n - 1) CHILD_OK(zc_engine_join(eng, &join));
  if (rank < n - 1) {
    const size_t sizes[3] = {1, 17, 101};
    for (zc_op op : {ZC_SUM, ZC_AVG}) {
      std::vector<std::unique_ptr<Buf>> bufs;
      for (size_t k = 0; k < 3; ++k) bufs.push_back(std::make_unique<Buf>(true, sizes[k] * sizeof(double)));
      for (int step = 0; step < 3; ++step) {
        std::vector<zc_engine_handle*> hs(3, nullptr);
        for (size_t k = 0; k < 3; ++k) {
          bufs[k]->Write(Input(ZC_FLOAT64, sizes[k], rank, static_cast<int>(k), step));
          const std::string name = zc::Format("join.%s.%zu", zc::OpName(op), k);
          const int64_t shape[1] = {static_cast<int64_t>(sizes[k])};
          CHILD_OK(zc_engine_allreduce(eng, name.c_str(), bufs[k]->ptr(), bufs[k]->ptr(), 1, shape, ZC_FLOAT64, op,
                                       1.0, 1.0, &hs[k]));
        }
        for (size_t k = 0; k < 3; ++k) {
          CHILD_OK(zc_engine_wait(hs[k]));
          zc_engine_handle_free(hs[k]);
          // Zeros from the joined rank; AVG still divides by every rank.
          std::vector<char> want = Expected(ZC_FLOAT64, ZC_SUM, sizes[k], n - 1, static_cast<int>(k), step, 1, 1);
          if (op == ZC_AVG) ref::RefScaleDiv(want.data(), sizes[k], ZC_FLOAT64, n);
          CHILD_RUN(Compare(rank, "joined", ZC_FLOAT64, sizes[k], bufs[k]->Read(), want));
        }
        CHILD_RUN(NoViolations(rank, "allreduce with a joined rank"));
      }
    }
    CHILD_OK(zc_engine_join(eng, &join));
  }
  CHILD_OK(zc_engine_wait(join));
  zc_engine_handle_free(join);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(EngineDeviceFusion, JoinedRankAmongDeviceRanks3Shm) {
  auto res = RunRanks(3, JoinBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// ---- a CUDA failure while packing ----

int PackFailureBody(int rank) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm, "1");
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  const char* names[3] = {"good.a", "bad", "good.b"};
  std::vector<std::unique_ptr<Buf>> in, out;
  std::vector<zc_engine_handle*> hs(3, nullptr);
  for (int k = 0; k < 3; ++k) {
    in.push_back(std::make_unique<Buf>(true, 64 * sizeof(float)));
    out.push_back(std::make_unique<Buf>(true, 64 * sizeof(float)));
    in.back()->Write(Input(ZC_FLOAT32, 64, rank, k, 0));
  }
  if (rank == 1) g_fail_src = reinterpret_cast<gpu::CuDevicePtr>(in[1]->ptr());
  const int64_t shape[1] = {64};
  for (int k = 0; k < 3; ++k)
    CHILD_OK(zc_engine_allreduce(eng, names[k], in[k]->ptr(), out[k]->ptr(), 1, shape, ZC_FLOAT32, ZC_SUM, 1.0, 1.0,
                                 &hs[k]));
  for (int k = 0; k < 3; ++k) {
    const zc_status s = zc_engine_wait(hs[k]);
    const std::string err = zc_last_error(comm);
    CHILD_CHECK(s != ZC_OK, "rank %d: '%s' succeeded though rank 1 failed to pack 'bad'", rank, names[k]);
    CHILD_CHECK(s != ZC_ERR_TIMEOUT, "rank %d: '%s' timed out: %s", rank, names[k], err.c_str());
    if (rank == 1) {
      CHILD_CHECK(s == ZC_ERR_SYSTEM, "rank 1: '%s': %s: %s", names[k], zc_status_string(s), err.c_str());
      for (const char* part : {"rank 1", "'bad'", "CUDA_ERROR_INVALID_VALUE", "cuMemcpyAsync"})
        CHILD_CHECK(err.find(part) != std::string::npos, "rank 1: '%s': the error lacks \"%s\": %s", names[k], part,
                    err.c_str());
    } else {
      CHILD_CHECK(err.find("rank 1") != std::string::npos, "rank %d: '%s': the error does not name rank 1: %s", rank,
                  names[k], err.c_str());
    }
    zc_engine_handle_free(hs[k]);
  }
  zc_engine_destroy(eng);
  zc_finalize(comm);
  return 0;
}

TEST(EngineDeviceFusion, PackFailureFailsEveryRank3Shm) {
  auto res = RunRanks(3, PackFailureBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
