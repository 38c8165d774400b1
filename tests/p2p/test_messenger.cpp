// Messenger (src/p2p/messenger.h): nonblocking send/recv per communicator,
// across processes, on shm and tcp.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "harness/multiproc.h"
#include "harness/shared_counter.h"
#include "p2p/device.h"
#include "p2p/messenger.h"
#include "p2p/send_recv.h"

namespace {

using zc::Messenger;
using zc::P2pRequest;
using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;
using zc::test::SharedCounter;
using ReqPtr = std::shared_ptr<P2pRequest>;

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

// Either side of the eager limits (8 KiB shm, 256 KiB tcp) and of tcp's
// control-slot spans (32808 payload bytes in one slot, 65641 in three).
const size_t kSizes[] = {0, 1, 7, 8191, 8193, 32767, 32769, 65641, 262144, 262145, (1u << 20) + 3};
constexpr int kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

// Communicator rank r is Device rank n-1-r: peers and tags are in the
// communicator's terms.
std::vector<int> Reversed(int n) {
  std::vector<int> m(n);
  for (int r = 0; r < n; ++r) m[r] = n - 1 - r;
  return m;
}

class MessengerTest : public ::testing::TestWithParam<const char*> {
 protected:
  zc::test::Env Env(const char* timeout = "30") {
    return {{"ZC_TRANSPORT", GetParam()}, {"ZC_SOCKET_IFNAME", "lo"}, {"ZC_TIMEOUT", timeout}};
  }
};

// Every rank posts all its isends first (both rounds, every size: 16 per
// peer, more than the 8 control slots), then the irecvs in reverse tag
// order, then waits for all in a shuffled order. Eager and rendezvous sizes
// on either side of both eager limits; data depends on sender, receiver,
// size and round.
TEST_P(MessengerTest, ManyInFlightBothWaysReverseTagsAnyOrder) {
  for (int n : {2, 4}) {
    auto res = RunRanks(n, [&](int drank) -> int {
      zc_comm* comm;
      CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
      const int me = n - 1 - drank;
      auto eng = std::make_unique<Messenger>(comm->device.get(), Reversed(n), me, 3);
      const int kRounds = 2;
      auto tag_of = [](int round, int k) { return 100 + round * kNumSizes + k; };
      std::vector<std::vector<uint8_t>> sbufs, rbufs;
      std::vector<ReqPtr> reqs;
      struct Expect { int from, tag; size_t idx; };
      std::vector<Expect> expect;
      for (int round = 0; round < kRounds; ++round)
        for (int k = 0; k < kNumSizes; ++k)
          for (int p = 0; p < n; ++p) {
            if (p == me) continue;
            sbufs.emplace_back(kSizes[k] + 1);
            Fill(sbufs.back().data() + 1, kSizes[k], me, p, tag_of(round, k));
            ReqPtr r;
            zc::Status st = eng->Isend(sbufs.back().data() + 1, kSizes[k], p, tag_of(round, k), &r);
            CHILD_CHECK(st.ok(), "isend: %s", st.message().c_str());
            reqs.push_back(r);
          }
      for (int round = kRounds - 1; round >= 0; --round)
        for (int k = kNumSizes - 1; k >= 0; --k)
          for (int p = 0; p < n; ++p) {
            if (p == me) continue;
            rbufs.emplace_back(kSizes[k] + 1, 0xEE);
            ReqPtr r;
            zc::Status st = eng->Irecv(rbufs.back().data(), kSizes[k], p, tag_of(round, k), &r);
            CHILD_CHECK(st.ok(), "irecv: %s", st.message().c_str());
            expect.push_back({p, tag_of(round, k), rbufs.size() - 1});
            reqs.push_back(r);
          }
      std::vector<ReqPtr> order = reqs;
      std::shuffle(order.begin(), order.end(), std::mt19937(drank + 7));
      for (auto& r : order) {
        zc::Status st = r->Wait(zc::Deadline(60));
        CHILD_CHECK(st.ok(), "wait: %s", st.message().c_str());
        zc::Status t;
        CHILD_CHECK(r->Test(&t) && t.ok(), "test after wait");
      }
      for (auto& e : expect) {
        const auto& b = rbufs[e.idx];
        size_t s = b.size() - 1;
        size_t bad = Check(b.data(), s, e.from, me, e.tag);
        CHILD_CHECK(bad == 0, "%zu bytes from %d (tag %d): %zu wrong", s, e.from, e.tag, bad);
        CHILD_CHECK(b[s] == 0xEE, "wrote past the end (%zu bytes from %d)", s, e.from);
      }
      CHILD_CHECK(eng->pending() == 0, "%zu pending", eng->pending());
      eng.reset();
      CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
      return 0;
    }, Env());
    ASSERT_TRUE(AllOk(res)) << n << " ranks\n" << Describe(res);
  }
}

// Messages of one (peer, tag) match in posting order, eager and rendezvous
// mixed (sizes differ, so a wrong match is a mismatch); the blocking
// context-0 zc::Send/zc::Recv speak with a context-0 messenger.
TEST_P(MessengerTest, SameTagFifoAndBlockingInterop) {
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    zc::Device* dev = comm->device.get();
    auto engp = std::make_unique<Messenger>(dev, std::vector<int>{0, 1, 2}, rank, 0);
    Messenger& eng = *engp;
    const int kMsgs = 24;
    auto size_of = [](int i) { return static_cast<size_t>(i % 3 == 1 ? 50000 + i : 10 + 37 * i); };
    if (rank == 0) {
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<ReqPtr> reqs;
      for (int to = 1; to <= 2; ++to)
        for (int i = 0; i < kMsgs; ++i) {
          bufs.emplace_back(size_of(i));
          Fill(bufs.back().data(), size_of(i), 0, to, i);
          ReqPtr r;
          CHILD_CHECK(eng.Isend(bufs.back().data(), size_of(i), to, 7, &r).ok(), "isend");
          reqs.push_back(r);
          // Posted in bursts, so the progress thread meets them in several turns
          // (pacing that shapes the load, not synchronisation).
          if (i % 4 == 3) usleep(2000);
        }
      for (auto& r : reqs) {
        zc::Status st = r->Wait(zc::Deadline::Never());
        CHILD_CHECK(st.ok(), "isend: %s", st.message().c_str());
      }
      // Blocking, old entry points, against the messenger (both directions).
      std::vector<uint8_t> b(300000);
      Fill(b.data(), 300000, 0, 1, 1000);
      zc::Status st = zc::Send(dev, b.data(), 300000, 1, 8);
      CHILD_CHECK(st.ok(), "zc::Send: %s", st.message().c_str());
      st = zc::Send(dev, b.data(), 100, 1, 8);
      CHILD_CHECK(st.ok(), "zc::Send: %s", st.message().c_str());
      st = zc::Recv(dev, b.data(), 70000, 1, 9);
      CHILD_CHECK(st.ok(), "zc::Recv: %s", st.message().c_str());
      CHILD_CHECK(Check(b.data(), 70000, 1, 0, 1001) == 0, "interop data");
    } else {
      // Receives posted all at once, completed in reverse order.
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<ReqPtr> reqs;
      for (int i = 0; i < kMsgs; ++i) {
        bufs.emplace_back(size_of(i));
        ReqPtr r;
        CHILD_CHECK(eng.Irecv(bufs.back().data(), size_of(i), 0, 7, &r).ok(), "irecv");
        reqs.push_back(r);
      }
      for (int i = kMsgs - 1; i >= 0; --i) {
        zc::Status st = reqs[i]->Wait(zc::Deadline::Never());
        CHILD_CHECK(st.ok(), "irecv %d: %s", i, st.message().c_str());
        CHILD_CHECK(Check(bufs[i].data(), size_of(i), 0, rank, i) == 0, "message %d: wrong data", i);
      }
      if (rank == 1) {
        std::vector<uint8_t> b(300000);
        zc::Status st = eng.Recv(b.data(), 300000, 0, 8);
        CHILD_CHECK(st.ok(), "recv: %s", st.message().c_str());
        CHILD_CHECK(Check(b.data(), 300000, 0, 1, 1000) == 0, "interop data");
        st = eng.Recv(b.data(), 100, 0, 8);
        CHILD_CHECK(st.ok(), "recv: %s", st.message().c_str());
        Fill(b.data(), 70000, 1, 0, 1001);
        st = eng.Send(b.data(), 70000, 0, 9);
        CHILD_CHECK(st.ok(), "send: %s", st.message().c_str());
      }
    }
    engp.reset();  // messengers go before their Device
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// TrySendNow (the send that zc_send records after the fact) sends a small
// message while a shared-memory slot is free and nothing else: once the
// receiver's slots are full, above the eager limit, with a request pending,
// over tcp, or with bad arguments it returns false and sends nothing. What
// it sent and what Send sends after it arrive in order.
TEST_P(MessengerTest, TrySendNowGoesOutAtOnceOrSendsNothing) {
  const bool shm = strcmp(GetParam(), "shm") == 0;
  SharedCounter refused, tried;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    auto engp = std::make_unique<Messenger>(comm->device.get(), std::vector<int>{0, 1}, rank, 5);
    Messenger& eng = *engp;
    constexpr int kTotal = 40;  // more than the receiver's control slots
    uint64_t msg[2] = {};
    if (rank == 0) {
      // Every slot free: what must not go out at once.
      std::vector<uint8_t> big(zc::kEagerLimit + 1);
      CHILD_CHECK(!eng.TrySendNow(big.data(), big.size(), 1, 4), "a rendezvous size went out");
      CHILD_CHECK(!eng.TrySendNow(msg, sizeof(msg), 0, 4), "a send to self went out");
      CHILD_CHECK(!eng.TrySendNow(msg, sizeof(msg), 2, 4), "a send to rank 2 of 2 went out");
      CHILD_CHECK(!eng.TrySendNow(nullptr, 8, 1, 4), "a null buffer went out");
      // A request pending (a receive that rank 1 answers next): nothing may
      // overtake it.
      uint64_t answer = 0;
      ReqPtr pending;
      CHILD_CHECK(eng.Irecv(&answer, sizeof(answer), 1, 77, &pending).ok(), "irecv");
      CHILD_CHECK(!eng.TrySendNow(msg, 0, 1, 78), "a send went out with a request pending");
      refused.Add();
      zc::Status st = pending->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.ok() && answer == 77, "irecv: %s", st.message().c_str());
      // Nothing pending: small messages go out while slots are free.
      int now = 0;
      for (; now < kTotal; ++now) {
        msg[0] = now;
        msg[1] = ~static_cast<uint64_t>(now);
        if (!eng.TrySendNow(msg, sizeof(msg), 1, 4)) break;
      }
      // shm: some went out, then the slots were full; tcp: none (no mapped slots).
      if (shm) CHILD_CHECK(now > 0 && now < kTotal, "%d of %d sent at once", now, kTotal);
      else CHILD_CHECK(now == 0, "%d sent at once over tcp", now);
      tried.Add();
      // The rest through Send, which waits for slots.
      for (int i = now; i < kTotal; ++i) {
        msg[0] = i;
        msg[1] = ~static_cast<uint64_t>(i);
        st = eng.Send(msg, sizeof(msg), 1, 4);
        CHILD_CHECK(st.ok(), "send %d: %s", i, st.message().c_str());
      }
    } else {
      CHILD_CHECK(refused.WaitAtLeast(1, 60), "rank 0 never tried with a request pending");
      const uint64_t answer = 77;
      zc::Status st = eng.Send(&answer, sizeof(answer), 0, 77);
      CHILD_CHECK(st.ok(), "send: %s", st.message().c_str());
      CHILD_CHECK(tried.WaitAtLeast(1, 60), "rank 0 never filled the slots");
      for (int i = 0; i < kTotal; ++i) {
        st = eng.Recv(msg, sizeof(msg), 0, 4);
        CHILD_CHECK(st.ok(), "recv %d: %s", i, st.message().c_str());
        CHILD_CHECK(msg[0] == static_cast<uint64_t>(i) && msg[1] == ~static_cast<uint64_t>(i),
                    "message %d arrived as %llu", i, static_cast<unsigned long long>(msg[0]));
      }
    }
    engp.reset();  // messengers go before their Device
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A lone Isend (the first, or the first after a receive) with nothing
// pending whose message goes out at once (eager, a free shared-memory slot)
// is complete when Isend returns; the next send of a burst, a send behind a
// pending request, or one that finds the slots full queues for the progress
// thread, and every message still arrives in posting order. Over tcp every
// Isend goes through the progress thread.
TEST_P(MessengerTest, IsendWithNothingPendingCompletesAtOnce) {
  const bool shm = strcmp(GetParam(), "shm") == 0;
  SharedCounter posted;
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    auto engp = std::make_unique<Messenger>(comm->device.get(), std::vector<int>{0, 1}, rank, 6);
    Messenger& eng = *engp;
    constexpr int kTotal = 40;  // more than the receiver's control slots
    const size_t big_bytes = 300000;  // rendezvous on both transports
    if (rank == 0) {
      // The first send of this messenger, small, every slot free: on shm it
      // is complete when Isend returns, and no progress thread was started
      // for it.
      uint64_t first[3] = {1, 2, 3};
      ReqPtr r;
      CHILD_CHECK(eng.Isend(&first[0], sizeof(uint64_t), 1, 2, &r).ok(), "isend first");
      if (shm) CHILD_CHECK(r->Test(nullptr), "a lone send not complete when posted");
      CHILD_CHECK(r->Wait(zc::Deadline::Never()).ok(), "first send");
      if (shm) CHILD_CHECK(!eng.progress_started(), "a lone send started the progress thread");
      // Right after it, a send is part of a burst: the progress thread
      // (started now) streams it.
      CHILD_CHECK(eng.Isend(&first[1], sizeof(uint64_t), 1, 2, &r).ok(), "isend second");
      CHILD_CHECK(eng.progress_started(), "a burst's second send did not start the progress thread");
      CHILD_CHECK(r->Wait(zc::Deadline::Never()).ok(), "second send");
      // After a receive, a send is lone again.
      uint64_t reply = 0;
      CHILD_CHECK(eng.Irecv(&reply, sizeof(reply), 1, 5, &r).ok(), "irecv reply");
      CHILD_CHECK(r->Wait(zc::Deadline::Never()).ok() && reply == 55, "reply %llu",
                  static_cast<unsigned long long>(reply));
      CHILD_CHECK(eng.Isend(&first[2], sizeof(uint64_t), 1, 2, &r).ok(), "isend third");
      if (shm) CHILD_CHECK(r->Test(nullptr), "a send after a receive not complete when posted");
      CHILD_CHECK(r->Wait(zc::Deadline::Never()).ok(), "third send");
      // A rendezvous send stays pending until rank 1 reads it; the small
      // send after it must not overtake it (rank 1 checks the order).
      std::vector<uint8_t> big(big_bytes);
      Fill(big.data(), big_bytes, 0, 1, 1);
      uint64_t small = 7;
      ReqPtr rb, rs;
      CHILD_CHECK(eng.Isend(big.data(), big_bytes, 1, 3, &rb).ok(), "isend big");
      CHILD_CHECK(eng.Isend(&small, sizeof(small), 1, 3, &rs).ok(), "isend small");
      CHILD_CHECK(rb->Wait(zc::Deadline::Never()).ok() && rs->Wait(zc::Deadline::Never()).ok(),
                  "sends behind one another");
      // Nothing pending: small sends complete as they are posted while slots
      // are free (rank 1 receives only once all are posted).
      std::vector<uint64_t> msgs(kTotal);
      std::vector<ReqPtr> reqs(kTotal);
      int at_once = 0;
      for (int i = 0; i < kTotal; ++i) {
        msgs[i] = 1000 + i;
        CHILD_CHECK(eng.Isend(&msgs[i], sizeof(uint64_t), 1, 4, &reqs[i]).ok(), "isend %d", i);
        if (reqs[i]->Test(nullptr) && at_once == i) ++at_once;
      }
      posted.Add();
      if (shm) CHILD_CHECK(at_once > 0 && at_once < kTotal, "%d of %d complete when posted", at_once, kTotal);
      for (auto& r : reqs) CHILD_CHECK(r->Wait(zc::Deadline::Never()).ok(), "isend");
    } else {
      for (uint64_t i = 1; i <= 3; ++i) {
        uint64_t m = 0;
        CHILD_CHECK(eng.Recv(&m, sizeof(m), 0, 2).ok() && m == i, "first message %llu arrived as %llu",
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(m));
        if (i == 2) {
          const uint64_t reply = 55;
          CHILD_CHECK(eng.Send(&reply, sizeof(reply), 0, 5).ok(), "send reply");
        }
      }
      std::vector<uint8_t> big(big_bytes);
      uint64_t small = 0;
      CHILD_CHECK(eng.Recv(big.data(), big_bytes, 0, 3).ok(), "recv big");
      CHILD_CHECK(Check(big.data(), big_bytes, 0, 1, 1) == 0, "big message wrong");
      CHILD_CHECK(eng.Recv(&small, sizeof(small), 0, 3).ok() && small == 7, "small after big: %llu",
                  static_cast<unsigned long long>(small));
      CHILD_CHECK(posted.WaitAtLeast(1, 60), "rank 0 never posted its sends");
      for (int i = 0; i < kTotal; ++i) {
        uint64_t m = 0;
        CHILD_CHECK(eng.Recv(&m, sizeof(m), 0, 4).ok(), "recv %d", i);
        CHILD_CHECK(m == static_cast<uint64_t>(1000 + i), "message %d arrived as %llu", i,
                    static_cast<unsigned long long>(m));
      }
    }
    engp.reset();  // messengers go before their Device
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Two messengers (contexts 1 and 2) over one Device exchange the same tags from
// two threads at once, while a third thread runs allreduces over the same
// Device: no message crosses from one context to the other.
TEST_P(MessengerTest, ContextsDoNotCrossTalk) {
  const int n = 3;
  auto res = RunRanks(n, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    zc::Device* dev = comm->device.get();
    std::vector<int> ident = {0, 1, 2};
    auto ap = std::make_unique<Messenger>(dev, ident, rank, 1);
    auto bp = std::make_unique<Messenger>(dev, Reversed(n), n - 1 - rank, 2);
    Messenger &a = *ap, &b = *bp;
    std::string err[3];
    auto exchange = [&](Messenger* eng, int which) {
      const int me = eng->rank();
      for (int iter = 0; iter < 10; ++iter) {
        std::vector<std::vector<uint8_t>> sb, rb;
        std::vector<ReqPtr> reqs;
        std::vector<std::pair<int, int>> from_tag;
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          for (int t = 0; t < 3; ++t) {
            // Same tags and sizes in both contexts; the data says which.
            size_t s = t == 2 ? 40000 : 100 + t;
            uint64_t seq = which * 1000 + iter * 10 + t;
            sb.emplace_back(s);
            Fill(sb.back().data(), s, me, p, seq);
            ReqPtr r;
            zc::Status st = eng->Isend(sb.back().data(), s, p, t, &r);
            if (!st.ok()) { err[which] = st.message(); return; }
            reqs.push_back(r);
            rb.emplace_back(s);
            st = eng->Irecv(rb.back().data(), s, p, t, &r);
            if (!st.ok()) { err[which] = st.message(); return; }
            reqs.push_back(r);
            from_tag.push_back({p, t});
          }
        }
        for (auto& r : reqs) {
          zc::Status st = r->Wait(zc::Deadline::Never());
          if (!st.ok()) { err[which] = st.message(); return; }
        }
        for (size_t i = 0; i < rb.size(); ++i) {
          uint64_t seq = which * 1000 + iter * 10 + from_tag[i].second;
          if (Check(rb[i].data(), rb[i].size(), from_tag[i].first, me, seq)) {
            err[which] = "context " + std::to_string(which) + ": wrong data from " +
                         std::to_string(from_tag[i].first);
            return;
          }
        }
      }
    };
    std::thread t1(exchange, &a, 1), t2(exchange, &b, 2);
    std::thread t3([&] {
      std::vector<float> x(1000, 1.0f);
      for (int i = 0; i < 20; ++i) {
        if (zc_allreduce(comm, x.data(), x.data(), 1000, ZC_FLOAT32, ZC_SUM) != ZC_OK) {
          err[0] = std::string("allreduce: ") + zc_last_error(comm);
          return;
        }
        for (auto& v : x) v = 1.0f;
      }
    });
    t1.join();
    t2.join();
    t3.join();
    for (auto& e : err) CHILD_CHECK(e.empty(), "%s", e.c_str());
    ap.reset();
    bp.reset();
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// Sizes differ: the receiver fails with both sizes, peer and tag; a
// rendezvous sender fails too, an eager one has completed. The messenger stays usable.
TEST_P(MessengerTest, SizeMismatch) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    auto engp = std::make_unique<Messenger>(comm->device.get(), std::vector<int>{0, 1}, rank, 5);
    Messenger& eng = *engp;
    std::vector<uint8_t> buf(200000);
    ReqPtr r1, r2, r3;
    if (rank == 0) {
      CHILD_CHECK(eng.Isend(buf.data(), 300000, 1, 3, &r1).ok(), "isend");
      CHILD_CHECK(eng.Isend(buf.data(), 10, 1, 4, &r2).ok(), "isend");
      zc::Status st = r1->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.code() == ZC_ERR_MISMATCH, "rendezvous sender: %s", st.message().c_str());
      CHILD_CHECK(st.message().find("300000") != std::string::npos &&
                      st.message().find("299999") != std::string::npos &&
                      st.message().find("peer 1") != std::string::npos &&
                      st.message().find("tag 3") != std::string::npos,
                  "message: %s", st.message().c_str());
      st = r2->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.ok(), "eager sender: %s", st.message().c_str());
      Fill(buf.data(), 50000, 0, 1, 9);
      st = eng.Send(buf.data(), 50000, 1, 9);
      CHILD_CHECK(st.ok(), "send after mismatch: %s", st.message().c_str());
    } else {
      CHILD_CHECK(eng.Irecv(buf.data(), 299999, 0, 3, &r1).ok(), "irecv");
      CHILD_CHECK(eng.Irecv(buf.data(), 11, 0, 4, &r2).ok(), "irecv");
      zc::Status st = r1->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.code() == ZC_ERR_MISMATCH, "receiver: %s", st.message().c_str());
      CHILD_CHECK(st.message().find("300000") != std::string::npos &&
                      st.message().find("299999") != std::string::npos &&
                      st.message().find("peer 0") != std::string::npos &&
                      st.message().find("tag 3") != std::string::npos,
                  "message: %s", st.message().c_str());
      st = r2->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.code() == ZC_ERR_MISMATCH && st.message().find("11 bytes") != std::string::npos &&
                      st.message().find("10 bytes") != std::string::npos,
                  "eager receiver: %s", st.message().c_str());
      st = eng.Recv(buf.data(), 50000, 0, 9);
      CHILD_CHECK(st.ok(), "recv after mismatch: %s", st.message().c_str());
      CHILD_CHECK(Check(buf.data(), 50000, 0, 1, 9) == 0, "wrong data");
    }
    engp.reset();
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, Env());
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// ZC_TIMEOUT=2: a receive and a rendezvous send whose peer never posts fail
// with ZC_ERR_TIMEOUT naming operation, peer, tag and size; a messenger
// destroyed with pending requests completes them with ZC_ERR_ABORTED.
TEST_P(MessengerTest, TimeoutAndDestroyWithPending) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    const int peer = 1 - rank;
    std::vector<uint8_t> big(1 << 20), small(16);
    ReqPtr rr, rs, pend1, pend2;
    {
      Messenger eng(comm->device.get(), {0, 1}, rank, 6);
      auto t0 = std::chrono::steady_clock::now();
      CHILD_CHECK(eng.Irecv(small.data(), 16, peer, 40 + rank, &rr).ok(), "irecv");
      CHILD_CHECK(eng.Isend(big.data(), big.size(), peer, 50 + rank, &rs).ok(), "isend");
      zc::Status st = rr->Wait(zc::Deadline::Never());
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      CHILD_CHECK(st.code() == ZC_ERR_TIMEOUT, "irecv: %s", st.message().c_str());
      std::string want = "irecv of 16 bytes from peer " + std::to_string(peer) + " (tag " +
                         std::to_string(40 + rank) + ")";
      CHILD_CHECK(st.message().find(want) != std::string::npos, "message: %s", st.message().c_str());
      CHILD_CHECK(secs > 1.5 && secs < 5, "timed out after %.1f s", secs);
      st = rs->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.code() == ZC_ERR_TIMEOUT, "isend: %s", st.message().c_str());
      want = "isend of 1048576 bytes to peer " + std::to_string(peer) + " (tag " +
             std::to_string(50 + rank) + ")";
      CHILD_CHECK(st.message().find(want) != std::string::npos, "message: %s", st.message().c_str());
      CHILD_CHECK(eng.Irecv(small.data(), 16, peer, 60, &pend1).ok(), "irecv");
      CHILD_CHECK(eng.Isend(big.data(), big.size(), peer, 61 + rank, &pend2).ok(), "isend");
      CHILD_CHECK(!pend1->Test(nullptr), "completed without a sender");
    }
    zc::Status st;
    CHILD_CHECK(pend1->Test(&st) && st.code() == ZC_ERR_ABORTED, "pending irecv: %s", st.message().c_str());
    CHILD_CHECK(pend2->Test(&st) && st.code() == ZC_ERR_ABORTED, "pending isend: %s", st.message().c_str());
    // Arguments are checked at once.
    {
      Messenger eng2(comm->device.get(), {0, 1}, rank, 7);
      ReqPtr r;
      CHILD_CHECK(eng2.Isend(big.data(), 1, rank, 0, &r).code() == ZC_ERR_INVALID_ARG, "self");
      CHILD_CHECK(eng2.Irecv(big.data(), 1, 2, 0, &r).code() == ZC_ERR_INVALID_ARG, "range");
      CHILD_CHECK(eng2.Irecv(nullptr, 1, peer, 0, &r).code() == ZC_ERR_INVALID_ARG, "null");
    }
    zc_finalize(comm);
    return 0;
  }, Env("2"));
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

// A rank killed while others have requests pending with it: they fail with
// ZC_ERR_PEER_LOST within a few seconds.
TEST_P(MessengerTest, PeerKilled) {
  SharedCounter posted, checked;
  auto res = RunRanks(3, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    if (rank == 2) {
      // Dies once both survivors have their requests with it pending.
      CHILD_CHECK(posted.WaitAtLeast(2, 30), "the survivors never posted their requests");
      raise(SIGKILL);
    }
    auto engp = std::make_unique<Messenger>(comm->device.get(), std::vector<int>{0, 1, 2}, rank, 8);
    Messenger& eng = *engp;
    std::vector<uint8_t> big(1 << 20), small(16);
    ReqPtr rr, rs;
    auto t0 = std::chrono::steady_clock::now();
    CHILD_CHECK(eng.Irecv(small.data(), 16, 2, 1, &rr).ok(), "irecv");
    CHILD_CHECK(eng.Isend(big.data(), big.size(), 2, 1, &rs).ok(), "isend");
    posted.Add();
    for (auto* r : {&rr, &rs}) {
      zc::Status st = (*r)->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.code() == ZC_ERR_PEER_LOST, "got %s", st.message().c_str());
      CHILD_CHECK(st.message().find("peer 2") != std::string::npos, "message: %s", st.message().c_str());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHILD_CHECK(secs < 5.0, "took %.1f s", secs);
    engp.reset();
    // Finalize after the other survivor's check: a failed finalize alerts the
    // job, which would then be the cause that survivor reports.
    checked.Add();
    CHILD_CHECK(checked.WaitAtLeast(2, 30), "the other survivor never finished its check");
    zc_finalize(comm);
    return 0;
  }, Env("60"), 60);
  ASSERT_EQ(res[2].signal, SIGKILL) << Describe(res);
  ASSERT_EQ(res[0].exit_code, 0) << Describe(res);
  ASSERT_EQ(res[1].exit_code, 0) << Describe(res);
}

INSTANTIATE_TEST_SUITE_P(Transports, MessengerTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

// Cross-memory attach refused: rendezvous from user memory goes through the
// kAckNeedStaged round (a pool copy's meta in the ack class), with several
// messages of one tag in flight, and between the messenger and zc::Send/Recv.
TEST(MessengerShm, StagedPathWhenCmaRefused) {
  auto res = RunRanks(2, [&](int rank) -> int {
    zc_comm* comm;
    CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
    zc::Device* dev = comm->device.get();
    auto eng = std::make_unique<Messenger>(dev, std::vector<int>{0, 1}, rank, 0);
    const int kMsgs = 4;
    auto size_of = [](int i) { return static_cast<size_t>((1u << 20) + 5 + i); };
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<ReqPtr> reqs;
    for (int i = 0; i < kMsgs; ++i) {
      bufs.emplace_back(size_of(i) + 3);
      ReqPtr r;
      if (rank == 0) {
        Fill(bufs.back().data() + 3, size_of(i), 0, 1, i);
        CHILD_CHECK(eng->Isend(bufs.back().data() + 3, size_of(i), 1, 2, &r).ok(), "isend");
      } else {
        CHILD_CHECK(eng->Irecv(bufs.back().data() + 3, size_of(i), 0, 2, &r).ok(), "irecv");
      }
      reqs.push_back(r);
    }
    for (auto& r : reqs) {
      zc::Status st = r->Wait(zc::Deadline::Never());
      CHILD_CHECK(st.ok(), "wait: %s", st.message().c_str());
    }
    if (rank == 1)
      for (int i = 0; i < kMsgs; ++i)
        CHILD_CHECK(Check(bufs[i].data() + 3, size_of(i), 0, 1, i) == 0, "message %d: wrong data", i);
    // Engine to blocking and back.
    std::vector<uint8_t>& b = bufs[0];
    const size_t s = size_of(0);
    zc::Status st;
    if (rank == 0) {
      Fill(b.data() + 3, s, 0, 1, 77);
      st = eng->Send(b.data() + 3, s, 1, 3);
      CHILD_CHECK(st.ok(), "messenger send: %s", st.message().c_str());
      st = zc::Recv(dev, b.data() + 3, s, 1, 4);
      CHILD_CHECK(st.ok(), "zc::Recv: %s", st.message().c_str());
      CHILD_CHECK(Check(b.data() + 3, s, 1, 0, 78) == 0, "wrong data");
    } else {
      st = zc::Recv(dev, b.data() + 3, s, 0, 3);
      CHILD_CHECK(st.ok(), "zc::Recv: %s", st.message().c_str());
      CHILD_CHECK(Check(b.data() + 3, s, 0, 1, 77) == 0, "wrong data");
      Fill(b.data() + 3, s, 1, 0, 78);
      st = eng->Send(b.data() + 3, s, 0, 4);
      CHILD_CHECK(st.ok(), "messenger send: %s", st.message().c_str());
    }
    eng.reset();
    CHILD_CHECK(zc_finalize(comm) == ZC_OK, "finalize: %s", zc_last_error(nullptr));
    return 0;
  }, {{"ZC_TRANSPORT", "shm"}, {"ZC_SHM_CMA", "off"}, {"ZC_TIMEOUT", "30"}});
  ASSERT_TRUE(AllOk(res)) << Describe(res);
}

}  // namespace
