// Large tcp messages through the C ABI, across processes, where a payload
// goes through one blocking read or write (p2p/tcp/tcp_socket.h,
// Socket::kBlockingMin): two peers sending large messages to one receiver
// at once (both receives posted, and both waited on by one thread), sizes
// either side of every threshold (the blocking threshold, it plus the
// socket's receive buffer, posting, eager) in a ping-pong, from and into
// unaligned buffers, repeated.
#include <gtest/gtest.h>
#include <zcomm/zcomm.h>

#include <cstring>
#include <vector>

#include "harness/multiproc.h"
#include "p2p/tcp/tcp_socket.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;

inline uint8_t Pattern(int from, int idx, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (from * 17u) ^ (idx * 29u) ^ (i >> 9) ^ (i >> 17));
}
void Fill(uint8_t* p, size_t n, int from, int idx) {
  for (size_t i = 0; i < n; ++i) p[i] = Pattern(from, idx, i);
}
size_t Bad(const uint8_t* p, size_t n, int from, int idx) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += p[i] != Pattern(from, idx, i);
  return bad;
}

zc::test::Env Env() { return {{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", "60"}}; }

// Ranks 1 and 2 each send rank 0 a large message at once, several rounds,
// sizes changing per round; rank 0 posts both receives, then waits on both
// (in either order): each payload lands whole in its own buffer.
TEST(TcpLarge, TwoSendersAtOnceToOneReceiver) {
  const std::vector<size_t> sizes = {(size_t{1} << 20) + 7, (size_t{4} << 20) + 1, 262147, 65537 + 16384};
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    for (int round = 0; round < 8; ++round) {
      const size_t s = sizes[round % sizes.size()];
      if (rank == 0) {
        std::vector<uint8_t> b1(s + 1), b2(s + 1);
        zc_request *r1, *r2;
        CHILD_OK(zc_irecv(comm, b1.data() + 1, s, 1, 3, &r1));
        CHILD_OK(zc_irecv(comm, b2.data() + 1, s, 2, 3, &r2));
        CHILD_CHECK(zc_barrier(comm) == ZC_OK, "barrier: %s", zc_last_error(comm));
        if (round % 2) {
          CHILD_OK(zc_wait(r2));
          CHILD_OK(zc_wait(r1));
        } else {
          CHILD_OK(zc_wait(r1));
          CHILD_OK(zc_wait(r2));
        }
        CHILD_CHECK(Bad(b1.data() + 1, s, 1, round) == 0, "round %d: %zu bytes from rank 1 wrong", round, s);
        CHILD_CHECK(Bad(b2.data() + 1, s, 2, round) == 0, "round %d: %zu bytes from rank 2 wrong", round, s);
      } else {
        std::vector<uint8_t> b(s + 3);
        Fill(b.data() + 3, s, rank, round);
        CHILD_CHECK(zc_barrier(comm) == ZC_OK, "barrier: %s", zc_last_error(comm));
        CHILD_OK(zc_send(comm, b.data() + 3, s, 0, 3));
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 240);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A blocking ping-pong of sizes either side of each threshold, unaligned
// on both ends, several times each: the posted receive's payload comes
// through the blocking read, others through the eager or rendezvous path.
TEST(TcpLarge, PingPongAroundEveryThreshold) {
  const size_t kMin = zc::tcp::Socket::kBlockingMin, kBuf = zc::tcp::Socket::kRecvBuf;
  const std::vector<size_t> sizes = {0,           1,          kMin - 1,          kMin,      kMin + 1,
                                     kMin + kBuf - 1, kMin + kBuf, kMin + kBuf + 1, 262143,    262144,
                                     262145,      1048573,    (size_t{4} << 20) + 1};
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int peer = 1 - rank;
    std::vector<uint8_t> sb((size_t{4} << 20) + 8), rb((size_t{4} << 20) + 8);
    int idx = 0;
    for (size_t s : sizes)
      for (int rep = 0; rep < 4; ++rep, ++idx) {
        uint8_t* out = sb.data() + 1 + idx % 7;
        uint8_t* in = rb.data() + 1 + (idx * 3) % 7;
        Fill(out, s, rank, idx);
        if (rank == 0) {
          CHILD_OK(zc_send(comm, out, s, peer, 11));
          CHILD_OK(zc_recv(comm, in, s, peer, 11));
        } else {
          CHILD_OK(zc_recv(comm, in, s, peer, 11));
          CHILD_OK(zc_send(comm, out, s, peer, 11));
        }
        CHILD_CHECK(Bad(in, s, peer, idx) == 0, "%zu bytes, repetition %d: wrong data", s, rep);
      }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 240);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
