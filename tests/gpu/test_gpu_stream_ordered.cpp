// The stream-ordered calls (zc_*_on_stream) through the C ABI, on the
// stream-faithful fake driver (fake_cuda.h): each rank installs a
// DevicePath over the fake in its communicator; its "device memory" is
// PROT_NONE to host code, and the fake reports every device access that
// is not ordered after a conflicting one (a missing wait).
//
// EveryCall: per round, a latch kernel holds the stream; behind it, for
// every collective and send/recv, a kernel writes the input (rank- and
// index-dependent), the call is made, a kernel reads the output into host
// memory. No host synchronisation in between: the calls return while the
// stream is still held (a call that waited for the stream would never
// return), and the requests are not done before the latch opens. Then the
// latch opens, the stream is synchronised once, and every output is
// checked against the reference; the fake must have seen no violation.
// Counts 1, 7, 4099 (odd, unaligned ends); 2-4 ranks; shm and tcp; the
// cuStreamWaitValue32 gate and the host-function fallback.
//
// Errors: a count mismatch fails the request and zc_comm_get_async_error
// and the stream goes on; a stream that never reaches the call times out
// (ZC_ERR_TIMEOUT naming the stream) and the stream goes on after it.
// HostBuffers: host memory on a stream.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "fake_cuda.h"
#include "gpu/device_path.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "fake_device_rig.h"
#include "gpu_fake_driver.h"
#include "harness/multiproc.h"
#include "harness/shared_counter.h"

namespace {

using namespace zc::test;
namespace gpu = zc::gpu;
using gpu::CuStream;
using gpu::testing::FakeCuda;
using gpu::testing::FakeDriver;

// Staged (no CUDA IPC); wait_value false: a driver without
// cuStreamWaitValue32 (the fallback through host functions).
struct Rig : gpu::testing::FakeDeviceRig {
  explicit Rig(bool wait_value)
      : FakeDeviceRig([wait_value](gpu::DriverTable& t) {
          FakeCuda::Get().DisableWaitValue(!wait_value);
          t = *FakeCuda::Get().table();
        }) {}
  void Install(zc_comm* comm) { FakeDeviceRig::Install(comm, {}); }
};

// A kernel that holds its stream until Open() (bounded: 60 s).
struct Latch {
  std::atomic<bool> open{false};
  void Enqueue(CuStream s) {
    FakeCuda::Get().Launch(s, {}, [this](const std::vector<void*>&) {
      for (int i = 0; i < 60000 && !open.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
};

float Value(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + i % 997); }

// One call's output, read by a kernel into `got`, checked after the round.
struct Out {
  std::string what;
  std::vector<float> got, want;
};

class Round {
 public:
  Round(zc_comm* comm, CuStream s) : comm_(comm), s_(s), rank_(zc_rank(comm)), n_(zc_size(comm)) {}

  // Device buffer of count floats (never freed: the child exits).
  float* Dev(size_t count) { return static_cast<float*>(FakeCuda::Get().Alloc(count * sizeof(float) + 1)); }
  // A kernel on the stream writes v into dev.
  void Write(float* dev, std::vector<float> v) {
    const size_t bytes = v.size() * sizeof(float);
    FakeCuda::Get().Launch(s_, {{dev, bytes, true}}, [v = std::move(v), bytes](const std::vector<void*>& p) {
      std::memcpy(p[0], v.data(), bytes);
    });
  }
  // A kernel on the stream reads dev; the round checks it against want.
  void Read(const char* what, const float* dev, std::vector<float> want) {
    outs_.push_back(std::make_unique<Out>());
    Out* o = outs_.back().get();
    o->what = what;
    o->want = std::move(want);
    o->got.assign(o->want.size(), -7.0f);
    const size_t bytes = o->want.size() * sizeof(float);
    FakeCuda::Get().Launch(s_, {{dev, bytes, false}}, [o, bytes](const std::vector<void*>& p) {
      std::memcpy(o->got.data(), p[0], bytes);
    });
  }
  void Keep(zc_request* r) { reqs_.push_back(r); }
  const std::vector<zc_request*>& reqs() const { return reqs_; }

  // Waits for the stream and the requests, then checks every output.
  int Finish() {
    zc_comm* comm = comm_;
    CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(s_) == 0, "rank %d: cuStreamSynchronize failed", rank_);
    for (zc_request* r : reqs_) CHILD_OK(zc_wait(r));
    reqs_.clear();
    for (const auto& o : outs_) {
      for (size_t i = 0; i < o->want.size(); ++i)
        CHILD_CHECK(o->got[i] == o->want[i], "rank %d: %s: [%zu] = %g, want %g", rank_, o->what.c_str(), i,
                    static_cast<double>(o->got[i]), static_cast<double>(o->want[i]));
    }
    outs_.clear();
    const auto v = FakeCuda::Get().violations();
    CHILD_CHECK(v.empty(), "rank %d: the fake driver saw %zu violations, the first: %s", rank_, v.size(),
                v.empty() ? "" : v[0].c_str());
    return 0;
  }

  zc_comm* comm_;
  CuStream s_;
  int rank_, n_;
  std::vector<std::unique_ptr<Out>> outs_;
  std::vector<zc_request*> reqs_;
};

std::vector<float> Series(int rank, size_t count, size_t offset = 0) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = Value(rank, offset + i);
  return v;
}

// Every collective and send/recv of one count, queued behind the latch.
int QueueEveryCall(Round& R, size_t count, int root) {
  zc_comm* comm = R.comm_;
  const int rank = R.rank_, n = R.n_;
  zc_request* req = nullptr;
  std::vector<float> sum(count, 0.0f);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i);

  // allreduce, out of place and in place
  float *in = R.Dev(count), *out = R.Dev(count);
  R.Write(in, Series(rank, count));
  CHILD_OK(zc_allreduce_on_stream(comm, in, out, count, ZC_FLOAT32, ZC_SUM, R.s_, &req));
  R.Keep(req);
  R.Read("allreduce", out, sum);
  float* same = R.Dev(count);
  R.Write(same, Series(rank, count));
  CHILD_OK(zc_allreduce_on_stream(comm, same, same, count, ZC_FLOAT32, ZC_SUM, R.s_, &req));
  R.Keep(req);
  R.Read("allreduce in place", same, sum);
  // The same input buffer again right away: the stream orders the reuse.
  R.Write(in, Series(rank, count, 1));
  CHILD_OK(zc_allreduce_on_stream(comm, in, out, count, ZC_FLOAT32, ZC_MAX, R.s_, nullptr));
  R.Read("allreduce max (reused buffers, no request)", out, Series(n - 1, count, 1));

  // broadcast
  float* b = R.Dev(count);
  R.Write(b, rank == root ? Series(rank, count) : std::vector<float>(count, 0.0f));
  CHILD_OK(zc_broadcast_on_stream(comm, b, count, ZC_FLOAT32, root, R.s_, &req));
  R.Keep(req);
  R.Read("broadcast", b, Series(root, count));

  // reduce (recvbuf only at the root)
  float* rin = R.Dev(count);
  float* rout = rank == root ? R.Dev(count) : nullptr;
  R.Write(rin, Series(rank, count));
  CHILD_OK(zc_reduce_on_stream(comm, rin, rout, count, ZC_FLOAT32, ZC_SUM, root, R.s_, &req));
  R.Keep(req);
  if (rank == root) R.Read("reduce", rout, sum);

  // allgather
  float* all = R.Dev(count * n);
  CHILD_OK(zc_allgather_on_stream(comm, in, all, count, ZC_FLOAT32, R.s_, &req));
  R.Keep(req);
  std::vector<float> gathered;
  for (int r = 0; r < n; ++r) {
    auto v = Series(r, count, 1);
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
  R.Read("allgather", all, gathered);

  // reduce_scatter: block r of rank q's input is Series(q, count, r*count)
  float* rs_in = R.Dev(count * n);
  float* rs_out = R.Dev(count);
  R.Write(rs_in, Series(rank, count * n));
  CHILD_OK(zc_reduce_scatter_on_stream(comm, rs_in, rs_out, count, ZC_FLOAT32, ZC_SUM, R.s_, &req));
  R.Keep(req);
  std::vector<float> rs_want(count, 0.0f);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) rs_want[i] += Value(q, rank * count + i);
  R.Read("reduce_scatter", rs_out, rs_want);

  // alltoall: rank q sends block j = Series(q, count, j*count) to rank j
  float* a_out = R.Dev(count * n);
  CHILD_OK(zc_alltoall_on_stream(comm, rs_in, a_out, count, ZC_FLOAT32, R.s_, &req));
  R.Keep(req);
  std::vector<float> a_want;
  for (int q = 0; q < n; ++q) {
    auto v = Series(q, count, rank * count);
    a_want.insert(a_want.end(), v.begin(), v.end());
  }
  R.Read("alltoall", a_out, a_want);

  CHILD_OK(zc_barrier_on_stream(comm, R.s_, &req));
  R.Keep(req);

  // allgatherv: rank r contributes count + r elements, packed
  std::vector<size_t> counts(n), displs(n);
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts[r] = count + r;
    displs[r] = total;
    total += counts[r];
  }
  float* gv_in = R.Dev(count + rank);
  float* gv_out = R.Dev(total);
  R.Write(gv_in, Series(rank, count + rank));
  CHILD_OK(zc_allgatherv_on_stream(comm, gv_in, count + rank, gv_out, counts.data(), displs.data(), ZC_FLOAT32,
                                   R.s_, &req));
  R.Keep(req);
  std::vector<float> gv_want;
  for (int r = 0; r < n; ++r) {
    auto v = Series(r, count + r);
    gv_want.insert(gv_want.end(), v.begin(), v.end());
  }
  R.Read("allgatherv", gv_out, gv_want);

  // alltoallv: rank q sends count + (q + j) % 2 elements to rank j
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = count + (rank + j) % 2;
    sd[j] = st;
    st += sc[j];
    rc[j] = count + (rank + j) % 2;
    rd[j] = rt;
    rt += rc[j];
  }
  float* v_in = R.Dev(st);
  float* v_out = R.Dev(rt);
  R.Write(v_in, Series(rank, st));
  CHILD_OK(zc_alltoallv_on_stream(comm, v_in, sc.data(), sd.data(), v_out, rc.data(), rd.data(), ZC_FLOAT32, R.s_,
                                  &req));
  R.Keep(req);
  std::vector<float> v_want;
  for (int q = 0; q < n; ++q) {
    size_t off = 0;  // where q's block for this rank starts in q's input
    for (int j = 0; j < rank; ++j) off += count + (q + j) % 2;
    auto v = Series(q, count + (q + rank) % 2, off);
    v_want.insert(v_want.end(), v.begin(), v.end());
  }
  R.Read("alltoallv", v_out, v_want);

  // gather and scatter at the root
  float* g_out = rank == root ? R.Dev(count * n) : nullptr;
  CHILD_OK(zc_gather_on_stream(comm, rin, g_out, count, ZC_FLOAT32, root, R.s_, &req));
  R.Keep(req);
  if (rank == root) {
    std::vector<float> g_want;
    for (int r = 0; r < n; ++r) {
      auto v = Series(r, count);
      g_want.insert(g_want.end(), v.begin(), v.end());
    }
    R.Read("gather", g_out, g_want);
  }
  float* s_out = R.Dev(count);
  CHILD_OK(zc_scatter_on_stream(comm, rank == root ? rs_in : nullptr, s_out, count, ZC_FLOAT32, root, R.s_, &req));
  R.Keep(req);
  R.Read("scatter", s_out, Series(root, count, rank * count));

  // send/recv around the ring, receive first on even ranks, send first on odd
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  float* p_in = R.Dev(count);
  float* p_out = R.Dev(count);
  R.Write(p_in, Series(rank, count, 3));
  zc_request *rr = nullptr, *sr = nullptr;
  if (rank % 2 == 0) {
    CHILD_OK(zc_recv_on_stream(comm, p_out, count * sizeof(float), prev, 11, R.s_, &rr));
    CHILD_OK(zc_send_on_stream(comm, p_in, count * sizeof(float), next, 11, R.s_, &sr));
  } else {
    CHILD_OK(zc_send_on_stream(comm, p_in, count * sizeof(float), next, 11, R.s_, &sr));
    CHILD_OK(zc_recv_on_stream(comm, p_out, count * sizeof(float), prev, 11, R.s_, &rr));
  }
  R.Keep(rr);
  R.Keep(sr);
  // The send's input may be overwritten at once: it was copied in stream order.
  R.Write(p_in, std::vector<float>(count, -1.0f));
  R.Read("recv", p_out, Series(prev, count, 3));
  return 0;
}

int EveryCallBody(int rank, bool wait_value) {
  static Rig rig(wait_value);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  CuStream s = FakeCuda::Get().NewStream();
  int round = 0;
  for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) {
    Round R(comm, s);
    Latch latch;
    latch.Enqueue(s);
    if (int r = QueueEveryCall(R, count, round++ % n); r != 0) return r;
    // Every call has returned with the stream held: nothing waited for it,
    // and nothing ran ahead of it.
    for (zc_request* r : R.reqs()) {
      int done = 1;
      CHILD_OK(zc_test(r, &done));
      CHILD_CHECK(!done, "rank %d: count %zu: a request completed before its stream reached it", rank, count);
    }
    latch.open.store(true);
    if (int r = R.Finish(); r != 0) return r;
  }
  if (!wait_value)
    CHILD_CHECK(FakeCuda::Get().host_funcs() > 0, "rank %d: the host-function gate was not used", rank);
  else
    CHILD_CHECK(FakeCuda::Get().value_waits() > 0, "rank %d: cuStreamWaitValue32 was not used", rank);
  zc_status e = ZC_ERR_INTERNAL;
  CHILD_OK(zc_comm_get_async_error(comm, &e));
  CHILD_CHECK(e == ZC_OK, "rank %d: async error %s", rank, zc_status_string(e));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

Env BaseEnv(const char* transport) {
  return {{"ZC_TRANSPORT", transport}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "60"}};
}

void EveryCall(int n, const char* transport, bool wait_value, const char* chunk = nullptr) {
  Env env = BaseEnv(transport);
  if (chunk) env.push_back({"ZC_GPU_CHUNK_BYTES", chunk});
  auto res = RunRanks(n, [wait_value](int rank) { return EveryCallBody(rank, wait_value); }, env, 240);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

TEST(StreamOrdered, EveryCall2Shm) { EveryCall(2, "shm", true); }
TEST(StreamOrdered, EveryCall3Shm) { EveryCall(3, "shm", true); }
TEST(StreamOrdered, EveryCall4Shm) { EveryCall(4, "shm", true); }
TEST(StreamOrdered, EveryCall2Tcp) { EveryCall(2, "tcp", true); }
TEST(StreamOrdered, EveryCall3Tcp) { EveryCall(3, "tcp", true); }
TEST(StreamOrdered, EveryCallHostFuncGate2Shm) { EveryCall(2, "shm", false); }
// Pipelined staging: allreduce, broadcast and reduce in 16-float parts
// (4099 floats: 257 parts, the last of 3 floats).
TEST(StreamOrdered, EveryCallPipelined3Shm) { EveryCall(3, "shm", true, "64"); }
TEST(StreamOrdered, EveryCallPipelined2Tcp) { EveryCall(2, "tcp", true, "64"); }
TEST(StreamOrdered, EveryCallPipelinedHostFuncGate2Shm) { EveryCall(2, "shm", false, "64"); }

// Chunk boundaries: counts around multiples of the part (1024 floats),
// out of place and in place, broadcast and reduce from the last rank; the
// stream waits on one gate per part.
int ChunkBoundariesBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm), root = n - 1;
  CuStream s = FakeCuda::Get().NewStream();
  for (size_t count : {size_t{1023}, size_t{1024}, size_t{1025}, size_t{2048}, size_t{3 * 1024 + 1}}) {
    const size_t parts = (count + 1023) / 1024;
    Round R(comm, s);
    Latch latch;
    latch.Enqueue(s);
    std::vector<float> sum(count, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i);
    zc_request* req = nullptr;
    float *in = R.Dev(count), *out = R.Dev(count);
    R.Write(in, Series(rank, count));
    const uint64_t waits0 = FakeCuda::Get().value_waits();
    CHILD_OK(zc_allreduce_on_stream(comm, in, out, count, ZC_FLOAT32, ZC_SUM, s, &req));
    R.Keep(req);
    R.Read("pipelined allreduce", out, sum);
    R.Write(in, Series(rank, count));
    CHILD_OK(zc_allreduce_on_stream(comm, in, in, count, ZC_FLOAT32, ZC_SUM, s, &req));
    R.Keep(req);
    R.Read("pipelined allreduce in place", in, sum);
    float* b = R.Dev(count);
    R.Write(b, rank == root ? Series(root, count, 5) : std::vector<float>(count, 0.0f));
    CHILD_OK(zc_broadcast_on_stream(comm, b, count, ZC_FLOAT32, root, s, &req));
    R.Keep(req);
    R.Read("pipelined broadcast", b, Series(root, count, 5));
    float* rin = R.Dev(count);
    float* rout = rank == root ? R.Dev(count) : nullptr;
    R.Write(rin, Series(rank, count));
    CHILD_OK(zc_reduce_on_stream(comm, rin, rout, count, ZC_FLOAT32, ZC_SUM, root, s, &req));
    R.Keep(req);
    if (rank == root) R.Read("pipelined reduce", rout, sum);
    latch.open.store(true);
    if (int r = R.Finish(); r != 0) return r;
    const uint64_t waits = FakeCuda::Get().value_waits() - waits0;
    CHILD_CHECK(waits == 4 * parts, "rank %d: count %zu: %llu gates, want %zu (4 calls x %zu parts)", rank, count,
                static_cast<unsigned long long>(waits), 4 * parts, parts);
  }
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(StreamOrdered, PipelinedChunkBoundaries3Shm) {
  Env env = BaseEnv("shm");
  env.push_back({"ZC_GPU_CHUNK_BYTES", "4096"});
  auto res = RunRanks(3, ChunkBoundariesBody, env, 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// A persistent plan started on a stream (zc_plan_start_on_stream), three
// times on the same device buffers with new values (the second in place),
// plus a host-buffer start, all queued behind a latch with kernels that
// write the inputs and read the outputs: the starts return while the
// stream is held, the outputs are right and the fake saw no violation.
int PlanOnStreamBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  CuStream s = FakeCuda::Get().NewStream();
  for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) {
    zc_plan* plan = nullptr;
    CHILD_OK(zc_allreduce_plan_init(comm, count, ZC_FLOAT32, ZC_SUM, &plan));
    Round R(comm, s);
    Latch latch;
    latch.Enqueue(s);
    float *in = R.Dev(count), *out = R.Dev(count);
    std::vector<float> hin(count), hout(count, -1.0f);
    for (size_t round = 0; round < 4; ++round) {
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i + round * 13);
      zc_request* req = nullptr;
      if (round == 3) {  // host buffers, filled by a "kernel" in stream order
        FakeCuda::Get().Launch(s, {}, [&hin, rank, count](const std::vector<void*>&) {
          const auto v = Series(rank, count, 3 * 13);
          std::copy(v.begin(), v.end(), hin.begin());
        });
        CHILD_OK(zc_plan_start_on_stream(plan, hin.data(), hout.data(), s, &req));
        R.Keep(req);
        continue;
      }
      float* dst = round == 1 ? in : out;
      R.Write(in, Series(rank, count, round * 13));
      CHILD_OK(zc_plan_start_on_stream(plan, in, dst, s, &req));
      R.Keep(req);
      R.Read(round == 1 ? "plan on stream, in place" : "plan on stream", dst, sum);
    }
    // Nothing ran ahead of the stream: every request is still pending.
    for (zc_request* r : R.reqs()) {
      int done = 1;
      CHILD_OK(zc_test(r, &done));
      CHILD_CHECK(!done, "rank %d: a plan start completed before the stream reached it", rank);
    }
    latch.open.store(true);
    if (int r = R.Finish(); r != 0) return r;
    std::vector<float> sum(count, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i + 3 * 13);
    CHILD_CHECK(hout == sum, "rank %d: plan on stream with host buffers: wrong result", rank);
    CHILD_OK(zc_plan_free(plan));
  }
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(StreamOrdered, PlanOnStream3Shm) {
  auto res = RunRanks(3, PlanOnStreamBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(StreamOrdered, PlanOnStream2Tcp) {
  auto res = RunRanks(2, PlanOnStreamBody, BaseEnv("tcp"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// A count mismatch fails the request and the communicator's async error;
// the stream goes on past the failed call.
int MismatchBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  CuStream s = FakeCuda::Get().NewStream();
  const size_t count = 100 + rank;
  Round R(comm, s);
  float *in = R.Dev(count), *out = R.Dev(count);
  R.Write(in, Series(rank, count));
  zc_request* req = nullptr;
  CHILD_OK(zc_allreduce_on_stream(comm, in, out, count, ZC_FLOAT32, ZC_SUM, s, &req));
  std::atomic<bool> after{false};
  FakeCuda::Get().Launch(s, {}, [&](const std::vector<void*>&) { after.store(true); });
  zc_status st = zc_wait(req);
  const std::string err = zc_last_error(comm);
  CHILD_CHECK(st == ZC_ERR_MISMATCH, "rank %d: %s: %s", rank, zc_status_string(st), err.c_str());
  CHILD_CHECK(err.find("allreduce_on_stream") != std::string::npos, "rank %d: %s", rank, err.c_str());
  zc_status async = ZC_OK;
  CHILD_OK(zc_comm_get_async_error(comm, &async));
  CHILD_CHECK(async == ZC_ERR_MISMATCH, "rank %d: async error %s", rank, zc_status_string(async));
  CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(s) == 0, "rank %d: stream stuck", rank);
  CHILD_CHECK(after.load(), "rank %d: the work after the failed call did not run", rank);
  zc_finalize(comm);
  return 0;
}

TEST(StreamOrdered, MismatchFailsRequestAndAsyncError) {
  auto res = RunRanks(2, MismatchBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// A stream that never reaches the call: ZC_ERR_TIMEOUT after ZC_TIMEOUT,
// and the stream is not left waiting on the gate once it gets there.
int StuckStreamBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  CuStream s = FakeCuda::Get().NewStream();
  Latch latch;
  latch.Enqueue(s);
  float* buf = static_cast<float*>(FakeCuda::Get().Alloc(64 * sizeof(float)));
  zc_request* req = nullptr;
  CHILD_OK(zc_allreduce_on_stream(comm, buf, buf, 64, ZC_FLOAT32, ZC_SUM, s, &req));
  zc_status st = zc_wait(req);
  const std::string err = zc_last_error(comm);
  CHILD_CHECK(st == ZC_ERR_TIMEOUT && err.find("did not reach the call") != std::string::npos, "rank %d: %s: %s",
              rank, zc_status_string(st), err.c_str());
  latch.open.store(true);
  CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(s) == 0, "rank %d: stream stuck", rank);
  zc_finalize(comm);
  return 0;
}

TEST(StreamOrdered, StuckStreamTimesOut) {
  Env env = BaseEnv("shm");
  env.back().second = "2";  // ZC_TIMEOUT
  auto res = RunRanks(2, StuckStreamBody, env, 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// Every rank receives before it sends, on one stream: each send waits
// behind its own rank's receive (stream order), so no message leaves before
// a receive gives up. The first receive to reach its deadline times out, and
// its error names the send queued behind it; its stream goes on, and its send
// may reach a peer whose receive has not given up yet (that one completes).
// The same exchange with the send on a second stream delivers.
SharedCounter* g_ring_timeouts = nullptr;  // receives that timed out, every rank

int StuckRingReceiveFirstBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm), next = (rank + 1) % n, prev = (rank + n - 1) % n;
  CuStream s = FakeCuda::Get().NewStream(), other = FakeCuda::Get().NewStream();
  const size_t count = 33;
  float* in = static_cast<float*>(FakeCuda::Get().Alloc(count * sizeof(float)));
  float* out = static_cast<float*>(FakeCuda::Get().Alloc(count * sizeof(float)));
  zc_request *rr = nullptr, *sr = nullptr;
  CHILD_OK(zc_recv_on_stream(comm, out, count * sizeof(float), prev, 7, s, &rr));
  CHILD_OK(zc_send_on_stream(comm, in, count * sizeof(float), next, 7, s, &sr));
  zc_status st = zc_wait(rr);
  const std::string err = zc_last_error(comm);
  CHILD_CHECK(st == ZC_ERR_TIMEOUT || st == ZC_OK, "rank %d: receive: %s: %s", rank, zc_status_string(st),
              err.c_str());
  if (st == ZC_ERR_TIMEOUT) g_ring_timeouts->Add();
  const std::string queued =
      "; this rank's send_on_stream to " + std::to_string(next) + " (tag 7, 132 bytes) is queued after";
  CHILD_CHECK(st == ZC_OK || (err.find("recv_on_stream from " + std::to_string(prev)) != std::string::npos &&
                                err.find(queued) != std::string::npos),
              "rank %d: the receive's error does not name the send behind it: %s", rank, err.c_str());
  // The failed receive lets the stream go on: the send then goes out late
  // (unmatched at the peer, whose receive gave up) or times out itself.
  (void)zc_wait(sr);
  CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(s) == 0, "rank %d: stream stuck", rank);
  // A fresh exchange (another tag) with the send on a second stream.
  Round R(comm, s);
  float* p_in = R.Dev(count);
  float* p_out = R.Dev(count);
  R.Write(p_in, Series(rank, count, 5));
  R.Write(p_out, std::vector<float>(count, -1.0f));
  // The send's input is written on s; the other stream waits for that write
  // (an event recorded before the receive, not after its gate).
  gpu::CuEvent written = nullptr;
  CHILD_CHECK(FakeCuda::Get().table()->EventCreate(&written, 0) == 0, "rank %d: event", rank);
  CHILD_CHECK(FakeCuda::Get().table()->EventRecord(written, s) == 0, "rank %d: event", rank);
  CHILD_OK(zc_recv_on_stream(comm, p_out, count * sizeof(float), prev, 8, s, &rr));
  CHILD_CHECK(FakeCuda::Get().table()->StreamWaitEvent(other, written, 0) == 0, "rank %d: wait event", rank);
  CHILD_OK(zc_send_on_stream(comm, p_in, count * sizeof(float), next, 8, other, &sr));
  R.Keep(rr);
  R.Keep(sr);
  R.Read("recv", p_out, Series(prev, count, 5));
  CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(other) == 0, "rank %d: other stream stuck", rank);
  if (int r = R.Finish(); r != 0) return r;
  zc_finalize(comm);
  return 0;
}

TEST(StreamOrdered, StuckRingReceiveFirstNamesTheQueuedSend) {
  Env env = BaseEnv("shm");
  env.back().second = "2";  // ZC_TIMEOUT
  SharedCounter timeouts;
  g_ring_timeouts = &timeouts;
  auto res = RunRanks(2, StuckRingReceiveFirstBody, env, 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  EXPECT_GE(timeouts.value(), 1) << "no receive timed out: a send left before its stream reached it";
}

// Host buffers on a stream: the call still waits for the stream's earlier
// work before it starts, and later work waits for it.
int HostBuffersBody(int rank) {
  static Rig rig(true);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  CuStream s = FakeCuda::Get().NewStream();
  const size_t count = 1001;
  std::vector<float> in(count, 0.0f), out(count, -1.0f), sum(count, 0.0f);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i);
  Latch latch;
  latch.Enqueue(s);
  // The "kernel" fills the host input (as a host function would).
  FakeCuda::Get().Launch(s, {}, [&](const std::vector<void*>&) {
    const auto v = Series(rank, count);
    std::copy(v.begin(), v.end(), in.begin());  // in place: the call has in.data()
  });
  zc_request* req = nullptr;
  CHILD_OK(zc_allreduce_on_stream(comm, in.data(), out.data(), count, ZC_FLOAT32, ZC_SUM, s, &req));
  std::vector<float> seen;
  FakeCuda::Get().Launch(s, {}, [&](const std::vector<void*>&) { seen = out; });
  // Nothing ran ahead of the stream: the output is untouched while it is held.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHILD_CHECK(out[0] == -1.0f, "rank %d: the output was written before the stream reached the call", rank);
  latch.open.store(true);
  CHILD_CHECK(FakeCuda::Get().table()->StreamSynchronize(s) == 0, "rank %d: stream", rank);
  CHILD_OK(zc_wait(req));
  CHILD_CHECK(seen.size() == count, "rank %d: the work after the call did not run", rank);
  for (size_t i = 0; i < count; ++i)
    CHILD_CHECK(seen[i] == sum[i] && out[i] == sum[i], "rank %d: [%zu]: the work after the call saw %g, want %g (out %g)",
                rank, i, static_cast<double>(seen[i]), static_cast<double>(sum[i]), static_cast<double>(out[i]));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(StreamOrdered, HostBuffers3Shm) {
  auto res = RunRanks(3, HostBuffersBody, BaseEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// No CUDA in the process (the communicator's own DevicePath, no driver
// loaded): stream NULL runs the calls as nonblocking ones on host memory;
// another stream is ZC_ERR_UNSUPPORTED.
int StreamlessBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const size_t count = 1001;
  std::vector<float> in = Series(rank, count), out(count, -1.0f), sum(count, 0.0f), got(count, 0.0f);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) sum[i] += Value(r, i);
  zc_request *req = nullptr, *rr = nullptr, *sr = nullptr;
  CHILD_OK(zc_allreduce_on_stream(comm, in.data(), out.data(), count, ZC_FLOAT32, ZC_SUM, nullptr, &req));
  CHILD_OK(zc_recv_on_stream(comm, got.data(), count * 4, (rank + n - 1) % n, 5, nullptr, &rr));
  CHILD_OK(zc_send_on_stream(comm, in.data(), count * 4, (rank + 1) % n, 5, nullptr, &sr));
  CHILD_OK(zc_wait(req));
  CHILD_OK(zc_wait(rr));
  CHILD_OK(zc_wait(sr));
  CHILD_CHECK(out == sum, "rank %d: allreduce_on_stream without CUDA: wrong result", rank);
  CHILD_CHECK(got == Series((rank + n - 1) % n, count), "rank %d: recv_on_stream without CUDA: wrong data", rank);
  int dummy = 0;
  zc_status st = zc_allreduce_on_stream(comm, in.data(), out.data(), count, ZC_FLOAT32, ZC_SUM, &dummy, &req);
  CHILD_CHECK(st == ZC_ERR_UNSUPPORTED, "rank %d: a stream without CUDA: %s", rank, zc_status_string(st));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(StreamOrdered, StreamlessWithoutCuda2Shm) {
  auto res = RunRanks(2, StreamlessBody, BaseEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
