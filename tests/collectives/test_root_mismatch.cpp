// Rooted collectives (broadcast, reduce, gather, scatter; blocking and
// nonblocking) called with different roots: the call itself fails with
// ZC_ERR_MISMATCH on a rank that sees the difference, naming both roots, and
// no rank waits: every rank's call or, where its neighbours agreed with it,
// its next collective fails at once with ZC_ERR_MISMATCH.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "harness/multiproc.h"

namespace {

using zc::test::Describe;
using zc::test::RunRanks;

enum class Op { kBroadcast, kIbroadcast, kReduce, kIreduce, kGather, kScatter };

struct Case {
  const char* transport;
  Op op;
  bool own_root;  // every rank its own root; else roots 0/1/0
};

const char* OpName(Op op) {
  switch (op) {
    case Op::kBroadcast: return "broadcast";
    case Op::kIbroadcast: return "ibroadcast";
    case Op::kReduce: return "reduce";
    case Op::kIreduce: return "ireduce";
    case Op::kGather: return "gather";
    case Op::kScatter: return "scatter";
  }
  return "?";
}

zc_status Call(zc_comm* comm, Op op, int root) {
  constexpr size_t kCount = 16;
  std::vector<int32_t> a(3 * kCount, 1), b(3 * kCount, 0);
  zc_request* req = nullptr;
  zc_status s = ZC_OK;
  switch (op) {
    case Op::kBroadcast: return zc_broadcast(comm, a.data(), kCount, ZC_INT32, root);
    case Op::kReduce: return zc_reduce(comm, a.data(), b.data(), kCount, ZC_INT32, ZC_SUM, root);
    case Op::kGather: return zc_gather(comm, a.data(), b.data(), kCount, ZC_INT32, root);
    case Op::kScatter: return zc_scatter(comm, a.data(), b.data(), kCount, ZC_INT32, root);
    case Op::kIbroadcast: s = zc_ibroadcast(comm, a.data(), kCount, ZC_INT32, root, &req); break;
    case Op::kIreduce: s = zc_ireduce(comm, a.data(), b.data(), kCount, ZC_INT32, ZC_SUM, root, &req); break;
  }
  return s == ZC_OK ? zc_wait(req) : s;
}

class RootMismatch : public ::testing::TestWithParam<Case> {};

TEST_P(RootMismatch, FailsAtOnceNamingBothRoots) {
  const Case k = GetParam();
  void* mem = mmap(nullptr, 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* ready = new (mem) std::atomic<int>(0);
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    // Every rank has left zc_init and the barrier (observed through shared
    // memory): an alert must not find a rank still in either.
    CHILD_OK(zc_barrier(comm));
    ready->fetch_add(1);
    for (int i = 0; ready->load() < 3; ++i) {
      CHILD_CHECK(i < 10000, "the other ranks never left the barrier");
      usleep(1000);
    }
    int root = k.own_root ? rank : (rank == 1 ? 1 : 0);
    auto t0 = std::chrono::steady_clock::now();
    zc_status s = Call(comm, k.op, root);
    std::string why = s == ZC_OK ? "" : zc_last_error(comm);
    zc_status next = zc_barrier(comm);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("rank %d (root %d): %s: %s [%s]; next barrier: %s; %.3f s\n", rank, root, OpName(k.op),
           zc_status_string(s), why.c_str(), zc_status_string(next), secs);
    fflush(stdout);
    CHILD_CHECK(s == ZC_OK || s == ZC_ERR_MISMATCH, "%s: got %s: %s", OpName(k.op), zc_status_string(s),
                why.c_str());
    CHILD_CHECK(next == ZC_ERR_MISMATCH, "next barrier: got %s", zc_status_string(next));
    CHILD_CHECK(secs < 5, "took %.1f s", secs);
    zc_finalize(comm);
    return s == ZC_ERR_MISMATCH && why.find("root=") != why.find("root=", why.find("root=") + 1) &&
                   why.find("root=", why.find("root=") + 1) != std::string::npos
               ? 10  // this rank's own call named both roots
               : 0;
  }, {{"ZC_TRANSPORT", k.transport}, {"ZC_TIMEOUT", "20"}, {"ZC_SOCKET_IFNAME", "lo"}}, 60);
  int named = 0;
  for (auto& r : res) {
    ASSERT_EQ(r.signal, 0) << Describe(res);
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 10) << Describe(res);
    named += r.exit_code == 10;
  }
  // At least one rank's call failed at once, naming both roots.
  EXPECT_GE(named, 1) << Describe(res);
  printf("%d of 3 ranks' own calls reported the mismatch\n", named);
  munmap(mem, 64);
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  for (const char* t : {"shm", "tcp"})
    for (Op op : {Op::kBroadcast, Op::kIbroadcast, Op::kReduce, Op::kIreduce, Op::kGather, Op::kScatter})
      for (bool own : {false, true}) v.push_back({t, op, own});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, RootMismatch, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.transport) + "_" + OpName(info.param.op) +
                                  (info.param.own_root ? "_own_roots" : "_roots_010");
                         });

}  // namespace
