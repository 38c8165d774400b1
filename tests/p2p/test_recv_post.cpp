// Receiver-posted transfers over tcp (src/p2p/recv_post.h): a receive posted
// before its message arrives announces its buffer and the sender writes
// straight into it; one posted after takes the message the ordinary way
// (eager or rendezvous), unless it comes as an offer (a blocking send that
// found no post; offer_board.h). Through the C ABI, across processes: sizes either
// side of every limit (posting at 64 KiB, eager up to 256 KiB), unaligned
// buffers in user and pool memory, both orders, many messages in flight
// both ways, receives from any source beside posted ones, size mismatches,
// a receive that times out and is retried, and a peer killed during a
// transfer (either side).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "harness/multiproc.h"
#include "harness/shared_counter.h"
#include "p2p/device.h"
#include "p2p/recv_post.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;
using zc::test::SharedCounter;

inline uint8_t Pattern(int from, int tag, int idx, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (from * 17u) ^ (tag * 7u) ^ (idx * 29u) ^ (i >> 9) ^ (i >> 17));
}
void Fill(uint8_t* p, size_t n, int from, int tag, int idx) {
  for (size_t i = 0; i < n; ++i) p[i] = Pattern(from, tag, idx, i);
}
size_t Bad(const uint8_t* p, size_t n, int from, int tag, int idx) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += p[i] != Pattern(from, tag, idx, i);
  return bad;
}
double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 0, 1, primes, either side of the posting threshold (64 KiB), of the tcp
// eager limit (256 KiB) and of the control slots, 256 KiB - 4 MiB + 1.
const std::vector<size_t> kSizes = {0,          1,          65521,       65536,       65537,
                                    131071,     262143,     262144,      262145,      524309,
                                    1048573,    1u << 20,   (2u << 20) + 7, 4u << 20, (4u << 20) + 1};

zc::test::Env Env(const char* timeout = "30") {
  return {{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", timeout}};
}

// Posts whose payload landed straight in the buffer, on this rank
// (through the post, or taken from an offer).
uint64_t Landed(zc_comm* comm) { return comm->device->posts().landed(); }
// Offers taken here (offer_board.h), and refused here.
uint64_t OffersTaken(zc_comm* comm) { return comm->device->offers().landed(); }
uint64_t OffersRefused(zc_comm* comm) { return comm->device->offers().refused(); }

// A buffer with one byte in front (unaligned data) and a guard byte behind,
// in user memory or in the pool (zc_mem_alloc).
class Buf {
 public:
  Buf(zc_comm* comm, size_t n, bool pool) : comm_(comm), n_(n), pool_(pool) {
    if (pool_) {
      void* p = nullptr;
      if (zc_mem_alloc(comm, n + 2, &p) == ZC_OK) base_ = static_cast<uint8_t*>(p);
    } else {
      own_.assign(n + 2, 0);
      base_ = own_.data();
    }
    if (base_) memset(base_, 0xEE, n + 2);
  }
  ~Buf() {
    if (pool_ && base_) zc_mem_free(comm_, base_);
  }
  bool ok() const { return base_ != nullptr; }
  uint8_t* data() { return base_ + 1; }
  size_t size() const { return n_; }
  bool guard_ok() const { return base_[0] == 0xEE && base_[n_ + 1] == 0xEE; }

 private:
  zc_comm* comm_;
  size_t n_;
  bool pool_;
  std::vector<uint8_t> own_;
  uint8_t* base_ = nullptr;
};

// Every size, both directions in turn, from user and pool memory: first
// with the receive posted well before the send (rank r waits for the
// receiver's signal, then a little more, so the post has arrived), then
// with the send first (the receive comes after the message has arrived).
// Blocking zc_send/zc_recv and nonblocking zc_isend/zc_irecv alike.
TEST(RecvPost, AllSizesBothOrdersBothApis) {
  SharedCounter signal;  // one Add a step: the receiver's post, or the sender's send
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int peer = 1 - rank;
    int idx = 0;
    for (int nonblocking = 0; nonblocking < 2; ++nonblocking)
      for (int pool = 0; pool < 2; ++pool)
        for (int posted_first = 1; posted_first >= 0; --posted_first)
          for (size_t s : kSizes)
            for (int sender = 0; sender < 2; ++sender, ++idx) {
              const int tag = 5 + (idx % 3);
              Buf b(comm, s, pool);
              CHILD_CHECK(b.ok(), "buffer of %zu bytes", s);
              const int want = idx + 1;
              if (rank == sender) {
                Fill(b.data(), s, rank, tag, idx);
                if (posted_first) {
                  CHILD_CHECK(signal.WaitAtLeast(want, 30), "receiver never posted (step %d)", idx);
                  usleep(3000);
                }
                zc_request* r = nullptr;
                if (nonblocking) CHILD_OK(zc_isend(comm, b.data(), s, peer, tag, &r));
                if (!posted_first) signal.Add();
                if (nonblocking) CHILD_OK(zc_wait(r));
                else CHILD_OK(zc_send(comm, b.data(), s, peer, tag));
              } else {
                if (!posted_first) {
                  CHILD_CHECK(signal.WaitAtLeast(want, 30), "sender never sent (step %d)", idx);
                  usleep(3000);
                }
                zc_request* r = nullptr;
                if (nonblocking || posted_first) CHILD_OK(zc_irecv(comm, b.data(), s, peer, tag, &r));
                if (posted_first) signal.Add();
                if (r) CHILD_OK(zc_wait(r));
                else CHILD_OK(zc_recv(comm, b.data(), s, peer, tag));
                size_t bad = Bad(b.data(), s, peer, tag, idx);
                CHILD_CHECK(bad == 0, "%zu bytes (%s, %s, %s first): %zu wrong", s, nonblocking ? "irecv" : "recv",
                            pool ? "pool" : "user", posted_first ? "receive" : "send", bad);
                CHILD_CHECK(b.guard_ok(), "%zu bytes: wrote outside the buffer", s);
              }
            }
    // The posted-first receives of posting sizes went straight in.
    CHILD_CHECK(Landed(comm) > 0, "no receive was written straight into its buffer");
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 240);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Blocking ping-pong of posting sizes: after the first exchange every
// message lands straight in the receive's buffer, through its post or from
// an offer. A rank's next receive is called only after its send has
// returned, so its post reaches the peer after the peer's reply is ready:
// from 512 KiB on the sender offers the reply instead, and the receive
// takes it as soon as it is armed (offer_board.h).
TEST(RecvPost, PingPongGoesDirect) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int peer = 1 - rank;
    const int kIters = 40;
    std::vector<uint8_t> sb((4u << 20) + 1), rb((4u << 20) + 1);
    for (size_t s : {size_t{65539}, size_t{262145}, size_t{524309}, size_t{1} << 20, (size_t{4} << 20) + 1}) {
      const uint64_t offers = OffersTaken(comm), direct = Landed(comm);
      for (int i = 0; i < kIters; ++i) {
        if (rank == 0) {
          Fill(sb.data(), s, rank, 11, i);
          CHILD_OK(zc_send(comm, sb.data(), s, peer, 11));
          CHILD_OK(zc_recv(comm, rb.data(), s, peer, 11));
        } else {
          CHILD_OK(zc_recv(comm, rb.data(), s, peer, 11));
          Fill(sb.data(), s, rank, 11, i);
          CHILD_OK(zc_send(comm, sb.data(), s, peer, 11));
        }
        CHILD_CHECK(Bad(rb.data(), s, peer, 11, i) == 0, "%zu bytes, iteration %d: wrong data", s, i);
      }
      const uint64_t offered = OffersTaken(comm) - offers, landed = Landed(comm) - direct;
      // Most, not all: on a loaded machine a post may come too late, or a
      // receive later than an offer waits for it (then the message goes the
      // ordinary way).
      CHILD_CHECK(landed >= kIters / 2, "%zu bytes: %llu of %d receives went straight into the buffer", s,
                  static_cast<unsigned long long>(landed), kIters);
      CHILD_CHECK(s < 524309 || offered >= 1, "%zu bytes: no receive took an offer (%llu refused)", s,
                  static_cast<unsigned long long>(OffersRefused(comm)));
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A receive that comes long after the message was offered: the offer is
// refused once it has waited (Socket::kOfferWait), and the message comes
// the ordinary way, in its place in the tag's order (a later message of
// the tag, offered or posted for, lands after it). Then the sender waits
// for posts again, and offers again once a message went into a post.
TEST(RecvPost, LateReceiveGetsARefusedOfferTheOrdinaryWay) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const size_t kSize = 524309;
    const int kTag = 12, kMsgs = 6;
    std::vector<uint8_t> b(kSize);
    if (rank == 1) {
      for (int i = 0; i < kMsgs; ++i) {
        Fill(b.data(), kSize, rank, kTag, i);
        CHILD_OK(zc_send(comm, b.data(), kSize, 0, kTag));
      }
    } else {
      // No receive yet: wait (observably) until the first offer is refused.
      const auto t0 = std::chrono::steady_clock::now();
      while (OffersRefused(comm) == 0) {
        CHILD_CHECK(Since(t0) < 20, "no offer was refused in 20 s");
        std::this_thread::yield();
      }
      for (int i = 0; i < kMsgs; ++i) {
        std::fill(b.begin(), b.end(), 0);
        CHILD_OK(zc_recv(comm, b.data(), kSize, 1, kTag));
        CHILD_CHECK(Bad(b.data(), kSize, 1, kTag, i) == 0, "message %d: wrong data", i);
      }
      CHILD_CHECK(OffersRefused(comm) >= 1, "refused %llu", static_cast<unsigned long long>(OffersRefused(comm)));
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Both ranks post many receives on a few tags (posting sizes and smaller
// ones mixed), then many sends, then wait for all in a shuffled order, for
// several rounds: posted receives, stale posts and ordinary messages
// interleave on every tag, in both directions at once.
TEST(RecvPost, ManyInFlightBothWays) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int peer = 1 - rank;
    const int kMsgs = 48, kRounds = 3;
    auto size_of = [](int i) -> size_t {
      const size_t s[] = {100000, 70001, 300007, 1000003, 65536, 4096, 262144, 2u << 20};
      return s[i % 8];
    };
    auto tag_of = [](int i) { return 20 + i % 3; };
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::vector<uint8_t>> sbufs, rbufs;
      std::vector<zc_request*> reqs;
      for (int i = 0; i < kMsgs; ++i) {
        rbufs.emplace_back(size_of(i) + 1, 0xEE);
        zc_request* r;
        CHILD_OK(zc_irecv(comm, rbufs.back().data(), size_of(i), peer, tag_of(i), &r));
        reqs.push_back(r);
      }
      for (int i = 0; i < kMsgs; ++i) {
        sbufs.emplace_back(size_of(i));
        Fill(sbufs.back().data(), size_of(i), rank, tag_of(i), round * kMsgs + i);
        zc_request* r;
        CHILD_OK(zc_isend(comm, sbufs.back().data(), size_of(i), peer, tag_of(i), &r));
        reqs.push_back(r);
        if (i % 7 == 3) usleep(500);  // some posts arrive before their sends, some after
      }
      std::vector<int> order(reqs.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
      std::shuffle(order.begin(), order.end(), std::mt19937(rank * 31 + round));
      for (int k : order) CHILD_OK(zc_wait(reqs[k]));
      for (int i = 0; i < kMsgs; ++i) {
        const size_t bad = Bad(rbufs[i].data(), size_of(i), peer, tag_of(i), round * kMsgs + i);
        CHILD_CHECK(bad == 0, "round %d, message %d (%zu bytes, tag %d): %zu wrong", round, i, size_of(i),
                    tag_of(i), bad);
        CHILD_CHECK(rbufs[i][size_of(i)] == 0xEE, "message %d: wrote past the end", i);
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 240);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Rank 0 receives from ranks 1 and 2 on one tag with receives from a named
// sender (which post) and from any source (which never post), all posted at
// once; the named ones first, so that the matching cannot strand one (an
// any-source receive posted before them could take a message they need).
// Each sender's messages must arrive in its order: its first ones in its
// named receives. Then, on another tag, an any-source receive posted before
// a named one: the named one must not post ahead of it (it would get the
// sender's first message straight into its buffer), so the any-source
// receive gets message 0 and the named one message 1.
TEST(RecvPost, AnySourceBesidePostedReceives) {
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kPer = 8, kTag = 40, kTag2 = 41;
    const size_t kSize = 300007;
    if (rank == 0) {
      const int n = 2 * kPer;
      std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(kSize));
      std::vector<zc_request*> reqs(n);
      std::vector<int> sources(n, -1);
      for (int k = 0; k < n; ++k) {
        if (k < kPer) {
          sources[k] = 1 + k % 2;
          CHILD_OK(zc_irecv(comm, bufs[k].data(), kSize, sources[k], kTag, &reqs[k]));
        } else {
          CHILD_OK(zc_irecv_source(comm, bufs[k].data(), kSize, ZC_ANY_SOURCE, kTag, &sources[k], &reqs[k]));
        }
      }
      for (auto* r : reqs) CHILD_OK(zc_wait(r));
      std::vector<int> next(3, 0);  // each sender's next message index, in posting order
      for (int k = 0; k < n; ++k) {
        const int from = sources[k];
        CHILD_CHECK(from == 1 || from == 2, "receive %d: source %d", k, from);
        const int idx = next[from]++;
        const size_t bad = Bad(bufs[k].data(), kSize, from, kTag, idx);
        CHILD_CHECK(bad == 0, "receive %d (from %d, message %d): %zu wrong", k, from, idx, bad);
      }
      CHILD_CHECK(next[1] == kPer && next[2] == kPer, "got %d and %d messages", next[1], next[2]);
      // Any source first, then named: from rank 1 only.
      zc_request *any, *named;
      int src = -1;
      CHILD_OK(zc_irecv_source(comm, bufs[0].data(), kSize, ZC_ANY_SOURCE, kTag2, &src, &any));
      CHILD_OK(zc_irecv(comm, bufs[1].data(), kSize, 1, kTag2, &named));
      CHILD_OK(zc_wait(any));
      CHILD_OK(zc_wait(named));
      CHILD_CHECK(src == 1, "source %d", src);
      CHILD_CHECK(Bad(bufs[0].data(), kSize, 1, kTag2, 0) == 0, "the any-source receive did not get message 0");
      CHILD_CHECK(Bad(bufs[1].data(), kSize, 1, kTag2, 1) == 0, "the named receive did not get message 1");
    } else {
      std::vector<uint8_t> b(kSize);
      for (int i = 0; i < kPer; ++i) {
        Fill(b.data(), kSize, rank, kTag, i);
        CHILD_OK(zc_send(comm, b.data(), kSize, 0, kTag));
      }
      for (int i = 0; rank == 1 && i < 2; ++i) {
        usleep(3000);  // rank 0's receives are posted
        Fill(b.data(), kSize, rank, kTag2, i);
        CHILD_OK(zc_send(comm, b.data(), kSize, 0, kTag2));
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A posted receive of another size than the message: the receive fails
// with ZC_ERR_MISMATCH (and a rendezvous sender too), and the next
// exchange on the same tag works.
TEST(RecvPost, SizeMismatchAfterPost) {
  SharedCounter posted;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kTag = 50;
    std::vector<uint8_t> b(2u << 20);
    // (receiver's size, sender's size): larger, smaller and eager senders.
    const size_t cases[][2] = {{1u << 20, 600000}, {600000, 1u << 20}, {1u << 20, 100000}};
    int step = 0;
    for (const auto& c : cases) {
      ++step;
      if (rank == 1) {
        zc_request* r;
        CHILD_OK(zc_irecv(comm, b.data(), c[0], 0, kTag, &r));
        posted.Add();
        zc_status s = zc_wait(r);
        CHILD_CHECK(s == ZC_ERR_MISMATCH, "receive of %zu, send of %zu: got %s", c[0], c[1], zc_status_string(s));
        CHILD_OK(zc_recv(comm, b.data(), 300000, 0, kTag));  // the next one, fine
        CHILD_CHECK(Bad(b.data(), 300000, 0, kTag, step) == 0, "wrong data after a mismatch");
      } else {
        CHILD_CHECK(posted.WaitAtLeast(step, 30), "receiver never posted");
        usleep(3000);
        Fill(b.data(), c[1], 0, kTag, 0);
        zc_status s = zc_send(comm, b.data(), c[1], 1, kTag);
        const bool eager = c[1] <= 256 * 1024;
        CHILD_CHECK(eager ? s == ZC_OK : s == ZC_ERR_MISMATCH, "send of %zu to a receive of %zu: got %s", c[1], c[0],
                    zc_status_string(s));
        Fill(b.data(), 300000, 0, kTag, step);
        CHILD_OK(zc_send(comm, b.data(), 300000, 1, kTag));
      }
    }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env(), 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A posted receive whose deadline passes, then the same receive again: the
// message sent after the first one gave up reaches the second (the first
// one's post was withdrawn), in user and pool memory. The second receive
// is retried while it times out (a loaded machine may delay the sender by
// more than ZC_TIMEOUT): a lost message fails every retry.
TEST(RecvPost, TimedOutReceiveIsRetried) {
  SharedCounter timed_out;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kTag = 60;
    int step = 0;
    for (size_t s : {size_t{1} << 20, size_t{131072}})
      for (int pool = 0; pool < 2; ++pool) {
        ++step;
        Buf b(comm, s, pool);
        CHILD_CHECK(b.ok(), "buffer");
        if (rank == 0) {
          zc_status st = zc_recv(comm, b.data(), s, 1, kTag);
          CHILD_CHECK(st == ZC_ERR_TIMEOUT, "first receive: %s", zc_status_string(st));
          timed_out.Add();
          st = ZC_ERR_TIMEOUT;
          for (int attempt = 0; attempt < 15 && st == ZC_ERR_TIMEOUT; ++attempt) st = zc_recv(comm, b.data(), s, 1, kTag);
          CHILD_CHECK(st == ZC_OK, "%zu bytes, after the timeout: %s: %s", s, zc_status_string(st), zc_last_error(comm));
          CHILD_CHECK(Bad(b.data(), s, 1, kTag, step) == 0, "%zu bytes: wrong data after the retry", s);
          CHILD_CHECK(b.guard_ok(), "wrote outside the buffer");
        } else {
          CHILD_CHECK(timed_out.WaitAtLeast(step, 60), "the receive never timed out");
          Fill(b.data(), s, 1, kTag, step);
          CHILD_OK(zc_send(comm, b.data(), s, 0, kTag));
        }
      }
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env("2"), 120);
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A warm-up ping-pong on the tag leaves rank 0 taking offers without
// posting (its receives come after its sends, so rank 1's replies find no
// post: offer_board.h, OfferedLast); then rank 1 sends 1 GiB to rank 0 as
// an offer, and one side is killed while its payload is being read. The
// other must fail with the peer's loss, not hang: a receive whose offer is
// being read waits for the read, which the loss ends; a sender waiting for
// its verdict stops at the loss.
int KilledDuringOffer(int rank, int victim) {
  zc_comm* comm;
  CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
  const size_t small = 524309, s = size_t{1} << 30;
  std::vector<uint8_t> b(s, 1);
  for (int i = 0; i < 4; ++i) {
    if (rank == 0) {
      CHILD_OK(zc_send(comm, b.data(), small, 1, 71));
      CHILD_OK(zc_recv(comm, b.data(), small, 1, 71));
    } else {
      CHILD_OK(zc_recv(comm, b.data(), small, 0, 71));
      CHILD_OK(zc_send(comm, b.data(), small, 0, 71));
    }
  }
  if (rank == 0 && OffersTaken(comm) == 0) fprintf(stderr, "rank 0 took no offer in the warm-up (a loaded host)\n");
  auto transfer = [&] { return rank == 1 ? zc_send(comm, b.data(), s, 0, 71) : zc_recv(comm, b.data(), s, 1, 71); };
  if (rank == victim) {
    std::thread killer([] {
      usleep(20000);
      raise(SIGKILL);
    });
    transfer();
    killer.join();
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  const zc_status st = transfer();
  CHILD_CHECK(st == ZC_ERR_PEER_LOST || st == ZC_OK, "got %s: %s", zc_status_string(st), zc_last_error(comm));
  if (st == ZC_OK) fprintf(stderr, "the kill came after the whole transfer\n");
  CHILD_CHECK(Since(t0) < 100, "took %.1f s", Since(t0));
  zc_finalize(comm);
  return 0;
}

TEST(RecvPost, SenderKilledDuringOffer) {
  auto res = RunRanks(2, [&](int rank) { return KilledDuringOffer(rank, 1); }, Env("300"), 200);
  ASSERT_EQ(res[1].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[0].exit_code, 0) << Describe(res);
}

TEST(RecvPost, ReceiverKilledDuringOffer) {
  auto res = RunRanks(2, [&](int rank) { return KilledDuringOffer(rank, 0); }, Env("300"), 200);
  ASSERT_EQ(res[0].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[1].exit_code, 0) << Describe(res);
}

// The sender dies while its payload goes into a posted receive: the
// receive fails with ZC_ERR_PEER_LOST, long before its deadline (no hang;
// the bound is loose: a loaded machine may take seconds to get the sender
// going at all). A machine that delays the kill until the whole gigabyte
// has landed makes it a plain success, which is accepted too.
TEST(RecvPost, SenderKilledDuringTransfer) {
  SharedCounter posted;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    const size_t s = size_t{1} << 30;  // long enough to be cut short
    std::vector<uint8_t> b(s, 1);
    if (rank == 0) {
      CHILD_CHECK(posted.WaitAtLeast(1, 30), "receiver never posted");
      usleep(3000);
      std::thread killer([] {
        usleep(20000);
        raise(SIGKILL);
      });
      zc_send(comm, b.data(), s, 1, 70);
      killer.join();
      return 0;
    }
    zc_request* r;
    CHILD_OK(zc_irecv(comm, b.data(), s, 0, 70, &r));
    posted.Add();
    auto t0 = std::chrono::steady_clock::now();
    zc_status st = zc_wait(r);
    CHILD_CHECK(st == ZC_ERR_PEER_LOST || st == ZC_OK, "got %s: %s", zc_status_string(st), zc_last_error(comm));
    if (st == ZC_OK) fprintf(stderr, "the kill came after the whole transfer\n");
    CHILD_CHECK(Since(t0) < 100, "took %.1f s", Since(t0));
    zc_finalize(comm);
    return 0;
  }, Env("300"), 200);
  ASSERT_EQ(res[0].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[1].exit_code, 0) << Describe(res);
}

// The receiver dies while the payload goes into its posted buffer: the
// sender fails with ZC_ERR_PEER_LOST, long before its deadline (no hang;
// a success when the kill came after the whole transfer).
TEST(RecvPost, ReceiverKilledDuringTransfer) {
  SharedCounter posted;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init");
    const size_t s = size_t{1} << 30;
    std::vector<uint8_t> b(s, 1);
    if (rank == 1) {
      zc_request* r;
      CHILD_OK(zc_irecv(comm, b.data(), s, 0, 71, &r));
      posted.Add();
      usleep(23000);  // the sender has started writing
      raise(SIGKILL);
    }
    CHILD_CHECK(posted.WaitAtLeast(1, 30), "receiver never posted");
    usleep(3000);
    auto t0 = std::chrono::steady_clock::now();
    zc_status st = zc_send(comm, b.data(), s, 1, 71);
    CHILD_CHECK(st == ZC_ERR_PEER_LOST || st == ZC_OK, "got %s: %s", zc_status_string(st), zc_last_error(comm));
    if (st == ZC_OK) fprintf(stderr, "the kill came after the whole transfer\n");
    CHILD_CHECK(Since(t0) < 100, "took %.1f s", Since(t0));
    zc_finalize(comm);
    return 0;
  }, Env("300"), 200);
  ASSERT_EQ(res[1].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[0].exit_code, 0) << Describe(res);
}

}  // namespace
