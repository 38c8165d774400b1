// The blocking calls' pipelined staging (gpu/pipelined_staging.h) through
// the C ABI, on the stream-faithful fake driver (fake_cuda.h): each rank
// installs a DevicePath over the fake in its communicator; "device memory"
// is PROT_NONE to host code (a host read of it kills the rank), and the
// fake reports every device access not ordered after a conflicting one.
// ZC_GPU_CHUNK_BYTES is small (64 bytes) so that a few elements make
// several parts.
//
// EveryDtypeOp: zc_allreduce on device buffers, every dtype x op, counts
// 0, 1, a prime and k*part-1, k*part, k*part+1 (k = 1..3, part in
// elements of the dtype), out of place and in place, the same buffers
// twice with new rank- and index-dependent values; results against an
// independent reference (values small enough that every order of
// reduction is exact), nothing written past recvbuf, sendbuf unchanged,
// one gate per part, no violation. 2 and 4 ranks over shm, 3 over tcp.
// BroadcastReduce: the same for zc_broadcast and zc_reduce from every
// root, plus zc_iallreduce (the nonblocking call runs the same path).
// MixedAcrossRanks: host buffers on one rank, device on the others: above
// one part every rank fails with ZC_ERR_MISMATCH (none by timeout), one
// part or less works.
// CopyFails*: the fake fails one rank's copy in the middle of the
// pipeline: every rank fails (an input copy) and none waits for the
// deadline; an output copy fails on that rank only (its peers' results
// are complete); an enqueue failure travels in the exchange.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/comm.h"
#include "fake_cuda.h"
#include "gpu/device_path.h"
#include "gpu/pinned_pool.h"
#include "gpu/pointer_cache.h"
#include "fake_device_rig.h"
#include "gpu_fake_driver.h"
#include "gpu_reduce_reference.h"
#include "harness/multiproc.h"

namespace {

using namespace zc::test;
namespace gpu = zc::gpu;
using gpu::testing::FakeCuda;
using gpu::testing::FakeDriver;
using gpu::testing::RefDtypeSize;

constexpr size_t kPartBytes = 64;  // ZC_GPU_CHUNK_BYTES of these tests
constexpr size_t kGuard = 16;      // bytes after each buffer that must stay untouched
constexpr gpu::CuResult kIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS

// Staged (no CUDA IPC) in parts of the communicator's ZC_GPU_CHUNK_BYTES.
struct Rig : gpu::testing::FakeDeviceRig {
  void Install(zc_comm* comm) { FakeDeviceRig::Install(comm, {"0", nullptr, true}); }
};

Env BaseEnv(const char* transport, const char* timeout = "60") {
  return {{"ZC_TRANSPORT", transport},
          {"ZC_SOCKET_IFNAME", "lo"},
          {"ZC_TIMEOUT", timeout},
          {"ZC_GPU_CHUNK_BYTES", std::to_string(kPartBytes)}};
}

const zc_dtype kDtypes[] = {ZC_INT8,    ZC_UINT8,   ZC_INT32,   ZC_UINT32, ZC_INT64, ZC_UINT64, ZC_FLOAT16,
                            ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64, ZC_INT16,  ZC_UINT16, ZC_BOOL};
const zc_op kOps[] = {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG, ZC_BAND, ZC_BOR, ZC_BXOR};

bool Floating(zc_dtype d) { return d == ZC_FLOAT16 || d == ZC_BFLOAT16 || d == ZC_FLOAT32 || d == ZC_FLOAT64; }
bool Unsigned(zc_dtype d) { return d == ZC_UINT8 || d == ZC_UINT16 || d == ZC_UINT32 || d == ZC_UINT64; }
bool Bitwise(zc_op op) { return op == ZC_BAND || op == ZC_BOR || op == ZC_BXOR; }
bool Valid(zc_dtype d, zc_op op) {
  if (op == ZC_AVG) return Floating(d);
  return !(Bitwise(op) && Floating(d));
}

// Rank r's element i as a small integer, so that every reduction order is
// exact in every dtype (products of 4 ranks stay within 81). AVG: values
// c(i) + s(i) * d_r with the d_r summing to 0, so the average is c(i).
int64_t Value(zc_dtype d, zc_op op, int n, int r, size_t i, int round) {
  const size_t j = i + 31 * static_cast<size_t>(round);
  if (d == ZC_BOOL) return (j + r) % 3 == 0 ? 0 : r + 1;  // any nonzero byte is true
  if (op == ZC_AVG) {
    const int64_t c = static_cast<int64_t>(j % 5) - 2, s = j % 2 ? 1 : -1;
    const int64_t dr = r < n - 1 ? r : -static_cast<int64_t>(n - 1) * (n - 2) / 2;
    return c + s * dr;
  }
  const int64_t v = static_cast<int64_t>((j * 7 + r * 3) % 7);
  return Unsigned(d) ? v % 4 : v - 3;
}

// The reference reduction of element i over n ranks.
double Expected(zc_dtype d, zc_op op, int n, size_t i, int round) {
  if (d == ZC_BOOL) {
    bool any = false, all = true, x = false;
    for (int r = 0; r < n; ++r) {
      const bool t = Value(d, op, n, r, i, round) != 0;
      any = any || t;
      all = all && t;
      x = x != t;
    }
    if (op == ZC_BXOR) return x;
    return (op == ZC_SUM || op == ZC_MAX || op == ZC_BOR) ? any : all;
  }
  int64_t acc = Value(d, op, n, 0, i, round);
  for (int r = 1; r < n; ++r) {
    const int64_t v = Value(d, op, n, r, i, round);
    switch (op) {
      case ZC_SUM: case ZC_AVG: acc += v; break;
      case ZC_PROD: acc *= v; break;
      case ZC_MIN: acc = std::min(acc, v); break;
      case ZC_MAX: acc = std::max(acc, v); break;
      case ZC_BAND: acc &= v; break;
      case ZC_BOR: acc |= v; break;
      case ZC_BXOR: acc ^= v; break;
    }
  }
  if (op == ZC_AVG) return static_cast<double>(acc) / n;
  // Narrow integer types keep the low bits (bitwise results of negatives).
  switch (d) {
    case ZC_INT8: return static_cast<int8_t>(acc);
    case ZC_UINT8: return static_cast<uint8_t>(acc);
    case ZC_INT16: return static_cast<int16_t>(acc);
    case ZC_UINT16: return static_cast<uint16_t>(acc);
    case ZC_INT32: return static_cast<int32_t>(acc);
    case ZC_UINT32: return static_cast<uint32_t>(acc);
    case ZC_UINT64: return static_cast<double>(static_cast<uint64_t>(acc));
    default: return static_cast<double>(acc);
  }
}

void Put(void* buf, size_t i, zc_dtype d, double v) {
  char* p = static_cast<char*>(buf) + i * RefDtypeSize(d);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (d) {
    case ZC_INT8: put(static_cast<int8_t>(v)); break;
    case ZC_UINT8: put(static_cast<uint8_t>(static_cast<int64_t>(v))); break;
    case ZC_INT16: put(static_cast<int16_t>(v)); break;
    case ZC_UINT16: put(static_cast<uint16_t>(static_cast<int64_t>(v))); break;
    case ZC_INT32: put(static_cast<int32_t>(v)); break;
    case ZC_UINT32: put(static_cast<uint32_t>(static_cast<int64_t>(v))); break;
    case ZC_INT64: put(static_cast<int64_t>(v)); break;
    case ZC_UINT64: put(static_cast<uint64_t>(static_cast<int64_t>(v))); break;
    case ZC_FLOAT16: put(gpu::testing::RefFloatToHalf(static_cast<float>(v))); break;
    case ZC_BFLOAT16: put(gpu::testing::RefFloatToBf16(static_cast<float>(v))); break;
    case ZC_FLOAT32: put(static_cast<float>(v)); break;
    case ZC_FLOAT64: put(v); break;
    case ZC_BOOL: put(static_cast<uint8_t>(v)); break;
  }
}

double Get(const void* buf, size_t i, zc_dtype d) {
  const char* p = static_cast<const char*>(buf) + i * RefDtypeSize(d);
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (d) {
    case ZC_INT8: return get(int8_t{});
    case ZC_UINT8: return get(uint8_t{});
    case ZC_INT16: return get(int16_t{});
    case ZC_UINT16: return get(uint16_t{});
    case ZC_INT32: return get(int32_t{});
    case ZC_UINT32: return get(uint32_t{});
    case ZC_INT64: return static_cast<double>(get(int64_t{}));
    case ZC_UINT64: return static_cast<double>(get(uint64_t{}));
    case ZC_FLOAT16: return gpu::testing::RefHalfToFloat(get(uint16_t{}));
    case ZC_BFLOAT16: return gpu::testing::RefBf16ToFloat(get(uint16_t{}));
    case ZC_FLOAT32: return get(float{});
    case ZC_FLOAT64: return get(double{});
    case ZC_BOOL: return get(uint8_t{});
  }
  return NAN;
}

// A device buffer of `bytes` plus a guard, the guard filled with 0xA5.
void* DevBuf(size_t bytes) {
  void* dev = FakeCuda::Get().Alloc(bytes + kGuard);
  std::vector<unsigned char> guard(kGuard, 0xA5);
  FakeCuda::Get().Upload(static_cast<char*>(dev) + bytes, guard.data(), kGuard);
  return dev;
}

bool GuardIntact(const void* dev, size_t bytes) {
  std::vector<unsigned char> guard(kGuard, 0);
  FakeCuda::Get().Download(guard.data(), static_cast<const char*>(dev) + bytes, kGuard);
  for (unsigned char c : guard)
    if (c != 0xA5) return false;
  return true;
}

std::vector<char> HostValues(zc_dtype d, zc_op op, int n, int r, size_t count, int round) {
  std::vector<char> v(count * RefDtypeSize(d) + 1);
  for (size_t i = 0; i < count; ++i) Put(v.data(), i, d, static_cast<double>(Value(d, op, n, r, i, round)));
  return v;
}

size_t Parts(size_t bytes) { return bytes <= kPartBytes ? 0 : (bytes + kPartBytes - 1) / kPartBytes; }

// Counts around the part boundaries of dtype d, plus 0, 1 and a prime.
std::vector<size_t> Counts(zc_dtype d) {
  const size_t part = kPartBytes / RefDtypeSize(d);
  std::vector<size_t> c = {0, 1, 61};
  for (size_t k = 1; k <= 3; ++k) c.insert(c.end(), {k * part - 1, k * part, k * part + 1});
  return c;
}

#define CHILD_NO_VIOLATION(rank)                                                                                  \
  do {                                                                                                            \
    const auto v_ = FakeCuda::Get().violations();                                                                 \
    CHILD_CHECK(v_.empty(), "rank %d: the fake driver saw %zu violations, the first: %s", rank, v_.size(),       \
                v_.empty() ? "" : v_[0].c_str());                                                                 \
  } while (0)

// One allreduce on device buffers, checked: result, guard, sendbuf kept,
// one gate per part.
int CheckedAllreduce(zc_comm* comm, void* send, void* recv, size_t count, zc_dtype d, zc_op op, int round) {
  const int rank = zc_rank(comm), n = zc_size(comm);
  const size_t bytes = count * RefDtypeSize(d);
  const std::vector<char> in = HostValues(d, op, n, rank, count, round);
  if (bytes) FakeCuda::Get().Upload(send, in.data(), bytes);
  const uint64_t gates0 = FakeCuda::Get().value_waits();
  CHILD_OK(zc_allreduce(comm, send, recv, count, d, op));
  const uint64_t gates = FakeCuda::Get().value_waits() - gates0;
  CHILD_CHECK(gates == Parts(bytes), "rank %d: allreduce(count=%zu, dtype %d, op %d): %llu gates, want %zu", rank,
              count, d, op, static_cast<unsigned long long>(gates), Parts(bytes));
  std::vector<char> got(bytes + 1);
  if (bytes) FakeCuda::Get().Download(got.data(), recv, bytes);
  for (size_t i = 0; i < count; ++i) {
    const double want = Expected(d, op, n, i, round), have = Get(got.data(), i, d);
    CHILD_CHECK(have == want, "rank %d: allreduce(count=%zu, dtype %d, op %d)%s round %d: [%zu] = %g, want %g", rank,
                count, d, op, send == recv ? " in place" : "", round, i, have, want);
  }
  CHILD_CHECK(GuardIntact(recv, bytes), "rank %d: allreduce(count=%zu, dtype %d) wrote past recvbuf", rank, count, d);
  if (send != recv && bytes) {
    std::vector<char> kept(bytes);
    FakeCuda::Get().Download(kept.data(), send, bytes);
    CHILD_CHECK(std::memcmp(kept.data(), in.data(), bytes) == 0, "rank %d: sendbuf changed", rank);
  }
  return 0;
}

int EveryDtypeOpBody(int rank) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  for (zc_dtype d : kDtypes) {
    for (size_t count : Counts(d)) {
      const size_t bytes = count * RefDtypeSize(d);
      void* send = DevBuf(bytes);
      void* recv = DevBuf(bytes);
      for (zc_op op : kOps) {
        if (!Valid(d, op)) continue;
        for (int round = 0; round < 2; ++round) {  // the same buffers again, new values
          if (int r = CheckedAllreduce(comm, send, recv, count, d, op, round)) return r;
          if (int r = CheckedAllreduce(comm, send, send, count, d, op, round)) return r;
        }
      }
    }
  }
  CHILD_NO_VIOLATION(rank);
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(PipelinedStaging, EveryDtypeOp2Shm) {
  auto res = RunRanks(2, EveryDtypeOpBody, BaseEnv("shm"), 400);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(PipelinedStaging, EveryDtypeOp3Tcp) {
  auto res = RunRanks(3, EveryDtypeOpBody, BaseEnv("tcp"), 400);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(PipelinedStaging, EveryDtypeOp4Shm) {
  auto res = RunRanks(4, EveryDtypeOpBody, BaseEnv("shm"), 400);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// Broadcast and reduce from every root, and the nonblocking allreduce, at
// the part boundaries of float32 and int8, on the same buffers twice.
int BroadcastReduceBody(int rank) {
  static Rig rig;
  zc_comm* comm = nullptr;
  CHILD_OK(zc_init(&comm));
  rig.Install(comm);
  const int n = zc_size(comm);
  for (zc_dtype d : {ZC_FLOAT32, ZC_INT8}) {
    for (size_t count : Counts(d)) {
      const size_t bytes = count * RefDtypeSize(d);
      void* buf = DevBuf(bytes);
      void* send = DevBuf(bytes);
      void* recv = DevBuf(bytes);
      for (int root = 0; root < n; ++root) {
        for (int round = 0; round < 2; ++round) {
          // broadcast: the root's values everywhere
          const std::vector<char> mine = HostValues(d, ZC_SUM, n, rank, count, round);
          const std::vector<char> roots = HostValues(d, ZC_SUM, n, root, count, round);
          if (bytes) FakeCuda::Get().Upload(buf, mine.data(), bytes);
          CHILD_OK(zc_broadcast(comm, buf, count, d, root));
          std::vector<char> got(bytes + 1);
          if (bytes) FakeCuda::Get().Download(got.data(), buf, bytes);
          CHILD_CHECK(std::memcmp(got.data(), roots.data(), bytes) == 0,
                      "rank %d: broadcast(count=%zu, dtype %d, root %d) round %d: wrong data", rank, count, d, root,
                      round);
          CHILD_CHECK(GuardIntact(buf, bytes), "rank %d: broadcast wrote past buf", rank);
          // reduce: the sum at the root only (recvbuf NULL elsewhere)
          if (bytes) FakeCuda::Get().Upload(send, mine.data(), bytes);
          CHILD_OK(zc_reduce(comm, send, rank == root ? recv : nullptr, count, d, ZC_SUM, root));
          if (rank == root) {
            if (bytes) FakeCuda::Get().Download(got.data(), recv, bytes);
            for (size_t i = 0; i < count; ++i)
              CHILD_CHECK(Get(got.data(), i, d) == Expected(d, ZC_SUM, n, i, round),
                          "rank %d: reduce(count=%zu, dtype %d, root %d): [%zu] = %g, want %g", rank, count, d, root,
                          i, Get(got.data(), i, d), Expected(d, ZC_SUM, n, i, round));
            CHILD_CHECK(GuardIntact(recv, bytes), "rank %d: reduce wrote past recvbuf", rank);
          }
        }
      }
      // the nonblocking allreduce, in place
      const std::vector<char> mine = HostValues(d, ZC_MAX, n, rank, count, 0);
      if (bytes) FakeCuda::Get().Upload(send, mine.data(), bytes);
      zc_request* req = nullptr;
      CHILD_OK(zc_iallreduce(comm, send, send, count, d, ZC_MAX, &req));
      CHILD_OK(zc_wait(req));
      std::vector<char> got(bytes + 1);
      if (bytes) FakeCuda::Get().Download(got.data(), send, bytes);
      for (size_t i = 0; i < count; ++i)
        CHILD_CHECK(Get(got.data(), i, d) == Expected(d, ZC_MAX, n, i, 0),
                    "rank %d: iallreduce(count=%zu, dtype %d): [%zu] = %g, want %g", rank, count, d, i,
                    Get(got.data(), i, d), Expected(d, ZC_MAX, n, i, 0));
    }
  }
  CHILD_NO_VIOLATION(rank);
  CHILD_OK(zc_finalize(comm));
  return 0;
}

TEST(PipelinedStaging, BroadcastReduce2Shm) {
  auto res = RunRanks(2, BroadcastReduceBody, BaseEnv("shm"), 300);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(PipelinedStaging, BroadcastReduce3Tcp) {
  auto res = RunRanks(3, BroadcastReduceBody, BaseEnv("tcp"), 300);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}
TEST(PipelinedStaging, BroadcastReduce4Shm) {
  auto res = RunRanks(4, BroadcastReduceBody, BaseEnv("shm"), 300);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
}

// In a job where a rank fails on purpose, a rank still in zc_init may see
// the failure's abort: *out null then (the job failed, as it should).
int InitUnlessAborted(int rank, zc_comm** out) {
  *out = nullptr;
  zc_comm* comm = nullptr;
  const zc_status st = zc_init(&comm);
  if (st == ZC_OK) {
    *out = comm;
    return 0;
  }
  const std::string err = zc_last_error(nullptr);
  fprintf(stderr, "rank %d: zc_init: %s: %s\n", rank, zc_status_string(st), err.c_str());
  CHILD_CHECK(err.find("failed or aborted the job") != std::string::npos, "rank %d: zc_init failed by itself",
              rank);
  return 0;
}

// Rank 0 passes host buffers, the others device buffers. One part or less:
// every rank stages whole (or passes through) and the result is right.
// Above one part: every rank fails, none by timeout, and one message
// names both memory paths.
int MixedBody(int rank, const char* kind, bool above_one_part) {
  static Rig rig;
  zc_comm* comm = nullptr;
  if (!above_one_part) CHILD_OK(zc_init(&comm));
  else if (int r = InitUnlessAborted(rank, &comm); r != 0 || comm == nullptr) return r;
  rig.Install(comm);
  const int n = zc_size(comm);
  const bool host = rank == 0;
  const zc_dtype d = ZC_FLOAT32;
  const size_t small = kPartBytes / 4, large = 3 * small + 1;
  {
    const size_t count = above_one_part ? large : small;
    const size_t bytes = count * 4;
    const std::vector<char> in = HostValues(d, ZC_SUM, n, rank, count, 0);
    std::vector<char> hbuf(in);
    void* buf = host ? hbuf.data() : DevBuf(bytes);
    if (!host) FakeCuda::Get().Upload(buf, in.data(), bytes);
    zc_status st = std::string(kind) == "allreduce" ? zc_allreduce(comm, buf, buf, count, d, ZC_SUM)
                   : std::string(kind) == "broadcast" ? zc_broadcast(comm, buf, count, d, n - 1)
                                                      : zc_reduce(comm, buf, rank == 0 ? hbuf.data() : nullptr,
                                                                  count, d, ZC_SUM, 0);
    const std::string err = zc_last_error(comm);
    if (count == small) {
      CHILD_CHECK(st == ZC_OK, "rank %d: mixed %s within one part: %s: %s", rank, kind, zc_status_string(st),
                  err.c_str());
      std::vector<char> got(bytes);
      if (host) std::memcpy(got.data(), hbuf.data(), bytes);
      else FakeCuda::Get().Download(got.data(), buf, bytes);
      if (std::string(kind) == "allreduce") {
        for (size_t i = 0; i < count; ++i)
          CHILD_CHECK(Get(got.data(), i, d) == Expected(d, ZC_SUM, n, i, 0), "rank %d: mixed allreduce: [%zu] wrong",
                      rank, i);
      }
      CHILD_OK(zc_finalize(comm));
      return 0;
    }
    // Broadcast and reduce: a rank that only sends (the broadcast root, a
    // reduce leaf) may finish before the failure reaches it.
    CHILD_CHECK(st != ZC_OK || std::string(kind) != "allreduce", "rank %d: mixed %s above one part returned ok",
                rank, kind);
    CHILD_CHECK(st != ZC_ERR_TIMEOUT, "rank %d: mixed %s timed out: %s", rank, kind, err.c_str());
    fprintf(stderr, "rank %d: %s: %s\n", rank, zc_status_string(st), err.c_str());
  }
  CHILD_NO_VIOLATION(rank);
  zc_finalize(comm);
  return 0;
}

// Two jobs: a failure's abort could otherwise reach a rank still finishing
// the call before.
void Mixed(int n, const char* transport, const char* kind) {
  auto ok = RunRanks(n, [kind](int rank) { return MixedBody(rank, kind, false); }, BaseEnv(transport), 120);
  EXPECT_TRUE(AllOk(ok)) << Describe(ok);
  // ZC_TIMEOUT far above the test's limit: a wait for it fails the test.
  auto res = RunRanks(n, [kind](int rank) { return MixedBody(rank, kind, true); }, BaseEnv(transport, "600"), 120);
  EXPECT_TRUE(AllOk(res)) << Describe(res);
  std::string all;
  for (const auto& r : res) all += r.output;
  EXPECT_NE(all.find(std::string(zc_status_string(ZC_ERR_MISMATCH)) + ":"), std::string::npos) << Describe(res);
  EXPECT_NE(all.find("device memory staged in parts"), std::string::npos) << Describe(res);
}

TEST(PipelinedStaging, MixedAcrossRanksAllreduce2Shm) { Mixed(2, "shm", "allreduce"); }
TEST(PipelinedStaging, MixedAcrossRanksAllreduce3Tcp) { Mixed(3, "tcp", "allreduce"); }
TEST(PipelinedStaging, MixedAcrossRanksBroadcast3Shm) { Mixed(3, "shm", "broadcast"); }
TEST(PipelinedStaging, MixedAcrossRanksReduce3Shm) { Mixed(3, "shm", "reduce"); }

// A CUDA failure on `failing`: its async copy number `skip` (0-based, from
// the call's first) fails. parts = 4.
enum class Where { kInputCopy, kOutputCopy, kEnqueue };

int CopyFailsBody(int rank, int failing, Where where, const char* kind) {
  static Rig rig;
  zc_comm* comm = nullptr;
  if (int r = InitUnlessAborted(rank, &comm); r != 0 || comm == nullptr) return r;
  rig.Install(comm);
  const int n = zc_size(comm);
  const zc_dtype d = ZC_FLOAT32;
  const size_t count = 4 * kPartBytes / 4 - 3;  // 4 parts, the last short
  const size_t bytes = count * 4;
  void* send = DevBuf(bytes);
  void* recv = DevBuf(bytes);
  const std::vector<char> in = HostValues(d, ZC_SUM, n, rank, count, 0);
  FakeCuda::Get().Upload(send, in.data(), bytes);
  // The buffers are in the pointer cache as device memory (as after an
  // earlier call): a freed one is still taken for device memory.
  for (void* b : {send, recv}) {
    gpu::PointerInfo info;
    CHILD_CHECK(rig.cache->Classify(b, bytes, &info).ok() && info.type == gpu::MemType::kDevice,
                "rank %d: the fake's memory is not device memory", rank);
  }
  if (rank == failing) {
    if (where == Where::kInputCopy) FakeCuda::Get().FailAsyncCopy(1, kIllegalAddress);  // part 2's input
    if (where == Where::kOutputCopy) FakeCuda::Get().FailAsyncCopy(4 + 1, kIllegalAddress);  // part 2's output
    if (where == Where::kEnqueue) FakeCuda::Get().Free(send);  // the cache still says device memory
  }
  zc_status st = std::string(kind) == "allreduce" ? zc_allreduce(comm, send, recv, count, d, ZC_SUM)
                                                  : zc_broadcast(comm, send, count, d, 0);
  const std::string err = zc_last_error(comm);
  fprintf(stderr, "rank %d: %s: %s\n", rank, zc_status_string(st), err.c_str());
  CHILD_CHECK(st != ZC_ERR_TIMEOUT, "rank %d: waited for the deadline: %s", rank, err.c_str());
  // A broadcast root only sends: it may finish before a receiver's
  // failure reaches it.
  const bool may_pass = std::string(kind) == "broadcast" && rank == 0 && failing != 0;
  const bool fails = (rank == failing || where != Where::kOutputCopy) && !may_pass;
  if (!fails && !may_pass) {
    CHILD_CHECK(st == ZC_OK, "rank %d: %s: %s", rank, zc_status_string(st), err.c_str());
  } else if (fails) {
    CHILD_CHECK(st != ZC_OK, "rank %d: the %s returned ok", rank, kind);
  }
  if (rank == failing) {
    CHILD_CHECK(st == ZC_ERR_SYSTEM, "rank %d: %s, want ZC_ERR_SYSTEM: %s", rank, zc_status_string(st), err.c_str());
    const std::string name = std::string(kind) == "broadcast"  ? "buf"
                             : where == Where::kOutputCopy ? "recvbuf"
                                                           : "sendbuf";
    const std::string buffer = name + (where == Where::kOutputCopy ? ": copy of the results from host to GPU"
                                       : where == Where::kInputCopy ? ": copy of part 2 of 4"
                                                                    : ": copy of");
    const char* cuda = where == Where::kEnqueue ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_ILLEGAL_ADDRESS";
    CHILD_CHECK(err.find(buffer) != std::string::npos && err.find(cuda) != std::string::npos &&
                    err.find(std::string("rank ") + std::to_string(rank)) != std::string::npos,
                "rank %d: message lacks the buffer, rank or CUDA error: %s", rank, err.c_str());
  }
  if (where == Where::kEnqueue && std::string(kind) == "allreduce") {
    // Told in the exchange: nobody aborted, the communicator goes on.
    if (rank != failing)
      CHILD_CHECK(err.find("rank " + std::to_string(failing) + " could not stage") != std::string::npos,
                  "rank %d: %s", rank, err.c_str());
    void* s2 = rank == failing ? DevBuf(bytes) : send;
    FakeCuda::Get().Upload(s2, in.data(), bytes);
    if (int r = CheckedAllreduce(comm, s2, recv, count, d, ZC_SUM, 0)) return r;
  }
  if (where != Where::kOutputCopy || rank != failing) CHILD_NO_VIOLATION(rank);
  zc_finalize(comm);
  return 0;
}

void CopyFails(int n, const char* transport, Where where, const char* kind = "allreduce") {
  // A broadcast from root 0: its input fails on the root only.
  const bool root_only = std::string(kind) == "broadcast" && where == Where::kInputCopy;
  for (int failing : root_only ? std::vector<int>{0} : std::vector<int>{0, n - 1}) {
    auto res = RunRanks(
        n, [=](int rank) { return CopyFailsBody(rank, failing, where, kind); }, BaseEnv(transport, "600"), 120);
    EXPECT_TRUE(AllOk(res)) << "failing rank " << failing << "\n" << Describe(res);
  }
}

TEST(PipelinedStaging, CopyFailsInputMidPipeline3Shm) { CopyFails(3, "shm", Where::kInputCopy); }
TEST(PipelinedStaging, CopyFailsInputMidPipeline2Tcp) { CopyFails(2, "tcp", Where::kInputCopy); }
TEST(PipelinedStaging, CopyFailsInputBroadcast3Shm) { CopyFails(3, "shm", Where::kInputCopy, "broadcast"); }
TEST(PipelinedStaging, CopyFailsOutputMidPipeline3Shm) { CopyFails(3, "shm", Where::kOutputCopy); }
TEST(PipelinedStaging, CopyFailsAtEnqueue3Shm) { CopyFails(3, "shm", Where::kEnqueue); }
TEST(PipelinedStaging, CopyFailsAtEnqueueBroadcast4Shm) { CopyFails(4, "shm", Where::kEnqueue, "broadcast"); }

}  // namespace
