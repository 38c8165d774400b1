// The hierarchical allreduce on emulated hosts. Each rank enters a UTS
// namespace of its own and takes the host name of its "host" before
// zc_init, so the bootstrap's host ids (host name + boot id) group the ranks
// as a real cluster would: ranks of one host talk over shared memory, ranks
// of different hosts over tcp (on loopback, ZC_SOCKET_IFNAME=lo). Needs
// root (CAP_SYS_ADMIN) for the namespaces: skipped otherwise.
// scripts/hier_bench.sh measures the same algorithm on throttled links.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "coll_check.h"
#include "collectives/collectives.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;
using zc::coll::HierShape;
using zc::coll::MakeHierShape;

// Whether this process may make UTS namespaces (asked once, in a child, so
// the test process keeps its own host name).
bool CanMakeHosts() {
  static int ok = -1;
  if (ok < 0) {
    auto res = RunRanks(1, [](int) { return unshare(CLONE_NEWUTS) == 0 ? 0 : 1; }, {}, 30);
    ok = AllOk(res) ? 1 : 0;
  }
  return ok == 1;
}

// In a rank before zc_init: become a rank of host hosts[rank].
int JoinHost(const std::vector<int>& hosts, int rank) {
  CHILD_CHECK(unshare(CLONE_NEWUTS) == 0, "unshare(CLONE_NEWUTS): %s", strerror(errno));
  std::string name = "zc-hier-host" + std::to_string(hosts[rank]);
  CHILD_CHECK(sethostname(name.c_str(), name.size()) == 0, "sethostname: %s", strerror(errno));
  return 0;
}

Env HierEnv(const char* algo, const char* timeout = "60") {
  // A small chunk so that mid-size vectors stream through several slots.
  return {{"ZC_ALGO", algo}, {"ZC_TIMEOUT", timeout}, {"ZC_CHUNK", "64k"},
          {"ZC_SOCKET_IFNAME", "lo"}};
}

#define NEED_HOSTS() \
  if (!CanMakeHosts()) GTEST_SKIP() << "needs root to make UTS namespaces (emulated hosts)"

// ---- the topology (pure) ----

TEST(HierShape, UniformContiguous) {
  HierShape h = MakeHierShape({0, 0, 1, 1, 2, 2}, 3);
  EXPECT_TRUE(h.uniform());
  EXPECT_EQ(h.hosts, 3);
  EXPECT_EQ(h.per_host, 2);
  EXPECT_EQ(h.host, 1);
  EXPECT_EQ(h.local, 1);
  EXPECT_EQ(h.local_ring, (std::vector<int>{2, 3}));
  EXPECT_EQ(h.cross_ring, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(h.layout, "3 host(s) x 2 rank(s)");
}

TEST(HierShape, InterleavedHostIds) {
  // Hosts are ordered by their first rank, whatever the ids are.
  HierShape h = MakeHierShape({7, 3, 7, 3}, 1);
  EXPECT_TRUE(h.uniform());
  EXPECT_EQ(h.host, 1);
  EXPECT_EQ(h.local, 0);
  EXPECT_EQ(h.local_ring, (std::vector<int>{1, 3}));
  EXPECT_EQ(h.cross_ring, (std::vector<int>{0, 1}));
}

TEST(HierShape, Uneven) {
  HierShape h = MakeHierShape({0, 0, 1}, 2);
  EXPECT_FALSE(h.uniform());
  EXPECT_TRUE(h.cross_ring.empty());
  EXPECT_EQ(h.layout, "2 hosts with 2, 1 ranks");
  EXPECT_TRUE(zc::coll::HierPeers(h).empty());
}

// ---- allreduce on emulated hosts ----

struct HierCase {
  std::vector<int> hosts;  // host of each rank
  const char* algo;        // ZC_ALGO
  std::vector<size_t> counts;
  std::vector<zc_dtype> dtypes;
};

// Every dtype x op x count, in and out of place, then a few large vectors
// (the automatic choice picks hier there) and a persistent plan.
int AllreduceBody(const HierCase& p, int rank) {
  if (JoinHost(p.hosts, rank)) return 1;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const bool forced = strcmp(p.algo, "hier") == 0;
  const size_t big = (1u << 20) + 3;  // elements: above the automatic threshold for any dtype
  std::vector<char> send(big * 8 + 64), recv(big * 8 + 64);
  char* sb = send.data() + 3;  // unaligned on purpose
  char* rb = recv.data() + 5;
  int it = 0;
  auto run = [&](zc_dtype d, zc_op op, size_t count, bool inplace) -> int {
    ++it;
    FillInput(d, op, sb, count, rank, it);
    char* out = inplace ? sb : rb;
    if (!inplace) memset(rb, 0x7f, count * DtypeSize(d));
    CHILD_OK(zc_allreduce(comm, sb, out, count, d, op));
    const char* algo = zc_last_algorithm(comm);
    bool want_hier = forced || count * DtypeSize(d) > zc::Collectives::kHdMaxBytes;
    CHILD_CHECK((strcmp(algo, "hier") == 0) == want_hier, "count %zu %s: algorithm %s", count,
                DtypeName(d), algo);
    {
      std::string err = CheckReducedRange(d, op, out, count, 0, n, it);
      CHILD_CHECK(err.empty(), "rank %d count %zu %s: %s", rank, count,
                  inplace ? "in place" : "out of place", err.c_str());
    }
    return 0;
  };
  for (zc_dtype d : p.dtypes)
    for (zc_op op : OpsFor(d))
      for (size_t count : p.counts)
        for (int inplace = 0; inplace < 2; ++inplace)
          if (run(d, op, count, inplace)) return 1;
  for (zc_op op : kBitwiseOps)
    if (run(ZC_UINT32, op, 1001, false)) return 1;
  CHILD_OK(zc_allreduce(comm, sb, rb, 0, ZC_FLOAT32, ZC_SUM));  // count 0: nothing
  if (run(ZC_FLOAT32, ZC_SUM, big, false)) return 1;
  if (run(ZC_BFLOAT16, ZC_AVG, big, true)) return 1;
  if (run(ZC_INT64, ZC_MAX, big, false)) return 1;
  if (run(ZC_FLOAT32, ZC_SUM, big, false)) return 1;  // again on the same buffers

  // A persistent plan uses the same choice, start after start.
  zc_plan* plan = nullptr;
  CHILD_OK(zc_allreduce_plan_init(comm, big, ZC_FLOAT64, ZC_AVG, &plan));
  for (int k = 0; k < 3; ++k) {
    ++it;
    FillInput(ZC_FLOAT64, ZC_AVG, sb, big, rank, it);
    CHILD_OK(zc_plan_start(plan, sb, k == 1 ? sb : rb));
    CHILD_OK(zc_plan_wait(plan));
    CHILD_CHECK(strcmp(zc_last_algorithm(comm), "hier") == 0, "plan algorithm %s",
                zc_last_algorithm(comm));
    const char* out = k == 1 ? sb : rb;
    for (size_t i = 0; i < big; i += 997) {
      std::string err = CheckReduced(ZC_FLOAT64, ZC_AVG, out, i, i, n, it);
      CHILD_CHECK(err.empty(), "plan start %d: %s", k, err.c_str());
    }
  }
  CHILD_OK(zc_plan_free(plan));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

void RunCase(const HierCase& p) {
  auto res = RunRanks(static_cast<int>(p.hosts.size()), [&](int rank) { return AllreduceBody(p, rank); },
                      HierEnv(p.algo), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

TEST(HierAllreduce, TwoHostsForced) {
  NEED_HOSTS();
  std::vector<zc_dtype> all(std::begin(kAllDtypes), std::end(kAllDtypes));
  // Counts below, at and above the rank count, primes, several chunks.
  RunCase({{0, 0, 1, 1}, "hier", {1, 2, 3, 5, 13, 4099, 40009}, all});
}

TEST(HierAllreduce, ThreeHostsAuto) {
  NEED_HOSTS();
  // Ranks of a host need not be consecutive.
  RunCase({{0, 1, 2, 0, 1, 2}, "auto", {1, 7, 40009, 65536 + 7},
           {ZC_INT8, ZC_INT32, ZC_FLOAT16, ZC_FLOAT32}});
}

TEST(HierAllreduce, ThreeRanksPerHostForced) {
  NEED_HOSTS();
  RunCase({{0, 0, 0, 1, 1, 1}, "hier", {1, 5, 7, 1031}, {ZC_UINT8, ZC_FLOAT64}});
}

// Five hosts of one rank: 8 cross-host steps per block, more than a link's
// slots, so a tick's messages go out in groups; several blocks in flight.
TEST(HierAllreduce, FiveHostsOneRankEach) {
  NEED_HOSTS();
  RunCase({{0, 1, 2, 3, 4}, "hier", {1, 7, 40009, 100003}, {ZC_INT32, ZC_FLOAT32}});
}

// Uneven hosts: the automatic choice keeps the flat algorithms and a
// forced hier is refused at init on every rank, naming the layout.
TEST(HierAllreduce, UnevenHosts) {
  NEED_HOSTS();
  std::vector<int> hosts = {0, 0, 1};
  auto res = RunRanks(3, [&](int rank) {
    if (JoinHost(hosts, rank)) return 1;
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    std::vector<float> a(1 << 20, 1.0f);
    CHILD_OK(zc_allreduce(comm, a.data(), a.data(), a.size(), ZC_FLOAT32, ZC_SUM));
    CHILD_CHECK(a[12345] == 3.0f, "got %g", a[12345]);
    CHILD_CHECK(strcmp(zc_last_algorithm(comm), "ring") == 0, "algorithm %s", zc_last_algorithm(comm));
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, HierEnv("auto"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);

  res = RunRanks(3, [&](int rank) {
    if (JoinHost(hosts, rank)) return 1;
    zc_comm* comm = nullptr;
    zc_status st = zc_init(&comm);
    std::string err = zc_last_error(nullptr);
    CHILD_CHECK(st == ZC_ERR_INVALID_ARG, "zc_init: %s: %s", zc_status_string(st), err.c_str());
    CHILD_CHECK(err.find("cannot use algorithm hier: the ranks are on 2 hosts with 2, 1 ranks") !=
                    std::string::npos, "error: %s", err.c_str());
    return 0;
  }, HierEnv("hier"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// The flat ring across hosts mixes its links: ranks of one host pass
// through shared-memory slots, ranks of different hosts write the allgather
// straight into the neighbour's buffer over tcp (allreduce_ring.cpp), so a
// rank may receive one way and send the other. Every dtype and op, counts
// around the chunk boundaries, in place and out of place.
TEST(HierAllreduce, RingWithMixedLinks) {
  NEED_HOSTS();
  for (std::vector<int> hosts : {std::vector<int>{0, 0, 1}, std::vector<int>{0, 1, 1, 0, 2}}) {
    auto res = RunRanks(static_cast<int>(hosts.size()), [&](int rank) {
      if (JoinHost(hosts, rank)) return 1;
      zc_comm* comm = nullptr;
      CHILD_OK(zc_init(&comm));
      const int n = zc_size(comm);
      std::vector<size_t> counts = {1, 3, 7919, 65537};
      for (size_t per_chunk : {8192, 16384})
        for (long d : {-1, 1}) counts.push_back(per_chunk * n + d);
      size_t max = 0;
      for (size_t c : counts) max = std::max(max, c);
      std::vector<char> send(max * 8 + 64), recv(max * 8 + 64);
      char* sb = send.data() + 1;
      char* rb = recv.data() + 7;
      int it = 0;
      for (zc_dtype d : kAllDtypes)
        for (zc_op op : OpsFor(d))
          for (size_t count : counts)
            for (int inplace = 0; inplace < 2; ++inplace) {
              ++it;
              FillInput(d, op, sb, count, rank, it);
              char* out = inplace ? sb : rb;
              CHILD_OK(zc_allreduce(comm, sb, out, count, d, op));
              CHILD_CHECK(strcmp(zc_last_algorithm(comm), "ring") == 0, "algorithm %s",
                          zc_last_algorithm(comm));
              {
                std::string err = CheckReducedRange(d, op, out, count, 0, n, it);
                CHILD_CHECK(err.empty(), "rank %d count %zu %s: %s", rank, count,
                            inplace ? "in place" : "out of place", err.c_str());
              }
            }
      CHILD_OK(zc_finalize(comm));
      return 0;
    }, HierEnv("ring", "120"), 240);
    EXPECT_TRUE(AllOk(res)) << Describe(res);
  }
}

// A rank whose count differs: ZC_ERR_MISMATCH naming both calls, from the
// first message that meets it (inside the host or across), and no rank hangs.
TEST(HierAllreduce, CountMismatch) {
  NEED_HOSTS();
  std::vector<int> hosts = {0, 0, 1, 1};
  auto res = RunRanks(4, [&](int rank) {
    if (JoinHost(hosts, rank)) return 1;
    zc_comm* comm = nullptr;
    // A rank still finishing zc_init when a faster one has already found
    // the mismatch and aborted the job fails there: allowed.
    if (zc_init(&comm) != ZC_OK) return 11;
    size_t count = rank == 3 ? 300001 : 300000;
    std::vector<float> a(count, 1.0f);
    zc_status st = zc_allreduce(comm, a.data(), a.data(), count, ZC_FLOAT32, ZC_SUM);
    std::string err = zc_last_error(comm);
    printf("rank %d: %s: %s\n", rank, zc_status_string(st), err.c_str());
    zc_finalize(comm);
    if (st == ZC_ERR_MISMATCH && err.find("allreduce(count=300001, float32, sum)") != std::string::npos &&
        err.find("allreduce(count=300000, float32, sum)") != std::string::npos)
      return 10;
    return st == ZC_OK ? 1 : 11;  // another failure (aborted by the detecting rank) is fine
  }, HierEnv("hier", "20"), 60);
  int named = 0;
  for (auto& r : res) {
    EXPECT_EQ(r.signal, 0) << Describe(res);
    EXPECT_TRUE(r.exit_code == 10 || r.exit_code == 11) << Describe(res);
    named += r.exit_code == 10;
  }
  // Rank 3's neighbours (rank 2 inside the host, rank 1 across) read its
  // messages.
  EXPECT_GT(named, 0) << Describe(res);
}

}  // namespace
