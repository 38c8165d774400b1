// Multi-process tests of zc_allgatherv, zc_alltoallv, zc_gather and
// zc_scatter through the C ABI (every dtype, uneven counts with zeros,
// displacements in reverse order with gaps, rank- and index-dependent data,
// the same buffers on every call, shm and tcp), their mismatch detection and
// argument checks; and ZC_ALGO (parser, per-collective choice, refusal).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "coll_check.h"
#include "collectives/algo_select.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;

constexpr unsigned char kSentinel = 0x5a;

Env VEnv(const char* transport, const char* algo = "auto", const char* timeout = "60") {
  // A small chunk: mid-size blocks stream through many slots.
  Env env = {{"ZC_TRANSPORT", transport}, {"ZC_ALGO", algo}, {"ZC_TIMEOUT", timeout},
             {"ZC_CHUNK", "64k"}};
  if (strcmp(transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  return env;
}

// Uneven counts with zeros: c == 0 gives all zeros ("count 0 everywhere").
size_t CountOf(size_t c, int p) { return c == 0 || p % 3 == 1 ? 0 : c + (p * 5) % 7; }
// Elements from rank s to rank d in alltoallv.
size_t PairCount(size_t c, int s, int d) {
  return c == 0 || (s + 2 * d) % 4 == 1 ? 0 : c + (s * 3 + d) % 5;
}

// Displacements: blocks in reverse rank order (or rotated by `rot`), a gap
// of 3 elements after each. Returns the extent.
size_t Layout(const std::vector<size_t>& counts, int rot, std::vector<size_t>* displs) {
  const int n = static_cast<int>(counts.size());
  displs->assign(n, 0);
  size_t cur = 0;
  for (int k = 0; k < n; ++k) {
    int p = rot < 0 ? n - 1 - k : (k + rot) % n;
    (*displs)[p] = cur;
    cur += counts[p] + 3;
  }
  return cur;
}

// Block `id` of call `it`, as FillInput makes it (index-dependent).
std::vector<char> Ref(zc_dtype d, size_t count, int id, int it) {
  std::vector<char> v(count * DtypeSize(d) + 1);
  FillInput(d, ZC_SUM, v.data(), count, id, it);
  return v;
}

// Every byte of [from, to) still holds the sentinel.
bool Untouched(const char* p, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (static_cast<unsigned char>(p[i]) != kSentinel) return false;
  return true;
}

struct VCase {
  const char* transport;
  int ranks;
};

std::string VName(const ::testing::TestParamInfo<VCase>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.ranks);
}

// small: fewer dtypes (for slow runs, e.g. under a sanitizer by hand).
int VectorBody(int rank, bool small) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  std::vector<size_t> cs = {0, 1, 7, 13, 1024, 65537};
  std::vector<zc_dtype> dtypes(std::begin(kAllDtypes), std::end(kAllDtypes));
  if (small) dtypes = {ZC_INT8, ZC_UINT32, ZC_FLOAT16, ZC_FLOAT64};
  // One pair of buffers for every call (reuse on purpose), odd offsets.
  const size_t cap = (65537 + 16) * 8 * n + 64;
  std::vector<char> A(cap + 8), B(cap + 8);
  char* sa = A.data() + 1;
  char* sb = B.data() + 3;
  int it = 0;
  for (zc_dtype d : dtypes) {
    const size_t es = DtypeSize(d);
    for (size_t c : cs) {
      ++it;
      // ---- allgatherv ----
      {
        std::vector<size_t> counts(n), displs;
        for (int p = 0; p < n; ++p) counts[p] = CountOf(c, p);
        size_t extent = Layout(counts, -1, &displs);
        FillInput(d, ZC_SUM, sa, counts[rank], rank, it);
        memset(sb, kSentinel, extent * es);
        CHILD_OK(zc_allgatherv(comm, counts[rank] ? sa : nullptr, counts[rank], sb, counts.data(),
                               displs.data(), d));
        CHILD_CHECK(c == 0 || strcmp(zc_last_algorithm(comm), n > 1 ? "ring" : "local") == 0,
                    "allgatherv algorithm %s", zc_last_algorithm(comm));
        for (int p = 0; p < n; ++p) {
          auto ref = Ref(d, counts[p], p, it);
          CHILD_CHECK(counts[p] == 0 || memcmp(sb + displs[p] * es, ref.data(), counts[p] * es) == 0,
                      "allgatherv %s c %zu: block of rank %d (%zu elements) wrong", DtypeName(d), c, p,
                      counts[p]);
          CHILD_CHECK(Untouched(sb, (displs[p] + counts[p]) * es, (displs[p] + counts[p] + 3) * es),
                      "allgatherv %s c %zu: gap after block %d written", DtypeName(d), c, p);
        }
      }
      // ---- alltoallv ----
      {
        std::vector<size_t> scounts(n), rcounts(n), sdispls, rdispls;
        for (int p = 0; p < n; ++p) {
          scounts[p] = PairCount(c, rank, p);
          rcounts[p] = PairCount(c, p, rank);
        }
        Layout(scounts, -1, &sdispls);
        size_t rextent = Layout(rcounts, rank, &rdispls);
        for (int p = 0; p < n; ++p)
          FillInput(d, ZC_SUM, sa + sdispls[p] * es, scounts[p], rank * n + p, it);
        memset(sb, kSentinel, rextent * es);
        CHILD_OK(zc_alltoallv(comm, sa, scounts.data(), sdispls.data(), sb, rcounts.data(),
                              rdispls.data(), d));
        for (int p = 0; p < n; ++p) {
          auto ref = Ref(d, rcounts[p], p * n + rank, it);
          CHILD_CHECK(rcounts[p] == 0 || memcmp(sb + rdispls[p] * es, ref.data(), rcounts[p] * es) == 0,
                      "alltoallv %s c %zu: block from rank %d (%zu elements) wrong", DtypeName(d), c,
                      p, rcounts[p]);
          CHILD_CHECK(Untouched(sb, (rdispls[p] + rcounts[p]) * es, (rdispls[p] + rcounts[p] + 3) * es),
                      "alltoallv %s c %zu: gap after block from %d written", DtypeName(d), c, p);
        }
      }
      // ---- gather and scatter, every root ----
      for (int root = 0; root < n; ++root) {
        const bool is_root = rank == root;
        FillInput(d, ZC_SUM, sa, c, rank, it + root);
        if (is_root) memset(sb, kSentinel, (c * n + 1) * es);
        CHILD_OK(zc_gather(comm, sa, is_root ? sb : nullptr, c, d, root));
        if (is_root) {
          for (int p = 0; p < n; ++p) {
            auto ref = Ref(d, c, p, it + root);
            CHILD_CHECK(c == 0 || memcmp(sb + p * c * es, ref.data(), c * es) == 0,
                        "gather %s c %zu root %d: block of rank %d wrong", DtypeName(d), c, root, p);
          }
          CHILD_CHECK(Untouched(sb, c * n * es, (c * n + 1) * es), "gather wrote past recvbuf");
        }
        if (is_root)
          for (int p = 0; p < n; ++p) FillInput(d, ZC_SUM, sa + p * c * es, c, root * n + p, it);
        memset(sb, kSentinel, (c + 1) * es);
        CHILD_OK(zc_scatter(comm, is_root ? sa : nullptr, sb, c, d, root));
        auto ref = Ref(d, c, root * n + rank, it);
        CHILD_CHECK(c == 0 || memcmp(sb, ref.data(), c * es) == 0,
                    "scatter %s c %zu root %d: my block wrong", DtypeName(d), c, root);
        CHILD_CHECK(Untouched(sb, c * es, (c + 1) * es), "scatter wrote past recvbuf");
        if (c && n > 1)
          CHILD_CHECK(strcmp(zc_last_algorithm(comm), "direct") == 0, "scatter algorithm %s",
                      zc_last_algorithm(comm));
      }
    }
  }
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

// The nonblocking variants (zc_iallgatherv, zc_ialltoallv, zc_igather,
// zc_iscatter) all queued at once on their own buffers, the count and
// displacement arrays changed right after each call (they are read before
// it returns), waited for in reverse order; zc_comm_enqueue running
// blocking collectives in the queue's order; zc_request_notify.
struct Notified {
  std::atomic<int> calls{0};
  std::atomic<int> status{-1};
};
void OnDone(void* arg, zc_status st) {
  auto* n = static_cast<Notified*>(arg);
  n->status = st;
  n->calls++;
}
struct EnqueueArg {
  zc_comm* comm;
  int64_t value, sum;
};
zc_status AllreduceTwice(void* p) {
  auto* a = static_cast<EnqueueArg*>(p);
  // Blocking collectives inside the queue's order, never refused as in flight.
  zc_status s = zc_allreduce(a->comm, &a->value, &a->sum, 1, ZC_INT64, ZC_SUM);
  if (s == ZC_OK) s = zc_allreduce(a->comm, &a->sum, &a->sum, 1, ZC_INT64, ZC_MAX);
  return s;
}
zc_status Refuse(void*) { return ZC_ERR_UNSUPPORTED; }
// Holds the queue until the test opens it (at most 30 s).
zc_status Gate(void* p) {
  auto* open = static_cast<std::atomic<bool>*>(p);
  for (int i = 0; i < 3000000 && !open->load(); ++i) usleep(10);
  return open->load() ? ZC_OK : ZC_ERR_TIMEOUT;
}

int QueuedBody(int rank) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const zc_dtype d = ZC_INT32;
  const size_t es = 4, c = 37;
  std::vector<size_t> counts(n), displs, scounts(n), rcounts(n), sdispls, rdispls;
  for (int p = 0; p < n; ++p) {
    counts[p] = CountOf(c, p);
    scounts[p] = PairCount(c, rank, p);
    rcounts[p] = PairCount(c, p, rank);
  }
  const size_t gext = Layout(counts, -1, &displs);
  Layout(scounts, -1, &sdispls);
  const size_t rext = Layout(rcounts, rank, &rdispls);
  std::vector<char> gin(counts[rank] * es + 8), gout(gext * es + 8), ain(4096), aout(rext * es + 8), tin(c * es),
      tout(c * n * es + 8), sin(c * n * es), sout(c * es + 8);
  FillInput(d, ZC_SUM, gin.data(), counts[rank], rank, 1);
  for (int p = 0; p < n; ++p) FillInput(d, ZC_SUM, ain.data() + sdispls[p] * es, scounts[p], rank * n + p, 2);
  FillInput(d, ZC_SUM, tin.data(), c, rank, 3);
  for (int p = 0; p < n; ++p) FillInput(d, ZC_SUM, sin.data() + p * c * es, c, p, 4);
  const int root = n - 1;
  zc_request* r[5];
  std::atomic<bool> open{false};
  zc_request* gate;
  CHILD_OK(zc_comm_enqueue(comm, Gate, &open, &gate));
  CHILD_OK(zc_iallgatherv(comm, gin.data(), counts[rank], gout.data(), counts.data(), displs.data(), d, &r[0]));
  std::vector<size_t> scratch = counts;  // the arrays are the caller's again at once
  std::fill(counts.begin(), counts.end(), 999);
  CHILD_OK(zc_ialltoallv(comm, ain.data(), scounts.data(), sdispls.data(), aout.data(), rcounts.data(),
                         rdispls.data(), d, &r[1]));
  std::vector<size_t> rsave = rcounts, rdsave = rdispls;
  std::fill(rdispls.begin(), rdispls.end(), 0);
  CHILD_OK(zc_igather(comm, tin.data(), rank == root ? tout.data() : nullptr, c, d, root, &r[2]));
  CHILD_OK(zc_iscatter(comm, rank == root ? sin.data() : nullptr, sout.data(), c, d, root, &r[3]));
  // A blocking collective is refused while these are queued (the gate holds them).
  CHILD_CHECK(zc_barrier(comm) == ZC_ERR_INVALID_ARG, "a blocking barrier was not refused");
  open = true;
  CHILD_OK(zc_wait(gate));
  EnqueueArg ea{comm, rank + 1, 0};
  Notified note;
  CHILD_OK(zc_comm_enqueue(comm, AllreduceTwice, &ea, &r[4]));
  CHILD_OK(zc_request_notify(r[4], OnDone, &note));
  CHILD_CHECK(zc_request_notify(r[4], OnDone, &note) == ZC_ERR_INVALID_ARG, "a second notify was accepted");
  for (int i = 4; i >= 0; --i) CHILD_OK(zc_wait(r[i]));
  CHILD_CHECK(note.calls == 1 && note.status == ZC_OK, "notify: %d calls, status %d", note.calls.load(),
              note.status.load());
  CHILD_CHECK(ea.sum == static_cast<int64_t>(n) * (n + 1) / 2, "enqueued allreduce: %lld",
              static_cast<long long>(ea.sum));
  for (int p = 0; p < n; ++p) {
    auto ref = Ref(d, scratch[p], p, 1);
    CHILD_CHECK(scratch[p] == 0 || memcmp(gout.data() + displs[p] * es, ref.data(), scratch[p] * es) == 0,
                "iallgatherv: block of rank %d wrong", p);
    auto aref = Ref(d, rsave[p], p * n + rank, 2);
    CHILD_CHECK(rsave[p] == 0 || memcmp(aout.data() + rdsave[p] * es, aref.data(), rsave[p] * es) == 0,
                "ialltoallv: block from rank %d wrong", p);
    if (rank == root) {
      auto tref = Ref(d, c, p, 3);
      CHILD_CHECK(memcmp(tout.data() + p * c * es, tref.data(), c * es) == 0, "igather: block %d wrong", p);
    }
  }
  auto sref = Ref(d, c, rank, 4);
  CHILD_CHECK(memcmp(sout.data(), sref.data(), c * es) == 0, "iscatter: my block wrong");
  // A failing function: its status reaches the waiter and the notify.
  zc_request* bad;
  Notified bn;
  CHILD_OK(zc_comm_enqueue(comm, Refuse, nullptr, &bad));
  CHILD_CHECK(zc_wait(bad) == ZC_ERR_UNSUPPORTED, "the enqueued function's status was lost");
  // Notify on a request already done: called at once.
  zc_request* done;
  CHILD_OK(zc_ibarrier(comm, &done));
  zc_status ws = zc_wait(done);
  CHILD_OK(ws);
  CHILD_OK(zc_ibarrier(comm, &done));
  int flag = 0;
  while (!flag) CHILD_OK(zc_test(done, &flag));
  CHILD_OK(zc_request_notify(done, OnDone, &bn));
  CHILD_CHECK(bn.calls == 1, "notify of a done request was not called at once");
  CHILD_OK(zc_wait(done));
  CHILD_CHECK(zc_comm_enqueue(comm, nullptr, nullptr, &done) == ZC_ERR_INVALID_ARG, "NULL fn accepted");
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

class Queued : public ::testing::TestWithParam<VCase> {};
TEST_P(Queued, NonblockingVectorEnqueueNotify) {
  auto res = RunRanks(GetParam().ranks, QueuedBody, VEnv(GetParam().transport), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
INSTANTIATE_TEST_SUITE_P(Shm, Queued, ::testing::Values(VCase{"shm", 1}, VCase{"shm", 2}, VCase{"shm", 3},
                                                        VCase{"shm", 5}), VName);
INSTANTIATE_TEST_SUITE_P(Tcp, Queued, ::testing::Values(VCase{"tcp", 2}, VCase{"tcp", 4}), VName);

class Vector : public ::testing::TestWithParam<VCase> {};

TEST_P(Vector, AllgathervAlltoallvGatherScatter) {
  const VCase& p = GetParam();
  auto res = RunRanks(p.ranks, [&](int rank) { return VectorBody(rank, false); }, VEnv(p.transport),
                      150);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Shm, Vector,
                         ::testing::Values(VCase{"shm", 1}, VCase{"shm", 2}, VCase{"shm", 3},
                                           VCase{"shm", 4}, VCase{"shm", 5}),
                         VName);
INSTANTIATE_TEST_SUITE_P(Tcp, Vector,
                         ::testing::Values(VCase{"tcp", 2}, VCase{"tcp", 3}, VCase{"tcp", 5}), VName);

// ---- mismatches: every rank fails, none hangs, the detector names both ----

enum class VDiff { kAllgathervTotal, kAllgathervSplit, kAlltoallv, kGatherRoot, kScatterRoot,
                   kScatterCount };

int VMismatchBody(int rank, VDiff diff, const char* expect_text) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  std::vector<int32_t> a(4096, 7), b(4096 * 8);
  // One good call first: links exist and sequence numbers agree. A slow
  // rank may see the abort of the next call here already.
  zc_status st = zc_gather(comm, a.data(), b.data(), 10, ZC_INT32, 0);
  CHILD_CHECK(st == ZC_OK || st == ZC_ERR_MISMATCH, "first call: %s: %s", zc_status_string(st),
              zc_last_error(comm));
  std::vector<size_t> counts(n, 4), displs(n), zeros(n, 0);
  for (int p = 0; p < n; ++p) displs[p] = p * 100;
  if (st == ZC_OK) switch (diff) {
    case VDiff::kAllgathervTotal:
      // Rank 1 sends 5 elements; the others expect 4 from it.
      if (rank == 1) counts[1] = 5;
      st = zc_allgatherv(comm, a.data(), counts[rank], b.data(), counts.data(), displs.data(),
                         ZC_INT32);
      break;
    case VDiff::kAllgathervSplit:
      // Same total (12), different split: rank 2 believes [4, 5, 3].
      counts = {3, 5, 4};
      if (rank == 2) counts = {4, 5, 3};
      st = zc_allgatherv(comm, a.data(), counts[rank], b.data(), counts.data(), displs.data(),
                         ZC_INT32);
      break;
    case VDiff::kAlltoallv: {
      // Rank 0 sends 5 elements to rank 1, which expects 4.
      std::vector<size_t> sc(n, 4), rc(n, 4);
      if (rank == 0) sc[1] = 5;
      st = zc_alltoallv(comm, a.data(), sc.data(), displs.data(), b.data(), rc.data(),
                        displs.data(), ZC_INT32);
      break;
    }
    case VDiff::kGatherRoot:
      st = zc_gather(comm, a.data(), b.data(), 10, ZC_INT32, rank == 1 ? 1 : 0);
      break;
    case VDiff::kScatterRoot:
      st = zc_scatter(comm, a.data(), b.data(), 10, ZC_INT32, rank == 1 ? 1 : 0);
      break;
    case VDiff::kScatterCount:
      st = zc_scatter(comm, a.data(), b.data(), rank == 1 ? 11 : 10, ZC_INT32, 0);
      break;
  }
  std::string err = zc_last_error(comm);
  printf("rank %d: status %s: %s\n", rank, zc_status_string(st), err.c_str());
  // A rank whose own part is complete and consistent (the sender of an
  // alltoallv block its receiver refused; a scatter root whose neighbours
  // agree with it while another rank believes it is the root) may return
  // OK: every block it accepted carried its own signature, so its data is
  // right. The detecting rank's abort reaches it at its next call, which
  // must fail.
  CHILD_CHECK(zc_barrier(comm) != ZC_OK, "rank %d: barrier after a mismatch succeeded", rank);
  zc_finalize(comm);
  if (st == ZC_ERR_MISMATCH && expect_text && err.find(expect_text) != std::string::npos) return 10;
  if (st == ZC_ERR_MISMATCH) return 11;
  return 12;  // aborted by the detecting rank: allowed for the others
}

void ExpectVMismatch(int n, VDiff diff, const char* transport, const char* text) {
  auto res = RunRanks(n, [&](int rank) { return VMismatchBody(rank, diff, text); },
                      VEnv(transport, "auto", "10"), 60);
  bool named = false;
  for (auto& r : res) {
    EXPECT_EQ(r.signal, 0) << Describe(res);
    EXPECT_TRUE(r.exit_code >= 10 && r.exit_code <= 12) << Describe(res);
    named |= r.exit_code == 10;
  }
  EXPECT_TRUE(named) << "no rank reported \"" << text << "\"\n" << Describe(res);
}

TEST(VectorMismatch, AllgathervCounts) {
  ExpectVMismatch(2, VDiff::kAllgathervTotal, "shm", "allgatherv(total=9, int32)");
  ExpectVMismatch(3, VDiff::kAllgathervTotal, "tcp", "allgatherv(total=13, int32)");
  ExpectVMismatch(3, VDiff::kAllgathervSplit, "shm",
                  "rank 2 sends 3 elements as rank 2's block, but rank 0 expects 4");
}

TEST(VectorMismatch, AlltoallvCounts) {
  ExpectVMismatch(2, VDiff::kAlltoallv, "shm", "rank 0 sends 5 elements as rank 0's block, but rank 1 expects 4");
  ExpectVMismatch(3, VDiff::kAlltoallv, "tcp", "rank 0 sends 5 elements");
}

TEST(VectorMismatch, GatherScatterRootAndCount) {
  ExpectVMismatch(2, VDiff::kGatherRoot, "shm", "root=1");
  ExpectVMismatch(3, VDiff::kGatherRoot, "shm", "root=1");
  ExpectVMismatch(3, VDiff::kScatterRoot, "tcp", "root=1");
  ExpectVMismatch(4, VDiff::kScatterCount, "shm", "scatter(count=11, int32, root=0)");
}

// ---- bad arguments: ZC_ERR_INVALID_ARG locally, the communicator goes on ----

TEST(VectorArgs, RefusedLocallyCommunicatorStillUsable) {
  auto res = RunRanks(3, [](int rank) -> int {
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    const int n = zc_size(comm);
    std::vector<int32_t> a(256, rank), b(1024, -1);
    std::vector<size_t> counts(n, 4), displs(n), zeros(n, 0);
    for (int p = 0; p < n; ++p) displs[p] = p * 4;
    auto bad = [&](zc_status s, const char* what, const char* text) -> int {
      CHILD_CHECK(s == ZC_ERR_INVALID_ARG, "%s: %s: %s", what, zc_status_string(s), zc_last_error(comm));
      CHILD_CHECK(strstr(zc_last_error(comm), text), "%s: message \"%s\" lacks \"%s\"", what,
                  zc_last_error(comm), text);
      return 0;
    };
    const size_t huge = SIZE_MAX / 2;
    std::vector<size_t> big_displs = displs;
    big_displs[2] = SIZE_MAX - 2;
    std::vector<size_t> wrong_mine = counts;
    wrong_mine[rank] = 3;
    std::vector<size_t> huge_counts(n, huge);
    // allgatherv
    if (bad(zc_allgatherv(comm, a.data(), 4, b.data(), nullptr, displs.data(), ZC_INT32),
            "NULL recvcounts", "recvcounts is NULL")) return 1;
    if (bad(zc_allgatherv(comm, a.data(), 4, b.data(), counts.data(), nullptr, ZC_INT32),
            "NULL displs", "displs is NULL")) return 1;
    if (bad(zc_allgatherv(comm, a.data(), 4, b.data(), wrong_mine.data(), displs.data(), ZC_INT32),
            "recvcounts[rank] != sendcount", "differs from recvcounts")) return 1;
    if (bad(zc_allgatherv(comm, nullptr, 4, b.data(), counts.data(), displs.data(), ZC_INT32),
            "NULL sendbuf", "sendbuf is NULL")) return 1;
    if (bad(zc_allgatherv(comm, a.data(), 4, nullptr, counts.data(), displs.data(), ZC_INT32),
            "NULL recvbuf", "recvbuf is NULL")) return 1;
    if (bad(zc_allgatherv(comm, a.data(), 4, b.data(), counts.data(), big_displs.data(), ZC_INT32),
            "displacement + count overflow", "overflows")) return 1;
    if (bad(zc_allgatherv(comm, b.data() + 4 * rank, 4, b.data(), counts.data(), displs.data(), ZC_INT32),
            "in place", "overlap")) return 1;
    if (bad(zc_allgatherv(comm, a.data(), 4, b.data(), counts.data(), displs.data(), (zc_dtype)42),
            "bad dtype", "dtype")) return 1;
    // alltoallv
    if (bad(zc_alltoallv(comm, a.data(), nullptr, displs.data(), b.data(), counts.data(), displs.data(), ZC_INT32),
            "NULL sendcounts", "sendcounts is NULL")) return 1;
    if (bad(zc_alltoallv(comm, a.data(), counts.data(), displs.data(), b.data(), counts.data(), nullptr, ZC_INT32),
            "NULL rdispls", "rdispls is NULL")) return 1;
    if (bad(zc_alltoallv(comm, a.data(), wrong_mine.data(), displs.data(), b.data(), counts.data(),
                         displs.data(), ZC_INT32), "sendcounts[rank] != recvcounts[rank]", "differs")) return 1;
    if (bad(zc_alltoallv(comm, a.data(), huge_counts.data(), zeros.data(), b.data(), huge_counts.data(),
                         zeros.data(), ZC_INT32), "count x size overflow", "overflows")) return 1;
    if (bad(zc_alltoallv(comm, a.data(), counts.data(), displs.data(), nullptr, counts.data(), displs.data(),
                         ZC_INT32), "NULL recvbuf", "recvbuf is NULL")) return 1;
    if (bad(zc_alltoallv(comm, a.data(), counts.data(), displs.data(), a.data() + 2, counts.data(), displs.data(),
                         ZC_INT32), "overlap", "overlap")) return 1;
    // gather / scatter
    for (int root : {-1, n}) {
      if (bad(zc_gather(comm, a.data(), b.data(), 4, ZC_INT32, root), "gather root", "out of range")) return 1;
      if (bad(zc_scatter(comm, a.data(), b.data(), 4, ZC_INT32, root), "scatter root", "out of range")) return 1;
    }
    if (bad(zc_gather(comm, nullptr, b.data(), 4, ZC_INT32, 0), "gather NULL sendbuf", "sendbuf is NULL")) return 1;
    if (bad(zc_scatter(comm, a.data(), nullptr, 4, ZC_INT32, 0), "scatter NULL recvbuf", "recvbuf is NULL")) return 1;
    if (bad(zc_gather(comm, a.data(), b.data(), huge, ZC_INT32, 0), "gather overflow", "overflows")) return 1;
    if (bad(zc_scatter(comm, a.data(), b.data(), huge, ZC_INT32, 0), "scatter overflow", "overflows")) return 1;
    // The message names the operands, never their wrapped product.
    if (bad(zc_allreduce(comm, a.data(), b.data(), SIZE_MAX / 2, ZC_FLOAT32, ZC_SUM), "allreduce overflow",
            "count 9223372036854775807 of 4-byte elements overflows size_t")) return 1;
    if (bad(zc_broadcast(comm, a.data(), SIZE_MAX / 4, ZC_FLOAT64, 0), "broadcast overflow",
            "count 4611686018427387903 of 8-byte elements overflows size_t")) return 1;
    if (bad(zc_reduce(comm, a.data(), b.data(), SIZE_MAX / 2, ZC_INT32, ZC_SUM, 0), "reduce overflow",
            "of 4-byte elements overflows size_t")) return 1;
    if (bad(zc_mem_deregister(comm, a.data(), SIZE_MAX), "deregister past the address space",
            "runs past the end of the address space")) return 1;
    if (rank == 1) {
      if (bad(zc_gather(comm, a.data(), nullptr, 4, ZC_INT32, 1), "gather NULL recvbuf at root", "recvbuf is NULL"))
        return 1;
      if (bad(zc_scatter(comm, nullptr, b.data(), 4, ZC_INT32, 1), "scatter NULL sendbuf at root", "sendbuf is NULL"))
        return 1;
      if (bad(zc_gather(comm, b.data() + 4, b.data(), 4, ZC_INT32, 1), "gather overlap", "overlap")) return 1;
    }
    CHILD_CHECK(zc_gather(nullptr, a.data(), b.data(), 4, ZC_INT32, 0) == ZC_ERR_INVALID_ARG, "NULL comm");
    // Count 0 everywhere: valid, NULL buffers allowed, nothing happens.
    CHILD_OK(zc_allgatherv(comm, nullptr, 0, nullptr, zeros.data(), displs.data(), ZC_INT32));
    CHILD_OK(zc_alltoallv(comm, nullptr, zeros.data(), displs.data(), nullptr, zeros.data(), displs.data(), ZC_INT32));
    CHILD_OK(zc_gather(comm, nullptr, nullptr, 0, ZC_INT32, 0));
    CHILD_OK(zc_scatter(comm, nullptr, nullptr, 0, ZC_INT32, 2));
    // Still usable: a real allgatherv and gather.
    for (int i = 0; i < 4; ++i) a[i] = rank * 10 + i;
    CHILD_OK(zc_allgatherv(comm, a.data(), 4, b.data(), counts.data(), displs.data(), ZC_INT32));
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < 4; ++i) CHILD_CHECK(b[p * 4 + i] == p * 10 + i, "allgatherv after bad args");
    CHILD_OK(zc_gather(comm, a.data(), rank == 2 ? b.data() + 100 : nullptr, 4, ZC_INT32, 2));
    if (rank == 2)
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < 4; ++i) CHILD_CHECK(b[100 + p * 4 + i] == p * 10 + i, "gather after bad args");
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, VEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// ---- ZC_ALGO ----

using zc::coll::Algo;
using zc::coll::AlgoSelect;
using zc::coll::Kind;

TEST(AlgoSelectParse, AutoBareNamesAndLists) {
  AlgoSelect s;
  ASSERT_TRUE(AlgoSelect::Parse("auto", &s).ok());
  EXPECT_EQ(s.forced(Kind::kAllreduce), Algo::kNone);
  EXPECT_EQ(s.Describe(), "auto");
  ASSERT_TRUE(AlgoSelect::Parse("ring", &s).ok());
  EXPECT_EQ(s.forced(Kind::kAllreduce), Algo::kRing);
  EXPECT_EQ(s.forced(Kind::kAllgather), Algo::kRing);
  EXPECT_EQ(s.forced(Kind::kReduceScatter), Algo::kRing);
  EXPECT_EQ(s.forced(Kind::kAllgatherv), Algo::kRing);
  EXPECT_EQ(s.forced(Kind::kBroadcast), Algo::kNone);
  ASSERT_TRUE(AlgoSelect::Parse("chain", &s).ok());
  EXPECT_EQ(s.forced(Kind::kBroadcast), Algo::kChain);
  EXPECT_EQ(s.forced(Kind::kReduce), Algo::kChain);
  EXPECT_EQ(s.forced(Kind::kAllreduce), Algo::kNone);
  ASSERT_TRUE(AlgoSelect::Parse("hier", &s).ok());  // only allreduce has it
  EXPECT_EQ(s.forced(Kind::kAllreduce), Algo::kHier);
  EXPECT_EQ(s.forced(Kind::kAllgather), Algo::kNone);
  EXPECT_EQ(s.Describe(), "allreduce=hier");
  ASSERT_TRUE(AlgoSelect::Parse("allreduce=hd,broadcast=chain,reduce=tree,gather=auto", &s).ok());
  EXPECT_EQ(s.forced(Kind::kAllreduce), Algo::kHd);
  EXPECT_EQ(s.forced(Kind::kBroadcast), Algo::kChain);
  EXPECT_EQ(s.forced(Kind::kReduce), Algo::kTree);
  EXPECT_EQ(s.forced(Kind::kGather), Algo::kNone);
  EXPECT_EQ(s.forced(Kind::kAllgather), Algo::kNone);
  EXPECT_EQ(s.Describe(), "allreduce=hd, broadcast=chain, reduce=tree");
  ASSERT_TRUE(AlgoSelect::Parse("reduce_scatter=ring,alltoallv=pairwise,scatter=direct", &s).ok());
  EXPECT_EQ(s.forced(Kind::kScatter), Algo::kDirect);
}

TEST(AlgoSelectParse, ErrorsNameTheValueAndTheCause) {
  struct Bad {
    const char* spec;
    const char* text;
  } cases[] = {
      {"tree2", "unknown algorithm \"tree2\""},
      {"local", "unknown algorithm \"local\""},
      {"allreduce=tree", "allreduce has no algorithm \"tree\" (it has ring, hd, shm, hier)"},
      {"broadcast=ring", "broadcast has no algorithm \"ring\" (it has tree, chain)"},
      {"nosuch=ring", "unknown collective \"nosuch\""},
      {"allreduce=ring,allreduce=hd", "allreduce is given more than once"},
      {"ring,broadcast=chain", "\"ring\" is not collective=algorithm"},
      {"allreduce=", "allreduce has no algorithm \"\""},
  };
  for (const Bad& b : cases) {
    AlgoSelect s;
    zc::Status st = AlgoSelect::Parse(b.spec, &s);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << b.spec;
    EXPECT_NE(st.message().find(std::string("ZC_ALGO=") + b.spec), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(b.text), std::string::npos) << st.message();
  }
}

// zc_init with this ZC_ALGO fails on every rank with ZC_ERR_INVALID_ARG and
// a message holding each of texts; nobody hangs.
void ExpectInitRefused(int n, const char* transport, const char* algo,
                       std::vector<const char*> texts) {
  auto res = RunRanks(n, [&](int) -> int {
    zc_comm* comm = nullptr;
    zc_status st = zc_init(&comm);
    printf("%s: %s\n", zc_status_string(st), zc_last_error(nullptr));
    CHILD_CHECK(st == ZC_ERR_INVALID_ARG && !comm, "zc_init: %s", zc_status_string(st));
    for (const char* t : texts)
      CHILD_CHECK(strstr(zc_last_error(nullptr), t), "message lacks \"%s\"", t);
    return 0;
  }, VEnv(transport, algo, "20"), 60);
  EXPECT_TRUE(AllOk(res)) << algo << "\n" << Describe(res);
}

TEST(AlgoEnv, RefusedAtCommunicatorCreation) {
  ExpectInitRefused(1, "shm", "tree2", {"ZC_ALGO=tree2", "unknown algorithm"});
  ExpectInitRefused(2, "shm", "allreduce=tree", {"allreduce has no algorithm \"tree\""});
  // shm where the data does not move through shared memory: refused, not
  // replaced by another algorithm.
  ExpectInitRefused(2, "tcp", "shm", {"allreduce cannot use algorithm shm", "tcp transport"});
  ExpectInitRefused(3, "tcp", "allreduce=shm,broadcast=chain",
                    {"ZC_ALGO=allreduce=shm,broadcast=chain", "cannot use algorithm shm"});
}

// Forced algorithms are the ones that run (zc_last_algorithm), with
// correct results; collectives not named stay automatic.
TEST(AlgoEnv, PerCollectiveChoiceRuns) {
  struct Want {
    const char* algo;
    const char* allreduce;  // for a small and a large vector
    const char* allreduce_big;
    const char* bcast;      // small (tree by default) and large (chain by default)
    const char* bcast_big;
    const char* reduce;
    const char* reduce_big;
  } cases[] = {
      {"broadcast=chain,reduce=tree,allreduce=ring", "ring", "ring", "chain", "chain", "tree", "tree"},
      {"chain", "shm", "shm", "chain", "chain", "chain", "chain"},
      {"tree", "shm", "shm", "tree", "tree", "tree", "tree"},
      {"hd", "hd", "hd", "tree", "chain", "tree", "chain"},
      {"auto", "shm", "shm", "tree", "chain", "tree", "chain"},
  };
  for (const Want& w : cases) {
    auto res = RunRanks(3, [&](int rank) -> int {
      zc_comm* comm = nullptr;
      CHILD_OK(zc_init(&comm));
      const int n = zc_size(comm);
      for (size_t count : {size_t{100}, size_t{100000}}) {  // 400 B and 400 kB (chunk 64k)
        const bool big = count > 100;
        std::vector<int64_t> a(count), b(count);
        for (size_t i = 0; i < count; ++i) a[i] = rank * 1000 + static_cast<int64_t>(i);
        CHILD_OK(zc_allreduce(comm, a.data(), b.data(), count, ZC_INT64, ZC_SUM));
        CHILD_CHECK(strcmp(zc_last_algorithm(comm), big ? w.allreduce_big : w.allreduce) == 0,
                    "ZC_ALGO=%s allreduce ran %s", w.algo, zc_last_algorithm(comm));
        for (size_t i = 0; i < count; ++i)
          CHILD_CHECK(b[i] == 3000 + 3 * static_cast<int64_t>(i), "allreduce i %zu", i);
        if (rank != 1) std::fill(a.begin(), a.end(), -1);
        CHILD_OK(zc_broadcast(comm, a.data(), count, ZC_INT64, 1));
        CHILD_CHECK(strcmp(zc_last_algorithm(comm), big ? w.bcast_big : w.bcast) == 0,
                    "ZC_ALGO=%s broadcast ran %s", w.algo, zc_last_algorithm(comm));
        for (size_t i = 0; i < count; ++i) CHILD_CHECK(a[i] == 1000 + static_cast<int64_t>(i), "bcast");
        for (size_t i = 0; i < count; ++i) a[i] = rank * 1000 + static_cast<int64_t>(i);
        CHILD_OK(zc_reduce(comm, a.data(), b.data(), count, ZC_INT64, ZC_MAX, 2));
        CHILD_CHECK(strcmp(zc_last_algorithm(comm), big ? w.reduce_big : w.reduce) == 0,
                    "ZC_ALGO=%s reduce ran %s", w.algo, zc_last_algorithm(comm));
        if (rank == 2)
          for (size_t i = 0; i < count; ++i) CHILD_CHECK(b[i] == (n - 1) * 1000 + static_cast<int64_t>(i), "reduce");
      }
      CHILD_OK(zc_finalize(comm));
      return 0;
    }, VEnv("shm", w.algo), 60);
    EXPECT_TRUE(AllOk(res)) << w.algo << "\n" << Describe(res);
  }
}

}  // namespace
