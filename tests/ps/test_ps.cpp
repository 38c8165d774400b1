// Multi-process tests of the parameter server through the C ABI: sums of
// every dtype and SGD values against a reference computed here, with rank-
// and round-dependent data, keys from one element to many chunks (a small
// ZC_PS_PARTITION), 1-5 ranks, all ranks ZC_PS_BOTH or separate server
// ranks, shm and tcp; 1000 rounds; asynchronous mode; every bad input; a
// killed server and a killed worker. Each TEST is its own meson test.
#include <gtest/gtest.h>
#include <signal.h>
#include <zcomm/zcomm.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/coll_check.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;

const zc_dtype kDtypes[] = {ZC_INT8,    ZC_UINT8,    ZC_INT32,   ZC_UINT32,  ZC_INT64,
                            ZC_UINT64, ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64,
                            ZC_INT16,  ZC_UINT16,  ZC_BOOL};

Env PsEnv(const char* transport, const char* partition = "256") {
  Env env = {{"ZC_TRANSPORT", transport}, {"ZC_TIMEOUT", "60"}, {"ZC_PS_PARTITION", partition}};
  if (strcmp(transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  return env;
}

// Worker w's push of element i in round r of key k: small integers, so that
// sums of up to 5 workers are exact in every dtype (bfloat16 included).
int64_t Grad(int w, uint64_t r, size_t i, uint64_t k) {
  return static_cast<int64_t>((w * 7 + i * 3 + r * 5 + k) % 11) + (w == 1 ? -3 : 1);
}

// Bool pushes: true (as the bytes 0x40, 0x44, 0x48, never 1) where the
// push's Grad is a multiple of 4, about one element in five, so that the
// servers' sum (a logical or over the workers) is neither all 0 nor all 1.
uint8_t BoolOf(int64_t grad) { return grad % 4 == 0 ? static_cast<uint8_t>(0x40 + grad) : 0; }

void SetValue(zc_dtype d, void* p, size_t i, int64_t v) {
  if (IsFloatType(d)) SetF(d, p, i, static_cast<double>(v));
  else if (d == ZC_BOOL) static_cast<uint8_t*>(p)[i] = BoolOf(v);
  else SetI(d, p, i, static_cast<uint64_t>(v));
}
bool SameValue(zc_dtype d, const void* p, size_t i, int64_t v) {
  if (IsFloatType(d)) return GetF(d, p, i) == static_cast<double>(v);
  return GetI(d, p, i) == Wrap(d, static_cast<uint64_t>(v));
}

// Roles: all ZC_PS_BOTH, or the last max(1, n/3) ranks server-only.
zc_ps_role RoleOf(int rank, int n, bool separate) {
  if (!separate || n == 1) return ZC_PS_BOTH;
  int servers = std::max(1, n / 3);
  return rank >= n - servers ? ZC_PS_SERVER : ZC_PS_WORKER;
}
int WorkerIndex(int rank, int n, bool separate) {
  (void)n;
  (void)separate;
  return rank;  // workers are the first ranks in both layouts
}

// Server-only ranks serve, then free.
int ServeAndFree(zc_comm* comm, zc_ps* ps) {
  CHILD_OK(zc_ps_serve(ps));
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

struct SumsCase {
  const char* transport;
  int ranks;
  bool separate;
  const char* placement = nullptr;  // ZC_PS_PLACEMENT; nullptr: the default (balanced)
};

int SumsBody(int rank, const SumsCase& p, const std::vector<zc_dtype>& dtypes,
             const std::vector<size_t>& counts, int rounds) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, RoleOf(rank, p.ranks, p.separate), nullptr, &ps));
  int W = zc_ps_num_workers(ps);
  if (RoleOf(rank, p.ranks, p.separate) == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  int w = WorkerIndex(rank, p.ranks, p.separate);
  CHILD_CHECK(W == (p.separate && p.ranks > 1 ? p.ranks - std::max(1, p.ranks / 3) : p.ranks), "W=%d", W);
  uint64_t key = 100;
  struct K { uint64_t key; zc_dtype d; size_t n; };
  std::vector<K> keys;
  for (zc_dtype d : dtypes)
    for (size_t n : counts) {
      keys.push_back({key, d, n});
      CHILD_OK(zc_ps_declare(ps, key++, n, d, nullptr));
    }
  std::vector<char> in, out;
  for (int r = 1; r <= rounds; ++r) {
    for (const K& k : keys) {
      size_t es = DtypeSize(k.d);
      in.assign(k.n * es + 3, 0);
      out.assign(k.n * es + 5, 0x5a);
      char* ib = in.data() + 3;  // unaligned on purpose
      char* ob = out.data() + 5;
      for (size_t i = 0; i < k.n; ++i) SetValue(k.d, ib, i, Grad(w, r, i, k.key));
      if (r % 2 == 0) {
        // Nonblocking in even rounds, completed through zc_test / zc_wait.
        zc_request *a = nullptr, *b = nullptr;
        CHILD_OK(zc_ps_ipush(ps, k.key, ib, &a));
        CHILD_OK(zc_ps_ipull(ps, k.key, ob, &b));
        CHILD_OK(zc_wait(a));
        CHILD_OK(zc_wait(b));
      } else {
        CHILD_OK(zc_ps_push(ps, k.key, ib));
        CHILD_OK(zc_ps_pull(ps, k.key, ob));
      }
      for (size_t i = 0; i < k.n; ++i) {
        int64_t want = 0;
        for (int v = 0; v < W; ++v) {
          // bool: the or of the pushes' truth values, written as 0 or 1.
          if (k.d == ZC_BOOL) want |= BoolOf(Grad(v, r, i, k.key)) != 0;
          else want += Grad(v, r, i, k.key);
        }
        CHILD_CHECK(SameValue(k.d, ob, i, want), "rank %d round %d key %llu %s count %zu element %zu: "
                    "got %g, want %lld", rank, r, (unsigned long long)k.key, DtypeName(k.d), k.n, i,
                    IsFloatType(k.d) ? GetF(k.d, ob, i) : (double)(int64_t)GetI(k.d, ob, i), (long long)want);
      }
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  printf("rank %d: %zu keys x %d rounds checked\n", rank, keys.size(), rounds);
  return 0;
}

class Sums : public ::testing::TestWithParam<SumsCase> {};

TEST_P(Sums, EveryDtypeAndSize) {
  const SumsCase& p = GetParam();
  bool tcp = strcmp(p.transport, "tcp") == 0;
  std::vector<zc_dtype> dtypes(std::begin(kDtypes), std::end(kDtypes));
  // 1 element, primes, exactly one chunk (256 bytes), and several chunks.
  std::vector<size_t> counts = {1, 7, 64, 257, 3001};
  if (tcp) dtypes = {ZC_INT8, ZC_UINT32, ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64,
                     ZC_INT16, ZC_UINT16, ZC_BOOL};
  Env env = PsEnv(p.transport);
  if (p.placement) env.push_back({"ZC_PS_PLACEMENT", p.placement});
  auto res = RunRanks(p.ranks, [&](int rank) { return SumsBody(rank, p, dtypes, counts, 3); }, env, 240);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

std::vector<SumsCase> SumsCases(const char* t) {
  std::vector<SumsCase> v;
  for (int n = 1; n <= 5; ++n) v.push_back({t, n, false});
  for (int n = 2; n <= 5; ++n) v.push_back({t, n, true});
  // The other placements: several servers, both layouts.
  v.push_back({t, 3, false, "roundrobin"});
  v.push_back({t, 5, true, "roundrobin"});
  v.push_back({t, 4, false, "hash"});
  return v;
}
std::string SumsName(const ::testing::TestParamInfo<SumsCase>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.ranks) +
         (info.param.separate ? "_servers" : "_both") +
         (info.param.placement ? std::string("_") + info.param.placement : std::string());
}
INSTANTIATE_TEST_SUITE_P(Shm, Sums, ::testing::ValuesIn(SumsCases("shm")), SumsName);
INSTANTIATE_TEST_SUITE_P(Tcp, Sums, ::testing::ValuesIn(SumsCases("tcp")), SumsName);

// SGD: value -= lr * mean(pushes of the round), from the first worker's
// init; the reference runs the same rounds in double here.
int SgdBody(int rank, int n, bool separate, zc_dtype d, size_t count, int rounds) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps_options o{0, 0.25};
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, RoleOf(rank, n, separate), &o, &ps));
  if (RoleOf(rank, n, separate) == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  int W = zc_ps_num_workers(ps);
  size_t es = DtypeSize(d);
  std::vector<char> init(count * es), g(count * es), v(count * es);
  std::vector<double> ref(count);
  for (size_t i = 0; i < count; ++i) {
    // Only the first worker's init counts: the others pass garbage.
    SetF(d, init.data(), i, rank == 0 ? static_cast<double>(i % 13) - 4.0 : 999.0);
    ref[i] = GetF(d, init.data(), i);
    if (rank != 0) ref[i] = static_cast<double>(i % 13) - 4.0;
  }
  CHILD_OK(zc_ps_declare(ps, 7, count, d, init.data()));
  double tol = d == ZC_FLOAT32 ? 1e-4 : d == ZC_FLOAT64 ? 1e-9 : 0.2;
  for (int r = 1; r <= rounds; ++r) {
    for (size_t i = 0; i < count; ++i) SetF(d, g.data(), i, static_cast<double>(Grad(rank, r, i, 7)));
    CHILD_OK(zc_ps_push(ps, 7, g.data()));
    CHILD_OK(zc_ps_pull(ps, 7, v.data()));
    for (size_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int u = 0; u < W; ++u) sum += static_cast<double>(Grad(u, r, i, 7));
      ref[i] -= 0.25 * sum / W;
      double got = GetF(d, v.data(), i);
      CHILD_CHECK(std::fabs(got - ref[i]) <= tol * (1 + std::fabs(ref[i])),
                  "rank %d %s round %d element %zu: got %g, want %g", rank, DtypeName(d), r, i, got, ref[i]);
      ref[i] = got;  // follow the server's rounding from here
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(Sgd, FloatTypesBothAndServers) {
  for (zc_dtype d : {ZC_FLOAT32, ZC_FLOAT64, ZC_FLOAT16, ZC_BFLOAT16}) {
    for (auto [n, separate] : {std::pair<int, bool>{3, false}, {4, true}, {1, false}}) {
      auto res = RunRanks(n, [&](int rank) { return SgdBody(rank, n, separate, d, 1000, 4); },
                          PsEnv("shm"), 120);
      EXPECT_TRUE(AllOk(res)) << DtypeName(d) << " n=" << n << "\n" << Describe(res);
    }
  }
  auto res = RunRanks(3, [&](int rank) { return SgdBody(rank, 3, true, ZC_FLOAT32, 777, 3); },
                      PsEnv("tcp"), 120);
  EXPECT_TRUE(AllOk(res)) << "tcp\n" << Describe(res);
}

// 1,000 synchronous rounds of two keys (one element; several chunks).
TEST(Rounds, Thousand) {
  for (auto [n, separate] : {std::pair<int, bool>{3, false}, {3, true}}) {
    auto res = RunRanks(n, [&](int rank) {
      return SumsBody(rank, SumsCase{"shm", n, separate}, {ZC_INT32}, {1, 150}, 1000);
    }, PsEnv("shm"), 240);
    EXPECT_TRUE(AllOk(res)) << Describe(res);
  }
}

// Asynchronous mode: pushes applied on arrival, pulls at once. A worker's
// pull after its own push sees that push; once every worker has pushed
// (after a barrier), a pull sees every push eventually, polled with a
// deadline.
int AsyncBody(int rank, int n, bool separate, double lr, const char* transport) {
  (void)transport;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps_options o{1, lr};
  zc_ps* ps = nullptr;
  zc_ps_role role = RoleOf(rank, n, separate);
  CHILD_OK(zc_ps_create(comm, role, &o, &ps));
  if (role == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  int W = zc_ps_num_workers(ps);
  const size_t count = 300;
  const int pushes = 20;
  std::vector<double> init(count), got(count), g(count);
  for (size_t i = 0; i < count; ++i) init[i] = static_cast<double>(i % 5);
  CHILD_OK(zc_ps_declare(ps, 1, count, ZC_FLOAT64, init.data()));
  // Before any push: the initial value.
  CHILD_OK(zc_ps_pull(ps, 1, got.data()));
  double pre = 0;
  for (size_t i = 0; i < count; ++i) pre += got[i];
  (void)pre;
  for (int k = 0; k < pushes; ++k) {
    for (size_t i = 0; i < count; ++i) g[i] = static_cast<double>(rank + 1);
    CHILD_OK(zc_ps_push(ps, 1, g.data()));
    CHILD_OK(zc_ps_pull(ps, 1, got.data()));
  }
  // Expected final value: every worker pushed `pushes` times (rank + 1).
  double total = 0;
  for (int u = 0; u < W; ++u) total += (u + 1) * pushes;
  auto want = [&](size_t i) { return lr > 0 ? init[i] - lr * total : init[i] + total; };
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    CHILD_OK(zc_ps_pull(ps, 1, got.data()));
    bool ok = true;
    for (size_t i = 0; i < count; ++i) ok = ok && std::fabs(got[i] - want(i)) < 1e-9;
    if (ok) break;
    CHILD_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20),
                "rank %d: value %g, want %g after every push", rank, got[0], want(0));
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(Async, SumsAndSgd) {
  for (const char* t : {"shm", "tcp"})
    for (double lr : {0.0, 0.5})
      for (auto [n, separate] : {std::pair<int, bool>{3, false}, {4, true}}) {
        auto res = RunRanks(n, [&](int rank) { return AsyncBody(rank, n, separate, lr, t); }, PsEnv(t), 120);
        EXPECT_TRUE(AllOk(res)) << t << " lr=" << lr << " n=" << n << "\n" << Describe(res);
      }
}

#define EXPECT_FAIL(call, code, text)                                                          \
  do {                                                                                        \
    zc_status s_ = (call);                                                                    \
    CHILD_CHECK(s_ == (code), "%s: got %s: %s", #call, zc_status_string(s_), zc_last_error(comm)); \
    CHILD_CHECK(strstr(zc_last_error(comm), text) != nullptr, "%s: message \"%s\" lacks \"%s\"", #call, \
                zc_last_error(comm), text);                                                   \
  } while (0)

int WorkerPart(zc_comm* comm, zc_ps* ps) {
  int rank = zc_rank(comm);
  std::vector<float> buf(100, 1.0f), out(100);
  EXPECT_FAIL(zc_ps_push(ps, 5, buf.data()), ZC_ERR_INVALID_ARG, "key 5 is not declared");
  EXPECT_FAIL(zc_ps_pull(ps, 5, out.data()), ZC_ERR_INVALID_ARG, "key 5 is not declared");
  EXPECT_FAIL(zc_ps_declare(ps, 5, 0, ZC_FLOAT32, nullptr), ZC_ERR_INVALID_ARG, "count is 0");
  EXPECT_FAIL(zc_ps_declare(ps, 5, 10, (zc_dtype)99, nullptr), ZC_ERR_INVALID_ARG, "rank");
  // Workers that disagree on the size, then on the dtype: every worker fails.
  EXPECT_FAIL(zc_ps_declare(ps, 6, rank == 0 ? 100 : 99, ZC_FLOAT32, nullptr), ZC_ERR_MISMATCH, "disagree");
  EXPECT_FAIL(zc_ps_declare(ps, 6, 100, rank == 0 ? ZC_FLOAT32 : ZC_INT32, nullptr), ZC_ERR_MISMATCH, "int32");
  CHILD_OK(zc_ps_declare(ps, 6, 100, ZC_FLOAT32, nullptr));
  EXPECT_FAIL(zc_ps_declare(ps, 6, 100, ZC_FLOAT32, nullptr), ZC_ERR_INVALID_ARG, "already declared");
  EXPECT_FAIL(zc_ps_pull(ps, 6, out.data()), ZC_ERR_INVALID_ARG, "pull before push");
  EXPECT_FAIL(zc_ps_push(ps, 6, nullptr), ZC_ERR_INVALID_ARG, "buf is NULL");
  CHILD_OK(zc_ps_push(ps, 6, buf.data()));
  EXPECT_FAIL(zc_ps_push(ps, 6, buf.data()), ZC_ERR_INVALID_ARG, "pushed twice");
  zc_request* req = nullptr;
  EXPECT_FAIL(zc_ps_ipush(ps, 6, buf.data(), &req), ZC_ERR_INVALID_ARG, "pushed twice");
  // Still usable after all that.
  CHILD_OK(zc_ps_pull(ps, 6, out.data()));
  CHILD_CHECK(out[0] == 2.0f && out[99] == 2.0f, "sum %g", out[0]);
  CHILD_OK(zc_ps_free(ps));
  return 0;
}

int BadInputBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  EXPECT_FAIL(zc_ps_create(comm, (zc_ps_role)7, nullptr, &ps), ZC_ERR_INVALID_ARG, "unknown role");
  zc_ps_options bad{0, -1};
  EXPECT_FAIL(zc_ps_create(comm, ZC_PS_BOTH, &bad, &ps), ZC_ERR_INVALID_ARG, "sgd_lr");
  // Collective refusals: no server at all; options that differ.
  EXPECT_FAIL(zc_ps_create(comm, ZC_PS_WORKER, nullptr, &ps), ZC_ERR_INVALID_ARG, "at least one");
  zc_ps_options mine{0, rank == 1 ? 0.5 : 0.0};
  EXPECT_FAIL(zc_ps_create(comm, ZC_PS_BOTH, &mine, &ps), ZC_ERR_MISMATCH, "disagree");
  CHILD_OK(zc_ps_create(comm, rank == 2 ? ZC_PS_SERVER : ZC_PS_WORKER, nullptr, &ps));
  if (rank == 2) {
    EXPECT_FAIL(zc_ps_declare(ps, 1, 10, ZC_INT32, nullptr), ZC_ERR_INVALID_ARG, "not a worker");
    CHILD_OK(zc_ps_serve(ps));
    CHILD_OK(zc_ps_free(ps));
  } else if (int e = WorkerPart(comm, ps)) {
    return e;
  }
  // sgd on an integer key is refused on the calling rank.
  zc_ps_options sgd{0, 0.1};
  CHILD_OK(zc_ps_create(comm, rank == 2 ? ZC_PS_SERVER : ZC_PS_WORKER, &sgd, &ps));
  if (rank == 2) return ServeAndFree(comm, ps);
  EXPECT_FAIL(zc_ps_declare(ps, 1, 10, ZC_INT32, nullptr), ZC_ERR_INVALID_ARG, "floating");
  EXPECT_FAIL(zc_ps_declare(ps, 2, 10, ZC_INT16, nullptr), ZC_ERR_INVALID_ARG, "not int16");
  EXPECT_FAIL(zc_ps_declare(ps, 3, 10, ZC_UINT16, nullptr), ZC_ERR_INVALID_ARG, "not uint16");
  EXPECT_FAIL(zc_ps_declare(ps, 4, 10, ZC_BOOL, nullptr), ZC_ERR_INVALID_ARG, "not bool");
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(BadInput, ClearErrors) {
  for (const char* t : {"shm", "tcp"}) {
    auto res = RunRanks(3, BadInputBody, PsEnv(t), 120);
    EXPECT_TRUE(AllOk(res)) << t << "\n" << Describe(res);
  }
}

// Ranks set to different ZC_PS_PLACEMENT would place chunks differently:
// zc_ps_create refuses on every rank, naming both policies.
int PlacementMismatchBody(int rank) {
  setenv("ZC_PS_PLACEMENT", rank == 1 ? "hash" : "balanced", 1);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  EXPECT_FAIL(zc_ps_create(comm, ZC_PS_BOTH, nullptr, &ps), ZC_ERR_MISMATCH, "ZC_PS_PLACEMENT");
  const char* last = zc_last_error(comm);
  CHILD_CHECK(strstr(last, "hash") && strstr(last, "balanced"), "rank %d: %s", rank, last);
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(BadInput, PlacementDisagreement) {
  auto res = RunRanks(3, PlacementMismatchBody, PsEnv("shm"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// Pipelined transfers: keys cut into chunks (ZC_PS_PARTITION 16 KiB) and the
// chunks into pieces (ZC_PS_PIECE 4 KiB), so that servers reduce and answer
// piece by piece while later pieces and keys are still being pushed. Many
// float32 keys of odd sizes (1, primes, piece and chunk boundaries +-1),
// rank- and index-dependent data, every element checked (and guard bytes
// after each buffer), over 4 rounds on the same buffers, each issued
// another way: all pushes then all pulls nonblocking (the training step);
// blocking push and pull per key; workers in opposite key orders (even
// workers ascending, odd descending: nobody may wait for a worker that
// waits for it); all pushes completed before any pull.
struct PipeCase {
  const char* transport;
  int ranks;
  bool separate;
};

int PipelineBody(int rank, const PipeCase& p) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  zc_ps_role role = RoleOf(rank, p.ranks, p.separate);
  CHILD_OK(zc_ps_create(comm, role, nullptr, &ps));
  if (role == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  const int W = zc_ps_num_workers(ps);
  const int w = WorkerIndex(rank, p.ranks, p.separate);
  EXPECT_FAIL(zc_ps_declare(ps, 999, 0, ZC_FLOAT32, nullptr), ZC_ERR_INVALID_ARG, "count is 0");
  const size_t piece = 1024, chunk = 4096;  // float32 elements
  std::vector<size_t> counts = {1,         2,         3,         7,          13,        piece - 1, piece,
                                piece + 1, chunk - 1, chunk,     chunk + 1,  2 * chunk + 1, 10007,
                                3 * chunk - 1, 65537, 5,         piece + 3,  chunk * 2, 127};
  const size_t nk = counts.size() * 2;  // every size twice: 38 keys
  std::vector<std::vector<float>> in(nk), out(nk);
  const size_t kGuard = 16;
  for (size_t k = 0; k < nk; ++k) {
    size_t n = counts[k % counts.size()];
    CHILD_OK(zc_ps_declare(ps, 1000 + k, n, ZC_FLOAT32, nullptr));
    in[k].resize(n);
    out[k].assign(n + kGuard, -1.0f);
  }
  for (int r = 1; r <= 4; ++r) {
    for (size_t k = 0; k < nk; ++k)
      for (size_t i = 0; i < in[k].size(); ++i) in[k][i] = static_cast<float>(Grad(w, r, i, k));
    std::vector<zc_request*> pr(nk, nullptr), qr(nk, nullptr);
    if (r == 1 || r == 4) {
      for (size_t k = 0; k < nk; ++k) CHILD_OK(zc_ps_ipush(ps, 1000 + k, in[k].data(), &pr[k]));
      if (r == 4)
        for (size_t k = 0; k < nk; ++k) CHILD_OK(zc_wait(pr[k]));
      for (size_t k = 0; k < nk; ++k) CHILD_OK(zc_ps_ipull(ps, 1000 + k, out[k].data(), &qr[k]));
      for (size_t k = 0; k < nk; ++k) {
        if (r == 1) CHILD_OK(zc_wait(pr[k]));
        CHILD_OK(zc_wait(qr[k]));
      }
    } else if (r == 2) {
      for (size_t k = 0; k < nk; ++k) {
        CHILD_OK(zc_ps_push(ps, 1000 + k, in[k].data()));
        CHILD_OK(zc_ps_pull(ps, 1000 + k, out[k].data()));
      }
    } else {
      for (size_t j = 0; j < nk; ++j) {
        size_t k = w % 2 ? nk - 1 - j : j;
        CHILD_OK(zc_ps_ipush(ps, 1000 + k, in[k].data(), &pr[k]));
        CHILD_OK(zc_wait(pr[k]));
      }
      for (size_t j = 0; j < nk; ++j) {
        size_t k = w % 2 ? nk - 1 - j : j;
        CHILD_OK(zc_ps_pull(ps, 1000 + k, out[k].data()));
      }
    }
    for (size_t k = 0; k < nk; ++k) {
      const size_t n = in[k].size();
      for (size_t i = 0; i < n; ++i) {
        int64_t want = 0;
        for (int v = 0; v < W; ++v) want += Grad(v, r, i, k);
        CHILD_CHECK(out[k][i] == static_cast<float>(want), "rank %d round %d key %zu (%zu elements) element %zu: "
                    "got %g, want %lld", rank, r, k, n, i, out[k][i], (long long)want);
      }
      for (size_t i = n; i < n + kGuard; ++i)
        CHILD_CHECK(out[k][i] == -1.0f, "rank %d round %d key %zu: wrote past the end (element %zu)", rank, r, k, i);
    }
  }
  // Rounds 5 and 6 queued at once, the second pushing what the first
  // pulls (same memory): it must push round 5's sums, W times summed.
  {
    std::vector<zc_request*> a(nk), b(nk), c(nk), d(nk);
    std::vector<std::vector<float>> sum6(nk);
    for (size_t k = 0; k < nk; ++k) {
      for (size_t i = 0; i < in[k].size(); ++i) in[k][i] = static_cast<float>(Grad(w, 5, i, k));
      sum6[k].assign(in[k].size(), -1.0f);
      CHILD_OK(zc_ps_ipush(ps, 1000 + k, in[k].data(), &a[k]));
      CHILD_OK(zc_ps_ipull(ps, 1000 + k, out[k].data(), &b[k]));
      CHILD_OK(zc_ps_ipush(ps, 1000 + k, out[k].data(), &c[k]));
      CHILD_OK(zc_ps_ipull(ps, 1000 + k, sum6[k].data(), &d[k]));
    }
    for (size_t k = 0; k < nk; ++k) {
      CHILD_OK(zc_wait(a[k]));
      CHILD_OK(zc_wait(b[k]));
      CHILD_OK(zc_wait(c[k]));
      CHILD_OK(zc_wait(d[k]));
      for (size_t i = 0; i < in[k].size(); ++i) {
        int64_t want = 0;
        for (int v = 0; v < W; ++v) want += Grad(v, 5, i, k);
        CHILD_CHECK(out[k][i] == static_cast<float>(want) && sum6[k][i] == static_cast<float>(want * W),
                    "rank %d rounds 5/6 key %zu element %zu: got %g and %g, want %lld and %lld", rank, k, i,
                    out[k][i], sum6[k][i], (long long)want, (long long)(want * W));
      }
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  printf("rank %d: %zu keys x 6 rounds checked\n", rank, nk);
  return 0;
}

class Pipeline : public ::testing::TestWithParam<PipeCase> {};

TEST_P(Pipeline, PiecesOfManyKeys) {
  const PipeCase& p = GetParam();
  Env env = PsEnv(p.transport, "16384");
  env.push_back({"ZC_PS_PIECE", "4096"});
  auto res = RunRanks(p.ranks, [&](int rank) { return PipelineBody(rank, p); }, env, 240);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// The default piece size (shared memory: 512 KiB pieces of 4 MiB chunks;
// tcp: whole chunks) on a few keys of several MiB, sizes off the boundaries.
int BigBody(int rank, const PipeCase& p) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  zc_ps_role role = RoleOf(rank, p.ranks, p.separate);
  CHILD_OK(zc_ps_create(comm, role, nullptr, &ps));
  if (role == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  const int W = zc_ps_num_workers(ps);
  const int w = WorkerIndex(rank, p.ranks, p.separate);
  const size_t counts[] = {(4u << 20) / 4 + 1, (512u << 10) / 4 - 1, 3 * (1u << 20) + 7, 1};
  for (size_t k = 0; k < 4; ++k) CHILD_OK(zc_ps_declare(ps, k, counts[k], ZC_FLOAT32, nullptr));
  std::vector<std::vector<float>> in(4), out(4);
  for (int r = 1; r <= 3; ++r) {
    std::vector<zc_request*> pr(4), qr(4);
    for (size_t k = 0; k < 4; ++k) {
      in[k].resize(counts[k]);
      out[k].assign(counts[k], 0.0f);
      for (size_t i = 0; i < counts[k]; ++i) in[k][i] = static_cast<float>(Grad(w, r, i, k));
      CHILD_OK(zc_ps_ipush(ps, k, in[k].data(), &pr[k]));
    }
    for (size_t k = 0; k < 4; ++k) CHILD_OK(zc_ps_ipull(ps, k, out[k].data(), &qr[k]));
    for (size_t k = 0; k < 4; ++k) {
      CHILD_OK(zc_wait(pr[k]));
      CHILD_OK(zc_wait(qr[k]));
      for (size_t i = 0; i < counts[k]; ++i) {
        int64_t want = 0;
        for (int v = 0; v < W; ++v) want += Grad(v, r, i, k);
        CHILD_CHECK(out[k][i] == static_cast<float>(want), "rank %d round %d key %zu element %zu: got %g, want %lld",
                    rank, r, k, i, out[k][i], (long long)want);
      }
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

// A large-key body on 2 and 3 ranks with the default pieces.
void RunLargeKeys(const PipeCase& p, int (*body)(int, const PipeCase&)) {
  if (p.ranks > 3) GTEST_SKIP() << "large keys: 2 and 3 ranks";
  Env env = {{"ZC_TRANSPORT", p.transport}, {"ZC_TIMEOUT", "60"}};
  if (strcmp(p.transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  auto res = RunRanks(p.ranks, [&](int rank) { return body(rank, p); }, env, 240);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

TEST_P(Pipeline, DefaultPiecesLargeKeys) { RunLargeKeys(GetParam(), BigBody); }

// Pieces large enough that servers sum them through a cache-sized block
// and write the sum out with non-temporal stores (from 64 KiB; the default
// 512 KiB pieces on shared memory), into the results region and, for a
// co-located worker whose pull is queued, into its tensor as well: every
// dtype, counts that end mid-block, rank- and round-dependent data, out of
// place, then in place (pushed from and pulled into the same buffer), and
// the bytes after each buffer untouched.
int StreamedBody(int rank, const PipeCase& p) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  zc_ps_role role = RoleOf(rank, p.ranks, p.separate);
  CHILD_OK(zc_ps_create(comm, role, nullptr, &ps));
  if (role == ZC_PS_SERVER) return ServeAndFree(comm, ps);
  const int W = zc_ps_num_workers(ps);
  const int w = WorkerIndex(rank, p.ranks, p.separate);
  const size_t kGuard = 64;
  std::vector<size_t> counts;
  for (size_t k = 0; k < std::size(kDtypes); ++k) {
    // About 1.2 MiB: two full pieces and a third that ends mid-block.
    counts.push_back((1228800 + 37 * k) / DtypeSize(kDtypes[k]) + 1);
    CHILD_OK(zc_ps_declare(ps, k, counts[k], kDtypes[k], nullptr));
  }
  std::vector<std::vector<char>> in(counts.size()), out(counts.size());
  for (int r = 1; r <= 4; ++r) {
    const bool in_place = r >= 3;
    std::vector<zc_request*> pr(counts.size()), qr(counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      const size_t bytes = counts[k] * DtypeSize(kDtypes[k]);
      in[k].assign(bytes + kGuard, 0x33);
      out[k].assign(bytes + kGuard, 0x5a);
      char* src = in_place ? out[k].data() : in[k].data();
      for (size_t i = 0; i < counts[k]; ++i) SetValue(kDtypes[k], src, i, Grad(w, r, i, k));
      // The pull right behind its push: queued before the piece is summed.
      CHILD_OK(zc_ps_ipush(ps, k, src, &pr[k]));
      CHILD_OK(zc_ps_ipull(ps, k, out[k].data(), &qr[k]));
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      CHILD_OK(zc_wait(pr[k]));
      CHILD_OK(zc_wait(qr[k]));
      const zc_dtype d = kDtypes[k];
      for (size_t i = 0; i < counts[k]; ++i) {
        int64_t want = 0;
        for (int v = 0; v < W; ++v) {
          if (d == ZC_BOOL) want |= BoolOf(Grad(v, r, i, k)) != 0;
          else want += Grad(v, r, i, k);
        }
        CHILD_CHECK(SameValue(d, out[k].data(), i, want), "rank %d round %d (%s) %s count %zu element %zu: got %g, "
                    "want %lld", rank, r, in_place ? "in place" : "out of place", DtypeName(d), counts[k], i,
                    IsFloatType(d) ? GetF(d, out[k].data(), i) : (double)(int64_t)GetI(d, out[k].data(), i),
                    (long long)want);
      }
      const size_t bytes = counts[k] * DtypeSize(d);
      for (size_t i = bytes; i < bytes + kGuard; ++i)
        CHILD_CHECK(out[k][i] == 0x5a, "rank %d round %d %s: byte %zu after the buffer was written", rank, r,
                    DtypeName(d), i - bytes);
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  printf("rank %d: %zu keys x 4 rounds checked\n", rank, counts.size());
  return 0;
}

TEST_P(Pipeline, StreamedSumsEveryDtype) { RunLargeKeys(GetParam(), StreamedBody); }

std::vector<PipeCase> PipeCases(const char* t) {
  std::vector<PipeCase> v;
  for (int n = 2; n <= 5; ++n) v.push_back({t, n, false});
  for (int n = 2; n <= 5; ++n) v.push_back({t, n, true});
  return v;
}
std::string PipeName(const ::testing::TestParamInfo<PipeCase>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.ranks) +
         (info.param.separate ? "_servers" : "_both");
}
INSTANTIATE_TEST_SUITE_P(Shm, Pipeline, ::testing::ValuesIn(PipeCases("shm")), PipeName);
INSTANTIATE_TEST_SUITE_P(Tcp, Pipeline, ::testing::ValuesIn(PipeCases("tcp")), PipeName);

// A push's pieces for this rank's server go by reference, and stay lent
// while nobody waits for the push (ZC_PS_LEND_MS, an hour here). Round 1:
// rank 1 pushes only once rank 0 has finished waiting for its push (a
// barrier between them), so rank 0's wait (zc_wait, or zc_test in a loop)
// must take its pieces back, or it waits for rank 1 until the deadline.
// Round 2: rank 0's push, unwatched, stays lent while rank 1 is held back;
// both pulls get the round's sum either way.
int LendBody(int rank, bool by_test) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, ZC_PS_BOTH, nullptr, &ps));
  const uint64_t key = 7;
  const size_t n = 100003;  // several 64 KiB chunks on both servers
  std::vector<float> g(n), v(n);
  CHILD_OK(zc_ps_declare(ps, key, n, ZC_FLOAT32, nullptr));
  for (uint64_t r = 1; r <= 2; ++r) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(Grad(rank, r, i, key));
    if (rank == 1) {
      CHILD_OK(zc_barrier(comm));
      CHILD_OK(zc_ps_push(ps, key, g.data()));
      CHILD_OK(zc_ps_pull(ps, key, v.data()));
    } else if (r == 1) {
      zc_request* push = nullptr;
      CHILD_OK(zc_ps_ipush(ps, key, g.data(), &push));
      if (by_test) {
        int done = 0;
        const auto t0 = std::chrono::steady_clock::now();
        while (!done) {
          CHILD_OK(zc_test(push, &done));
          CHILD_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30),
                      "rank 0: the push tested for 30 s is not done: it waits for rank 1");
        }
        CHILD_OK(zc_wait(push));  // frees the request
      } else {
        CHILD_OK(zc_wait(push));
      }
      CHILD_OK(zc_barrier(comm));
      CHILD_OK(zc_ps_pull(ps, key, v.data()));
    } else {
      zc_request *push = nullptr, *pull = nullptr;
      CHILD_OK(zc_ps_ipush(ps, key, g.data(), &push));
      CHILD_OK(zc_ps_ipull(ps, key, v.data(), &pull));
      CHILD_OK(zc_barrier(comm));
      CHILD_OK(zc_wait(pull));
      CHILD_OK(zc_wait(push));
    }
    for (size_t i = 0; i < n; ++i) {
      const float want = static_cast<float>(Grad(0, r, i, key) + Grad(1, r, i, key));
      CHILD_CHECK(v[i] == want, "rank %d round %llu element %zu: got %g, want %g", rank,
                  static_cast<unsigned long long>(r), i, v[i], want);
    }
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(Lending, WaitTakesPiecesBackUnwatchedStayLent) {
  for (const char* t : {"shm", "tcp"}) {
    for (bool by_test : {false, true}) {
      Env env = PsEnv(t, "64K");
      for (auto& e : env)
        if (e.first == "ZC_TIMEOUT") e.second = "20";
      env.push_back({"ZC_PS_LEND_MS", "3600000"});
      auto res = RunRanks(2, [&](int rank) { return LendBody(rank, by_test); }, env, 90);
      EXPECT_TRUE(AllOk(res)) << t << (by_test ? " zc_test" : " zc_wait") << "\n" << Describe(res);
    }
  }
}

// A member killed after the first round: every surviving rank's next
// operation fails with ZC_ERR_PEER_LOST naming it; nobody hangs.
int KilledBody(int rank, int victim, bool separate_server) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps_role role = separate_server && rank == 2 ? ZC_PS_SERVER : ZC_PS_BOTH;
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, role, nullptr, &ps));
  if (role == ZC_PS_SERVER) {
    if (rank == victim) {
      // Let the workers finish round 1 first: the server dies while idle.
      zc_barrier(comm);
      raise(SIGKILL);
    }
    zc_status st = zc_ps_serve(ps);
    printf("rank %d serve: %s: %s\n", rank, zc_status_string(st), zc_last_error(comm));
    CHILD_CHECK(st == ZC_ERR_PEER_LOST, "serve: %s", zc_status_string(st));
    zc_ps_free(ps);
    zc_finalize(comm);
    return 0;
  }
  std::vector<float> g(1000, 1.0f), v(1000);
  CHILD_OK(zc_ps_declare(ps, 1, g.size(), ZC_FLOAT32, nullptr));
  CHILD_OK(zc_ps_push(ps, 1, g.data()));
  CHILD_OK(zc_ps_pull(ps, 1, v.data()));
  // The victim dies once round 1 is done everywhere: a server victim after
  // a barrier with the workers; a worker victim once every other worker has
  // told it that its round-1 pull returned.
  if (separate_server && victim == 2) {
    zc_barrier(comm);
  } else {
    const int workers = separate_server ? 2 : 3;
    int token = rank;
    if (rank != victim) {
      CHILD_OK(zc_send(comm, &token, sizeof(token), victim, 77));
    } else {
      for (int w = 0; w < workers; ++w)
        if (w != victim) CHILD_OK(zc_recv(comm, &token, sizeof(token), w, 77));
    }
  }
  if (rank == victim) raise(SIGKILL);
  zc_status st = ZC_OK;
  for (int i = 0; i < 50 && st == ZC_OK; ++i) {
    st = zc_ps_push(ps, 1, g.data());
    if (st == ZC_OK) st = zc_ps_pull(ps, 1, v.data());
  }
  printf("rank %d: %s: %s\n", rank, zc_status_string(st), zc_last_error(comm));
  CHILD_CHECK(st == ZC_ERR_PEER_LOST, "expected peer lost, got %s", zc_status_string(st));
  // "server rank 2 lost" where this rank saw it go, or "peer 2 lost (rank 1
  // saw it go and alerted the job)" when another rank's alert came first;
  // never a survivor named as the lost one.
  char name[32], peer[32], survivor[64];
  snprintf(name, sizeof(name), "rank %d lost", victim);
  snprintf(peer, sizeof(peer), "peer %d lost", victim);
  const char* why = zc_last_error(comm);
  CHILD_CHECK(strstr(why, name) != nullptr || strstr(why, peer) != nullptr, "message does not name %s: %s", name,
              why);
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    snprintf(survivor, sizeof(survivor), "rank %d lost", r);
    CHILD_CHECK(strstr(why, survivor) == nullptr, "message names survivor %d as lost: %s", r, why);
  }
  zc_ps_free(ps);
  zc_finalize(comm);
  return 0;
}

TEST(PeerLost, KilledServer) {
  for (const char* t : {"shm", "tcp"}) {
    auto res = RunRanks(3, [](int rank) { return KilledBody(rank, 2, true); }, PsEnv(t), 90);
    EXPECT_EQ(res[2].signal, SIGKILL) << Describe(res);
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(res[r].signal == 0 && res[r].exit_code == 0) << t << "\n" << Describe(res);
  }
}

TEST(PeerLost, KilledWorker) {
  for (const char* t : {"shm", "tcp"}) {
    for (bool separate : {true, false}) {
      auto res = RunRanks(3, [&](int rank) { return KilledBody(rank, 1, separate); }, PsEnv(t), 90);
      EXPECT_EQ(res[1].signal, SIGKILL) << Describe(res);
      for (int r : {0, 2})
        EXPECT_TRUE(res[r].signal == 0 && res[r].exit_code == 0) << t << " separate=" << separate << "\n"
                                                                 << Describe(res);
    }
  }
}

}  // namespace
