// Communicators for frameworks, through the C ABI: bad input to
// zc_comm_init_rank (corrupted and stale ids, nranks disagreement, a rank
// claimed twice or out of range, a rank that never arrives), split with a
// killed rank, memory of a one-rank split used by its parent's collectives
// and kept past the parent's finalize, zc_comm_get_async_error after a
// peer's death with no call in flight, and finalize/init 50 times in one
// process without leaking fds, threads, memory or /dev/shm segments. The ranks are forked by the test;
// rank 0 makes the id and hands it to the others through pipes, as a
// framework would through its own store.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/multiproc.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::Env;
using zc::test::RunRanks;

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Pipes from rank 0 to every other rank, made before the ranks are forked.
struct IdPipes {
  explicit IdPipes(int n) : fds(static_cast<size_t>(n)) {
    for (auto& p : fds) EXPECT_EQ(pipe(p.data()), 0);
  }
  ~IdPipes() {
    for (auto& p : fds) {
      close(p[0]);
      close(p[1]);
    }
  }
  // Rank 0: sends id to ranks 1..n-1. Others: receives it.
  bool Share(int rank, zc_unique_id* id) const {
    if (rank == 0) {
      for (size_t q = 1; q < fds.size(); ++q)
        if (write(fds[q][1], id, sizeof(*id)) != static_cast<ssize_t>(sizeof(*id))) return false;
      return true;
    }
    size_t got = 0;
    while (got < sizeof(*id)) {
      ssize_t r = read(fds[static_cast<size_t>(rank)][0], reinterpret_cast<char*>(id) + got, sizeof(*id) - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  std::vector<std::array<int, 2>> fds;
};

// Rank 0 makes an id; every rank gets it.
#define SHARE_ID(pipes, rank, id)                                                   \
  do {                                                                              \
    if ((rank) == 0) {                                                              \
      zc_status s_ = zc_get_unique_id(&(id));                                       \
      CHILD_CHECK(s_ == ZC_OK, "zc_get_unique_id: %s", zc_last_error(nullptr));     \
    }                                                                               \
    CHILD_CHECK((pipes).Share((rank), &(id)), "rank %d: id not passed", (rank));    \
  } while (0)

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Every rendezvous and tcp connection of these tests stays on loopback.
const Env kShort = {{"ZC_TIMEOUT", "4"}, {"ZC_SOCKET_IFNAME", "lo"}};

// Use after zc_finalize: a second finalize, a collective and the queries on
// the freed handle are refused with a clear error, not a double free. (The
// check reads the freed handle: AddressSanitizer and ThreadSanitizer rightly
// report that, so there the test has nothing to show.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZC_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ZC_TEST_SANITIZED 1
#endif
#endif
TEST(Lifetime, UseAfterFinalizeRefused) {
#ifdef ZC_TEST_SANITIZED
  GTEST_SKIP() << "reads a freed handle on purpose";
#endif
  auto res = RunRanks(2, [&](int rank) {
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    CHILD_OK(zc_finalize(comm));
    zc_status again = zc_finalize(comm);
    CHILD_CHECK(again == ZC_ERR_INVALID_ARG, "second finalize: %s", zc_status_string(again));
    CHILD_CHECK(Contains(zc_last_error(nullptr), "zc_finalize") &&
                    Contains(zc_last_error(nullptr), "not a live communicator (already finalized"),
                "second finalize: %s", zc_last_error(nullptr));
    zc_status b = zc_barrier(comm);
    CHILD_CHECK(b == ZC_ERR_INVALID_ARG, "barrier after finalize: %s", zc_status_string(b));
    CHILD_CHECK(zc_rank(comm) == -1 && zc_size(comm) == -1, "rank/size of a finalized handle: %d/%d",
                zc_rank(comm), zc_size(comm));
    printf("rank %d: %s\n", rank, zc_last_error(nullptr));
    return 0;
  }, kShort, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(InitRank, VersionAndArguments) {
  int major = -1, minor = -1, patch = -1;
  zc_version(&major, &minor, &patch);
  EXPECT_EQ(major, ZCOMM_VERSION_MAJOR);
  EXPECT_EQ(minor, ZCOMM_VERSION_MINOR);
  EXPECT_EQ(patch, ZCOMM_VERSION_PATCH);
  zc_version(nullptr, nullptr, nullptr);  // allowed

  zc_unique_id id;
  EXPECT_EQ(zc_get_unique_id(nullptr), ZC_ERR_INVALID_ARG);
  memset(&id, 0, sizeof(id));
  zc_comm* comm = reinterpret_cast<zc_comm*>(0x1);
  auto t0 = Clock::now();
  EXPECT_EQ(zc_comm_init_rank(nullptr, 2, &id, 0), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(zc_comm_init_rank(&comm, 2, nullptr, 0), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(zc_comm_init_rank(&comm, 0, &id, 0), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(zc_comm_init_rank(&comm, 2, &id, 2), ZC_ERR_INVALID_ARG);
  EXPECT_TRUE(Contains(zc_last_error(nullptr), "rank 2 is out of range [0, 2)")) << zc_last_error(nullptr);
  EXPECT_EQ(zc_comm_init_rank(&comm, 2, &id, -1), ZC_ERR_INVALID_ARG);
  // All zeros: not an id at all.
  EXPECT_EQ(zc_comm_init_rank(&comm, 2, &id, 0), ZC_ERR_INVALID_ARG);
  EXPECT_TRUE(Contains(zc_last_error(nullptr), "bad magic")) << zc_last_error(nullptr);
  EXPECT_LT(Since(t0), 1.0) << "argument errors are found without waiting";
}

// Every byte of the id is covered: a change anywhere is refused before
// anything is connected, and the rank that made it sees the rank missing.
TEST(InitRank, CorruptedIdRefused) {
  IdPipes pipes(2);
  auto res = RunRanks(2, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    zc_comm* comm = nullptr;
    if (rank == 1) {
      for (size_t byte : {0, 7, 30, 60, 100, 127}) {
        zc_unique_id bad = id;
        bad.internal[byte] ^= 0x20;
        auto t0 = Clock::now();
        zc_status s = zc_comm_init_rank(&comm, 2, &bad, 1);
        CHILD_CHECK(s == ZC_ERR_INVALID_ARG, "byte %zu: %s: %s", byte, zc_status_string(s), zc_last_error(comm));
        CHILD_CHECK(Since(t0) < 1.0, "byte %zu: took %.2f s", byte, Since(t0));
        CHILD_CHECK(comm == nullptr, "no communicator");
      }
      printf("rank 1: %s\n", zc_last_error(nullptr));
      return 0;
    }
    zc_status s = zc_comm_init_rank(&comm, 2, &id, 0);
    CHILD_CHECK(s == ZC_ERR_TIMEOUT, "rank 0: %s: %s", zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(Contains(zc_last_error(comm), "missing rank: 1"), "%s", zc_last_error(comm));
    printf("rank 0: %s\n", zc_last_error(comm));
    return 0;
  }, kShort, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  EXPECT_TRUE(Contains(res[1].output, "checksum")) << Describe(res);
}

// An id whose process has exited is refused at once, not after ZC_TIMEOUT.
TEST(InitRank, StaleIdRefused) {
  auto res = RunRanks(1, [&](int) {
    int p[2];
    CHILD_CHECK(pipe(p) == 0, "pipe");
    pid_t maker = fork();
    if (maker == 0) {
      zc_unique_id made;
      if (zc_get_unique_id(&made) != ZC_OK) _exit(1);
      _exit(write(p[1], &made, sizeof(made)) == sizeof(made) ? 0 : 1);
    }
    zc_unique_id id;
    CHILD_CHECK(read(p[0], &id, sizeof(id)) == sizeof(id), "no id from the maker");
    int status = 0;
    waitpid(maker, &status, 0);
    zc_comm* comm = nullptr;
    auto t0 = Clock::now();
    zc_status s = zc_comm_init_rank(&comm, 1, &id, 0);
    double took = Since(t0);
    CHILD_CHECK(s != ZC_OK && comm == nullptr, "a stale id gave a communicator");
    CHILD_CHECK(Contains(zc_last_error(comm), "stale"), "%s", zc_last_error(comm));
    CHILD_CHECK(took < 12, "took %.1f s", took);
    printf("stale id refused in %.3f s: %s\n", took, zc_last_error(comm));
    return 0;
  }, {{"ZC_TIMEOUT", "60"}, {"ZC_SOCKET_IFNAME", "lo"}}, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(InitRank, NranksDisagreementFailsEveryRank) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    zc_comm* comm = nullptr;
    auto t0 = Clock::now();
    zc_status s = zc_comm_init_rank(&comm, rank == 2 ? 4 : 3, &id, rank);
    CHILD_CHECK(s == ZC_ERR_MISMATCH, "rank %d: %s: %s", rank, zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(Contains(zc_last_error(comm), "nranks=4") && Contains(zc_last_error(comm), "nranks=3"),
                "%s", zc_last_error(comm));
    CHILD_CHECK(Since(t0) < 3, "took %.1f s", Since(t0));
    printf("rank %d: %s\n", rank, zc_last_error(comm));
    return 0;
  }, {{"ZC_TIMEOUT", "30"}, {"ZC_SOCKET_IFNAME", "lo"}}, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(InitRank, RankClaimedTwiceFailsEveryRank) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int proc) {
    zc_unique_id id;
    SHARE_ID(pipes, proc, id);
    const int rank = proc == 2 ? 1 : proc;  // two processes say they are rank 1
    zc_comm* comm = nullptr;
    auto t0 = Clock::now();
    zc_status s = zc_comm_init_rank(&comm, 3, &id, rank);
    CHILD_CHECK(s == ZC_ERR_INVALID_ARG, "process %d: %s: %s", proc, zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(Contains(zc_last_error(comm), "rank 1 was claimed by two processes"), "%s", zc_last_error(comm));
    CHILD_CHECK(Since(t0) < 3, "took %.1f s", Since(t0));
    return 0;
  }, {{"ZC_TIMEOUT", "30"}, {"ZC_SOCKET_IFNAME", "lo"}}, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(InitRank, MissingRankNamedAtTimeout) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    if (rank == 1) return 0;  // never joins
    zc_comm* comm = nullptr;
    auto t0 = Clock::now();
    zc_status s = zc_comm_init_rank(&comm, 3, &id, rank);
    CHILD_CHECK(s == ZC_ERR_TIMEOUT, "rank %d: %s: %s", rank, zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(Contains(zc_last_error(comm), "missing rank: 1"), "%s", zc_last_error(comm));
    CHILD_CHECK(Since(t0) < 4 + 8, "took %.1f s", Since(t0));
    printf("rank %d after %.1f s: %s\n", rank, Since(t0), zc_last_error(comm));
    return 0;
  }, kShort, 60);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Split (collective over the parent) with a rank killed before it: the
// others fail promptly instead of waiting out ZC_TIMEOUT.
void SplitWithKilledRank(const Env& env) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    zc_comm* comm = nullptr;
    CHILD_OK(zc_comm_init_rank(&comm, 3, &id, rank));
    CHILD_OK(zc_barrier(comm));
    if (rank == 2) raise(SIGKILL);
    zc_comm* half = nullptr;
    auto t0 = Clock::now();
    zc_status s = zc_comm_split(comm, rank % 2, rank, &half);
    CHILD_CHECK(s == ZC_ERR_PEER_LOST || s == ZC_ERR_ABORTED, "rank %d: %s: %s", rank, zc_status_string(s),
                zc_last_error(comm));
    CHILD_CHECK(half == nullptr, "no communicator from a failed split");
    CHILD_CHECK(Since(t0) < 10, "took %.1f s", Since(t0));
    printf("rank %d: split failed after %.3f s: %s\n", rank, Since(t0), zc_last_error(comm));
    zc_finalize(comm);
    return 0;
  }, env, 90);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[2].signal, SIGKILL) << Describe(res);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r].exit_code, 0) << Describe(res);
}

TEST(Split, KilledRankShm) { SplitWithKilledRank({{"ZC_TIMEOUT", "60"}, {"ZC_SOCKET_IFNAME", "lo"}}); }
TEST(Split, KilledRankTcp) {
  SplitWithKilledRank({{"ZC_TIMEOUT", "60"}, {"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}});
}

// Memory of a communicator of one rank split from a group's (zcomm.torch
// makes its registered tensors so): the group's collectives take it (a
// split shares the parent's pool), another thread allocates and frees on
// the split one meanwhile, and it stays usable after the group's
// communicator is finalized, until it is freed and its own is finalized.
void MemoryOfOwnSplit(const Env& env) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    zc_comm* comm = nullptr;  // the group's (CHILD_OK reports through it)
    CHILD_OK(zc_comm_init_rank(&comm, 3, &id, rank));
    zc_comm* own = nullptr;
    CHILD_OK(zc_comm_split(comm, rank, 0, &own));
    CHILD_CHECK(zc_size(own) == 1 && zc_rank(own) == 0, "own: rank %d of %d", zc_rank(own), zc_size(own));
    const size_t count = (size_t{1} << 20) + 3;  // the zero-copy round on shared memory
    float* x = nullptr;
    CHILD_OK(zc_mem_alloc(own, count * sizeof(float), reinterpret_cast<void**>(&x)));
    std::atomic<bool> stop{false};
    std::atomic<int> churn_failures{0};
    std::thread churn([&] {
      while (!stop.load()) {
        void* p = nullptr;
        if (zc_mem_alloc(own, 1 << 16, &p) != ZC_OK) ++churn_failures;
        else if (std::memset(p, rank, 1 << 16), zc_mem_free(own, p) != ZC_OK) ++churn_failures;
      }
    });
    for (int it = 0; it < 30; ++it) {
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 7 + rank * 3 + it) % 13);
      CHILD_OK(zc_allreduce(comm, x, x, count, ZC_FLOAT32, ZC_SUM));
      for (size_t i = 0; i < count; i += 997) {
        float want = 0;
        for (int r = 0; r < 3; ++r) want += static_cast<float>((i * 7 + r * 3 + it) % 13);
        CHILD_CHECK(x[i] == want, "rank %d iteration %d: x[%zu] = %g, want %g", rank, it, i, x[i], want);
      }
    }
    stop = true;
    churn.join();
    CHILD_CHECK(churn_failures.load() == 0, "%d allocations or frees failed", churn_failures.load());
    CHILD_OK(zc_finalize(comm));
    std::memset(x, 0x5a, count * sizeof(float));  // still mapped
    CHILD_CHECK(reinterpret_cast<unsigned char*>(x)[count * sizeof(float) - 1] == 0x5a, "x after the group");
    CHILD_OK(zc_mem_free(own, x));
    CHILD_OK(zc_finalize(own));
    return 0;
  }, env, 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(SplitMemory, OwnRankSplitLendsThePoolShm) {
  MemoryOfOwnSplit({{"ZC_TIMEOUT", "60"}, {"ZC_SOCKET_IFNAME", "lo"}});
}
TEST(SplitMemory, OwnRankSplitLendsThePoolTcp) {
  MemoryOfOwnSplit({{"ZC_TIMEOUT", "60"}, {"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}});
}

// A framework's watchdog: nothing in flight, a peer dies, the next query
// reports it (within 5 s).
void AsyncErrorAfterDeath(const Env& env) {
  IdPipes pipes(3);
  auto res = RunRanks(3, [&](int rank) {
    zc_unique_id id;
    SHARE_ID(pipes, rank, id);
    zc_comm* comm = nullptr;
    CHILD_OK(zc_comm_init_rank(&comm, 3, &id, rank));
    zc_comm* dup = nullptr;
    CHILD_OK(zc_comm_dup(comm, &dup));
    zc_comm* pair = nullptr;  // ranks 0 and 1 only: rank 2's death is not its business
    CHILD_OK(zc_comm_split(comm, rank < 2 ? 0 : 1, rank, &pair));
    zc_status e = ZC_ERR_INTERNAL;
    CHILD_OK(zc_comm_get_async_error(comm, &e));
    CHILD_CHECK(e == ZC_OK, "healthy communicator reports %s", zc_status_string(e));
    CHILD_OK(zc_barrier(comm));  // every rank has seen it healthy
    if (rank == 2) raise(SIGKILL);
    // Wait until rank 2 is really gone: its process is not ours to see, so
    // poll (observable condition: the error itself), with a bound.
    auto t0 = Clock::now();
    while (e == ZC_OK && Since(t0) < 10) {
      CHILD_OK(zc_comm_get_async_error(comm, &e));
      if (e == ZC_OK) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    double took = Since(t0);
    CHILD_CHECK(e == ZC_ERR_PEER_LOST, "rank %d: after %.1f s: %s", rank, took, zc_status_string(e));
    CHILD_CHECK(took < 5, "rank %d: lost peer reported after %.2f s", rank, took);
    std::string why = zc_last_error(comm);
    CHILD_CHECK(Contains(why, "peer 2"), "%s", why.c_str());
    zc_status ed = ZC_OK;
    CHILD_OK(zc_comm_get_async_error(dup, &ed));
    CHILD_CHECK(ed == ZC_ERR_PEER_LOST, "the dup shares the lost peer: %s", zc_status_string(ed));
    zc_status ep = ZC_ERR_INTERNAL;
    CHILD_OK(zc_comm_get_async_error(pair, &ep));
    CHILD_CHECK(ep == ZC_OK, "a communicator without rank 2 is healthy: %s", zc_status_string(ep));
    CHILD_OK(zc_allreduce(pair, &rank, &ep, 1, ZC_INT32, ZC_SUM));
    printf("rank %d: lost peer reported after %.3f s: %s\n", rank, took, why.c_str());
    CHILD_OK(zc_finalize(pair));
    // Communicators with the dead rank still finalize, promptly, and free
    // everything (their barrier reports the loss).
    auto t1 = Clock::now();
    zc_status f1 = zc_finalize(dup);
    zc_status f2 = zc_finalize(comm);
    CHILD_CHECK(Since(t1) < 10, "finalize after a peer loss took %.1f s", Since(t1));
    // The first finalize's barrier meets the loss (and aborts the shared
    // connections); the second has nothing left to wait for.
    CHILD_CHECK(f1 != ZC_OK || f2 != ZC_OK, "finalize with a dead member reports it: %s, %s",
                zc_status_string(f1), zc_status_string(f2));
    return 0;
  }, env, 90);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[2].signal, SIGKILL) << Describe(res);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r].exit_code, 0) << Describe(res);
}

TEST(AsyncError, PeerDeathShm) { AsyncErrorAfterDeath({{"ZC_TIMEOUT", "60"}, {"ZC_SOCKET_IFNAME", "lo"}}); }
TEST(AsyncError, PeerDeathTcp) {
  AsyncErrorAfterDeath({{"ZC_TIMEOUT", "60"}, {"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}});
}

// What a process holds: open fds, threads, resident memory, and the shared
// memory segments its pid owns.
struct Usage {
  int fds = 0, threads = 0, segments = 0;
  long rss_kb = 0;
};

int CountDir(const char* path, const std::string& contains = "") {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && (contains.empty() || strstr(e->d_name, contains.c_str()))) ++n;
    closedir(d);
  }
  return n;
}

Usage Measure() {
  Usage u;
  u.fds = CountDir("/proc/self/fd");
  u.threads = CountDir("/proc/self/task");
  u.segments = CountDir("/dev/shm", "-" + std::to_string(getpid()) + "-");
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kb = atol(line.c_str() + 6);
  return u;
}

// finalize and init again, 50 times, through both ways of making a
// communicator; afterwards as many fds, threads and segments as after the
// first round, and memory that does not keep growing.
void InitLoop(const Env& env) {
  constexpr int kRounds = 50;
  IdPipes pipes(2);
  auto res = RunRanks(2, [&](int rank) {
    Usage first{}, before = Measure();
    auto t0 = Clock::now();
    for (int i = 0; i < kRounds; ++i) {
      zc_unique_id id;
      SHARE_ID(pipes, rank, id);
      zc_comm* comm = nullptr;
      CHILD_OK(zc_comm_init_rank(&comm, 2, &id, rank));
      zc_comm* dup = nullptr;
      CHILD_OK(zc_comm_dup(comm, &dup));
      int v = rank + i, sum = 0;
      CHILD_OK(zc_allreduce(dup, &v, &sum, 1, ZC_INT32, ZC_SUM));
      CHILD_CHECK(sum == 2 * i + 1, "round %d: %d", i, sum);
      CHILD_OK(zc_finalize(comm));
      CHILD_OK(zc_finalize(dup));
      zc_comm* env_comm = nullptr;
      CHILD_OK(zc_init(&env_comm));
      comm = env_comm;
      CHILD_OK(zc_allreduce(env_comm, &v, &sum, 1, ZC_INT32, ZC_SUM));
      CHILD_CHECK(sum == 2 * i + 1, "zc_init round %d: %d", i, sum);
      CHILD_OK(zc_finalize(env_comm));
      if (i == 0) first = Measure();
    }
    Usage after = Measure();
    printf("rank %d: %d rounds in %.2f s; before / after round 1 / after round %d: fds %d/%d/%d, "
           "threads %d/%d/%d, own shm segments %d/%d/%d, RSS %ld/%ld/%ld kB\n",
           rank, kRounds, Since(t0), kRounds, before.fds, first.fds, after.fds, before.threads, first.threads,
           after.threads, before.segments, first.segments, after.segments, before.rss_kb, first.rss_kb,
           after.rss_kb);
    CHILD_CHECK(after.fds == first.fds, "fds: %d after round 1, %d after round %d", first.fds, after.fds, kRounds);
    // Against round 1, as for fds: a sanitizer's runtime may start a thread
    // of its own on first use.
    CHILD_CHECK(after.threads == first.threads, "threads: %d after round 1, %d after round %d", first.threads,
                after.threads, kRounds);
    CHILD_CHECK(after.segments == 0, "%d shared memory segments left", after.segments);
    // Under the sanitizers freed memory stays resident (ASan's quarantine
    // holds up to 256 MiB; their leak checks cover leaks there): RSS then
    // grows with what the rounds allocate and free, not with what they keep.
#ifdef ZC_TEST_SANITIZED
    const long rss_slack_kb = 64 * 1024;
#else
    const long rss_slack_kb = 16 * 1024;
#endif
    CHILD_CHECK(after.rss_kb - first.rss_kb < rss_slack_kb, "RSS grew by %ld kB over %d rounds",
                after.rss_kb - first.rss_kb, kRounds - 1);
    return 0;
  }, env, 240);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  std::cout << res[0].output << res[1].output;
}

// zc_init twice while the first communicator lives (the n-th call of each
// process meets the n-th of the others), each used from its own thread.
TEST(InitLoop, TwoEnvironmentCommunicatorsAtOnce) {
  auto res = RunRanks(3, [&](int rank) {
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    zc_comm* second = nullptr;
    CHILD_OK(zc_init(&second));
    CHILD_CHECK(zc_rank(second) == rank && zc_size(second) == 3, "second: rank %d of %d", zc_rank(second),
                zc_size(second));
    int errors[2] = {0, 0};
    auto work = [&](zc_comm* c, int k) {
      std::vector<int64_t> v(4099), out(4099);
      for (int it = 0; it < 50; ++it) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = rank * 1000 + static_cast<int64_t>(i) + it * (k + 1);
        if (zc_allreduce(c, v.data(), out.data(), v.size(), ZC_INT64, ZC_SUM) != ZC_OK) {
          ++errors[k];
          return;
        }
        for (size_t i = 0; i < v.size(); ++i)
          if (out[i] != 3000 + 3 * static_cast<int64_t>(i) + 3 * it * (k + 1)) ++errors[k];
      }
    };
    std::thread t([&] { work(second, 1); });
    work(comm, 0);
    t.join();
    CHILD_CHECK(errors[0] == 0 && errors[1] == 0, "wrong results: %d and %d", errors[0], errors[1]);
    CHILD_OK(zc_finalize(comm));
    comm = second;
    CHILD_OK(zc_finalize(second));
    return 0;
  }, {{"ZC_SOCKET_IFNAME", "lo"}}, 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(InitLoop, FiftyRoundsShm) { InitLoop({{"ZC_SOCKET_IFNAME", "lo"}}); }
TEST(InitLoop, FiftyRoundsTcp) { InitLoop({{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}}); }

}  // namespace
