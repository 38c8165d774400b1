// Point-to-point layer across processes, on both transports: send/recv
// (eager and rendezvous), one-sided writes with flags through SlotStreams
// (static placement), one-sided reads (dynamic placement), failure handling.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <cstring>
#include <thread>
#include <numeric>
#include <vector>

#include "api/comm.h"
#include "harness/multiproc.h"
#include "harness/shared_counter.h"
#include "p2p/device.h"
#include "p2p/slot_stream.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;
using zc::test::SharedCounter;

// Byte i of a message from `from` to `to` with sequence `seq`.
inline uint8_t Pattern(int from, int to, uint64_t seq, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (from * 17u) ^ (to * 7u) ^ (seq * 29u) ^ (i >> 11));
}

void Fill(uint8_t* p, size_t n, int from, int to, uint64_t seq) {
  for (size_t i = 0; i < n; ++i) p[i] = Pattern(from, to, seq, i);
}

size_t Check(const uint8_t* p, size_t n, int from, int to, uint64_t seq) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += p[i] != Pattern(from, to, seq, i);
  return bad;
}

class P2p : public ::testing::TestWithParam<const char*> {
 protected:
  zc::test::Env Env(zc::test::Env extra = {}) {
    extra.push_back({"ZC_TRANSPORT", GetParam()});
    extra.push_back({"ZC_TIMEOUT", "30"});
    return extra;
  }
};

// Every pair exchanges messages of odd sizes in both directions (either side
// of the eager limits: 8 KiB on shm, 256 KiB on tcp; on tcp also either side
// of the control-slot boundaries an eager message spans: 32832 payload bytes a
// slot, less the 24-byte meta), from user memory at unaligned addresses and
// from pool memory.
TEST_P(P2p, SendRecvAllSizesAllPairs) {
  const size_t sizes[] = {0,     1,      7,      4095,   4096,   4097,   8192,  8193, 32768,
                          32769, 32808,  32809,  65640,  65641,  100003, 262144, 262145, (1u << 20) + 3};
  for (int n : {2, 3}) {
    auto res = RunRanks(n, [&](int rank) -> int {
      zc_comm* comm;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      size_t maxb = (1u << 20) + 3 + 64;
      std::vector<uint8_t> sendv(maxb + 1), recvv(maxb + 1);
      void* pool_send;
      CHILD_CHECK(zc_mem_alloc(comm, maxb, &pool_send) == ZC_OK, "alloc: %s", zc_last_error(comm));
      for (int round = 0; round < 2; ++round) {
        for (size_t s : sizes) {
          for (int step = 1; step < n; ++step) {
            int to = (rank + step) % n, from = (rank - step + n) % n;
            uint64_t seq = s * 10 + step + round * 1000;
            // Round 0: user memory, unaligned; round 1: pool memory.
            uint8_t* src = round == 0 ? sendv.data() + 1 : static_cast<uint8_t*>(pool_send);
            uint8_t* dst = recvv.data() + 1;
            Fill(src, s, rank, to, seq);
            memset(dst, 0xEE, s);
            // Blocking sends along the cycles of i -> i+step: the smallest
            // rank of each cycle (rank < gcd(n, step)) sends first, every
            // other rank receives first, so no cycle of senders waits on itself.
            bool starter = rank < std::gcd(n, step);
            if (starter) {
              CHILD_CHECK(zc_send(comm, src, s, to, 5) == ZC_OK, "send: %s", zc_last_error(comm));
            }
            CHILD_CHECK(zc_recv(comm, dst, s, from, 5) == ZC_OK, "recv: %s", zc_last_error(comm));
            if (!starter) {
              CHILD_CHECK(zc_send(comm, src, s, to, 5) == ZC_OK, "send: %s", zc_last_error(comm));
            }
            size_t bad = Check(dst, s, from, rank, seq);
            CHILD_CHECK(bad == 0, "size %zu from %d: %zu wrong bytes", s, from, bad);
          }
        }
      }
      zc_mem_free(comm, pool_send);
      CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
      return 0;
    }, Env());
    ASSERT_TRUE(AllOk(res)) << n << " ranks\n" << Describe(res);
  }
}

TEST_P(P2p, SizeMismatchIsReported) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    std::vector<char> buf(300000);
    if (rank == 0) {
      zc_status s = zc_send(comm, buf.data(), 300000, 1, 3);
      CHILD_CHECK(s == ZC_ERR_MISMATCH, "sender got %s", zc_status_string(s));
      CHILD_CHECK(strstr(zc_last_error(comm), "299999") != nullptr, "message: %s", zc_last_error(comm));
      s = zc_send(comm, buf.data(), 10, 1, 4);  // eager: the receiver reports it
      CHILD_CHECK(s == ZC_OK, "eager sender got %s", zc_status_string(s));
    } else {
      zc_status s = zc_recv(comm, buf.data(), 299999, 0, 3);
      CHILD_CHECK(s == ZC_ERR_MISMATCH, "receiver got %s", zc_status_string(s));
      CHILD_CHECK(strstr(zc_last_error(comm), "peer 0") != nullptr, "message: %s", zc_last_error(comm));
      s = zc_recv(comm, buf.data(), 11, 0, 4);
      CHILD_CHECK(s == ZC_ERR_MISMATCH, "eager receiver got %s", zc_status_string(s));
    }
    // The communicator stays usable.
    if (rank == 0) CHILD_CHECK(zc_send(comm, buf.data(), 50000, 1, 9) == ZC_OK, "send after mismatch");
    else CHILD_CHECK(zc_recv(comm, buf.data(), 50000, 0, 9) == ZC_OK, "recv after mismatch");
    zc_finalize(comm);
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A receiver that takes one message and then neither sends nor receives:
// on tcp its credit waits to ride with a reply (Connection::WriteFlagLazy),
// and the progress thread must send it on its own within about a
// millisecond, or the sender's 9th message (8 control slots) never finds a
// free slot and fails at ZC_TIMEOUT. The receiver goes on only once the
// sender has sent all 9.
TEST_P(P2p, CreditWithoutReplyReachesTheSender) {
  SharedCounter sent;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kMsgs = 9;
    uint8_t buf[64];
    for (int round = 0; round < 2; ++round) {
      if (rank == 0) {
        for (int i = 0; i < kMsgs; ++i) {
          Fill(buf, sizeof(buf), 0, 1, round * 100 + i);
          CHILD_CHECK(zc_send(comm, buf, sizeof(buf), 1, 7) == ZC_OK, "round %d send %d: %s", round, i,
                      zc_last_error(comm));
        }
        sent.Add();
      } else {
        CHILD_CHECK(zc_recv(comm, buf, sizeof(buf), 0, 7) == ZC_OK, "recv: %s", zc_last_error(comm));
        CHILD_CHECK(Check(buf, sizeof(buf), 0, 1, round * 100) == 0, "round %d message 0: wrong data", round);
        CHILD_CHECK(sent.WaitAtLeast(round + 1, 20), "round %d: the sender did not get through", round);
        for (int i = 1; i < kMsgs; ++i) {
          CHILD_CHECK(zc_recv(comm, buf, sizeof(buf), 0, 7) == ZC_OK, "recv: %s", zc_last_error(comm));
          CHILD_CHECK(Check(buf, sizeof(buf), 0, 1, round * 100 + i) == 0, "round %d message %d: wrong data",
                      round, i);
        }
      }
    }
    zc_finalize(comm);
    return 0;
  }, Env({{"ZC_TIMEOUT", "10"}}));
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Messages are matched by tag, not arrival order: 20 eager messages (more
// than the 8 control slots) received in reverse tag order, and a rendezvous
// message received before the eager ones sent ahead of it. Sizes and
// contents depend on the tag, so a mix-up shows.
TEST_P(P2p, TagsMatchOutOfOrder) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kMsgs = 20;
    auto size_of = [](int i) { return static_cast<size_t>(3 + 97 * i); };
    std::vector<uint8_t> buf(200001);
    for (int round = 0; round < 2; ++round) {
      if (rank == 0) {
        for (int i = 0; i < kMsgs; ++i) {
          Fill(buf.data(), size_of(i), 0, 1, 100 + i + round);
          CHILD_CHECK(zc_send(comm, buf.data(), size_of(i), 1, 100 + i) == ZC_OK, "send %d: %s", i,
                      zc_last_error(comm));
        }
        Fill(buf.data(), 200001, 0, 1, 99 + round);
        CHILD_CHECK(zc_send(comm, buf.data(), 200001, 1, 99) == ZC_OK, "send big: %s",
                    zc_last_error(comm));
      } else {
        std::vector<uint8_t> got(200001);
        CHILD_CHECK(zc_recv(comm, got.data(), 200001, 0, 99) == ZC_OK, "recv big: %s",
                    zc_last_error(comm));
        CHILD_CHECK(Check(got.data(), 200001, 0, 1, 99 + round) == 0, "big message corrupted");
        for (int i = kMsgs - 1; i >= 0; --i) {
          memset(got.data(), 0xEE, size_of(i));
          CHILD_CHECK(zc_recv(comm, got.data(), size_of(i), 0, 100 + i) == ZC_OK, "recv %d: %s", i,
                      zc_last_error(comm));
          CHILD_CHECK(Check(got.data(), size_of(i), 0, 1, 100 + i + round) == 0,
                      "tag %d: wrong bytes", 100 + i);
        }
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// The allocation-site hook (§3.4): iteration 1 allocates from site 7 in
// plain memory and sends it; from iteration 2 on, site 7's allocations are
// pool memory (zero copy on the sender), site 8 (never sent) stays plain.
// (tcp: receives do not post, ZC_TCP_RECV_POST=off, so that every send goes by
// rendezvous and exposes its source; a send into a posted receive exposes nothing.)
TEST_P(P2p, AllocationSiteMovesToThePoolAfterASend) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t s = (1u << 20) + 3;  // rendezvous size: the buffer itself is exposed
    for (int iter = 0; iter < 3; ++iter) {
      void* t = nullptr;
      void* other = nullptr;
      CHILD_CHECK(zc_site_alloc(comm, 7, s, &t) == ZC_OK, "alloc: %s", zc_last_error(comm));
      CHILD_CHECK(zc_site_alloc(comm, 8, 4096, &other) == ZC_OK, "alloc: %s", zc_last_error(comm));
      int in_pool = -1, pooled = -1, other_pool = -1;
      CHILD_CHECK(zc_mem_is_pool(comm, t, &in_pool) == ZC_OK, "is_pool");
      CHILD_CHECK(zc_mem_is_pool(comm, other, &other_pool) == ZC_OK, "is_pool");
      CHILD_CHECK(other_pool == 0, "site 8 was never sent but its memory is pool memory");
      if (rank == 0) {
        // Only the sender's site is traced.
        CHILD_CHECK(in_pool == (iter > 0), "iteration %d: site memory in pool = %d", iter, in_pool);
        CHILD_CHECK(zc_site_pooled(comm, 7, &pooled) == ZC_OK && pooled == (iter > 0), "pooled %d", pooled);
        Fill(static_cast<uint8_t*>(t), s, 0, 1, iter);
        CHILD_CHECK(zc_send(comm, t, s, 1, 3) == ZC_OK, "send: %s", zc_last_error(comm));
        CHILD_CHECK(zc_site_pooled(comm, 7, &pooled) == ZC_OK && pooled == 1, "site 7 not marked");
      } else {
        CHILD_CHECK(zc_recv(comm, t, s, 0, 3) == ZC_OK, "recv: %s", zc_last_error(comm));
        size_t bad = Check(static_cast<uint8_t*>(t), s, 0, 1, iter);
        CHILD_CHECK(bad == 0, "iteration %d: %zu wrong bytes", iter, bad);
      }
      CHILD_CHECK(zc_site_free(comm, t) == ZC_OK, "free: %s", zc_last_error(comm));
      CHILD_CHECK(zc_site_free(comm, other) == ZC_OK, "free: %s", zc_last_error(comm));
    }
    int dummy;
    CHILD_CHECK(zc_site_free(comm, &dummy) == ZC_ERR_INVALID_ARG, "freeing a foreign pointer must fail");
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}, {"ZC_TCP_RECV_POST", "off"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// User memory is registered on first send and cached; zc_mem_deregister drops
// the registration (as before a free), and the next send registers again.
// (tcp: receives do not post, ZC_TCP_RECV_POST=off, so that every send goes by
// rendezvous and exposes its source; a send into a posted receive exposes nothing.)
TEST_P(P2p, DeregisterDropsCachedRegistrations) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t s = (1u << 20) + 3;
    std::vector<uint8_t> buf(s + 5);
    uint8_t* p = buf.data() + 5;
    for (int round = 0; round < 3; ++round) {
      if (rank == 0) {
        Fill(p, s, 0, 1, round);
        CHILD_CHECK(zc_send(comm, p, s, 1, 4) == ZC_OK, "send: %s", zc_last_error(comm));
        // Sent twice: the second send hits the cache (nothing new to drop).
        CHILD_CHECK(zc_send(comm, p, s, 1, 4) == ZC_OK, "send: %s", zc_last_error(comm));
        size_t dropped = comm->device->regions().Deregister(p + 100, 1);  // any overlap counts
        CHILD_CHECK(dropped == 1, "round %d: %zu registrations dropped, want 1", round, dropped);
        CHILD_CHECK(comm->device->regions().Deregister(p, s) == 0, "nothing left to drop");
        CHILD_CHECK(zc_mem_deregister(comm, p, s) == ZC_OK, "deregister: %s", zc_last_error(comm));
      } else {
        for (int k = 0; k < 2; ++k) {
          memset(p, 0, s);
          CHILD_CHECK(zc_recv(comm, p, s, 0, 4) == ZC_OK, "recv: %s", zc_last_error(comm));
          size_t bad = Check(p, s, 0, 1, round);
          CHILD_CHECK(bad == 0, "round %d: %zu wrong bytes", round, bad);
        }
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}, {"ZC_TCP_RECV_POST", "off"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// The case for the registration cache: [10,20) then [0,100) (in
// 64 KiB units) then [50,60). The old cache (keyed by base, looking at the
// preceding entry only) found [10,20) for [50,60) and registered a third
// time; the interval cache registers [10,20), then the union [0,100), and
// finds [50,60) inside it. The replaced [10,20) is dropped once its send is
// done: one registration is left to deregister.
// (tcp: receives do not post, ZC_TCP_RECV_POST=off, so that every send goes by
// rendezvous and exposes its source; a send into a posted receive exposes nothing.)
TEST_P(P2p, OverlappingSendsRegisterOnce) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t unit = 64 << 10;
    std::vector<uint8_t> buf(100 * unit + 3);
    uint8_t* p = buf.data() + 3;  // unaligned on purpose
    const size_t ranges[3][2] = {{10, 20}, {0, 100}, {50, 60}};
    const size_t before = comm->device->regions().registrations();
    for (int i = 0; i < 3; ++i) {
      uint8_t* q = p + ranges[i][0] * unit;
      const size_t n = (ranges[i][1] - ranges[i][0]) * unit;
      if (rank == 0) {
        Fill(q, n, 0, 1, i);
        CHILD_CHECK(zc_send(comm, q, n, 1, 5) == ZC_OK, "send %d: %s", i, zc_last_error(comm));
      } else {
        memset(q, 0, n);
        CHILD_CHECK(zc_recv(comm, q, n, 0, 5) == ZC_OK, "recv %d: %s", i, zc_last_error(comm));
        size_t bad = Check(q, n, 0, 1, i);
        CHILD_CHECK(bad == 0, "range %d: %zu wrong bytes", i, bad);
      }
    }
    if (rank == 0) {
      const size_t made = comm->device->regions().registrations() - before;
      fprintf(stderr, "rank 0: %zu registrations for the 3 overlapping sends\n", made);
      CHILD_CHECK(made == 2, "%zu registrations for [10,20), [0,100), [50,60); want 2", made);
      size_t dropped = comm->device->regions().Deregister(p, 100 * unit);
      CHILD_CHECK(dropped == 1, "%zu registrations left to drop; want 1 (the union)", dropped);
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}, {"ZC_TCP_RECV_POST", "off"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Memory from zc_mem_alloc is found in its pool chunk, whichever of many
// chunks holds it (small ZC_POOL_CHUNK: one chunk per allocation here), at
// its start, inside or at its end; it never goes through the registration
// cache, while a malloc'd buffer does.
TEST_P(P2p, PoolBuffersAreFoundInTheirChunk) {
  auto res = RunRanks(1, [&](int) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    auto& regions = comm->device->regions();
    const size_t bytes = 40000;  // with slack: one 64 KiB chunk each
    std::vector<void*> bufs(12);
    for (void*& b : bufs) CHILD_CHECK(zc_mem_alloc(comm, bytes, &b) == ZC_OK, "alloc: %s", zc_last_error(comm));
    const size_t before = regions.registrations();
    for (void* b : bufs) {
      char* p = static_cast<char*>(b);
      const std::pair<size_t, size_t> parts[] = {{0, bytes}, {1, 7}, {bytes - 13, 13}, {bytes / 2, 1}};
      for (auto [off, n] : parts) {
        zc::MemRegion* r = nullptr;
        CHILD_CHECK(regions.RegionFor(p + off, n, &r).ok(), "RegionFor failed at offset %zu", off);
        CHILD_CHECK(r && r->contains(p + off, n) && !r->cached && !r->parent,
                    "offset %zu: not the pool chunk holding it", off);
      }
    }
    CHILD_CHECK(regions.registrations() == before, "pool memory was registered %zu times",
                regions.registrations() - before);
    std::vector<char> user(bytes);
    zc::MemRegion* r = nullptr;
    CHILD_CHECK(regions.RegionFor(user.data(), user.size(), &r).ok() && r && r->cached,
                "malloc'd memory: not a cached registration");
    CHILD_CHECK(regions.registrations() == before + 1, "malloc'd memory: %zu registrations, want 1",
                regions.registrations() - before);
    regions.Deregister(user.data(), user.size());
    for (void* b : bufs) CHILD_CHECK(zc_mem_free(comm, b) == ZC_OK, "free: %s", zc_last_error(comm));
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_POOL_CHUNK", "64K"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A region that a pending send holds survives its replacement: rank 0's
// isend of [10,20) (64 KiB units) is still pending when the send of
// [0,100) registers the union; the peer still reads [10,20) through the
// old descriptor, and the old region is dropped once the isend is done
// (one registration left to deregister).
TEST_P(P2p, HeldRegionSurvivesReplacement) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t unit = 64 << 10;
    std::vector<uint8_t> buf(100 * unit);
    uint8_t* inner = buf.data() + 10 * unit;
    const size_t inner_bytes = 10 * unit;
    if (rank == 0) {
      Fill(inner, inner_bytes, 0, 1, 1);
      zc_request* req = nullptr;
      CHILD_CHECK(zc_isend(comm, inner, inner_bytes, 1, 6, &req) == ZC_OK, "isend: %s",
                  zc_last_error(comm));
      CHILD_CHECK(zc_send(comm, buf.data(), buf.size(), 1, 7) == ZC_OK, "send: %s", zc_last_error(comm));
      CHILD_CHECK(zc_wait(req) == ZC_OK, "wait: %s", zc_last_error(comm));
      size_t dropped = comm->device->regions().Deregister(buf.data(), buf.size());
      CHILD_CHECK(dropped == 1, "%zu registrations left to drop; want 1 (the union)", dropped);
    } else {
      std::vector<uint8_t> big(buf.size());
      // The big one first: the isend's source is replaced before it is read.
      CHILD_CHECK(zc_recv(comm, big.data(), big.size(), 0, 7) == ZC_OK, "recv big: %s",
                  zc_last_error(comm));
      CHILD_CHECK(zc_recv(comm, inner, inner_bytes, 0, 6) == ZC_OK, "recv inner: %s",
                  zc_last_error(comm));
      size_t bad = Check(inner, inner_bytes, 0, 1, 1);
      CHILD_CHECK(bad == 0, "%zu wrong bytes in the held region's data", bad);
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST_P(P2p, BadArgumentsFailLocally) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    char b[8];
    CHILD_CHECK(zc_send(comm, nullptr, 8, 1 - rank, 0) == ZC_ERR_INVALID_ARG, "null buf");
    CHILD_CHECK(zc_send(comm, b, 8, 7, 0) == ZC_ERR_INVALID_ARG, "bad peer");
    CHILD_CHECK(zc_recv(comm, b, 8, rank, 0) == ZC_ERR_INVALID_ARG, "self");
    CHILD_CHECK(strstr(zc_last_error(comm), "self") != nullptr, "msg %s", zc_last_error(comm));
    CHILD_CHECK(zc_send(comm, nullptr, 0, 1 - rank, 0) == ZC_OK || true, "zero");
    zc_finalize(comm);
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Static placement: a SlotStream from every rank to the next, 10,000
// messages through 4 slots, so every slot is reused 2,500 times; in the
// standard layout and in the compact one (flag and header in the slot's
// first line, two aux words), where lengths cross the line's 32 payload bytes.
TEST_P(P2p, SlotStreamReuse10000) {
  for (bool compact : {false, true})
  for (int n : {2, 4}) {
    auto res = RunRanks(n, [&](int rank) -> int {
      zc_comm* comm;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      zc::Device* dev = comm->device.get();
      int right = (rank + 1) % n, left = (rank - 1 + n) % n;
      zc::SlotLayout layout;
      layout.slots = 4;
      layout.slot_bytes = 333;
      layout.compact = compact;
      zc::MemRegion *slots, *credit;
      CHILD_CHECK(dev->regions().Allocate(layout.reader_bytes(), &slots).ok(), "alloc");
      CHILD_CHECK(dev->regions().Allocate(zc::SlotLayout::kWriterBytes, &credit).ok(), "alloc");
      memset(slots->data(), 0, slots->size());
      memset(credit->data(), 0, credit->size());
      zc::Deadline dl(60);
      // Exchange descriptors: my slots go to my left (it writes to me).
      CHILD_CHECK(dev->SendControl(left, 77, slots->remote().Serialize(), dl).ok(), "ctl");
      CHILD_CHECK(dev->SendControl(right, 78, credit->remote().Serialize(), dl).ok(), "ctl");
      std::string a, b;
      CHILD_CHECK(dev->RecvControl(right, 77, &a, dl).ok(), "ctl");
      CHILD_CHECK(dev->RecvControl(left, 78, &b, dl).ok(), "ctl");
      zc::RemoteRegion right_slots, left_credit;
      CHILD_CHECK(zc::RemoteRegion::Parse(a, &right_slots).ok(), "parse");
      CHILD_CHECK(zc::RemoteRegion::Parse(b, &left_credit).ok(), "parse");
      zc::SlotWriter w;
      zc::SlotReader r;
      w.Init(&dev->channels(), &dev->health(), right, layout, credit, right_slots);
      r.Init(&dev->channels(), &dev->health(), left, layout, slots, left_credit);
      const int kMessages = 10000;
      std::string err;
      std::thread writer([&] {
        std::vector<uint8_t> msg(333);
        for (int i = 0; i < kMessages && err.empty(); ++i) {
          size_t len = 1 + (i * 7) % 333;
          Fill(msg.data(), len, rank, right, i);
          uint64_t aux[3] = {static_cast<uint64_t>(i), 0xABCD, 0x1234};
          if (compact && i == 0) {
            // Three header words do not fit the compact header: refused, nothing sent.
            zc::Status st = w.Put(msg.data(), len, aux, 3, dl);
            if (st.code() != ZC_ERR_INTERNAL || w.sent() != 0) err = "3 aux words accepted";
          }
          zc::Status st = w.Put(msg.data(), len, aux, compact ? 2 : 3, dl);
          if (!st.ok()) err = st.message();
        }
      });
      int bad = 0;
      for (int i = 0; i < kMessages; ++i) {
        const zc::SlotHeader* h;
        const void* p;
        zc::Status st = r.Next(&h, &p, dl);
        if (!st.ok()) {
          fprintf(stderr, "next: %s\n", st.message().c_str());
          bad++;
          break;
        }
        size_t len = 1 + (i * 7) % 333;
        if (h->bytes != len || h->aux[0] != static_cast<uint64_t>(i) ||
            h->aux[1] != 0xABCD || (!compact && h->aux[2] != 0x1234) || Check(static_cast<const uint8_t*>(p), len, left, rank, i) != 0)
          ++bad;
        if (!r.Release(dl).ok()) ++bad;
      }
      writer.join();
      CHILD_CHECK(err.empty(), "writer: %s", err.c_str());
      CHILD_CHECK(bad == 0, "%d bad messages", bad);
      zc_finalize(comm);
      return 0;
    }, Env());
    ASSERT_TRUE(AllOk(res)) << n << " ranks" << (compact ? ", compact" : "") << "\n"
                            << Describe(res);
  }
}

// Dynamic placement: one-sided reads of a peer's registered user memory and
// pool memory, at odd offsets, from several threads and channels at once.
TEST_P(P2p, OneSidedReadsFromThreads) {
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    zc::Device* dev = comm->device.get();
    const size_t kBytes = (1u << 20) + 3;
    zc::MemRegion* mine;
    CHILD_CHECK(dev->regions().Allocate(kBytes, &mine).ok(), "alloc");
    Fill(static_cast<uint8_t*>(mine->data()), kBytes, rank, 0, 42);
    zc::Deadline dl(60);
    std::vector<zc::RemoteRegion> theirs(3);
    for (int p = 0; p < 3; ++p)
      if (p != rank) CHILD_CHECK(dev->SendControl(p, 90, mine->remote().Serialize(), dl).ok(), "ctl");
    for (int p = 0; p < 3; ++p) {
      if (p == rank) continue;
      std::string s;
      CHILD_CHECK(dev->RecvControl(p, 90, &s, dl).ok(), "ctl");
      CHILD_CHECK(zc::RemoteRegion::Parse(s, &theirs[p]).ok(), "parse");
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<uint8_t> buf(kBytes + 1);
        for (int p = 0; p < 3; ++p) {
          if (p == rank) continue;
          size_t off = (t * 4097) % 5000, len = kBytes - off - t;
          zc::Status st = dev->channel(p, t).Read(buf.data() + 1, len, theirs[p], off, dl);
          if (!st.ok()) {
            fprintf(stderr, "read: %s\n", st.message().c_str());
            ++bad;
            continue;
          }
          for (size_t i = 0; i < len; ++i)
            if (buf[1 + i] != Pattern(p, 0, 42, off + i)) {
              ++bad;
              break;
            }
        }
      });
    }
    for (auto& th : threads) th.join();
    CHILD_CHECK(bad == 0, "%d bad reads", bad.load());
    // Out-of-range reads are refused before reaching the wire.
    std::vector<uint8_t> small(16);
    zc::Status st = dev->channel((rank + 1) % 3).Read(small.data(), 16, theirs[(rank + 1) % 3], kBytes + 60, dl);
    CHILD_CHECK(st.code() == ZC_ERR_INVALID_ARG, "out of range read gave %s", st.message().c_str());
    zc_finalize(comm);
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A rank killed mid-transfer: the others fail with PEER_LOST promptly.
TEST_P(P2p, PeerKilledMidTransfer) {
  SharedCounter entering, checked;
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    std::vector<char> buf(64 << 20);
    if (rank == 2) {
      // Dies once both survivors are entering their receive (the kill may
      // land just before its first wait or during it: both must fail alike).
      CHILD_CHECK(entering.WaitAtLeast(2, 30), "the survivors never reached zc_recv");
      raise(SIGKILL);
    }
    auto t0 = std::chrono::steady_clock::now();
    // Waits for a message rank 2 will never send.
    entering.Add();
    zc_status s = zc_recv(comm, buf.data(), buf.size(), 2, 1);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHILD_CHECK(s == ZC_ERR_PEER_LOST, "got %s: %s", zc_status_string(s), zc_last_error(comm));
    CHILD_CHECK(strstr(zc_last_error(comm), "peer 2") != nullptr, "message: %s", zc_last_error(comm));
    CHILD_CHECK(secs < 5.0, "took %.1f s", secs);
    // Finalize with a dead peer: reports the loss, frees everything, no hang.
    // (After the other survivor's check: a failed finalize alerts the job,
    // which would then be the cause that survivor reports.)
    checked.Add();
    CHILD_CHECK(checked.WaitAtLeast(2, 30), "the other survivor never finished its check");
    zc_finalize(comm);
    return 0;
  }, Env({{"ZC_TIMEOUT", "60"}}), 60);
  ASSERT_EQ(res[2].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[0].exit_code, 0) << Describe(res);
  ASSERT_EQ(res[1].exit_code, 0) << Describe(res);
}

// 256 MiB each way: user memory at an odd address to pool memory and back.
TEST_P(P2p, Transfer256MiBBothWays) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t s = 256u << 20;
    std::vector<uint8_t> user(s + 1);
    void* pool;
    CHILD_CHECK(zc_mem_alloc(comm, s, &pool) == ZC_OK, "alloc: %s", zc_last_error(comm));
    uint8_t* p = static_cast<uint8_t*>(pool);
    int peer = 1 - rank;
    if (rank == 0) {
      Fill(user.data() + 1, s, 0, 1, 256);
      CHILD_CHECK(zc_send(comm, user.data() + 1, s, peer, 9) == ZC_OK, "send: %s", zc_last_error(comm));
      CHILD_CHECK(zc_recv(comm, p, s, peer, 9) == ZC_OK, "recv: %s", zc_last_error(comm));
      size_t bad = Check(p, s, 1, 0, 257);
      CHILD_CHECK(bad == 0, "%zu wrong bytes", bad);
    } else {
      CHILD_CHECK(zc_recv(comm, p, s, peer, 9) == ZC_OK, "recv: %s", zc_last_error(comm));
      size_t bad = Check(p, s, 0, 1, 256);
      CHILD_CHECK(bad == 0, "%zu wrong bytes", bad);
      Fill(p, s, 1, 0, 257);
      CHILD_CHECK(zc_send(comm, p, s, peer, 9) == ZC_OK, "send: %s", zc_last_error(comm));
    }
    zc_mem_free(comm, pool);
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST_P(P2p, DeadlineExpires) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    char b[16];
    if (rank == 0) {
      zc_status s = zc_recv(comm, b, 16, 1, 1);  // rank 1 never sends tag 1
      CHILD_CHECK(s == ZC_ERR_TIMEOUT, "got %s", zc_status_string(s));
      CHILD_CHECK(strstr(zc_last_error(comm), "peer 1") != nullptr, "message %s", zc_last_error(comm));
      zc_send(comm, b, 16, 1, 2);
    } else {
      // Rank 0 sends only after its own 2 s deadline: our first waits may
      // time out too, and the communicator must survive that.
      zc_status s = ZC_ERR_TIMEOUT;
      for (int attempt = 0; attempt < 5 && s == ZC_ERR_TIMEOUT; ++attempt) s = zc_recv(comm, b, 16, 0, 2);
      CHILD_CHECK(s == ZC_OK, "late recv: %s", zc_last_error(comm));
    }
    zc_finalize(comm);
    return 0;
  }, {{"ZC_TRANSPORT", GetParam()}, {"ZC_TIMEOUT", "2"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST_P(P2p, AbortWakesPeers) {
  SharedCounter entering;
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    char b[16];
    if (rank == 1) {
      // Aborts once the others are entering their receive from it.
      CHILD_CHECK(entering.WaitAtLeast(2, 30), "the others never reached zc_recv");
      zc_abort(comm);
      zc_finalize(comm);
      return 0;
    }
    entering.Add();
    zc_status s = zc_recv(comm, b, 16, 1, 1);
    CHILD_CHECK(s == ZC_ERR_ABORTED || s == ZC_ERR_PEER_LOST, "got %s", zc_status_string(s));
    zc_finalize(comm);
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Transports, P2p, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

// The congestion control names of this process's connected TCP sockets.
std::vector<std::string> ConnectedCongestion() {
  std::vector<std::string> out;
  for (int fd = 0; fd < 4096; ++fd) {
    char name[16] = {};
    socklen_t len = sizeof(name);
    sockaddr_storage ss{};
    socklen_t sl = sizeof(ss);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0 &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) == 0)
      out.push_back(name);
  }
  return out;
}

// ZC_TCP_CONGESTION=auto: the data sockets to a peer on this host use reno
// (bbr's pacing delays loopback data, docs/PERFORMANCE.md); system leaves
// the kernel's default on them.
TEST(P2pTcp, LocalDataSocketsUseReno) {
  char def[32] = {};
  FILE* f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  if (f) {
    if (!fgets(def, sizeof(def), f)) def[0] = 0;
    fclose(f);
  }
  def[strcspn(def, "\n")] = 0;
  for (const char* mode : {"auto", "system"}) {
    auto res = RunRanks(2, [&](int) -> int {
      zc_comm* comm;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
      CHILD_CHECK(zc_barrier(comm) == ZC_OK, "barrier: %s", zc_last_error(comm));
      int reno = 0;
      for (const std::string& n : ConnectedCongestion()) reno += n == "reno";
      // 3 sockets per peer, and the store's connection (the kernel's default).
      if (strcmp(mode, "auto") == 0)
        CHILD_CHECK(reno >= 3, "%d of the data sockets use reno (%zu connected)", reno, ConnectedCongestion().size());
      else if (strcmp(def, "reno") != 0)
        CHILD_CHECK(reno == 0, "%d sockets use reno, the default is %s", reno, def);
      zc_finalize(comm);
      return 0;
    }, {{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_SOCKETS_PER_PEER", "3"},
        {"ZC_TCP_CONGESTION", mode}, {"ZC_TIMEOUT", "30"}});
    ASSERT_TRUE(AllOk(res)) << mode << ": " << Describe(res);
  }
}

// CMA forced off: user buffers on shm go through staged pool copies.
TEST(P2pShm, StagedPathWhenCmaRefused) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    const size_t s = (3u << 20) + 5;
    std::vector<uint8_t> buf(s + 3);
    for (int i = 0; i < 3; ++i) {
      if (rank == 0) {
        Fill(buf.data() + 3, s, 0, 1, i);
        CHILD_CHECK(zc_send(comm, buf.data() + 3, s, 1, i) == ZC_OK, "send: %s", zc_last_error(comm));
      } else {
        CHILD_CHECK(zc_recv(comm, buf.data() + 3, s, 0, i) == ZC_OK, "recv: %s", zc_last_error(comm));
        CHILD_CHECK(Check(buf.data() + 3, s, 0, 1, i) == 0, "wrong data");
      }
    }
    zc_finalize(comm);
    return 0;
  }, {{"ZC_TRANSPORT", "shm"}, {"ZC_SHM_CMA", "off"}, {"ZC_TIMEOUT", "30"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

TEST(P2pShm, SegmentsRemovedAfterFinalize) {
  auto res = RunRanks(2, [&](int) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    printf("pid %d\n", getpid());
    zc_finalize(comm);
    return 0;
  }, {{"ZC_TRANSPORT", "shm"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
  for (auto& r : res) {
    int pid = atoi(r.output.substr(r.output.find("pid ") + 4).c_str());
    std::string cmd = "ls /dev/shm | grep -c -- '-" + std::to_string(pid) + "-' > /dev/null";
    EXPECT_NE(system(cmd.c_str()), 0) << "segments of pid " << pid << " left in /dev/shm";
  }
}

}  // namespace
