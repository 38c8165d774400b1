// Multi-process tests of the engine through its C ABI (zcomm_engine.h):
// every operation against references on 1-4 ranks with rank-dependent data
// and uneven shapes, names submitted in different orders on different
// ranks, fusion on and off giving identical results, the response cache's
// steady state (one negotiation collective per cycle), mismatches, the
// stall report, join, the timeline, and a killed rank. Each TEST is its own
// meson test (meson.build).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/coll_check.h"
#include "engine/fusion.h"
#include "engine/request.h"
#include "harness/multiproc.h"
#include "harness/shared_counter.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;

zc::test::Env MakeEnv(const char* transport, Env extra = {}) {
  Env env = {{"ZC_TRANSPORT", transport}, {"ZC_TIMEOUT", "60"}, {"ZC_CYCLE_TIME", "1"}};
  if (strcmp(transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  for (auto& e : extra) env.push_back(e);
  return env;
}

struct Case {
  const char* transport;
  int ranks;
};
std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.ranks);
}

// Waits for a handle that must succeed (`comm` in scope for CHILD_OK).
#define WAIT_OK(h) CHILD_OK(zc_engine_wait(h))

uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

// ---- every operation against references ----

int AllOpsBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  for (int step = 0; step < 3; ++step) {
    // Allreduce: every dtype and op, odd shapes, submitted all at once in an
    // order that differs by rank, so the engine must match them by name.
    struct T {
      std::string name;
      zc_dtype d;
      zc_op op;
      std::vector<int64_t> shape;
      size_t count;
      std::vector<char> in, out;
      zc_engine_handle* h = nullptr;
      int it;
    };
    std::vector<T> ts;
    int it = step * 1000;
    for (zc_dtype d : kAllDtypes)
      for (zc_op op : OpsFor(d))
        for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {7}, {3, 5}, {2, 3, 11}}) {
          T t;
          t.name = std::string("ar.") + DtypeName(d) + "." + zc::OpName(op) + "." + std::to_string(shape.size());
          t.d = d;
          t.op = op;
          t.shape = shape;
          t.count = 1;
          for (int64_t s : shape) t.count *= static_cast<size_t>(s);
          t.it = ++it;
          t.in.resize(t.count * DtypeSize(d));
          t.out.assign(t.count * DtypeSize(d), 0x5a);
          FillInput(d, op, t.in.data(), t.count, rank, t.it);
          ts.push_back(std::move(t));
        }
    std::vector<size_t> order(ts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (rank % 2) std::reverse(order.begin(), order.end());
    else std::rotate(order.begin(), order.begin() + static_cast<long>(order.size() / 3), order.end());
    for (size_t k : order) {
      T& t = ts[k];
      bool inplace = (k % 2) == 1;
      void* out = inplace ? t.in.data() : t.out.data();
      CHILD_OK(zc_engine_allreduce(eng, t.name.c_str(), t.in.data(), out, static_cast<int>(t.shape.size()),
                                   t.shape.data(), t.d, t.op, 1.0, 1.0, &t.h));
    }
    // Scale factors: output = post * sum(pre * x).
    std::vector<double> sx(13), sy(13);
    for (size_t i = 0; i < sx.size(); ++i) sx[i] = rank + 1 + static_cast<double>(i);
    int64_t sshape[] = {13};
    zc_engine_handle* hs;
    CHILD_OK(zc_engine_allreduce(eng, "scaled", sx.data(), sy.data(), 1, sshape, ZC_FLOAT64, ZC_SUM, 2.0, 0.25, &hs));
    // Broadcast from a rotating root, every dtype.
    std::vector<std::vector<char>> bbuf;
    std::vector<zc_engine_handle*> bh;
    const int root = (step + 1) % n;
    for (zc_dtype d : kAllDtypes) {
      std::vector<char> b(17 * DtypeSize(d));
      FillInput(d, ZC_SUM, b.data(), 17, rank, 77 + step);
      bbuf.push_back(std::move(b));
      int64_t shape[] = {17};
      zc_engine_handle* h;
      CHILD_OK(zc_engine_broadcast(eng, (std::string("bc.") + DtypeName(d)).c_str(), bbuf.back().data(), 1, shape, d,
                                   root, &h));
      bh.push_back(h);
    }
    // Allgather with an uneven first dimension: rank r has r + 1 rows of 3.
    std::vector<int32_t> ag((rank + 1) * 3);
    for (size_t i = 0; i < ag.size(); ++i) ag[i] = rank * 1000 + static_cast<int>(i) + step;
    int64_t agshape[] = {rank + 1, 3};
    zc_engine_handle* hag;
    CHILD_OK(zc_engine_allgather(eng, "gather", ag.data(), 2, agshape, ZC_INT32, &hag));
    // Alltoall with splits: rank r sends (q + r) % 3 rows of 2 to rank q.
    std::vector<int64_t> splits(n);
    int64_t rows = 0;
    for (int q = 0; q < n; ++q) rows += splits[q] = (q + rank) % 3;
    std::vector<float> a2a(rows * 2);
    {
      size_t k = 0;
      for (int q = 0; q < n; ++q)
        for (int64_t j = 0; j < splits[q] * 2; ++j) a2a[k++] = static_cast<float>(rank * 100 + q * 10 + j + step);
    }
    int64_t a2ashape[] = {rows, 2};
    zc_engine_handle* ha2a;
    CHILD_OK(zc_engine_alltoall(eng, "a2a", a2a.data(), 2, a2ashape, ZC_FLOAT32, splits.data(), &ha2a));
    // Reducescatter, uneven: 2n + 1 rows of 4.
    const int64_t rsrows = 2 * n + 1;
    std::vector<int64_t> rs(rsrows * 4);
    for (size_t i = 0; i < rs.size(); ++i) rs[i] = (rank + 1) * static_cast<int64_t>(i + step);
    int64_t rsshape[] = {rsrows, 4};
    zc_engine_handle* hrs;
    CHILD_OK(zc_engine_reducescatter(eng, "rs", rs.data(), 2, rsshape, ZC_INT64, ZC_SUM, 1.0, 1.0, &hrs));
    zc_engine_handle* hb;
    CHILD_OK(zc_engine_barrier(eng, &hb));

    for (size_t k = 0; k < ts.size(); ++k) {
      T& t = ts[k];
      WAIT_OK(t.h);
      const void* out = (k % 2) ? t.in.data() : t.out.data();
      const void* got;
      int nd;
      int64_t shape[ZC_ENGINE_MAX_DIMS];
      CHILD_OK(zc_engine_output(t.h, &got, &nd, shape));
      CHILD_CHECK(got == out && nd == static_cast<int>(t.shape.size()), "%s: output %p ndims %d", t.name.c_str(), got, nd);
      {
        std::string err = CheckReducedRange(t.d, t.op, out, t.count, 0, n, t.it);
        CHILD_CHECK(err.empty(), "rank %d step %d %s: %s", rank, step, t.name.c_str(), err.c_str());
      }
      zc_engine_handle_free(t.h);
    }
    WAIT_OK(hs);
    for (size_t i = 0; i < sy.size(); ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += 2.0 * (r + 1 + static_cast<double>(i));
      want *= 0.25;
      CHILD_CHECK(sy[i] == want, "scaled[%zu] = %g, want %g", i, sy[i], want);
    }
    zc_engine_handle_free(hs);
    for (size_t k = 0; k < bh.size(); ++k) {
      WAIT_OK(bh[k]);
      zc_dtype d = kAllDtypes[k];
      std::vector<char> want(17 * DtypeSize(d));
      FillInput(d, ZC_SUM, want.data(), 17, root, 77 + step);
      CHILD_CHECK(want == bbuf[k], "broadcast %s from %d differs", DtypeName(d), root);
      zc_engine_handle_free(bh[k]);
    }
    {
      WAIT_OK(hag);
      const void* got;
      int nd;
      int64_t shape[ZC_ENGINE_MAX_DIMS];
      CHILD_OK(zc_engine_output(hag, &got, &nd, shape));
      int64_t total = n * (n + 1) / 2;
      CHILD_CHECK(nd == 2 && shape[0] == total && shape[1] == 3, "allgather shape %d [%lld, %lld]", nd,
                  (long long)shape[0], (long long)shape[1]);
      auto* g = static_cast<const int32_t*>(got);
      size_t k = 0;
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < (r + 1) * 3; ++i, ++k)
          CHILD_CHECK(g[k] == r * 1000 + i + step, "allgather [%zu] = %d", k, g[k]);
      zc_engine_handle_free(hag);
    }
    {
      WAIT_OK(ha2a);
      const void* got;
      int nd;
      int64_t shape[ZC_ENGINE_MAX_DIMS];
      std::vector<int64_t> rsp(n);
      CHILD_OK(zc_engine_output(ha2a, &got, &nd, shape));
      CHILD_OK(zc_engine_received_splits(ha2a, rsp.data()));
      auto* g = static_cast<const float*>(got);
      size_t k = 0;
      for (int q = 0; q < n; ++q) {
        CHILD_CHECK(rsp[q] == (rank + q) % 3, "received split from %d: %lld", q, (long long)rsp[q]);
        for (int64_t j = 0; j < rsp[q] * 2; ++j, ++k)
          CHILD_CHECK(g[k] == static_cast<float>(q * 100 + rank * 10 + j + step), "alltoall [%zu] = %g", k, g[k]);
      }
      CHILD_CHECK(shape[0] == static_cast<int64_t>(k / 2), "alltoall rows %lld", (long long)shape[0]);
      zc_engine_handle_free(ha2a);
    }
    {
      WAIT_OK(hrs);
      const void* got;
      int nd;
      int64_t shape[ZC_ENGINE_MAX_DIMS];
      CHILD_OK(zc_engine_output(hrs, &got, &nd, shape));
      int64_t mine = rsrows / n + (rank < rsrows % n ? 1 : 0);
      int64_t first = rank * (rsrows / n) + std::min<int64_t>(rank, rsrows % n);
      CHILD_CHECK(nd == 2 && shape[0] == mine && shape[1] == 4, "reducescatter shape [%lld, %lld]",
                  (long long)shape[0], (long long)shape[1]);
      auto* g = static_cast<const int64_t*>(got);
      for (int64_t i = 0; i < mine * 4; ++i) {
        int64_t want = 0;
        for (int r = 0; r < n; ++r) want += (r + 1) * (first * 4 + i + step);
        CHILD_CHECK(g[i] == want, "reducescatter [%lld] = %lld want %lld", (long long)i, (long long)g[i], (long long)want);
      }
      zc_engine_handle_free(hrs);
    }
    WAIT_OK(hb);
    zc_engine_handle_free(hb);
  }
  zc_engine_stats st;
  CHILD_OK(zc_engine_get_stats(eng, &st, sizeof st));
  // Steps 2 and 3 repeat every name: agreed through the cache.
  CHILD_CHECK(st.cache_hits > 0 && st.cache_misses > 0, "cache hits %llu misses %llu", (unsigned long long)st.cache_hits,
              (unsigned long long)st.cache_misses);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

class AllOps : public ::testing::TestWithParam<Case> {};
TEST_P(AllOps, AgainstReferences) {
  auto res = RunRanks(GetParam().ranks, AllOpsBody, MakeEnv(GetParam().transport), 240);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
INSTANTIATE_TEST_SUITE_P(Shm, AllOps, ::testing::Values(Case{"shm", 1}, Case{"shm", 2}, Case{"shm", 3}, Case{"shm", 4}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Tcp, AllOps, ::testing::Values(Case{"tcp", 2}, Case{"tcp", 3}), CaseName);

// ---- many small tensors: fusion on and off agree; the cache's steady state ----

// The counters once the engine has published the cycle that completed
// `done` operations (they are published at the end of each cycle, after the
// handles are done).
int StatsAfter(zc_comm* comm, zc_engine* eng, uint64_t done, zc_engine_stats* st) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    CHILD_OK(zc_engine_get_stats(eng, st, sizeof *st));
    if (st->operations_done >= done) return 0;
    usleep(500);  // polling an observable counter
  } while (std::chrono::steady_clock::now() < until);
  CHILD_CHECK(false, "operations_done %llu, want %llu", (unsigned long long)st->operations_done,
              (unsigned long long)done);
}

// 120 float32 tensors of odd sizes, submitted in a rank-dependent order, 6
// steps. Prints "HASH <hash>" of every result and the counters.
int ManyBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  const int kTensors = 120, kSteps = 6;
  std::vector<std::vector<float>> in(kTensors), out(kTensors);
  uint64_t hash = 1469598103934665603ull;
  zc_engine_stats before{}, after{};
  for (int step = 0; step < kSteps; ++step) {
    if (step == 2 && StatsAfter(comm, eng, 2 * kTensors, &before)) return 1;
    std::vector<zc_engine_handle*> h(kTensors);
    for (int k = 0; k < kTensors; ++k) {
      int t = (k * 7 + rank * 13) % kTensors;  // a rank-dependent permutation
      size_t count = 1 + static_cast<size_t>(t * 37 % 301);
      in[t].resize(count);
      out[t].assign(count, 0);
      for (size_t i = 0; i < count; ++i) in[t][i] = static_cast<float>((rank + 1) * (i % 17) + t + step);
      int64_t shape[] = {static_cast<int64_t>(count)};
      std::string name = "grad." + std::to_string(t);
      CHILD_OK(zc_engine_allreduce(eng, name.c_str(), in[t].data(), out[t].data(), 1, shape, ZC_FLOAT32, ZC_SUM,
                                   1.0, 1.0, &h[t]));
    }
    for (int t = 0; t < kTensors; ++t) {
      WAIT_OK(h[t]);
      zc_engine_handle_free(h[t]);
      hash = Fnv(hash, out[t].data(), out[t].size() * sizeof(float));
    }
  }
  if (StatsAfter(comm, eng, kSteps * kTensors, &after)) return 1;
  printf("HASH %016llx\n", (unsigned long long)hash);
  printf("STATS cycles %llu negotiation %llu hits %llu misses %llu fused_sets %llu plan_reuses %llu\n",
         (unsigned long long)(after.cycles - before.cycles),
         (unsigned long long)(after.negotiation_collectives - before.negotiation_collectives),
         (unsigned long long)(after.cache_hits - before.cache_hits),
         (unsigned long long)(after.cache_misses - before.cache_misses),
         (unsigned long long)after.fused_sets, (unsigned long long)after.plan_reuses);
  // From the third step on every name is cached: one collective per cycle.
  CHILD_CHECK(after.negotiation_collectives - before.negotiation_collectives == after.cycles - before.cycles,
              "steady state: %llu negotiation collectives in %llu cycles",
              (unsigned long long)(after.negotiation_collectives - before.negotiation_collectives),
              (unsigned long long)(after.cycles - before.cycles));
  CHILD_CHECK(after.cache_hits - before.cache_hits == static_cast<uint64_t>(kTensors * (kSteps - 2)), "hits %llu",
              (unsigned long long)(after.cache_hits - before.cache_hits));
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

std::string Grab(const std::string& out, const std::string& key) {
  size_t p = out.find(key);
  if (p == std::string::npos) return "";
  size_t e = out.find('\n', p);
  return out.substr(p, e - p);
}

class Many : public ::testing::TestWithParam<Case> {};
TEST_P(Many, FusionOnOffIdentical) {
  const Case c = GetParam();
  auto fused = RunRanks(c.ranks, ManyBody, MakeEnv(c.transport), 240);
  ASSERT_TRUE(AllOk(fused)) << Describe(fused);
  auto plain = RunRanks(c.ranks, ManyBody, MakeEnv(c.transport, {{"ZC_FUSION_THRESHOLD", "0"}}), 240);
  ASSERT_TRUE(AllOk(plain)) << Describe(plain);
  for (int r = 0; r < c.ranks; ++r) {
    std::string hf = Grab(fused[r].output, "HASH "), hp = Grab(plain[r].output, "HASH ");
    EXPECT_FALSE(hf.empty());
    EXPECT_EQ(hf, hp) << "rank " << r << ": fusion on and off differ";
    EXPECT_EQ(hf, Grab(fused[0].output, "HASH ")) << "rank " << r << " differs from rank 0";
    std::string sf = Grab(fused[r].output, "STATS "), sp = Grab(plain[r].output, "STATS ");
    EXPECT_EQ(sp.find("fused_sets 0 "), sp.find("fused_sets ")) << sp;  // plain: no fused set
    EXPECT_EQ(sf.find("fused_sets 0 "), std::string::npos) << sf;  // fused: some sets
    printf("rank %d fused: %s\nrank %d plain: %s\n", r, sf.c_str(), r, sp.c_str());
  }
}
INSTANTIATE_TEST_SUITE_P(Shm, Many, ::testing::Values(Case{"shm", 1}, Case{"shm", 3}, Case{"shm", 4}), CaseName);
INSTANTIATE_TEST_SUITE_P(Tcp, Many, ::testing::Values(Case{"tcp", 2}), CaseName);

// ---- a mismatch fails that operation on every rank, naming the tensor, the ranks and
// both shapes; the engine goes on ----

struct MismatchCase {
  const char* kind;  // shape, dtype, op
  int ranks;
};

int MismatchBody(int rank, const char* kind) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  const bool odd = rank == n - 1;
  // A good tensor first, so that the mismatch also has to get past the cache.
  std::vector<double> buf(64, 1.0), out(64);
  for (int step = 0; step < 2; ++step) {
    int64_t shape[] = {4, 3};
    zc_engine_handle* h;
    CHILD_OK(zc_engine_allreduce(eng, "w", buf.data(), out.data(), 2, shape, ZC_FLOAT64, ZC_SUM, 1, 1, &h));
    WAIT_OK(h);
    zc_engine_handle_free(h);
  }
  int64_t shape[] = {4, odd && strcmp(kind, "shape") == 0 ? 5 : 3};
  zc_dtype d = odd && strcmp(kind, "dtype") == 0 ? ZC_FLOAT32 : ZC_FLOAT64;
  zc_op op = odd && strcmp(kind, "op") == 0 ? ZC_MAX : ZC_SUM;
  zc_engine_handle* h;
  CHILD_OK(zc_engine_allreduce(eng, "w", buf.data(), out.data(), 2, shape, d, op, 1, 1, &h));
  zc_status s = zc_engine_wait(h);
  std::string err = zc_last_error(comm);
  CHILD_CHECK(s == ZC_ERR_MISMATCH, "status %s: %s", zc_status_string(s), err.c_str());
  std::string other = "rank " + std::to_string(n - 1);
  CHILD_CHECK(err.find("'w'") != std::string::npos && err.find("rank 0") != std::string::npos &&
                  err.find(other) != std::string::npos && err.find(kind) != std::string::npos,
              "message lacks the tensor, ranks or cause: %s", err.c_str());
  if (strcmp(kind, "shape") == 0)
    CHILD_CHECK(err.find("[4, 3]") != std::string::npos && err.find("[4, 5]") != std::string::npos,
                "message lacks both shapes: %s", err.c_str());
  zc_engine_handle_free(h);
  // Only that operation failed: the engine goes on, and the same name,
  // submitted alike everywhere, runs (through the cache's renegotiation).
  zc_status e;
  CHILD_OK(zc_engine_error(eng, &e));
  CHILD_CHECK(e == ZC_OK, "engine error %s after a mismatch", zc_status_string(e));
  for (int step = 0; step < 2; ++step) {
    int64_t good[] = {4, 3};
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = rank * 100.0 + i + step;
    zc_engine_handle* h2;
    CHILD_OK(zc_engine_allreduce(eng, step ? "later" : "w", buf.data(), out.data(), 2, good, ZC_FLOAT64, ZC_SUM,
                                 1, 1, &h2));
    WAIT_OK(h2);
    zc_engine_handle_free(h2);
    for (size_t i = 0; i < 12; ++i) {
      double want = 100.0 * n * (n - 1) / 2 + n * (static_cast<double>(i) + step);
      CHILD_CHECK(out[i] == want, "step %d: out[%zu] = %g, want %g", step, i, out[i], want);
    }
  }
  printf("MISMATCH %s\n", err.c_str());
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

class Mismatch : public ::testing::TestWithParam<MismatchCase> {};
TEST_P(Mismatch, EveryRankFailsTheOpAndGoesOn) {
  auto res = RunRanks(GetParam().ranks, [&](int r) { return MismatchBody(r, GetParam().kind); }, MakeEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
INSTANTIATE_TEST_SUITE_P(Engine, Mismatch,
                         ::testing::Values(MismatchCase{"shape", 2}, MismatchCase{"shape", 4}, MismatchCase{"dtype", 3},
                                           MismatchCase{"op", 3}),
                         [](const ::testing::TestParamInfo<MismatchCase>& i) {
                           return std::string(i.param.kind) + "_" + std::to_string(i.param.ranks);
                         });

// ---- local argument errors: this rank only, the engine goes on ----

int BadArgsBody(int /*rank*/) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  int32_t x[4] = {1, 2, 3, 4};
  int64_t shape[] = {4};
  zc_engine_handle* h = nullptr;
  CHILD_CHECK(zc_engine_allreduce(eng, nullptr, x, x, 1, shape, ZC_INT32, ZC_SUM, 1, 1, &h) == ZC_ERR_INVALID_ARG, "NULL name");
  CHILD_CHECK(zc_engine_allreduce(eng, "x", x, x, 1, shape, ZC_INT32, ZC_SUM, NAN, 1, &h) == ZC_ERR_INVALID_ARG,
              "NaN scale");
  CHILD_CHECK(strstr(zc_last_error(comm), "'x'") != nullptr, "message: %s", zc_last_error(comm));
  CHILD_CHECK(zc_engine_allreduce(eng, "x", x, x, 1, shape, ZC_INT32, ZC_AVG, 1, 1, &h) == ZC_ERR_INVALID_ARG, "int avg");
  CHILD_CHECK(zc_engine_broadcast(eng, "x", x, 1, shape, ZC_INT32, 99, &h) == ZC_ERR_INVALID_ARG, "root");
  int64_t neg[] = {-1};
  CHILD_CHECK(zc_engine_allreduce(eng, "x", x, x, 1, neg, ZC_INT32, ZC_SUM, 1, 1, &h) == ZC_ERR_INVALID_ARG, "negative dim");
  int64_t bad_splits[8] = {5};
  CHILD_CHECK(zc_engine_alltoall(eng, "x", x, 1, shape, ZC_INT32, bad_splits, &h) == ZC_ERR_INVALID_ARG, "splits");
  CHILD_OK(zc_engine_allreduce(eng, "x", x, x, 1, shape, ZC_INT32, ZC_SUM, 1, 1, &h));
  zc_engine_handle* h2;
  CHILD_CHECK(zc_engine_allreduce(eng, "x", x, x, 1, shape, ZC_INT32, ZC_SUM, 1, 1, &h2) == ZC_ERR_INVALID_ARG, "duplicate");
  CHILD_CHECK(strstr(zc_last_error(comm), "already pending") != nullptr, "message: %s", zc_last_error(comm));
  WAIT_OK(h);
  const int n = zc_size(comm);
  for (int i = 0; i < 4; ++i) CHILD_CHECK(x[i] == (i + 1) * n, "x[%d] = %d", i, x[i]);
  zc_engine_handle_free(h);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}
TEST(BadArgs, LocalAndRecoverable) {
  auto res = RunRanks(2, BadArgsBody, MakeEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// ---- stall report: rank 0 names the missing ranks ----

// Rank 0 prints the stall report; the late rank submits only once rank 0
// has made it (`reported`), since each rank judges the stall by its own
// clock and a late rank that went on as soon as its own engine saw the
// stall could end it before rank 0 got there.
int StallBody(int rank, bool cached, zc::test::SharedCounter* reported) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  float x[3] = {1, 2, 3};
  int64_t shape[] = {3};
  zc_engine_handle* h;
  if (cached) {  // once on every rank, so that the late one is a cache hit
    CHILD_OK(zc_engine_allreduce(eng, "late.tensor", x, x, 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h));
    WAIT_OK(h);
    zc_engine_handle_free(h);
    x[0] = 1;
  }
  if (rank != n - 1) {
    CHILD_OK(zc_engine_allreduce(eng, "late.tensor", x, x, 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h));
    if (rank == 0) {
      // Rank 0 reports the stall while its allreduce waits for the late rank.
      zc_engine_stats st{};
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (st.stall_warnings == 0 && std::chrono::steady_clock::now() < until) {
        CHILD_OK(zc_engine_get_stats(eng, &st, sizeof st));
        usleep(2000);  // polling an observable counter, not a guess
      }
      CHILD_CHECK(st.stall_warnings > 0, "no stall report within 30 s");
      reported->Add();
    }
  } else {
    CHILD_CHECK(reported->WaitAtLeast(1, 30), "rank 0 made no stall report within 30 s");
    CHILD_OK(zc_engine_allreduce(eng, "late.tensor", x, x, 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h));
  }
  WAIT_OK(h);
  zc_engine_handle_free(h);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

class Stall : public ::testing::TestWithParam<bool> {};
TEST_P(Stall, NamesMissingRanks) {
  const int n = 3;
  zc::test::SharedCounter reported;
  auto res = RunRanks(n, [&](int r) { return StallBody(r, GetParam(), &reported); },
                      MakeEnv("shm", {{"ZC_STALL_WARNING", "0.3"}}), 90);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  const std::string& out = res[0].output;
  EXPECT_NE(out.find("stall"), std::string::npos) << out;
  EXPECT_NE(out.find("'late.tensor' (missing ranks 2;"), std::string::npos) << out;
}
INSTANTIATE_TEST_SUITE_P(Engine, Stall, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "cached" : "new"; });

// A stall past ZC_STALL_SHUTDOWN ends every rank's engine with the cause.
int StallShutdownBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  float x[2] = {1, 2};
  int64_t shape[] = {2};
  zc_engine_handle* h = nullptr;
  if (rank == 0) CHILD_OK(zc_engine_allreduce(eng, "never", x, x, 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h));
  else CHILD_OK(zc_engine_barrier(eng, &h));  // pending too: rank 0 never submits it
  zc_status s = zc_engine_wait(h);
  std::string err = zc_last_error(comm);
  CHILD_CHECK(s == ZC_ERR_TIMEOUT && err.find("'never' (missing ranks 1)") != std::string::npos, "%s: %s",
              zc_status_string(s), err.c_str());
  zc_engine_handle_free(h);
  zc_engine_destroy(eng);
  CHILD_OK(zc_finalize(comm));
  return 0;
}
TEST(StallShutdown, EveryRankFails) {
  auto res = RunRanks(2, StallShutdownBody, MakeEnv("shm", {{"ZC_STALL_WARNING", "0.2"}, {"ZC_STALL_SHUTDOWN", "0.5"}}), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// ---- join: the others go on with zeros from joined ranks ----

int JoinBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  // Rank r has r + 1 batches; step s is reduced over the ranks r >= s.
  for (int step = 0; step <= rank; ++step) {
    std::vector<float> g(5 + step), big(70);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((rank + 1) * 10 + i);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(rank + i);
    int64_t shape[] = {static_cast<int64_t>(g.size())}, bshape[] = {70};
    zc_engine_handle *h1, *h2;
    CHILD_OK(zc_engine_allreduce(eng, ("g" + std::to_string(step)).c_str(), g.data(), g.data(), 1, shape, ZC_FLOAT32,
                                 ZC_SUM, 1, 1, &h1));
    CHILD_OK(zc_engine_allreduce(eng, "big", big.data(), big.data(), 1, bshape, ZC_FLOAT32, ZC_SUM, 1, 1, &h2));
    WAIT_OK(h1);
    WAIT_OK(h2);
    for (size_t i = 0; i < g.size(); ++i) {
      float want = 0, bwant = 0;
      for (int r = step; r < n; ++r) want += static_cast<float>((r + 1) * 10 + i);
      CHILD_CHECK(g[i] == want, "step %d g[%zu] = %g want %g", step, i, g[i], want);
      (void)bwant;
    }
    for (size_t i = 0; i < big.size(); ++i) {
      float want = 0;
      for (int r = step; r < n; ++r) want += static_cast<float>(r + i);
      CHILD_CHECK(big[i] == want, "step %d big[%zu] = %g want %g", step, i, big[i], want);
    }
    zc_engine_handle_free(h1);
    zc_engine_handle_free(h2);
  }
  zc_engine_handle* hj;
  CHILD_OK(zc_engine_join(eng, &hj));
  WAIT_OK(hj);
  int last = -1;
  CHILD_OK(zc_engine_join_result(hj, &last));
  CHILD_CHECK(last == n - 1, "last rank to join: %d, want %d", last, n - 1);
  zc_engine_handle_free(hj);
  // After the join everyone goes on as before.
  double y = rank;
  zc_engine_handle* h;
  CHILD_OK(zc_engine_allreduce(eng, "after", &y, &y, 0, nullptr, ZC_FLOAT64, ZC_SUM, 1, 1, &h));
  WAIT_OK(h);
  CHILD_CHECK(y == n * (n - 1) / 2.0, "after join: %g", y);
  zc_engine_handle_free(h);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}
class Join : public ::testing::TestWithParam<Case> {};
TEST_P(Join, UnevenData) {
  auto res = RunRanks(GetParam().ranks, JoinBody, MakeEnv(GetParam().transport), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
INSTANTIATE_TEST_SUITE_P(Engine, Join, ::testing::Values(Case{"shm", 1}, Case{"shm", 2}, Case{"shm", 4}, Case{"tcp", 3}),
                         CaseName);

// ---- join: an allgather or broadcast that needs a joined rank fails on the
// ranks that submitted it, and the engine goes on ----

int JoinNeedsRankBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  for (int first = 0; first < n; ++first) {
    zc_engine_handle* hj = nullptr;
    if (rank == first) {
      CHILD_OK(zc_engine_join(eng, &hj));
    } else {
      float x[6];
      for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(rank * 10 + i);
      int64_t shape[] = {2, 3};
      zc_engine_handle *ha, *hb, *hr, *hn;
      CHILD_OK(zc_engine_allgather(eng, "gathered", x, 2, shape, ZC_FLOAT32, &ha));
      // A name only this rank uses: it fails at once too (it need not wait
      // for the other ranks, as in Horovod).
      const std::string own = "own." + std::to_string(rank);
      CHILD_OK(zc_engine_allgather(eng, own.c_str(), x, 2, shape, ZC_FLOAT32, &hn));
      CHILD_CHECK(zc_engine_wait(hn) == ZC_ERR_INVALID_ARG, "allgather '%s' with rank %d joined: %s", own.c_str(),
                  first, zc_last_error(comm));
      zc_engine_handle_free(hn);
      CHILD_OK(zc_engine_broadcast(eng, "bcast", x, 2, shape, ZC_FLOAT32, (first + 1) % n, &hb));
      zc_status sa = zc_engine_wait(ha);
      std::string err = zc_last_error(comm);
      CHILD_CHECK(sa == ZC_ERR_INVALID_ARG, "allgather with rank %d joined: %s", first, zc_status_string(sa));
      CHILD_CHECK(err.find("'gathered'") != std::string::npos &&
                      err.find("rank " + std::to_string(first)) != std::string::npos &&
                      err.find("joined") != std::string::npos,
                  "message lacks the tensor or the joined rank: %s", err.c_str());
      CHILD_CHECK(zc_engine_wait(hb) == ZC_ERR_INVALID_ARG, "broadcast with rank %d joined", first);
      // Allreduces still run, the joined rank contributing zeros.
      float y[3] = {1.0f * rank, 2.0f, 3.0f};
      int64_t yshape[] = {3};
      CHILD_OK(zc_engine_allreduce(eng, "y", y, y, 1, yshape, ZC_FLOAT32, ZC_SUM, 1, 1, &hr));
      WAIT_OK(hr);
      float want0 = static_cast<float>(n * (n - 1) / 2 - first);
      CHILD_CHECK(y[0] == want0 && y[1] == 2.0f * (n - 1), "allreduce with rank %d joined: %g %g", first, y[0], y[1]);
      zc_engine_handle_free(ha);
      zc_engine_handle_free(hb);
      zc_engine_handle_free(hr);
      CHILD_OK(zc_engine_join(eng, &hj));
    }
    WAIT_OK(hj);
    int last = -1;
    CHILD_OK(zc_engine_join_result(hj, &last));
    CHILD_CHECK(n == 1 || last != first, "join %d: the first rank to join (%d) is reported last", first, last);
    zc_engine_handle_free(hj);
    zc_status e;
    CHILD_OK(zc_engine_error(eng, &e));
    CHILD_CHECK(e == ZC_OK, "engine error %s", zc_status_string(e));
  }
  // Every rank has read its engine's error before any destroys: a destroy
  // shuts the engine down on every rank, which zc_engine_error then reports
  // ("aborted": shut down by zc_engine_destroy on a rank).
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}
TEST_P(Join, OtherOperationsFailAndGoOn) {
  auto res = RunRanks(GetParam().ranks, JoinNeedsRankBody, MakeEnv(GetParam().transport), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// ---- scale factors: Horovod's numerics, bit for bit ----
//
// Horovod scales float32 by (float)factor in float32, float64 in double,
// float16/bfloat16 through float32 (by (float)factor, rounded back), and
// integers in double truncated toward zero (torch's
// (factor * t.double()).to(int)). The references below are written out
// here in that arithmetic; the data makes every sum exact, so results do
// not depend on the order in which ranks are added:
//  - with a prescale, element i is nonzero on one rank only (i % n);
//  - without one, values are small integers on every rank.
// Integer data is small integers throughout (integer sums are exact).

bool ScaleIsInt(zc_dtype d) { return d == ZC_INT32 || d == ZC_INT16 || d == ZC_INT8 || d == ZC_UINT8; }

// Element i of rank r's input as bits (float16/bfloat16 words, float32/64
// and integer bit patterns) in a uint64_t. `tensor` varies the data.
uint64_t ScaleInput(zc_dtype d, bool one_owner, int r, int n, size_t i, int tensor) {
  const int64_t small = static_cast<int64_t>((r * 7 + i * 3 + tensor * 5) % 41) - 20;
  if (ScaleIsInt(d)) {
    int64_t v = d == ZC_UINT8 ? small + 20 : small * (d == ZC_INT8 ? 1 : 37);
    return static_cast<uint64_t>(v);
  }
  double v = static_cast<double>(small);
  uint16_t h16 = 0;
  bool raw16 = false;
  if (one_owner) {
    if (r != static_cast<int>((i + tensor) % n)) return 0;  // +0 in every format
    // -300..300 for float32 (where x * (float)(1/3) often differs from the
    // double product rounded to float); for the 16-bit types bit patterns
    // from denormals up, where float32 and double products round apart.
    v = static_cast<double>(static_cast<int64_t>((i * 37 + tensor * 11) % 601) - 300);
    if (d == ZC_FLOAT16 || d == ZC_BFLOAT16) {
      const size_t low = d == ZC_FLOAT16 ? 0x40 + i : 0x3c00 + 3 * i;  // float16: denormals
      h16 = static_cast<uint16_t>(i < 700 ? low : (i * 40503u) % 0x7b00u);
      if (i % 3 == 1) h16 |= 0x8000;
      raw16 = true;
    }
  }
  switch (d) {
    case ZC_FLOAT32: {
      float f = static_cast<float>(v);
      uint32_t b;
      memcpy(&b, &f, 4);
      return b;
    }
    case ZC_FLOAT64: {
      uint64_t b;
      memcpy(&b, &v, 8);
      return b;
    }
    case ZC_FLOAT16: return raw16 ? h16 : zc::FloatToHalf(static_cast<float>(v));
    case ZC_BFLOAT16: return raw16 ? h16 : zc::FloatToBFloat16(static_cast<float>(v));
    default: return 0;
  }
}

// Horovod's scaling of one element (bits in, bits out).
uint64_t ScaleRef(zc_dtype d, uint64_t x, double f) {
  switch (d) {
    case ZC_FLOAT32: {
      float v;
      uint32_t b = static_cast<uint32_t>(x);
      memcpy(&v, &b, 4);
      v = v * static_cast<float>(f);
      memcpy(&b, &v, 4);
      return b;
    }
    case ZC_FLOAT64: {
      double v;
      memcpy(&v, &x, 8);
      v *= f;
      memcpy(&x, &v, 8);
      return x;
    }
    case ZC_FLOAT16:
      return zc::FloatToHalf(zc::HalfToFloat(static_cast<uint16_t>(x)) * static_cast<float>(f));
    case ZC_BFLOAT16:
      return zc::FloatToBFloat16(zc::BFloat16ToFloat(static_cast<uint16_t>(x)) * static_cast<float>(f));
    default: {  // integers: in double, truncated toward zero, saturated at the type's bounds
      const double v = std::trunc(static_cast<double>(static_cast<int64_t>(x)) * f);
      const int bits = 8 * static_cast<int>(DtypeSize(d));
      const double lo = d == ZC_UINT8 ? 0.0 : -std::ldexp(1.0, bits - 1);
      const double hi = d == ZC_UINT8 ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
      return static_cast<uint64_t>(static_cast<int64_t>(std::min(hi, std::max(lo, v))));
    }
  }
}

// The same product the other way (double product rounded once to the type;
// floor for integers): the data must make the two differ somewhere, or the
// test could not tell them apart.
uint64_t ScaleOtherWay(zc_dtype d, uint64_t x, double f) {
  switch (d) {
    case ZC_FLOAT32: {
      float v;
      uint32_t b = static_cast<uint32_t>(x);
      memcpy(&v, &b, 4);
      v = static_cast<float>(static_cast<double>(v) * f);
      memcpy(&b, &v, 4);
      return b;
    }
    case ZC_FLOAT16:
      return zc::FloatToHalf(static_cast<float>(static_cast<double>(zc::HalfToFloat(static_cast<uint16_t>(x))) * f));
    case ZC_BFLOAT16:
      return zc::FloatToBFloat16(
          static_cast<float>(static_cast<double>(zc::BFloat16ToFloat(static_cast<uint16_t>(x))) * f));
    case ZC_FLOAT64: return ScaleRef(d, x, f);
    default:
      return static_cast<uint64_t>(static_cast<int64_t>(std::floor(static_cast<double>(static_cast<int64_t>(x)) * f)));
  }
}

// Exact sums (see above) in the type's own arithmetic.
uint64_t AddRef(zc_dtype d, uint64_t a, uint64_t b) {
  switch (d) {
    case ZC_FLOAT32: {
      float x, y;
      uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
      memcpy(&x, &ua, 4);
      memcpy(&y, &ub, 4);
      x += y;
      memcpy(&ua, &x, 4);
      return ua;
    }
    case ZC_FLOAT64: {
      double x, y;
      memcpy(&x, &a, 8);
      memcpy(&y, &b, 8);
      x += y;
      memcpy(&a, &x, 8);
      return a;
    }
    case ZC_FLOAT16:
      return zc::FloatToHalf(zc::HalfToFloat(static_cast<uint16_t>(a)) + zc::HalfToFloat(static_cast<uint16_t>(b)));
    case ZC_BFLOAT16:
      return zc::FloatToBFloat16(zc::BFloat16ToFloat(static_cast<uint16_t>(a)) +
                                 zc::BFloat16ToFloat(static_cast<uint16_t>(b)));
    default: return a + b;
  }
}

uint64_t LoadBits(zc_dtype d, const void* p, size_t i) {
  const size_t es = DtypeSize(d);
  uint64_t v = 0;
  memcpy(&v, static_cast<const char*>(p) + i * es, es);
  if (ScaleIsInt(d) && d != ZC_UINT8 && (v >> (8 * es - 1)) & 1) v |= ~0ull << (8 * es);  // sign-extend
  return v;
}
void StoreBits(zc_dtype d, void* p, size_t i, uint64_t v) {
  memcpy(static_cast<char*>(p) + i * DtypeSize(d), &v, DtypeSize(d));
}

struct ScaleMode {
  const char* name;
  double pre, post;
};

// Factors per dtype: where float32 and double products round apart
// (1/3, 0.1, 0.3), and 0.5 / 1/3 for integers (truncation of negative
// halves and thirds toward zero).
std::vector<ScaleMode> ModesFor(zc_dtype d) {
  if (ScaleIsInt(d)) return {{"pre", 0.5, 1.0}, {"post", 1.0, 1.0 / 3}, {"both", -0.5, 1.0 / 3}};
  if (d == ZC_FLOAT16 || d == ZC_BFLOAT16) return {{"pre", 0.3, 1.0}, {"post", 1.0, 0.3}, {"both", 0.3, 1.0 / 3}};
  return {{"pre", 1.0 / 3, 1.0}, {"post", 1.0, 0.1}, {"both", 1.0 / 3, 0.1}};
}

const zc_dtype kScaleDtypes[] = {ZC_FLOAT32, ZC_FLOAT16, ZC_INT32, ZC_BFLOAT16, ZC_FLOAT64, ZC_INT16, ZC_INT8, ZC_UINT8};

// Every dtype x mode: 4 allreduces (fused when fusion is on: same dtype, op
// and factors, submitted together), and reducescatters of an even and an
// uneven first dimension. Prints "FUSED <sets>".
int ScaleBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  struct T {
    std::string name;
    zc_dtype d;
    ScaleMode m;
    bool rs;
    int tensor;
    std::vector<int64_t> shape;
    size_t count;
    std::vector<char> in, out;
    zc_engine_handle* h = nullptr;
  };
  std::vector<T> ts;
  int tensor = 0;
  for (zc_dtype d : kScaleDtypes)
    for (const ScaleMode& m : ModesFor(d)) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{1501}}) {
        T t{std::string("ar.") + DtypeName(d) + "." + m.name + "." + std::to_string(count), d, m, false, ++tensor,
            {static_cast<int64_t>(count)}, count, {}, {}};
        ts.push_back(std::move(t));
      }
      for (int64_t rows : {2 * n, 2 * n + 1}) {
        T t{std::string("rs.") + DtypeName(d) + "." + m.name + "." + std::to_string(rows), d, m, true, ++tensor,
            {rows, 37}, static_cast<size_t>(rows) * 37, {}, {}};
        ts.push_back(std::move(t));
      }
    }
  size_t discriminating = 0;
  for (T& t : ts) {
    t.in.resize(t.count * DtypeSize(t.d));
    t.out.assign(t.count * DtypeSize(t.d), 0x5a);
    const bool one_owner = t.m.pre != 1.0;
    for (size_t i = 0; i < t.count; ++i) StoreBits(t.d, t.in.data(), i, ScaleInput(t.d, one_owner, rank, n, i, t.tensor));
    if (t.rs) {
      CHILD_OK(zc_engine_reducescatter(eng, t.name.c_str(), t.in.data(), 2, t.shape.data(), t.d, ZC_SUM, t.m.pre,
                                       t.m.post, &t.h));
    } else {
      CHILD_OK(zc_engine_allreduce(eng, t.name.c_str(), t.in.data(), t.out.data(), 1, t.shape.data(), t.d, ZC_SUM,
                                   t.m.pre, t.m.post, &t.h));
    }
  }
  for (T& t : ts) {
    WAIT_OK(t.h);
    const void* got = t.out.data();
    size_t first = 0, len = t.count;
    if (t.rs) {
      int nd;
      int64_t shape[ZC_ENGINE_MAX_DIMS];
      CHILD_OK(zc_engine_output(t.h, &got, &nd, shape));
      const int64_t rows = t.shape[0];
      const int64_t mine = rows / n + (rank < rows % n ? 1 : 0);
      CHILD_CHECK(nd == 2 && shape[0] == mine && shape[1] == 37, "%s: output shape [%lld, %lld]", t.name.c_str(),
                  (long long)shape[0], (long long)shape[1]);
      first = static_cast<size_t>(rank * (rows / n) + std::min<int64_t>(rank, rows % n)) * 37;
      len = static_cast<size_t>(mine) * 37;
    }
    const bool one_owner = t.m.pre != 1.0;
    for (size_t j = 0; j < len; ++j) {
      const size_t i = first + j;
      uint64_t sum = 0;
      for (int r = 0; r < n; ++r) {
        const uint64_t x = ScaleInput(t.d, one_owner, r, n, i, t.tensor);
        const uint64_t y = t.m.pre != 1.0 ? ScaleRef(t.d, x, t.m.pre) : x;
        sum = r == 0 ? y : AddRef(t.d, sum, y);
        if (t.m.pre != 1.0 && y != ScaleOtherWay(t.d, x, t.m.pre)) ++discriminating;
      }
      uint64_t want = t.m.post != 1.0 ? ScaleRef(t.d, sum, t.m.post) : sum;
      if (t.m.post != 1.0 && want != ScaleOtherWay(t.d, sum, t.m.post)) ++discriminating;
      if (ScaleIsInt(t.d)) want = LoadBits(t.d, &want, 0);  // wrapped to the type, sign-extended
      const uint64_t g = LoadBits(t.d, got, j);
      CHILD_CHECK(g == want, "rank %d %s (prescale %.17g, postscale %.17g) element %zu: got bits 0x%llx, want 0x%llx",
                  rank, t.name.c_str(), t.m.pre, t.m.post, i, (unsigned long long)g, (unsigned long long)want);
    }
    zc_engine_handle_free(t.h);
  }
  CHILD_CHECK(discriminating > 0, "no element where Horovod's rounding differs from the alternative");
  zc_engine_stats st;
  if (StatsAfter(comm, eng, ts.size(), &st)) return 1;  // published after the handles
  printf("FUSED %llu of %zu tensors, %zu elements where the rounding matters\n", (unsigned long long)st.fused_sets,
         ts.size(), discriminating);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

struct ScaleCase {
  const char* transport;
  int ranks;
  bool fused;
};
class Scale : public ::testing::TestWithParam<ScaleCase> {};
TEST_P(Scale, HorovodNumericsBitExact) {
  const ScaleCase c = GetParam();
  Env extra;
  if (!c.fused) extra.push_back({"ZC_FUSION_THRESHOLD", "0"});
  auto res = RunRanks(c.ranks, ScaleBody, MakeEnv(c.transport, extra), 180);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  for (auto& r : res) {
    const std::string line = Grab(r.output, "FUSED ");
    ASSERT_FALSE(line.empty()) << Describe(res);
    // Fusion on: some allreduces went through the fusion buffer; off: none.
    if (c.fused) EXPECT_EQ(line.find("FUSED 0 "), std::string::npos) << line;
    else EXPECT_NE(line.find("FUSED 0 "), std::string::npos) << line;
  }
}
INSTANTIATE_TEST_SUITE_P(Engine, Scale,
                         ::testing::Values(ScaleCase{"shm", 1, true}, ScaleCase{"shm", 2, true},
                                           ScaleCase{"shm", 3, true}, ScaleCase{"shm", 3, false},
                                           ScaleCase{"tcp", 2, true}, ScaleCase{"tcp", 2, false}),
                         [](const ::testing::TestParamInfo<ScaleCase>& i) {
                           return std::string(i.param.transport) + "_" + std::to_string(i.param.ranks) +
                                  (i.param.fused ? "_fused" : "_unfused");
                         });

// Bool takes no scale factors; integer dtypes do (ZC_ERR_INVALID_ARG names
// the tensor and the cause).
int ScaleRefusedBody(int /*rank*/) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  uint8_t b[4] = {1, 0, 2, 0};
  int64_t shape[] = {4};
  zc_engine_handle* h = nullptr;
  for (auto [pre, post] : {std::pair<double, double>{2.0, 1.0}, {1.0, 0.5}}) {
    zc_status s = zc_engine_allreduce(eng, "flags", b, b, 1, shape, ZC_BOOL, ZC_MAX, pre, post, &h);
    CHILD_CHECK(s == ZC_ERR_INVALID_ARG && strstr(zc_last_error(comm), "'flags'") &&
                    strstr(zc_last_error(comm), "bool cannot be scaled"),
                "bool allreduce scaled: %s: %s", zc_status_string(s), zc_last_error(comm));
    s = zc_engine_reducescatter(eng, "flags", b, 1, shape, ZC_BOOL, ZC_SUM, pre, post, &h);
    CHILD_CHECK(s == ZC_ERR_INVALID_ARG && strstr(zc_last_error(comm), "bool cannot be scaled"),
                "bool reducescatter scaled: %s: %s", zc_status_string(s), zc_last_error(comm));
  }
  // AVG on the appended integer types and bool is refused as on the others.
  for (zc_dtype d : {ZC_INT16, ZC_UINT16, ZC_BOOL}) {
    zc_status s = zc_engine_allreduce(eng, "avg", b, b, 1, shape, d, ZC_AVG, 1, 1, &h);
    CHILD_CHECK(s == ZC_ERR_INVALID_ARG && strstr(zc_last_error(comm), DtypeName(d)) &&
                    strstr(zc_last_error(comm), "avg"),
                "%s avg: %s: %s", DtypeName(d), zc_status_string(s), zc_last_error(comm));
  }
  // Unscaled bool goes through, as a logical or.
  CHILD_OK(zc_engine_allreduce(eng, "flags", b, b, 1, shape, ZC_BOOL, ZC_MAX, 1, 1, &h));
  WAIT_OK(h);
  zc_engine_handle_free(h);
  CHILD_CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1 && b[3] == 0, "bool max: %u %u %u %u", b[0], b[1], b[2], b[3]);
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}
TEST(ScaleRefused, BoolAndAvg) {
  auto res = RunRanks(2, ScaleRefusedBody, MakeEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// The scaling itself, on known answers (computed with numpy and torch:
// float16/bfloat16/float32 as t.float() * float32(f), integers as
// (f * t.double()).to(int)), in place and out of place; saturation at the
// integer bounds; bool and factor 1 copy the bytes.
TEST(ScaledCopy, KnownAnswers) {
  using zc::engine::ScaledCopy;
  {
    const float in[] = {-299.0f, 3.0f};
    float out[2];
    ScaledCopy(ZC_FLOAT32, in, out, 2, 1.0 / 3);
    uint32_t b;
    memcpy(&b, &out[0], 4);
    EXPECT_EQ(b, 0xc2c75556u);  // the double product rounded to float is 0xc2c75555
    EXPECT_EQ(out[1], 3.0f * static_cast<float>(1.0 / 3));
  }
  {
    uint16_t h[] = {0x005f, 0x3c00, 0xc500};
    ScaledCopy(ZC_FLOAT16, h, h, 1, 0.3);  // in place, one element
    EXPECT_EQ(h[0], 0x001d);              // the double product rounded twice gives 0x001c
    ScaledCopy(ZC_FLOAT16, h + 1, h + 1, 1, 1.0 / 3);
    ScaledCopy(ZC_FLOAT16, h + 2, h + 2, 1, 0.1);
    EXPECT_EQ(h[1], 0x3555);
    EXPECT_EQ(h[2], 0xb800);
    uint16_t bf[] = {0x3fc0, 0x4049}, bo[2];
    ScaledCopy(ZC_BFLOAT16, bf, bo, 1, 1.0 / 3);
    ScaledCopy(ZC_BFLOAT16, bf + 1, bo + 1, 1, 0.1);
    EXPECT_EQ(bo[0], 0x3f00);
    EXPECT_EQ(bo[1], 0x3ea1);
  }
  {
    const int32_t in[] = {-7, -5, 5, 7, INT32_MAX, INT32_MIN, -1};
    int32_t out[7];
    ScaledCopy(ZC_INT32, in, out, 7, 0.5);
    const int32_t want[] = {-3, -2, 2, 3, 1073741823, -1073741824, 0};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], want[i]) << i;
    ScaledCopy(ZC_INT32, in, out, 7, -3.0);
    const int32_t sat[] = {21, 15, -15, -21, INT32_MIN, INT32_MAX, 3};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], sat[i]) << i;
  }
  {
    int64_t v[] = {INT64_MAX, INT64_MIN, -9};
    ScaledCopy(ZC_INT64, v, v, 3, 2.0);
    EXPECT_EQ(v[0], INT64_MAX);
    EXPECT_EQ(v[1], INT64_MIN);
    EXPECT_EQ(v[2], -18);
    uint64_t u[] = {UINT64_MAX, 7};
    ScaledCopy(ZC_UINT64, u, u, 2, 0.5);
    EXPECT_EQ(u[0], 1ull << 63);  // UINT64_MAX is 2^64 in double
    EXPECT_EQ(u[1], 3u);
  }
  {
    int16_t a[] = {-32768, 32767, -301};
    ScaledCopy(ZC_INT16, a, a, 3, 1.0 / 3);
    EXPECT_EQ(a[0], -10922);
    EXPECT_EQ(a[1], 10922);
    EXPECT_EQ(a[2], -100);
    uint16_t b[] = {65535, 100};
    ScaledCopy(ZC_UINT16, b, b, 2, 1.5);
    EXPECT_EQ(b[0], 65535);
    EXPECT_EQ(b[1], 150);
    int8_t c[] = {-128, 100, -3};
    ScaledCopy(ZC_INT8, c, c, 3, 1.3);
    EXPECT_EQ(c[0], -128);
    EXPECT_EQ(c[1], 127);
    EXPECT_EQ(c[2], -3);
    uint8_t d[] = {200, 10, 7};
    ScaledCopy(ZC_UINT8, d, d, 2, -1.0);
    EXPECT_EQ(d[0], 0);
    EXPECT_EQ(d[1], 0);
    ScaledCopy(ZC_UINT8, d + 2, d + 2, 1, 37.0);
    EXPECT_EQ(d[2], 255);
  }
  {
    const uint8_t in[] = {0, 1, 2, 0xff};
    uint8_t out[4];
    ScaledCopy(ZC_BOOL, in, out, 4, 3.0);  // never scaled: the bytes as they are
    EXPECT_EQ(memcmp(in, out, 4), 0);
    const uint32_t nan = 0x7fc12345u;
    uint32_t o = 0;
    ScaledCopy(ZC_FLOAT32, &nan, &o, 1, 1.0);
    EXPECT_EQ(o, nan);
  }
  {
    // An empty tensor may come without storage (torch's data_ptr() of zero
    // elements is null): nothing is read or written, whatever the factor
    // (UBSan checks that no null pointer reaches memmove).
    float one = 1.0f;
    ScaledCopy(ZC_FLOAT32, nullptr, &one, 0, 1.0);
    ScaledCopy(ZC_FLOAT32, &one, nullptr, 0, 1.0);
    ScaledCopy(ZC_FLOAT32, nullptr, nullptr, 0, 0.5);
    ScaledCopy(ZC_BOOL, nullptr, &one, 0, 2.0);
    EXPECT_EQ(one, 1.0f);
  }
}

// Requests carry the dtype and op on the wire: every dtype survives the
// trip; a peer's value past the last dtype or op is refused, naming it. (The
// bad values are written into the bytes: a zc_dtype/zc_op variable must not
// hold them.)
TEST(RequestWire, DtypesTravelUnknownOnesAreRefused) {
  using zc::engine::Request;
  auto wire_of = [](zc_dtype d) {
    Request r;
    r.name = "t";
    r.dtype = d;
    r.op = ZC_MAX;
    r.shape = {3};
    std::string wire;
    zc::engine::AppendRequest(r, &wire);
    return std::make_pair(r, wire);
  };
  for (int d = 0; d < zc::kNumDtypes; ++d) {
    auto [r, wire] = wire_of(static_cast<zc_dtype>(d));
    Request back;
    size_t pos = 0;
    zc::Status st = zc::engine::ParseRequest(wire, &pos, &back);
    ASSERT_TRUE(st.ok()) << d << ": " << st.message();
    EXPECT_TRUE(zc::engine::SameRequest(r, back)) << d;
  }
  // name length (4), name "t" (1), type (1), then dtype (4) and op (4).
  const size_t at_dtype = 4 + 1 + 1, at_op = at_dtype + 4;
  for (auto [at, value, what] : {std::tuple<size_t, int32_t, const char*>{at_dtype, zc::kNumDtypes, "dtype 13"},
                                 {at_dtype, -1, "dtype -1"},
                                 {at_op, 8, "no such op"},
                                 {at_op, -2, "no such op"}}) {
    std::string wire = wire_of(ZC_BOOL).second;
    memcpy(&wire[at], &value, 4);
    Request back;
    size_t pos = 0;
    zc::Status st = zc::engine::ParseRequest(wire, &pos, &back);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.message();
  }
}

// ---- timeline: valid Chrome-trace JSON with the phases ----

int TimelineBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> t(5, std::vector<float>(10, static_cast<float>(rank)));
    std::vector<zc_engine_handle*> h(6);
    int64_t shape[] = {10};
    for (int k = 0; k < 5; ++k)
      CHILD_OK(zc_engine_allreduce(eng, ("layer" + std::to_string(k) + "/\"w\"").c_str(), t[k].data(), t[k].data(), 1,
                                   shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h[k]));
    CHILD_OK(zc_engine_broadcast(eng, "params", t[0].data(), 1, shape, ZC_FLOAT32, 0, &h[5]));
    for (auto* x : h) {
      WAIT_OK(x);
      zc_engine_handle_free(x);
    }
  }
  CHILD_OK(zc_engine_destroy(eng));
  CHILD_OK(zc_finalize(comm));
  return 0;
}
TEST(Timeline, ValidChromeTrace) {
  std::string path = "/tmp/zc_engine_timeline_" + std::to_string(getpid()) + ".json";
  auto res = RunRanks(3, TimelineBody, MakeEnv("shm", {{"ZC_TIMELINE", path}}), 90);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  std::string cmd =
      "/usr/bin/python3 -c 'import json,sys; ev=json.load(open(sys.argv[1])); "
      "names={e[\"name\"] for e in ev}; "
      "threads={e[\"args\"][\"name\"] for e in ev if e[\"name\"]==\"thread_name\"}; "
      "need={\"QUEUE\",\"NEGOTIATE\",\"MEMCPY_IN_FUSION_BUFFER\",\"ALLREDUCE\",\"MEMCPY_OUT_FUSION_BUFFER\",\"BROADCAST\"}; "
      "assert need <= names, need - names; "
      "assert \"layer3/\\\"w\\\"\" in threads and \"params\" in threads, threads; "
      "assert all(e[\"dur\"] >= 0 for e in ev if e[\"ph\"]==\"X\"); "
      "print(len(ev), \"events\")' " + path;
  int rc = system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "timeline " << path << " is not valid or lacks events";
  if (rc == 0) unlink(path.c_str());
}

// ---- a killed rank ends every other rank's engine; pending handles fail ----

int PeerLostBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  zc_engine* eng = nullptr;
  CHILD_OK(zc_engine_create(comm, &eng));
  float x[8] = {};
  int64_t shape[] = {8};
  zc_engine_handle* h;
  CHILD_OK(zc_engine_allreduce(eng, "first", x, x, 1, shape, ZC_FLOAT32, ZC_SUM, 1, 1, &h));
  WAIT_OK(h);
  zc_engine_handle_free(h);
  if (rank == n - 1) raise(SIGKILL);
  // The dead rank never submits these. The engine may already have seen the
  // loss (then the submission returns it, as the header promises for every
  // later submission) or not yet (then the wait does): either way each one
  // ends with the loss, never with success and never by hanging.
  std::vector<std::vector<float>> b(3, std::vector<float>(8));
  for (int k = 0; k < 3; ++k) {
    zc_engine_handle* p = nullptr;
    zc_status s = zc_engine_allreduce(eng, ("pending" + std::to_string(k)).c_str(), b[k].data(), b[k].data(), 1,
                                      shape, ZC_FLOAT32, ZC_SUM, 1, 1, &p);
    if (s == ZC_OK) {
      s = zc_engine_wait(p);
      zc_engine_handle_free(p);
    } else {
      CHILD_CHECK(p == nullptr, "a failed submission returned a handle");
    }
    CHILD_CHECK(s == ZC_ERR_PEER_LOST || s == ZC_ERR_ABORTED, "pending%d: %s: %s", k, zc_status_string(s),
                zc_last_error(comm));
  }
  zc_status e;
  CHILD_OK(zc_engine_error(eng, &e));
  CHILD_CHECK(e != ZC_OK, "engine still running");
  printf("LOST %s\n", zc_last_error(comm));
  zc_engine_destroy(eng);
  zc_finalize(comm);
  return 0;
}
class PeerLost : public ::testing::TestWithParam<Case> {};
TEST_P(PeerLost, EveryEngineFails) {
  const int n = GetParam().ranks;
  auto res = RunRanks(n, PeerLostBody, MakeEnv(GetParam().transport, {{"ZC_TIMEOUT", "30"}}), 90);
  for (int r = 0; r < n - 1; ++r) EXPECT_EQ(res[r].exit_code, 0) << Describe(res);
  EXPECT_EQ(res[n - 1].signal, SIGKILL) << Describe(res);
  for (int r = 0; r < n - 1; ++r) EXPECT_LT(res[r].seconds, 25) << "rank " << r << " took its time";
}
INSTANTIATE_TEST_SUITE_P(Engine, PeerLost, ::testing::Values(Case{"shm", 3}, Case{"tcp", 2}), CaseName);

}  // namespace
