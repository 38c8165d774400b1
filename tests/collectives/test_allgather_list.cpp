// Multi-process tests of zc_allgather_list and zc_iallgather_list through
// the C ABI: rank k's block into recvbufs[k], separate buffers at addresses
// in no particular order, every dtype, counts 0 to 262147, rank- and
// index-dependent data, out of place and in place, ranks mixing the list
// call with zc_allgather in one collective, the nonblocking call with its
// array overwritten at once, the same buffers on every call (shm and tcp,
// 1-5 ranks); mismatched counts; argument checks.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "coll_check.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
using zc::DtypeName;
using zc::DtypeSize;

constexpr unsigned char kSentinel = 0x5a;
constexpr size_t kPad = 16;  // sentinel bytes before and after every block

Env LEnv(const char* transport, const char* timeout = "60") {
  // A small chunk: large blocks stream through many slots.
  Env env = {{"ZC_TRANSPORT", transport}, {"ZC_TIMEOUT", timeout}, {"ZC_CHUNK", "64k"}};
  if (strcmp(transport, "tcp") == 0) env.push_back({"ZC_SOCKET_IFNAME", "lo"});
  return env;
}

// Block `id` of call `it`, as FillInput makes it (index-dependent).
std::vector<char> Ref(zc_dtype d, size_t count, int id, int it) {
  std::vector<char> v(count * DtypeSize(d) + 1);
  FillInput(d, ZC_SUM, v.data(), count, id, it);
  return v;
}

bool Untouched(const char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (static_cast<unsigned char>(p[i]) != kSentinel) return false;
  return true;
}

// One separately allocated block per rank, each between sentinel pads;
// allocated last rank first, so addresses follow no rank order.
struct Blocks {
  std::vector<std::unique_ptr<char[]>> mem;
  std::vector<void*> at;
  size_t cap;

  Blocks(int n, size_t cap_bytes) : mem(n), at(n), cap(cap_bytes) {
    for (int k = n - 1; k >= 0; --k) {
      mem[k].reset(new char[cap + 2 * kPad + 1]);
      at[k] = mem[k].get() + kPad + 1;  // odd addresses: unaligned blocks
    }
  }
  void Clear(size_t bytes) {
    for (auto& m : mem) memset(m.get(), kSentinel, bytes + 2 * kPad + 1);
  }
};

// How a rank makes call `it`: ranks differ within one call on purpose.
enum class Mode { kList, kListInPlace, kContiguous, kNonblocking };
Mode ModeOf(int rank, int it) { return static_cast<Mode>((rank + it) % 4); }

int ListBody(int rank, bool all_dtypes) {
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  const int n = zc_size(comm);
  const std::vector<size_t> counts = {0, 1, 7, 13, 1024, 65537, 262147};
  std::vector<zc_dtype> dtypes(std::begin(kAllDtypes), std::end(kAllDtypes));
  if (!all_dtypes) dtypes = {ZC_INT8, ZC_FLOAT16, ZC_UINT32, ZC_FLOAT64};
  const size_t max_bytes = 262147 * 8;
  Blocks out(n, max_bytes);
  std::vector<char> send(max_bytes + 1), flat(max_bytes * n + 1);
  int it = 0;
  for (zc_dtype d : dtypes) {
    const size_t es = DtypeSize(d);
    for (size_t c : counts) {
      ++it;
      const size_t bytes = c * es;
      const Mode mode = ModeOf(rank, it);
      out.Clear(bytes);
      char* mine = mode == Mode::kListInPlace ? static_cast<char*>(out.at[rank]) : send.data() + 1;
      FillInput(d, ZC_SUM, mine, c, rank, it);
      switch (mode) {
        case Mode::kList:
        case Mode::kListInPlace:
          CHILD_OK(zc_allgather_list(comm, mine, out.at.data(), c, d));
          break;
        case Mode::kContiguous:
          CHILD_OK(zc_allgather(comm, mine, flat.data(), c, d));
          for (int k = 0; k < n; ++k) memcpy(out.at[k], flat.data() + k * bytes, bytes);
          break;
        case Mode::kNonblocking: {
          std::vector<void*> blocks = out.at;
          zc_request* req = nullptr;
          CHILD_OK(zc_iallgather_list(comm, mine, blocks.data(), c, d, &req));
          // The array is read before the call returns.
          for (void*& b : blocks) b = nullptr;
          CHILD_OK(zc_wait(req));
          break;
        }
      }
      if (c && mode != Mode::kContiguous && mode != Mode::kNonblocking)
        CHILD_CHECK(strcmp(zc_last_algorithm(comm), n > 1 ? "ring" : "local") == 0,
                    "algorithm %s", zc_last_algorithm(comm));
      for (int k = 0; k < n; ++k) {
        const char* b = static_cast<const char*>(out.at[k]);
        auto ref = Ref(d, c, k, it);
        CHILD_CHECK(memcmp(b, ref.data(), bytes) == 0,
                    "%s count %zu call %d (mode %d): block of rank %d wrong", DtypeName(d), c, it,
                    static_cast<int>(mode), k);
        CHILD_CHECK(Untouched(b - kPad, kPad) && Untouched(b + bytes, kPad),
                    "%s count %zu call %d: written around the block of rank %d", DtypeName(d), c, it, k);
      }
    }
  }
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

struct LCase {
  const char* transport;
  int ranks;
};

std::string LName(const ::testing::TestParamInfo<LCase>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.ranks);
}

class AllgatherList : public ::testing::TestWithParam<LCase> {};

TEST_P(AllgatherList, SeparateBuffersEveryModeAndDtype) {
  const LCase& p = GetParam();
  const bool all = strcmp(p.transport, "shm") == 0 && p.ranks <= 3;
  auto res = RunRanks(p.ranks, [&](int rank) { return ListBody(rank, all); }, LEnv(p.transport), 150,
                      OnRankFailure::kStopAll);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Shm, AllgatherList,
                         ::testing::Values(LCase{"shm", 1}, LCase{"shm", 2}, LCase{"shm", 3},
                                           LCase{"shm", 5}),
                         LName);
INSTANTIATE_TEST_SUITE_P(Tcp, AllgatherList, ::testing::Values(LCase{"tcp", 2}, LCase{"tcp", 3}), LName);

// Ranks disagree on the count: every rank fails, the detector names it.
TEST(AllgatherListMismatch, CountsDiffer) {
  auto res = RunRanks(3, [](int rank) -> int {
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    std::vector<int32_t> a(64, rank), b0(64), b1(64), b2(64);
    void* blocks[3] = {b0.data(), b1.data(), b2.data()};
    CHILD_OK(zc_allgather_list(comm, a.data(), blocks, 4, ZC_INT32));
    zc_status st = zc_allgather_list(comm, a.data(), blocks, rank == 1 ? 5 : 4, ZC_INT32);
    std::string err = zc_last_error(comm);
    printf("rank %d: %s: %s\n", rank, zc_status_string(st), err.c_str());
    CHILD_CHECK(st != ZC_OK || zc_barrier(comm) != ZC_OK, "rank %d: the mismatch went unseen", rank);
    zc_finalize(comm);
    return st == ZC_ERR_MISMATCH && err.find("allgather(count=5") != std::string::npos ? 10 : 11;
  }, LEnv("shm", "10"), 60);
  bool named = false;
  for (auto& r : res) {
    EXPECT_EQ(r.signal, 0) << Describe(res);
    EXPECT_TRUE(r.exit_code == 10 || r.exit_code == 11) << Describe(res);
    named |= r.exit_code == 10;
  }
  EXPECT_TRUE(named) << "no rank named allgather(count=5\n" << Describe(res);
}

// Bad arguments: ZC_ERR_INVALID_ARG on the calling rank, nothing sent, the
// communicator goes on.
TEST(AllgatherListArgs, RefusedLocallyCommunicatorStillUsable) {
  auto res = RunRanks(3, [](int rank) -> int {
    zc_comm* comm = nullptr;
    CHILD_OK(zc_init(&comm));
    std::vector<int32_t> a(16, rank), big(64, -1);
    int32_t* b = big.data();
    std::vector<void*> blocks = {b, b + 16, b + 32};
    zc_request* req = nullptr;
    auto bad = [&](zc_status s, const char* what, const char* text) -> int {
      CHILD_CHECK(s == ZC_ERR_INVALID_ARG, "%s: %s: %s", what, zc_status_string(s), zc_last_error(comm));
      CHILD_CHECK(strstr(zc_last_error(comm), text), "%s: message \"%s\" lacks \"%s\"", what,
                  zc_last_error(comm), text);
      return 0;
    };
    if (bad(zc_allgather_list(comm, a.data(), nullptr, 4, ZC_INT32), "NULL recvbufs", "recvbufs is NULL"))
      return 1;
    std::vector<void*> hole = blocks;
    hole[2] = nullptr;
    if (bad(zc_allgather_list(comm, a.data(), hole.data(), 4, ZC_INT32), "NULL block",
            "recvbufs[2] is NULL")) return 1;
    if (bad(zc_allgather_list(comm, nullptr, blocks.data(), 4, ZC_INT32), "NULL sendbuf", "sendbuf is NULL"))
      return 1;
    std::vector<void*> close = {b, b + 3, b + 32};  // 4 elements from b overlap b + 3
    if (bad(zc_allgather_list(comm, a.data(), close.data(), 4, ZC_INT32), "overlapping blocks",
            "recvbufs[0] and recvbufs[1] overlap")) return 1;
    std::vector<void*> same = {b + 32, b, b + 32};
    if (bad(zc_allgather_list(comm, a.data(), same.data(), 4, ZC_INT32), "a block twice", "overlap")) return 1;
    const int other = (rank + 1) % 3;
    if (bad(zc_allgather_list(comm, static_cast<int32_t*>(blocks[other]) + 1, blocks.data(), 4, ZC_INT32),
            "sendbuf in another rank's block", "sendbuf overlaps recvbufs")) return 1;
    if (bad(zc_allgather_list(comm, static_cast<int32_t*>(blocks[rank]) + 2, blocks.data(), 4, ZC_INT32),
            "sendbuf half in its own block", "without being it")) return 1;
    if (bad(zc_allgather_list(comm, a.data(), blocks.data(), SIZE_MAX / 4, ZC_INT32), "count overflow",
            "overflows")) return 1;
    if (bad(zc_allgather_list(comm, a.data(), blocks.data(), 4, static_cast<zc_dtype>(42)), "bad dtype",
            "dtype")) return 1;
    if (bad(zc_iallgather_list(comm, a.data(), nullptr, 4, ZC_INT32, &req), "nonblocking NULL recvbufs",
            "iallgather_list")) return 1;
    CHILD_CHECK(zc_allgather_list(nullptr, a.data(), blocks.data(), 4, ZC_INT32) == ZC_ERR_INVALID_ARG,
                "NULL comm");
    // Count 0: valid with NULL buffers, nothing happens.
    std::vector<void*> nulls(3, nullptr);
    CHILD_OK(zc_allgather_list(comm, nullptr, nulls.data(), 0, ZC_INT32));
    // Still usable, in place.
    for (int i = 0; i < 4; ++i) static_cast<int32_t*>(blocks[rank])[i] = rank * 10 + i;
    CHILD_OK(zc_allgather_list(comm, blocks[rank], blocks.data(), 4, ZC_INT32));
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 4; ++i)
        CHILD_CHECK(static_cast<int32_t*>(blocks[k])[i] == k * 10 + i, "block %d after bad args", k);
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, LEnv("shm"), 60);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
