// Multi-process tests of the parameter server's replies over tcp, which a
// server writes straight into the pulling worker's tensor (kReplyInto,
// docs/ps.md "Replies"): every push names where the pull of its round takes
// each piece, so a wrong target, a stale one or a late reply shows up as a
// wrong or overwritten element.
//   PullInto.FreshTargetsEachRound: each round pulls into new memory (a new
//     arena, every key's tensor at an odd byte offset between guard bytes),
//     keys of odd sizes around piece and chunk boundaries in three dtypes;
//     one round pushes and pulls the same memory (the reply slots then).
//   PullInto.WorkerKilledMidPush: a worker dies right after starting a
//     push of many pieces: every other rank's round fails with
//     ZC_ERR_PEER_LOST naming it; nobody hangs.
//   PullInto.TimedOutPullGetsNoLateReply: a pull that timed out leaves its
//     tensor alone when the reply comes later.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <zcomm/zcomm.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/multiproc.h"

namespace {

using namespace zc::test;

Env TcpEnv() {
  return {{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "60"},
          {"ZC_PS_PARTITION", "16384"}, {"ZC_PS_PIECE", "4096"}};
}

// Worker w's element i of key k in round r: small integers, exact as sums
// of up to 5 workers in every dtype used here (int8 included).
int Grad(int w, int r, size_t i, size_t k) { return static_cast<int>((w * 5 + i * 7 + r * 3 + k) % 9) - 2; }

struct KeySpec {
  zc_dtype dtype;
  size_t count;
};
const KeySpec kKeys[] = {{ZC_FLOAT32, 1},     {ZC_FLOAT32, 2},     {ZC_FLOAT32, 1023}, {ZC_FLOAT32, 1024},
                         {ZC_FLOAT32, 1025},  {ZC_FLOAT32, 4095},  {ZC_FLOAT32, 4097}, {ZC_FLOAT32, 10007},
                         {ZC_FLOAT64, 511},   {ZC_FLOAT64, 2049},  {ZC_INT8, 4099},    {ZC_INT8, 16385},
                         {ZC_INT8, 3}};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

size_t SizeOf(zc_dtype d) { return d == ZC_FLOAT64 ? 8 : d == ZC_FLOAT32 ? 4 : 1; }
void Put(zc_dtype d, char* p, size_t i, int v) {
  if (d == ZC_FLOAT64) {
    double x = v;
    memcpy(p + 8 * i, &x, 8);
  } else if (d == ZC_FLOAT32) {
    float x = static_cast<float>(v);
    memcpy(p + 4 * i, &x, 4);
  } else {
    p[i] = static_cast<char>(static_cast<int8_t>(v));
  }
}
int Get(zc_dtype d, const char* p, size_t i) {
  if (d == ZC_FLOAT64) {
    double x;
    memcpy(&x, p + 8 * i, 8);
    return static_cast<int>(x);
  }
  if (d == ZC_FLOAT32) {
    float x;
    memcpy(&x, p + 4 * i, 4);
    return static_cast<int>(x);
  }
  return static_cast<int8_t>(p[i]);
}

constexpr char kGuard = 0x5a;
constexpr size_t kGuardBytes = 9;

int FreshTargetsBody(int rank, int n, bool separate) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const bool server = separate && n > 1 && rank == n - 1;
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, server ? ZC_PS_SERVER : ZC_PS_BOTH, nullptr, &ps));
  if (server) {
    CHILD_OK(zc_ps_serve(ps));
    CHILD_OK(zc_ps_free(ps));
    CHILD_OK(zc_finalize(comm));
    return 0;
  }
  const int W = zc_ps_num_workers(ps);
  std::vector<std::vector<char>> in(kNumKeys);
  for (size_t k = 0; k < kNumKeys; ++k) {
    CHILD_OK(zc_ps_declare(ps, k, kKeys[k].count, kKeys[k].dtype, nullptr));
    in[k].resize(kKeys[k].count * SizeOf(kKeys[k].dtype));
  }
  for (int r = 1; r <= 5; ++r) {
    // A new arena each round (freed below): every tensor at an odd offset,
    // guard bytes before and after it.
    std::vector<size_t> at(kNumKeys);
    size_t bytes = kGuardBytes;
    for (size_t k = 0; k < kNumKeys; ++k) {
      at[k] = bytes + (k % 3);
      bytes = at[k] + in[k].size() + kGuardBytes;
    }
    auto* arena = static_cast<char*>(malloc(bytes + 64 * r));  // another size each round
    CHILD_CHECK(arena != nullptr, "malloc");
    memset(arena, kGuard, bytes);
    const bool in_place = r == 3;  // push and pull the same memory
    std::vector<zc_request*> pr(kNumKeys), qr(kNumKeys);
    for (size_t k = 0; k < kNumKeys; ++k) {
      char* src = in_place ? arena + at[k] : in[k].data();
      for (size_t i = 0; i < kKeys[k].count; ++i) Put(kKeys[k].dtype, src, i, Grad(rank, r, i, k));
      CHILD_OK(zc_ps_ipush(ps, k, src, &pr[k]));
    }
    for (size_t k = 0; k < kNumKeys; ++k) CHILD_OK(zc_ps_ipull(ps, k, arena + at[k], &qr[k]));
    for (size_t k = 0; k < kNumKeys; ++k) {
      CHILD_OK(zc_wait(pr[k]));
      CHILD_OK(zc_wait(qr[k]));
    }
    size_t guard_from = 0;
    for (size_t k = 0; k < kNumKeys; ++k) {
      for (size_t b = guard_from; b < at[k]; ++b)
        CHILD_CHECK(arena[b] == kGuard, "rank %d round %d: byte %zu before key %zu overwritten", rank, r, b, k);
      for (size_t i = 0; i < kKeys[k].count; ++i) {
        int want = 0;
        for (int v = 0; v < W; ++v) want += Grad(v, r, i, k);
        int got = Get(kKeys[k].dtype, arena + at[k], i);
        CHILD_CHECK(got == want, "rank %d round %d key %zu (%zu elements) element %zu: got %d, want %d", rank, r, k,
                    kKeys[k].count, i, got, want);
      }
      guard_from = at[k] + in[k].size();
    }
    for (size_t b = guard_from; b < bytes; ++b)
      CHILD_CHECK(arena[b] == kGuard, "rank %d round %d: byte %zu after the last key overwritten", rank, r, b);
    // zcomm.h: memory passed to zcomm is deregistered before it is freed.
    CHILD_OK(zc_mem_deregister(comm, arena, bytes));
    free(arena);
  }
  CHILD_OK(zc_ps_free(ps));
  CHILD_OK(zc_finalize(comm));
  printf("rank %d: %zu keys x 5 rounds checked\n", rank, kNumKeys);
  return 0;
}

struct Layout {
  int ranks;
  bool separate;
};
class PullInto : public ::testing::TestWithParam<Layout> {};

TEST_P(PullInto, FreshTargetsEachRound) {
  const Layout& l = GetParam();
  auto res = RunRanks(l.ranks, [&](int rank) { return FreshTargetsBody(rank, l.ranks, l.separate); }, TcpEnv(), 120,
                      OnRankFailure::kStopAll);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Tcp, PullInto,
                         ::testing::Values(Layout{2, false}, Layout{3, false}, Layout{5, false}, Layout{3, true},
                                           Layout{4, true}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::to_string(info.param.ranks) + (info.param.separate ? "_servers" : "_both");
                         });

// Rank 1 (a worker) starts pushing round 2 of a key of many pieces and dies
// at once; the others push and pull round 2.
int KilledMidPushBody(int rank, bool separate) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const bool server = separate && rank == 2;
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, server ? ZC_PS_SERVER : ZC_PS_BOTH, nullptr, &ps));
  if (server) {
    zc_status st = zc_ps_serve(ps);
    printf("rank %d serve: %s: %s\n", rank, zc_status_string(st), zc_last_error(comm));
    CHILD_CHECK(st == ZC_ERR_PEER_LOST, "serve: %s", zc_status_string(st));
    const char* why = zc_last_error(comm);
    CHILD_CHECK(strstr(why, "rank 1") || strstr(why, "peer 1"), "serve's error does not name rank 1: %s", why);
    zc_ps_free(ps);
    zc_finalize(comm);
    return 0;
  }
  const size_t count = 300007;  // float32: 74 chunks of 16 KiB, 4 pieces each
  std::vector<float> g(count), v(count);
  for (size_t i = 0; i < count; ++i) g[i] = static_cast<float>(Grad(rank, 1, i, 0));
  CHILD_OK(zc_ps_declare(ps, 0, count, ZC_FLOAT32, nullptr));
  CHILD_OK(zc_ps_push(ps, 0, g.data()));
  CHILD_OK(zc_ps_pull(ps, 0, v.data()));
  // Rank 1 dies once every other worker's round-1 pull has returned (it
  // is a server too when co-located: round 1 must not fail).
  int token = rank;
  if (rank != 1) {
    CHILD_OK(zc_send(comm, &token, sizeof(token), 1, 77));
  } else {
    for (int w = 0; w < (separate ? 2 : 3); ++w)
      if (w != 1) CHILD_OK(zc_recv(comm, &token, sizeof(token), w, 77));
    zc_request* req = nullptr;
    CHILD_OK(zc_ps_ipush(ps, 0, g.data(), &req));
    raise(SIGKILL);
  }
  // Round 2 may still complete (rank 1's push got through whole); round
  // 3 cannot.
  zc_status st = ZC_OK;
  for (int r = 2; r <= 3 && st == ZC_OK; ++r) {
    st = zc_ps_push(ps, 0, g.data());
    if (st == ZC_OK) st = zc_ps_pull(ps, 0, v.data());
  }
  printf("rank %d: %s: %s\n", rank, zc_status_string(st), zc_last_error(comm));
  CHILD_CHECK(st == ZC_ERR_PEER_LOST, "expected peer lost, got %s", zc_status_string(st));
  const char* why = zc_last_error(comm);
  CHILD_CHECK(strstr(why, "rank 1") || strstr(why, "peer 1"), "message does not name rank 1: %s", why);
  zc_ps_free(ps);
  zc_finalize(comm);
  return 0;
}

TEST(PullInto, WorkerKilledMidPush) {
  for (const char* t : {"tcp", "shm"}) {
    for (bool separate : {true, false}) {
      Env env = TcpEnv();
      env[0].second = t;
      auto res = RunRanks(3, [&](int rank) { return KilledMidPushBody(rank, separate); }, env, 90);
      EXPECT_EQ(res[1].signal, SIGKILL) << Describe(res);
      for (int r : {0, 2})
        EXPECT_TRUE(res[r].signal == 0 && res[r].exit_code == 0) << t << " separate=" << separate << "\n"
                                                                 << Describe(res);
    }
  }
}

// Rank 0 pushes and pulls two keys whose tensors are neighbours in one
// allocation (all queued at once) while rank 1 holds its pushes back, so
// rank 0's pulls fail (ZC_TIMEOUT 1 s there: the first times out, the other
// times out too or stops because the first dropped their common
// registration); rank 0 then fills its tensors with a sentinel and lets
// rank 1 push. The server (rank 2) replies to both workers, rank 0 first;
// once rank 1's pulls are done and the PS freed everywhere, rank 0's
// tensors still hold the sentinel.
int TimedOutBody(int rank) {
  if (rank == 0) setenv("ZC_TIMEOUT", "1", 1);
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, rank == 2 ? ZC_PS_SERVER : ZC_PS_WORKER, nullptr, &ps));
  if (rank == 2) {
    CHILD_OK(zc_ps_serve(ps));
    CHILD_OK(zc_ps_free(ps));
    CHILD_OK(zc_barrier(comm));
    CHILD_OK(zc_finalize(comm));
    return 0;
  }
  const size_t count = 600011, second = 1031;  // key 7, key 8 right after it
  std::vector<float> g(count + second, static_cast<float>(rank + 1)), v(count + second, 0.0f);
  CHILD_OK(zc_ps_declare(ps, 7, count, ZC_FLOAT32, nullptr));
  CHILD_OK(zc_ps_declare(ps, 8, second, ZC_FLOAT32, nullptr));
  int token = 0;
  // The tensors are registered already (a large send's rendezvous exposes
  // them) and stay so after the pulls: only the pulls' own deregistration
  // can keep the late replies out.
  if (rank == 0) CHILD_OK(zc_send(comm, v.data(), v.size() * sizeof(float), 1, 4));
  if (rank == 1) CHILD_OK(zc_recv(comm, v.data(), v.size() * sizeof(float), 0, 4));
  if (rank == 0) {
    // All queued: each push names its pull's tensor as its reply's target.
    zc_request *push[2], *pull[2];
    CHILD_OK(zc_ps_ipush(ps, 7, g.data(), &push[0]));
    CHILD_OK(zc_ps_ipush(ps, 8, g.data() + count, &push[1]));
    CHILD_OK(zc_ps_ipull(ps, 7, v.data(), &pull[0]));
    CHILD_OK(zc_ps_ipull(ps, 8, v.data() + count, &pull[1]));
    for (int i = 0; i < 2; ++i) {
      CHILD_OK(zc_wait(push[i]));
      zc_status st = zc_wait(pull[i]);
      CHILD_CHECK(st == ZC_ERR_TIMEOUT, "pull of key %d: expected a timeout, got %s: %s", 7 + i,
                  zc_status_string(st), zc_last_error(comm));
    }
    for (float& x : v) x = -7.0f;
    CHILD_OK(zc_send(comm, &token, sizeof(token), 1, 5));
    CHILD_OK(zc_recv(comm, &token, sizeof(token), 1, 6));
  } else {
    CHILD_OK(zc_recv(comm, &token, sizeof(token), 0, 5));
    CHILD_OK(zc_ps_push(ps, 7, g.data()));
    CHILD_OK(zc_ps_push(ps, 8, g.data() + count));
    CHILD_OK(zc_ps_pull(ps, 7, v.data()));
    CHILD_OK(zc_ps_pull(ps, 8, v.data() + count));
    for (size_t i = 0; i < v.size(); ++i) CHILD_CHECK(v[i] == 3.0f, "rank 1 element %zu: got %g, want 3", i, v[i]);
    CHILD_OK(zc_send(comm, &token, sizeof(token), 0, 6));
  }
  zc_status freed = zc_ps_free(ps);
  printf("rank %d: zc_ps_free: %s\n", rank, zc_status_string(freed));
  CHILD_OK(zc_barrier(comm));
  if (rank == 0)
    for (size_t i = 0; i < v.size(); ++i)
      CHILD_CHECK(v[i] == -7.0f, "rank 0 element %zu: %g written after the pull timed out", i, v[i]);
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(PullInto, TimedOutPullGetsNoLateReply) {
  Env env = TcpEnv();
  auto res = RunRanks(3, TimedOutBody, env, 90);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
