// Receive from any source through the C ABI (zc_recv / zc_irecv with
// ZC_ANY_SOURCE, zc_recv_source, zc_irecv_source), across processes, on shm
// and tcp: many senders at once, per-sender FIFO, posting order between
// specific and any-source receives, eager and rendezvous sizes, bad
// arguments, size mismatches, a deadline, a killed sender.
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

#include "harness/multiproc.h"
#include "harness/shared_counter.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;
using zc::test::SharedCounter;

// Data depends on the sender, the stream (tag) and the message's index in it.
inline uint8_t Pattern(int from, int tag, int idx, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (from * 17u) ^ (tag * 7u) ^ (idx * 29u) ^ (i >> 9) ^
                              (idx >> 3));
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

bool Has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// A message buffer: one byte in front (unaligned data) and a guard byte behind.
struct Msg {
  explicit Msg(size_t n) : b(n + 2, 0xEE) {}
  uint8_t* data() { return b.data() + 1; }
  size_t size() const { return b.size() - 2; }
  bool guard_ok() const { return b.front() == 0xEE && b.back() == 0xEE; }
  std::vector<uint8_t> b;
};

class AnySourceTest : public ::testing::TestWithParam<const char*> {
 protected:
  zc::test::Env Env(const char* timeout = "30") {
    return {{"ZC_TRANSPORT", GetParam()}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", timeout}};
  }
};

// Every other rank sends to rank 0 on nine streams at once (a tag per size:
// empty, one byte, prime and unaligned sizes, either side of both eager
// limits, 1 MiB + 3), the streams interleaved; rank 0 posts every receive
// from any source at once (irecv_source), completes them in a shuffled
// order (zc_test or zc_wait), then takes two more streams with blocking
// calls (zc_recv_source, zc_recv). Each sender's messages of a stream must
// come in the order it sent them, each with its data.
TEST_P(AnySourceTest, ManySendersFifoPerSender) {
  const std::vector<size_t> sizes = {0, 1, 13, 4099, 8192, 8193, 65537, 262147, (1u << 20) + 3};
  const int kStreams = static_cast<int>(sizes.size());
  const int kPer = 5;  // messages per sender and stream
  const int kBlockingTag = 300, kPlainTag = 301;
  const size_t kBlockingSize = 70001, kPlainSize = 5;
  for (int n : {2, 3, 4}) {
    auto res = RunRanks(n, [&](int rank) -> int {
      zc_comm* comm;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      auto tag_of = [](int s) { return 200 + s; };
      if (rank != 0) {
        std::vector<Msg> bufs;
        bufs.reserve(kPer * kStreams);
        std::vector<zc_request*> reqs;
        for (int idx = 0; idx < kPer; ++idx)
          for (int s = 0; s < kStreams; ++s) {
            bufs.emplace_back(sizes[s]);
            Fill(bufs.back().data(), sizes[s], rank, tag_of(s), idx);
            zc_request* r;
            CHILD_OK(zc_isend(comm, sizes[s] ? bufs.back().data() : nullptr, sizes[s], 0,
                              tag_of(s), &r));
            reqs.push_back(r);
          }
        for (auto* r : reqs) CHILD_OK(zc_wait(r));
        Msg m(kBlockingSize);
        for (int idx = 0; idx < kPer; ++idx) {
          Fill(m.data(), kBlockingSize, rank, kBlockingTag, idx);
          CHILD_OK(zc_send(comm, m.data(), kBlockingSize, 0, kBlockingTag));
          Fill(m.data(), kPlainSize, rank, kPlainTag, idx);
          CHILD_OK(zc_send(comm, m.data(), kPlainSize, 0, kPlainTag));
        }
      } else {
        const int per_stream = (n - 1) * kPer;
        std::vector<std::vector<Msg>> bufs(kStreams);
        std::vector<std::vector<int>> src(kStreams, std::vector<int>(per_stream, -7));
        struct Pending { zc_request* r; int s, j; };
        std::vector<Pending> reqs;
        for (int s = 0; s < kStreams; ++s) {
          bufs[s].reserve(per_stream);
          for (int j = 0; j < per_stream; ++j) {
            bufs[s].emplace_back(sizes[s]);
            zc_request* r;
            CHILD_OK(zc_irecv_source(comm, sizes[s] ? bufs[s][j].data() : nullptr, sizes[s],
                                     ZC_ANY_SOURCE, tag_of(s), &src[s][j], &r));
            CHILD_CHECK(src[s][j] == ZC_ANY_SOURCE, "source before completion: %d", src[s][j]);
            reqs.push_back({r, s, j});
          }
        }
        // Blocking streams while the others are in flight.
        std::vector<int> next_b(n, 0), next_p(n, 0);
        Msg m(kBlockingSize);
        for (int k = 0; k < per_stream; ++k) {
          int from = -7;
          CHILD_OK(zc_recv_source(comm, m.data(), kBlockingSize, ZC_ANY_SOURCE, kBlockingTag, &from));
          CHILD_CHECK(from >= 1 && from < n, "blocking: source %d", from);
          CHILD_CHECK(Bad(m.data(), kBlockingSize, from, kBlockingTag, next_b[from]) == 0,
                      "blocking: message %d of rank %d: wrong data (out of order?)", next_b[from], from);
          CHILD_CHECK(m.guard_ok(), "blocking: wrote outside the buffer");
          ++next_b[from];
        }
        // zc_recv from any source says nothing of the sender: the data does.
        std::vector<int> seen(n, 0);
        for (int k = 0; k < per_stream; ++k) {
          uint8_t b[kPlainSize];
          CHILD_OK(zc_recv(comm, b, kPlainSize, ZC_ANY_SOURCE, kPlainTag));
          int from = -1;
          for (int f = 1; f < n && from < 0; ++f)
            if (Bad(b, kPlainSize, f, kPlainTag, seen[f]) == 0) from = f;
          CHILD_CHECK(from > 0, "zc_recv: a message of no sender's next index");
          ++seen[from];
        }
        std::shuffle(reqs.begin(), reqs.end(), std::mt19937(n));
        for (size_t i = 0; i < reqs.size(); ++i) {
          Pending& p = reqs[i];
          if (i % 2) {
            CHILD_OK(zc_wait(p.r));
          } else {
            int done = 0;
            const auto t0 = std::chrono::steady_clock::now();
            while (!done) {
              CHILD_OK(zc_test(p.r, &done));
              CHILD_CHECK(Since(t0) < 60, "zc_test never reported done");
              if (!done) std::this_thread::yield();
            }
            // Done: the source is there already.
            CHILD_CHECK(src[p.s][p.j] >= 1 && src[p.s][p.j] < n, "source %d after zc_test",
                        src[p.s][p.j]);
            CHILD_OK(zc_wait(p.r));
          }
        }
        for (int s = 0; s < kStreams; ++s) {
          std::vector<int> next(n, 0);
          // In posting order, each sender's messages in sending order.
          for (int j = 0; j < per_stream; ++j) {
            const int from = src[s][j];
            CHILD_CHECK(from >= 1 && from < n, "stream %d receive %d: source %d", s, j, from);
            size_t bad = Bad(bufs[s][j].data(), sizes[s], from, tag_of(s), next[from]);
            CHILD_CHECK(bad == 0, "%zu bytes, receive %d: %zu bytes differ from rank %d's message %d",
                        sizes[s], j, bad, from, next[from]);
            CHILD_CHECK(bufs[s][j].guard_ok(), "%zu bytes: wrote outside the buffer", sizes[s]);
            ++next[from];
          }
          for (int f = 1; f < n; ++f)
            CHILD_CHECK(next[f] == kPer, "stream %d: %d messages from rank %d, want %d", s, next[f], f, kPer);
        }
      }
      CHILD_OK(zc_finalize(comm));
      return 0;
    }, Env());
    ASSERT_TRUE(AllOk(res)) << n << " ranks\n" << Describe(res);
  }
}

// Receives match in posting order, whether they name the sender or not.
//  a) Rank 1 alone sends on tag 7 (eager and rendezvous sizes); rank 0's
//     receives alternate between "from 1" and "from any source": each takes
//     the message of its posting position. Meanwhile rank 2 sends on tag 8
//     to any-source receives.
//  b) Ranks 1 and 2 send on tag 9; rank 0 posts 4 receives from each, then
//     any-source receives for the rest: the named ones take each sender's
//     first 4 messages, the any-source ones the rest, in order.
//  c) An irecv from any source posted before a blocking zc_recv from rank 1
//     (same tag) takes rank 1's first message, zc_recv its second.
TEST_P(AnySourceTest, PostingOrderBetweenSpecificAndAnySource) {
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int kA = 12, kB = 10, kNamed = 4;
    auto size_a = [](int i) {
      const size_t s[] = {10 + 37 * static_cast<size_t>(i), 70000 + static_cast<size_t>(i),
                          300000 + static_cast<size_t>(i)};
      return s[i % 3];
    };
    const size_t kSizeB = 4099, kSizeC = 40000;
    if (rank == 0) {
      // a)
      std::vector<Msg> a;
      a.reserve(kA);
      std::vector<int> asrc(kA, -7), osrc(kA, -7);
      std::vector<zc_request*> reqs;
      std::vector<Msg> other;
      other.reserve(kA);
      for (int i = 0; i < kA; ++i) {
        a.emplace_back(size_a(i));
        zc_request* r;
        CHILD_OK(zc_irecv_source(comm, a.back().data(), size_a(i), i % 2 ? ZC_ANY_SOURCE : 1, 7,
                                 &asrc[i], &r));
        reqs.push_back(r);
        other.emplace_back(5);
        CHILD_OK(zc_irecv_source(comm, other.back().data(), 5, ZC_ANY_SOURCE, 8, &osrc[i], &r));
        reqs.push_back(r);
      }
      for (auto* r : reqs) CHILD_OK(zc_wait(r));
      for (int i = 0; i < kA; ++i) {
        CHILD_CHECK(asrc[i] == 1, "a) receive %d: source %d", i, asrc[i]);
        CHILD_CHECK(Bad(a[i].data(), size_a(i), 1, 7, i) == 0,
                    "a) receive %d (%s) did not get rank 1's message %d", i,
                    i % 2 ? "any source" : "from 1", i);
        CHILD_CHECK(osrc[i] == 2 && Bad(other[i].data(), 5, 2, 8, i) == 0, "a) tag 8, receive %d", i);
      }
      // b)
      const int total = 2 * kB;
      std::vector<Msg> b;
      b.reserve(total);
      std::vector<int> bsrc(total, -7), bpeer(total);
      reqs.clear();
      for (int i = 0; i < total; ++i) {
        bpeer[i] = i < 2 * kNamed ? 1 + i % 2 : ZC_ANY_SOURCE;
        b.emplace_back(kSizeB);
        zc_request* r;
        CHILD_OK(zc_irecv_source(comm, b.back().data(), kSizeB, bpeer[i], 9, &bsrc[i], &r));
        reqs.push_back(r);
      }
      for (auto* r : reqs) CHILD_OK(zc_wait(r));
      int next[3] = {0, 0, 0};
      for (int i = 0; i < total; ++i) {
        const int from = bsrc[i];
        CHILD_CHECK(from == 1 || from == 2, "b) receive %d: source %d", i, from);
        CHILD_CHECK(bpeer[i] == ZC_ANY_SOURCE || bpeer[i] == from, "b) receive %d from %d got %d", i,
                    bpeer[i], from);
        CHILD_CHECK(Bad(b[i].data(), kSizeB, from, 9, next[from]) == 0,
                    "b) receive %d (%s): not rank %d's message %d", i,
                    bpeer[i] == ZC_ANY_SOURCE ? "any source" : "named", from, next[from]);
        ++next[from];
      }
      CHILD_CHECK(next[1] == kB && next[2] == kB, "b) %d and %d messages", next[1], next[2]);
      // c)
      Msg c0(kSizeC), c1(kSizeC);
      int csrc = -7;
      zc_request* r;
      CHILD_OK(zc_irecv_source(comm, c0.data(), kSizeC, ZC_ANY_SOURCE, 11, &csrc, &r));
      CHILD_OK(zc_recv(comm, c1.data(), kSizeC, 1, 11));
      CHILD_OK(zc_wait(r));
      CHILD_CHECK(csrc == 1 && Bad(c0.data(), kSizeC, 1, 11, 0) == 0, "c) the any-source receive "
                  "posted first did not get the first message (source %d)", csrc);
      CHILD_CHECK(Bad(c1.data(), kSizeC, 1, 11, 1) == 0, "c) zc_recv did not get the second message");
    } else {
      std::vector<zc_request*> reqs;
      std::vector<Msg> bufs;
      bufs.reserve(kA + kB + 2);
      for (int i = 0; i < kA; ++i) {
        const size_t s = rank == 1 ? size_a(i) : 5;
        const int tag = rank == 1 ? 7 : 8;
        bufs.emplace_back(s);
        Fill(bufs.back().data(), s, rank, tag, i);
        zc_request* r;
        CHILD_OK(zc_isend(comm, bufs.back().data(), s, 0, tag, &r));
        reqs.push_back(r);
      }
      for (int i = 0; i < kB; ++i) {
        bufs.emplace_back(kSizeB);
        Fill(bufs.back().data(), kSizeB, rank, 9, i);
        zc_request* r;
        CHILD_OK(zc_isend(comm, bufs.back().data(), kSizeB, 0, 9, &r));
        reqs.push_back(r);
      }
      if (rank == 1)
        for (int i = 0; i < 2; ++i) {
          bufs.emplace_back(kSizeC);
          Fill(bufs.back().data(), kSizeC, 1, 11, i);
          zc_request* r;
          CHILD_OK(zc_isend(comm, bufs.back().data(), kSizeC, 0, 11, &r));
          reqs.push_back(r);
        }
      for (auto* r : reqs) CHILD_OK(zc_wait(r));
    }
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Bad arguments fail at once with ZC_ERR_INVALID_ARG naming rank, call and
// cause; empty messages; size mismatches name both sizes and the sender
// (and set *source), a rendezvous sender fails too, and the pair goes on.
TEST_P(AnySourceTest, ArgumentsEmptyMessagesAndMismatch) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    std::vector<uint8_t> buf(400000);
    int src = 5;
    zc_request* req = nullptr;
    auto bad = [&](zc_status st, const char* call, const char* why) -> bool {
      const std::string e = zc_last_error(comm);
      return st == ZC_ERR_INVALID_ARG && Has(e, "rank " + std::to_string(rank)) && Has(e, call) &&
             Has(e, why);
    };
    CHILD_CHECK(bad(zc_recv_source(comm, nullptr, 4, ZC_ANY_SOURCE, 0, &src), "zc_recv_source", "NULL"),
                "null buffer: %s", zc_last_error(comm));
    CHILD_CHECK(src == ZC_ANY_SOURCE, "source after a refused call: %d", src);
    CHILD_CHECK(bad(zc_irecv_source(comm, nullptr, 4, ZC_ANY_SOURCE, 0, &src, &req), "zc_irecv_source",
                    "NULL") && req == nullptr, "null buffer: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_recv_source(comm, buf.data(), 4, -2, 0, &src), "zc_recv_source", "out of range"),
                "peer -2: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_irecv_source(comm, buf.data(), 4, 2, 0, &src, &req), "zc_irecv_source",
                    "out of range"), "peer 2: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_recv_source(comm, buf.data(), 4, rank, 0, &src), "zc_recv_source", "self"),
                "self: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_irecv_source(comm, buf.data(), 4, ZC_ANY_SOURCE, -1, &src, &req),
                    "zc_irecv_source", "tag -1"), "tag: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_irecv_source(comm, buf.data(), 4, ZC_ANY_SOURCE, 0, &src, nullptr),
                    "zc_irecv_source", "req is NULL"), "req: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_send(comm, buf.data(), 4, ZC_ANY_SOURCE, 0), "zc_send", "out of range"),
                "send to any source: %s", zc_last_error(comm));
    CHILD_CHECK(bad(zc_isend(comm, buf.data(), 4, ZC_ANY_SOURCE, 0, &req), "zc_isend", "out of range"),
                "isend to any source: %s", zc_last_error(comm));
    // Alone in a communicator: nobody could ever send.
    zc_comm* solo = nullptr;
    CHILD_OK(zc_comm_split(comm, rank, 0, &solo));
    CHILD_CHECK(zc_recv_source(solo, buf.data(), 4, ZC_ANY_SOURCE, 0, &src) == ZC_ERR_INVALID_ARG &&
                    Has(zc_last_error(solo), "alone"), "any source in a communicator of one: %s",
                zc_last_error(solo));
    CHILD_OK(zc_finalize(solo));

    if (rank == 1) {
      // Empty messages (NULL buffer), a mismatch of each kind, then a good one.
      CHILD_OK(zc_send(comm, nullptr, 0, 0, 1));
      CHILD_OK(zc_send(comm, nullptr, 0, 0, 1));
      CHILD_OK(zc_send(comm, buf.data(), 100, 0, 3));
      zc_status st = zc_send(comm, buf.data(), 300000, 0, 4);
      const std::string e = zc_last_error(comm);
      CHILD_CHECK(st == ZC_ERR_MISMATCH && Has(e, "299999") && Has(e, "300000"),
                  "rendezvous sender of a mismatch: %s: %s", zc_status_string(st), e.c_str());
      Fill(buf.data(), 300000, 1, 5, 0);
      CHILD_OK(zc_send(comm, buf.data(), 300000, 0, 5));
    } else {
      src = -7;
      CHILD_OK(zc_recv_source(comm, nullptr, 0, ZC_ANY_SOURCE, 1, &src));
      CHILD_CHECK(src == 1, "empty message: source %d", src);
      src = -7;
      CHILD_OK(zc_irecv_source(comm, nullptr, 0, ZC_ANY_SOURCE, 1, nullptr, &req));
      CHILD_OK(zc_wait(req));
      zc_status st = zc_recv_source(comm, buf.data(), 99, ZC_ANY_SOURCE, 3, &src);
      std::string e = zc_last_error(comm);
      CHILD_CHECK(st == ZC_ERR_MISMATCH && Has(e, "99 bytes") && Has(e, "100 bytes") &&
                      Has(e, "peer 1") && Has(e, "rank 0"),
                  "eager mismatch: %s: %s", zc_status_string(st), e.c_str());
      CHILD_CHECK(src == 1, "eager mismatch: source %d", src);
      src = -7;
      CHILD_OK(zc_irecv_source(comm, buf.data(), 299999, ZC_ANY_SOURCE, 4, &src, &req));
      st = zc_wait(req);
      e = zc_last_error(comm);
      CHILD_CHECK(st == ZC_ERR_MISMATCH && Has(e, "299999") && Has(e, "300000") && Has(e, "peer 1"),
                  "rendezvous mismatch: %s: %s", zc_status_string(st), e.c_str());
      CHILD_CHECK(src == 1, "rendezvous mismatch: source %d", src);
      CHILD_OK(zc_recv_source(comm, buf.data(), 300000, ZC_ANY_SOURCE, 5, &src));
      CHILD_CHECK(src == 1 && Bad(buf.data(), 300000, 1, 5, 0) == 0, "after the mismatches");
    }
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// ZC_TIMEOUT=2 and no sender: the any-source receive fails with
// ZC_ERR_TIMEOUT after about 2 s, naming the call.
TEST_P(AnySourceTest, NoSenderTimesOut) {
  SharedCounter done;
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    if (rank == 0) {
      uint8_t b[16];
      int src = -7;
      const auto t0 = std::chrono::steady_clock::now();
      zc_status st = zc_recv_source(comm, b, sizeof b, ZC_ANY_SOURCE, 42, &src);
      const double secs = Since(t0);
      const std::string e = zc_last_error(comm);
      CHILD_CHECK(st == ZC_ERR_TIMEOUT && Has(e, "from any source") && Has(e, "tag 42"),
                  "%s: %s", zc_status_string(st), e.c_str());
      CHILD_CHECK(src == ZC_ANY_SOURCE, "source %d", src);
      CHILD_CHECK(secs > 1.5 && secs < 6, "timed out after %.1f s", secs);
      done.Add();
    }
    // Finalize (collective, itself under ZC_TIMEOUT) once rank 0 is done.
    CHILD_CHECK(done.WaitAtLeast(1, 30), "rank 0 never finished");
    CHILD_OK(zc_finalize(comm));
    return 0;
  }, Env("2"));
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Rank 2 is killed while rank 0 waits to receive from any source: the
// message rank 1 had already sent is matched first, then the receive fails
// with ZC_ERR_PEER_LOST naming peer 2 within seconds, not at ZC_TIMEOUT.
TEST_P(AnySourceTest, KilledSenderFailsTheWaitingReceive) {
  SharedCounter arrived, checked;
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    if (rank == 2) {
      CHILD_CHECK(arrived.WaitAtLeast(1, 30), "rank 0 never got ready");
      raise(SIGKILL);
    }
    if (rank == 1) {
      uint8_t m[64];
      Fill(m, 64, 1, 5, 0);
      CHILD_OK(zc_send(comm, m, 64, 0, 5));
      Fill(m, 64, 1, 6, 0);
      CHILD_OK(zc_send(comm, m, 64, 0, 6));
    } else {
      uint8_t m[64];
      // The tag-6 message came after the tag-5 one on rank 1's stream: once
      // it is here, so is the other.
      CHILD_OK(zc_recv(comm, m, 64, 1, 6));
      int src = -7;
      zc_request* r;
      CHILD_OK(zc_irecv_source(comm, m, 64, ZC_ANY_SOURCE, 5, &src, &r));
      CHILD_OK(zc_wait(r));
      CHILD_CHECK(src == 1 && Bad(m, 64, 1, 5, 0) == 0, "the arrived message: source %d", src);
      // Now one that only the doomed rank could satisfy.
      CHILD_OK(zc_irecv_source(comm, m, 64, ZC_ANY_SOURCE, 5, &src, &r));
      const auto t0 = std::chrono::steady_clock::now();
      arrived.Add();
      zc_status st = zc_wait(r);
      const double secs = Since(t0);
      const std::string e = zc_last_error(comm);
      CHILD_CHECK(st == ZC_ERR_PEER_LOST && Has(e, "peer 2") && Has(e, "any source"),
                  "%s: %s", zc_status_string(st), e.c_str());
      CHILD_CHECK(src == ZC_ANY_SOURCE, "source %d", src);
      CHILD_CHECK(secs < 5, "took %.1f s", secs);
    }
    // Finalize after rank 0's check (a failed finalize would alert the job).
    checked.Add();
    CHILD_CHECK(checked.WaitAtLeast(2, 30), "the other survivor never finished");
    zc_finalize(comm);
    return 0;
  }, Env("60"), 60);
  ASSERT_EQ(res[2].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[0].exit_code, 0) << Describe(res);
  ASSERT_EQ(res[1].exit_code, 0) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Transports, AnySourceTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
