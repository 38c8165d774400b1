// Elastic membership (docs/elastic.md, "Grow"): zc_comm_grow, zc_comm_join,
// zc_comm_join_pending and zc_is_joiner on shm and tcp. Newcomers are
// forked with the ranks of the job but start as joiners (ZC_JOIN=1, no
// ZC_RANK). The job grows 2 -> 3 and 3 -> 5; a rank is killed, the
// survivors shrink and a replacement joins; a newcomer and a survivor die
// during a grow. Collectives with rank-dependent data of odd sizes are
// checked exactly before and after; the application broadcasts its state to
// the newcomers; every failure is a clear status, never ZC_ERR_TIMEOUT; no
// fd or shared-memory segment is left.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness/multiproc.h"
#include "job_leftovers.h"
#include "verified_step.h"
#include "harness/shared_counter.h"

namespace {

using zc::test::Describe;
using zc::test::RunRanks;
using zc::test::CountFds;
using zc::test::ExpectNoSegments;
using zc::test::NoteJobTag;
using zc::test::Seed;
// A rank that sees a wrong result ends the whole test at once (its message
// names the value), not after the others wait out ZC_TIMEOUT.
constexpr auto kStopAll = zc::test::OnRankFailure::kStopAll;
using zc::test::SharedCounter;

struct Shared {
  char job_tag[17];
};

Shared* MapShared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared{};
}





// A forked process that is to join: the environment zcrun --elastic gives
// a replacement (the store and key, ZC_JOIN=1, no rank).
void BecomeJoiner() {
  for (const char* v : {"ZC_RANK", "ZC_SIZE", "ZC_LOCAL_RANK", "ZC_LOCAL_SIZE"}) unsetenv(v);
  setenv("ZC_JOIN", "1", 1);
}

using zc_elastic_test::VerifiedStep;

// Runs iterations [from, to) on comm; "" or what went wrong.
std::string Steps(zc_comm* comm, const std::vector<int>& ids, int from, int to) {
  for (int it = from; it < to; ++it) {
    std::string bad;
    zc_status s = VerifiedStep(comm, ids, it, 1 + it % 13, &bad);
    if (s != ZC_OK)
      return "iteration " + std::to_string(it) + ": " + zc_status_string(s) + ": " +
             (bad.empty() ? zc_last_error(comm) : bad);
  }
  return "";
}

// Waits until every rank of comm sees at least n processes waiting to join
// (agreed: one rank's count may be ahead of another's).
std::string AwaitPending(zc_comm* comm, int n) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
    int count = -1, fewest = -1;
    zc_status s = zc_comm_join_pending(comm, &count);
    if (s != ZC_OK) return std::string("join_pending: ") + zc_status_string(s) + ": " + zc_last_error(comm);
    s = zc_allreduce(comm, &count, &fewest, 1, ZC_INT32, ZC_MIN);
    if (s != ZC_OK) return std::string("allreduce of the counts: ") + zc_status_string(s) + ": " + zc_last_error(comm);
    if (fewest >= n) return "";
    if (std::chrono::steady_clock::now() > end) return "never saw " + std::to_string(n) + " joiners waiting";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The application's state, which the grown communicator's rank 0 broadcasts
// to the newcomers: the next iteration and the process ids in rank order.
struct State {
  int32_t next_it = 0;
  int32_t size = 0;
  int32_t ids[16] = {};
};

std::string SyncState(zc_comm* grown, State* st) {
  zc_status s = zc_broadcast(grown, st, sizeof(State) / 4, ZC_INT32, 0);
  if (s != ZC_OK) return std::string("state broadcast: ") + zc_status_string(s) + ": " + zc_last_error(grown);
  if (st->size != zc_size(grown)) return "state names " + std::to_string(st->size) + " ranks";
  return "";
}

// The process ids of grown's ranks, in rank order.
std::string WhoIsWhere(zc_comm* grown, int proc, std::vector<int>* ids) {
  ids->assign(static_cast<size_t>(zc_size(grown)), -1);
  int32_t me = proc;
  zc_status s = zc_allgather(grown, &me, ids->data(), 1, ZC_INT32);
  if (s != ZC_OK) return std::string("allgather of ids: ") + zc_status_string(s) + ": " + zc_last_error(grown);
  return "";
}

const zc::test::Env& EnvFor(const char* transport, int initial) {
  static thread_local zc::test::Env env;
  env = {{"ZC_TRANSPORT", transport}, {"ZC_TIMEOUT", "60"}, {"ZC_SOCKET_IFNAME", "lo"},
         {"ZC_SIZE", std::to_string(initial)}, {"ZC_LOCAL_SIZE", std::to_string(initial)}};
  return env;
}


class Grow : public ::testing::TestWithParam<const char*> {};

// initial ranks run a few verified iterations, newcomers join, and all go
// on in the grown communicator; the old one is still usable, then finalized.
void GrowBy(const char* transport, int initial, int newcomers) {
  Shared* sh = MapShared();
  ASSERT_NE(sh, nullptr);
  const int total = initial + newcomers;
  auto res = RunRanks(total, [&](int proc) -> int {
    const int fds_before = CountFds();
    zc_comm* comm = nullptr;
    zc_comm* grown = nullptr;
    int joining = -1;
    State st;
    if (proc >= initial) {
      BecomeJoiner();
      CHILD_CHECK(zc_is_joiner(&joining) == ZC_OK && joining == 1, "proc %d: not a joiner", proc);
      zc_status s = zc_comm_join(&grown);
      CHILD_CHECK(s == ZC_OK, "proc %d: join: %s: %s", proc, zc_status_string(s), zc_last_error(nullptr));
      CHILD_CHECK(zc_rank(grown) >= initial && zc_size(grown) == total, "newcomer got rank %d of %d",
                  zc_rank(grown), zc_size(grown));
    } else {
      CHILD_CHECK(zc_is_joiner(&joining) == ZC_OK && joining == 0, "proc %d: a joiner?", proc);
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      if (proc == 0) NoteJobTag(sh->job_tag);
      std::vector<int> ids;
      for (int r = 0; r < initial; ++r) ids.push_back(r);
      std::string why = Steps(comm, ids, 0, 7);
      CHILD_CHECK(why.empty(), "proc %d before grow: %s", proc, why.c_str());
      why = AwaitPending(comm, newcomers);
      CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
      CHILD_OK(zc_comm_grow(comm, &grown));
      CHILD_CHECK(zc_rank(grown) == proc && zc_size(grown) == total, "survivor %d got rank %d of %d", proc,
                  zc_rank(grown), zc_size(grown));
      int pending = -1;
      CHILD_OK(zc_comm_join_pending(comm, &pending));
      CHILD_CHECK(pending == 0, "%d still pending after the grow", pending);
      st.next_it = 7;
      st.size = total;
      for (int r = 0; r < total; ++r) st.ids[r] = r;
    }
    std::string why = SyncState(grown, &st);
    CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
    // The newcomers' ranks follow the order they queued in: who is where.
    std::vector<int> ids;
    why = WhoIsWhere(grown, proc, &ids);
    CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
    for (int r = 0; r < initial; ++r)
      CHILD_CHECK(ids[r] == st.ids[r], "rank %d of the grown communicator is proc %d, not %d", r, ids[r], st.ids[r]);
    why = Steps(grown, ids, st.next_it, st.next_it + 9);
    CHILD_CHECK(why.empty(), "proc %d after grow: %s", proc, why.c_str());
    if (comm) {
      // The old communicator still works, then goes.
      std::vector<int> old;
      for (int r = 0; r < initial; ++r) old.push_back(r);
      why = Steps(comm, old, 100, 102);
      CHILD_CHECK(why.empty(), "proc %d on the old communicator: %s", proc, why.c_str());
      CHILD_OK(zc_finalize(comm));
    }
    zc_status s = zc_finalize(grown);
    CHILD_CHECK(s == ZC_OK, "proc %d: finalize: %s: %s", proc, zc_status_string(s), zc_last_error(nullptr));
    CHILD_CHECK(CountFds() == fds_before, "proc %d: %d fds before, %d after", proc, fds_before, CountFds());
    return 0;
  }, EnvFor(transport, initial), 100, kStopAll);
  EXPECT_TRUE(zc::test::AllOk(res)) << Describe(res);
  ExpectNoSegments(sh->job_tag);
  munmap(sh, sizeof(Shared));
}

TEST_P(Grow, TwoToThree) { GrowBy(GetParam(), 2, 1); }
TEST_P(Grow, ThreeToFive) { GrowBy(GetParam(), 3, 2); }

// 4 ranks; one dies at a random point of the loop; the survivors shrink,
// then a replacement (waiting from the start) joins and the job goes on
// with 4 ranks and exact results.
TEST_P(Grow, KillShrinkThenReplacementJoins) {
  Shared* sh = MapShared();
  ASSERT_NE(sh, nullptr);
  unsigned seed = Seed();
  const int initial = 4, victim = static_cast<int>(seed % initial), die_at = 2 + static_cast<int>(seed % 9);
  printf("rank %d dies in iteration %d\n", victim, die_at);
  auto res = RunRanks(initial + 1, [&](int proc) -> int {
    const int fds_before = CountFds();
    zc_comm* grown = nullptr;
    State st;
    if (proc == initial) {
      BecomeJoiner();
      zc_status s = zc_comm_join(&grown);
      CHILD_CHECK(s == ZC_OK, "replacement: join: %s: %s", zc_status_string(s), zc_last_error(nullptr));
    } else {
      zc_comm* comm = nullptr;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      if (proc == 0) NoteJobTag(sh->job_tag);
      std::vector<int> ids;
      for (int r = 0; r < initial; ++r) ids.push_back(r);
      int it = 0;
      for (; it < 30; ++it) {
        if (proc == victim && it == die_at) raise(SIGKILL);
        std::string bad;
        zc_status s = VerifiedStep(comm, ids, it, 1 + it % 13, &bad);
        CHILD_CHECK(s != ZC_ERR_INTERNAL, "proc %d: %s", proc, bad.c_str());
        if (s == ZC_OK) continue;
        CHILD_CHECK(s == ZC_ERR_PEER_LOST || s == ZC_ERR_ABORTED, "proc %d: %s: %s", proc, zc_status_string(s),
                    zc_last_error(comm));
        break;
      }
      CHILD_CHECK(it < 30, "proc %d: the victim never died", proc);
      zc_comm* shrunk = nullptr;
      CHILD_OK(zc_comm_shrink(comm, &shrunk));
      CHILD_OK(zc_finalize(comm));
      comm = shrunk;
      CHILD_CHECK(zc_size(comm) == initial - 1, "shrunk to %d", zc_size(comm));
      // Where to resume: the lowest iteration any survivor failed in.
      int32_t mine = it, resume = -1;
      CHILD_OK(zc_allreduce(comm, &mine, &resume, 1, ZC_INT32, ZC_MIN));
      ids.erase(ids.begin() + victim);
      std::string why = Steps(comm, ids, resume, resume + 3);
      CHILD_CHECK(why.empty(), "proc %d after shrink: %s", proc, why.c_str());
      why = AwaitPending(comm, 1);
      CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
      CHILD_OK(zc_comm_grow(comm, &grown));
      CHILD_OK(zc_finalize(comm));
      st.next_it = resume + 3;
      st.size = initial;
      for (size_t r = 0; r < ids.size(); ++r) st.ids[r] = ids[r];
      st.ids[initial - 1] = initial;  // the replacement's process id
    }
    std::string why = SyncState(grown, &st);
    CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
    std::vector<int> ids(st.ids, st.ids + st.size);
    why = Steps(grown, ids, st.next_it, st.next_it + 9);
    CHILD_CHECK(why.empty(), "proc %d after the replacement joined: %s", proc, why.c_str());
    zc_status s = zc_finalize(grown);
    CHILD_CHECK(s == ZC_OK, "proc %d: finalize: %s: %s", proc, zc_status_string(s), zc_last_error(nullptr));
    CHILD_CHECK(CountFds() == fds_before, "proc %d: %d fds before, %d after", proc, fds_before, CountFds());
    return 0;
  }, EnvFor(GetParam(), initial), 100, kStopAll);
  for (int p = 0; p <= initial; ++p) {
    if (p == victim) {
      EXPECT_EQ(res[p].signal, SIGKILL) << Describe(res);
    } else {
      EXPECT_EQ(res[p].signal, 0) << Describe(res);
      EXPECT_EQ(res[p].exit_code, 0) << Describe(res);
    }
  }
  ExpectNoSegments(sh->job_tag);
  munmap(sh, sizeof(Shared));
}

// A failed grow or a first failing operation after it: a clear status, not
// a wait for ZC_TIMEOUT.
bool ClearFailure(zc_status s) { return s == ZC_ERR_PEER_LOST || s == ZC_ERR_ABORTED; }

// One participant (a newcomer, or a survivor) dies at a random point of the
// grow. Every other one fails the grow with a clear status (or, when the
// grow completed first, fails its next collective); the survivors' old
// communicator is still theirs (after a shrink when a survivor died).
void DieDuringGrow(const char* transport, bool newcomer_dies, unsigned seed) {
  Shared* sh = MapShared();
  ASSERT_NE(sh, nullptr);
  SharedCounter growing, grow_failed;
  const int initial = 3, victim = newcomer_dies ? initial : 1;
  const int delay_us = static_cast<int>(seed % 20000);
  printf("%s %d dies %d us after the grow starts\n", newcomer_dies ? "newcomer" : "rank", victim, delay_us);
  auto res = RunRanks(initial + 1, [&](int proc) -> int {
    const int fds_before = CountFds();
    if (proc == victim) {
      std::thread([&] {
        growing.WaitAtLeast(1, 60);
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        raise(SIGKILL);
      }).detach();
    }
    zc_comm* grown = nullptr;
    if (proc == initial) {
      BecomeJoiner();
      zc_status s = zc_comm_join(&grown);
      if (s != ZC_OK) grow_failed.Add();
      if (s == ZC_OK) {
        int32_t v = 1, sum = 0;
        s = zc_allreduce(grown, &v, &sum, 1, ZC_INT32, ZC_SUM);
        zc_finalize(grown);
      }
      CHILD_CHECK(ClearFailure(s), "newcomer: %s: %s", zc_status_string(s), zc_last_error(nullptr));
      fprintf(stderr, "newcomer: %s: %s\n", zc_status_string(s), zc_last_error(nullptr));
      CHILD_CHECK(CountFds() == fds_before, "newcomer: %d fds before, %d after", fds_before, CountFds());
      return 0;
    }
    zc_comm* comm = nullptr;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    if (proc == 0) NoteJobTag(sh->job_tag);
    std::vector<int> ids = {0, 1, 2};
    std::string why = Steps(comm, ids, 0, 3);
    CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
    why = AwaitPending(comm, 1);
    CHILD_CHECK(why.empty(), "proc %d: %s", proc, why.c_str());
    growing.Add();
    zc_status s = zc_comm_grow(comm, &grown);
    if (s != ZC_OK) grow_failed.Add();
    if (s == ZC_OK) {
      int32_t v = 1, sum = 0;
      s = zc_allreduce(grown, &v, &sum, 1, ZC_INT32, ZC_SUM);
      zc_finalize(grown);
    }
    CHILD_CHECK(ClearFailure(s), "proc %d: grow: %s: %s", proc, zc_status_string(s), zc_last_error(comm));
    fprintf(stderr, "proc %d: %s: %s\n", proc, zc_status_string(s), zc_last_error(comm));
    if (!newcomer_dies) {
      // A survivor died: the old communicator fails too; shrink it.
      int32_t v = 1, sum = 0;
      s = zc_allreduce(comm, &v, &sum, 1, ZC_INT32, ZC_SUM);
      CHILD_CHECK(ClearFailure(s), "proc %d: old communicator: %s", proc, zc_status_string(s));
      zc_comm* shrunk = nullptr;
      CHILD_OK(zc_comm_shrink(comm, &shrunk));
      CHILD_OK(zc_finalize(comm));
      comm = shrunk;
      ids = {0, 2};
    }
    why = Steps(comm, ids, 10, 13);
    CHILD_CHECK(why.empty(), "proc %d after the failed grow: %s", proc, why.c_str());
    CHILD_OK(zc_finalize(comm));
    CHILD_CHECK(CountFds() == fds_before, "proc %d: %d fds before, %d after", proc, fds_before, CountFds());
    return 0;
  }, EnvFor(transport, initial), 100, kStopAll);
  // Which of the two outcomes this run had (both are correct).
  printf("%d of the %d other participants saw the grow itself fail\n", grow_failed.value(), initial);
  for (int p = 0; p <= initial; ++p) {
    if (p == victim) {
      EXPECT_EQ(res[p].signal, SIGKILL) << Describe(res);
    } else {
      EXPECT_EQ(res[p].signal, 0) << Describe(res);
      EXPECT_EQ(res[p].exit_code, 0) << Describe(res);
    }
  }
  ExpectNoSegments(sh->job_tag);
  munmap(sh, sizeof(Shared));
}

TEST_P(Grow, NewcomerDiesDuringGrow) { DieDuringGrow(GetParam(), true, Seed()); }
TEST_P(Grow, SurvivorDiesDuringGrow) { DieDuringGrow(GetParam(), false, Seed()); }

INSTANTIATE_TEST_SUITE_P(Transports, Grow, ::testing::Values("shm", "tcp"));

// Argument checks and a process that is no joiner.
TEST(GrowArgs, ClearErrors) {
  unsetenv("ZC_JOIN");
  int joining = -1;
  EXPECT_EQ(zc_is_joiner(&joining), ZC_OK);
  EXPECT_EQ(joining, 0);
  EXPECT_EQ(zc_is_joiner(nullptr), ZC_ERR_INVALID_ARG);
  zc_comm* c = nullptr;
  EXPECT_EQ(zc_comm_join(&c), ZC_ERR_INVALID_ARG);
  EXPECT_NE(std::string(zc_last_error(nullptr)).find("ZC_JOIN"), std::string::npos) << zc_last_error(nullptr);
  EXPECT_EQ(zc_comm_join(nullptr), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(zc_comm_grow(nullptr, &c), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(zc_comm_join_pending(nullptr, &joining), ZC_ERR_INVALID_ARG);
}

}  // namespace
