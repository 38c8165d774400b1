// Parameter-server failover through the C ABI (docs/ps.md, "Failover").
// Asynchronous mode: a worker-only rank killed at a random point of a loop
// of pushes and pulls (before declaring, between operations, with a push
// or a pull in flight); the surviving workers go on, declare a key after
// the loss, and every survivor's pushes are applied exactly: each element
// ends at init + the survivors' pushes + k * kMark, where kMark is what the
// victim pushes and k at most its push count (its pieces count whole or
// not at all). Every survivor lists the victim in zc_ps_lost_workers.
// 2-5 ranks, separate servers or a ZC_PS_BOTH rank, shm and tcp. A lost
// server (asynchronous mode) still fails every worker with
// ZC_ERR_PEER_LOST naming it. ZC_TEST_SEED repeats a run.
#include <gtest/gtest.h>
#include <signal.h>
#include <zcomm/zcomm.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness/multiproc.h"

namespace {

using namespace zc::test;
using Clock = std::chrono::steady_clock;

constexpr int64_t kMark = int64_t{1} << 32;  // each victim push adds this to every element
constexpr int kIters = 40;                   // each survivor's push/pull rounds
const size_t kCounts[] = {1, 7, 61, 1000};   // 1000 int64: many pieces of ZC_PS_PARTITION=256

Env FailoverEnv(const char* transport) {
  Env env = {{"ZC_TRANSPORT", transport}, {"ZC_TIMEOUT", "60"}, {"ZC_PS_PARTITION", "256"}};
  if (strcmp(transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  return env;
}

// separate: the last max(1, n/3) ranks serve only, the others work only.
// mixed: rank 0 both, the last rank (n >= 4) serves only, the others work only.
zc_ps_role RoleOf(int rank, int n, bool mixed) {
  if (mixed) {
    if (rank == 0) return ZC_PS_BOTH;
    return n >= 4 && rank == n - 1 ? ZC_PS_SERVER : ZC_PS_WORKER;
  }
  return rank >= n - std::max(1, n / 3) ? ZC_PS_SERVER : ZC_PS_WORKER;
}

int64_t Init(uint64_t key, size_t e) { return static_cast<int64_t>(key * 10 + e % 3); }
int64_t Grad(int rank, int iter, size_t e, uint64_t key) {
  return static_cast<int64_t>((rank * 7 + iter * 3 + e + key) % 5) + 1;
}

struct Plan {
  const char* transport;
  int ranks;
  bool mixed;
  int victim;
  int kill_iter;  // -1: before declaring
  int kill_mode;  // 0: between operations, 1: a push in flight, 2: a pull in flight
};

// The rounds a worker pushes to each key (the victim: at most kill_iter + 1).
int64_t SurvivorSum(const Plan& p, uint64_t key, size_t e, int iters) {
  int64_t s = 0;
  for (int r = 0; r < p.ranks; ++r) {
    if (r == p.victim || RoleOf(r, p.ranks, p.mixed) == ZC_PS_SERVER) continue;
    for (int i = 0; i < iters; ++i) s += Grad(r, i, e, key);
  }
  return s;
}

// Until this rank's zc_ps_lost_workers lists exactly the victim.
int AwaitLost(zc_comm* comm, zc_ps* ps, int victim) {
  auto until = Clock::now() + std::chrono::seconds(30);
  int ranks[8], n = 0;
  for (;;) {
    CHILD_OK(zc_ps_lost_workers(ps, ranks, &n));
    if (n == 1 && ranks[0] == victim) return 0;
    CHILD_CHECK(n == 0, "lost workers: %d entries, first %d (victim %d)", n, n ? ranks[0] : -1, victim);
    CHILD_CHECK(Clock::now() < until, "rank %d never listed as lost", victim);
    std::this_thread::yield();
  }
}

// Pulls key until the survivors' part is complete; fails on an excess.
int AwaitFinal(zc_comm* comm, zc_ps* ps, const Plan& p, uint64_t key, size_t count, int iters,
               int64_t victim_pushes) {
  std::vector<int64_t> v(count + 1);
  auto until = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    CHILD_OK(zc_ps_pull(ps, key, v.data() + 1));  // unaligned by 8 bytes from the vector's start
    bool done = true;
    for (size_t e = 0; e < count; ++e) {
      int64_t want = Init(key, e) + SurvivorSum(p, key, e, iters);
      int64_t low = v[e + 1] % kMark, marks = v[e + 1] / kMark;
      CHILD_CHECK(v[e + 1] >= 0 && low <= want && marks <= victim_pushes,
                  "key %llu element %zu: %lld = %lld + %lld marks; survivors' part must reach %lld, marks <= %lld",
                  static_cast<unsigned long long>(key), e, static_cast<long long>(v[e + 1]),
                  static_cast<long long>(low), static_cast<long long>(marks), static_cast<long long>(want),
                  static_cast<long long>(victim_pushes));
      done = done && low == want;
    }
    if (done) return 0;
    CHILD_CHECK(Clock::now() < until, "key %llu: the survivors' pushes never all arrived",
                static_cast<unsigned long long>(key));
  }
}

int VictimBody(zc_comm* comm, zc_ps* ps, const Plan& p) {
  (void)comm;
  if (p.kill_iter < 0) raise(SIGKILL);
  std::vector<int64_t> init;
  for (size_t i = 0; i < 4; ++i) {
    init.assign(kCounts[i], 0);
    for (size_t e = 0; e < kCounts[i]; ++e) init[e] = Init(i + 1, e);
    CHILD_OK(zc_ps_declare(ps, i + 1, kCounts[i], ZC_INT64, init.data()));
  }
  std::vector<int64_t> g(1000, kMark), v(1000);
  for (int it = 0;; ++it) {
    for (uint64_t key = 1; key <= 4; ++key) {
      if (it == p.kill_iter && key == 3) {
        zc_request* r = nullptr;
        if (p.kill_mode == 1) CHILD_OK(zc_ps_ipush(ps, key, g.data(), &r));
        if (p.kill_mode == 2) CHILD_OK(zc_ps_ipull(ps, key, v.data(), &r));
        raise(SIGKILL);
      }
      CHILD_OK(zc_ps_push(ps, key, g.data()));
      CHILD_OK(zc_ps_pull(ps, key, v.data()));
    }
  }
}

int FailoverBody(int rank, const Plan& p) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps_options o = {};
  o.async = 1;
  zc_ps* ps = nullptr;
  const zc_ps_role role = RoleOf(rank, p.ranks, p.mixed);
  CHILD_OK(zc_ps_create(comm, role, &o, &ps));
  if (rank == p.victim) return VictimBody(comm, ps, p);
  if (role == ZC_PS_SERVER) {
    CHILD_OK(zc_ps_serve(ps));
    if (AwaitLost(comm, ps, p.victim)) return 1;
    CHILD_OK(zc_ps_free(ps));
    zc_finalize(comm);
    return 0;
  }
  std::vector<int64_t> init, g(1001), v(1001);
  for (size_t i = 0; i < 4; ++i) {
    init.assign(kCounts[i], 0);
    for (size_t e = 0; e < kCounts[i]; ++e) init[e] = Init(i + 1, e);
    CHILD_OK(zc_ps_declare(ps, i + 1, kCounts[i], ZC_INT64, init.data()));
  }
  for (int it = 0; it < kIters; ++it) {
    for (uint64_t key = 1; key <= 4; ++key) {
      for (size_t e = 0; e < kCounts[key - 1]; ++e) g[e + 1] = Grad(rank, it, e, key);
      if (it % 2) {
        zc_request *a = nullptr, *b = nullptr;
        CHILD_OK(zc_ps_ipush(ps, key, g.data() + 1, &a));
        CHILD_OK(zc_ps_ipull(ps, key, v.data() + 1, &b));
        CHILD_OK(zc_wait(a));
        CHILD_OK(zc_wait(b));
      } else {
        CHILD_OK(zc_ps_push(ps, key, g.data() + 1));
        CHILD_OK(zc_ps_pull(ps, key, v.data() + 1));
      }
      // Every pulled element: init + survivors' pushes so far + whole marks.
      for (size_t e = 0; e < kCounts[key - 1]; ++e)
        CHILD_CHECK(v[e + 1] >= Init(key, e) && v[e + 1] % kMark <= Init(key, e) + SurvivorSum(p, key, e, kIters),
                    "iteration %d key %llu element %zu: %lld", it, static_cast<unsigned long long>(key), e,
                    static_cast<long long>(v[e + 1]));
    }
  }
  // A key declared after the loss (the victim never declares it).
  init.assign(13, 0);
  for (size_t e = 0; e < 13; ++e) init[e] = Init(5, e);
  CHILD_OK(zc_ps_declare(ps, 5, 13, ZC_INT64, init.data()));
  for (size_t e = 0; e < 13; ++e) g[e + 1] = Grad(rank, 0, e, 5);
  CHILD_OK(zc_ps_push(ps, 5, g.data() + 1));
  const int64_t victim_pushes = p.kill_iter < 0 ? 0 : p.kill_iter + 1;
  for (uint64_t key = 1; key <= 4; ++key)
    if (AwaitFinal(comm, ps, p, key, kCounts[key - 1], kIters, victim_pushes)) return 1;
  if (AwaitFinal(comm, ps, p, 5, 13, 1, 0)) return 1;
  if (AwaitLost(comm, ps, p.victim)) return 1;
  CHILD_OK(zc_ps_free(ps));
  zc_finalize(comm);
  return 0;
}

uint64_t Seed() {
  const char* s = getenv("ZC_TEST_SEED");
  return s ? strtoull(s, nullptr, 10) : std::random_device{}();
}

void RunFailover(const char* transport) {
  const uint64_t seed = Seed();
  std::mt19937_64 rng(seed);
  printf("%s: ZC_TEST_SEED=%llu\n", transport, static_cast<unsigned long long>(seed));
  for (int n = 2; n <= 5; ++n) {
    for (bool mixed : {false, true}) {
      std::vector<int> candidates;
      for (int r = 0; r < n; ++r)
        if (RoleOf(r, n, mixed) == ZC_PS_WORKER) candidates.push_back(r);
      Plan p{transport, n, mixed, candidates[rng() % candidates.size()],
             static_cast<int>(rng() % 12) - 1, static_cast<int>(rng() % 3)};
      std::string what = std::string(transport) + " ranks=" + std::to_string(n) + (mixed ? " mixed" : " separate") +
                         " victim=" + std::to_string(p.victim) + " kill_iter=" + std::to_string(p.kill_iter) +
                         " kill_mode=" + std::to_string(p.kill_mode) + " ZC_TEST_SEED=" + std::to_string(seed);
      auto res = RunRanks(n, [&](int rank) { return FailoverBody(rank, p); }, FailoverEnv(transport), 120);
      EXPECT_EQ(res[p.victim].signal, SIGKILL) << what << "\n" << Describe(res);
      for (int r = 0; r < n; ++r) {
        if (r == p.victim) continue;
        EXPECT_TRUE(res[r].signal == 0 && res[r].exit_code == 0) << what << "\n" << Describe(res);
      }
    }
  }
}

TEST(PsFailover, AsyncWorkerLostShm) { RunFailover("shm"); }
TEST(PsFailover, AsyncWorkerLostTcp) { RunFailover("tcp"); }

// Asynchronous mode, a server killed after round 1: every worker's next
// operation fails with ZC_ERR_PEER_LOST naming it (its process exited);
// nobody hangs.
int ServerLostBody(int rank, int victim, int n) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  zc_ps_options o = {};
  o.async = 1;
  const zc_ps_role role = rank >= n - 2 ? ZC_PS_SERVER : (rank == 0 ? ZC_PS_BOTH : ZC_PS_WORKER);
  zc_ps* ps = nullptr;
  CHILD_OK(zc_ps_create(comm, role, &o, &ps));
  if (role == ZC_PS_SERVER) {
    if (victim != 0) zc_barrier(comm);  // the workers' round 1 is done
    if (rank == victim) raise(SIGKILL);
    // The other server fails too, or ends well when every worker has freed
    // its zc_ps (after failing) before this server noticed the loss.
    zc_status st = zc_ps_serve(ps);
    CHILD_CHECK(st == ZC_ERR_PEER_LOST || st == ZC_OK, "serve: %s: %s", zc_status_string(st), zc_last_error(comm));
    zc_ps_free(ps);
    zc_finalize(comm);
    return 0;
  }
  std::vector<float> g(1000, 1.0f), v(1000);
  CHILD_OK(zc_ps_declare(ps, 1, g.size(), ZC_FLOAT32, nullptr));
  CHILD_OK(zc_ps_push(ps, 1, g.data()));
  CHILD_OK(zc_ps_pull(ps, 1, v.data()));
  if (victim == 0) {
    // A ZC_PS_BOTH victim: the others' round 1 is done too.
    int token = 0;
    if (rank == 0) {
      for (int r = 1; r < n - 2; ++r) CHILD_OK(zc_recv(comm, &token, sizeof(token), r, 9));
      raise(SIGKILL);
    }
    CHILD_OK(zc_send(comm, &token, sizeof(token), 0, 9));
  } else {
    zc_barrier(comm);
  }
  zc_status st = ZC_OK;
  auto until = Clock::now() + std::chrono::seconds(60);
  while (st == ZC_OK && Clock::now() < until) {
    st = zc_ps_push(ps, 1, g.data());
    if (st == ZC_OK) st = zc_ps_pull(ps, 1, v.data());
  }
  CHILD_CHECK(st == ZC_ERR_PEER_LOST, "expected ZC_ERR_PEER_LOST, got %s: %s", zc_status_string(st),
              zc_last_error(comm));
  // "server rank 4 lost", or "peer 4 lost" from a job-wide alert (the
  // other server, done, may have finalized its communicator already).
  std::string name = "rank " + std::to_string(victim), peer = "peer " + std::to_string(victim);
  CHILD_CHECK(strstr(zc_last_error(comm), name.c_str()) || strstr(zc_last_error(comm), peer.c_str()),
              "'%s' does not name %s", zc_last_error(comm), name.c_str());
  zc_ps_free(ps);
  zc_finalize(comm);
  return 0;
}

TEST(PsFailover, AsyncServerLost) {
  for (const char* t : {"shm", "tcp"}) {
    for (int victim : {0, 4}) {  // the ZC_PS_BOTH rank 0, the server-only rank 4
      const int n = 5;
      auto res = RunRanks(n, [&](int rank) { return ServerLostBody(rank, victim, n); }, FailoverEnv(t), 120);
      EXPECT_EQ(res[victim].signal, SIGKILL) << t << " victim " << victim << "\n" << Describe(res);
      for (int r = 0; r < n; ++r) {
        if (r == victim) continue;
        EXPECT_TRUE(res[r].signal == 0 && res[r].exit_code == 0) << t << " victim " << victim << "\n"
                                                                 << Describe(res);
      }
    }
  }
}

}  // namespace
