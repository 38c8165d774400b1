// The tcp transport's accept side under attack (issue 17): idle, silent or
// garbage connections to a rank's data port while the job connects must
// cost the real peers nothing. Two transports (ranks 0 and 1) run in this
// process over a fake host; after they exchange addresses, and before rank 0
// connects, the test opens hostile connections to rank 1's port, so they sit
// first in its accept queue.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/config.h"
#include "common/socket.h"
#include "p2p/tcp/tcp_transport.h"
#include "fake_transport_host.h"

namespace zc {
namespace {

// In-process address exchange between the two fake ranks (the Device's
// "zc.connect"), with a hook that runs once every rank has posted and
// before any returns.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> values;
  int posted = 0;
  bool released = false;
  std::function<void(const std::vector<std::string>&)> hook;

  void Run(int rank, const std::string& mine, std::vector<std::string>* all) {
    std::unique_lock<std::mutex> lock(mu);
    values[rank] = mine;
    if (++posted == static_cast<int>(values.size())) {
      if (hook) hook(values);
      released = true;
      cv.notify_all();
    }
    cv.wait(lock, [&] { return released; });
    *all = values;
  }
};

using FakeHost = testing_fakes::FakeTransportHost;

TransportSetup Setup(int rank, int size) {
  TransportSetup s;
  s.rank = s.config.rank = rank;
  s.size = s.config.size = size;
  s.config.timeout_s = 60;
  s.config.socket_ifname = "lo";
  s.config.sockets_per_peer = 2;
  s.config.num_cqs = 1;
  s.job_key = "job-key";
  return s;
}

// Listen, exchange the addresses, connect: what Device::ConnectTransports does.
Status ConnectRank(Transport* t, int rank, int peer, Exchange* ex) {
  LinkPlan plan;
  plan.peers = {peer};
  std::string mine;
  ZC_RETURN_IF_ERROR(t->Listen(plan, &mine));
  std::vector<std::string> all;
  ex->Run(rank, mine, &all);
  return t->Connect(all);
}

enum class Hostile { kIdle, kGarbage, kPartialHello };

// Connects the two ranks with `n` hostile connections queued at rank 1
// first; returns the seconds rank 0's and rank 1's Connect took (the larger).
double ConnectUnderAttack(int n, Hostile kind, Status* st0, Status* st1) {
  Exchange ex;
  ex.values.resize(2);
  std::vector<net::ScopedFd> hostile;
  ex.hook = [&](const std::vector<std::string>& addrs) {
    std::string host;
    int port = 0;
    if (!net::ParseHostPort(addrs[1], &host, &port).ok()) return;
    for (int i = 0; i < n; ++i) {
      int fd = -1;
      // connect() returns once the kernel has queued the connection: these
      // are ahead of rank 0's in rank 1's accept queue.
      if (!net::Connect(host, port, Deadline(10), &fd).ok()) return;
      hostile.emplace_back(fd);
      if (kind == Hostile::kGarbage) {
        std::string junk(net::AuthHandshake::kHelloBytes, 'G');
        // The server may close on us at any byte: that is what is tested.
        IgnoreError(net::SendAll(fd, junk.data(), junk.size(), Deadline(5)), "hostile client");
      } else if (kind == Hostile::kPartialHello) {
        net::AuthHandshake hs(net::AuthRole::kClient, "not-the-key");
        std::string hello = hs.Start();
        IgnoreError(net::SendAll(fd, hello.data(), 20, Deadline(5)), "hostile client");
      }
    }
  };
  FakeHost h0, h1;
  std::unique_ptr<Transport> t0, t1;
  EXPECT_TRUE(CreateTcpTransport(&h0, Setup(0, 2), &t0).ok());
  EXPECT_TRUE(CreateTcpTransport(&h1, Setup(1, 2), &t1).ok());
  auto start = std::chrono::steady_clock::now();
  double s0 = 0, s1 = 0;
  std::thread r1([&] {
    *st1 = ConnectRank(t1.get(), 1, 0, &ex);
    s1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  *st0 = ConnectRank(t0.get(), 0, 1, &ex);
  s0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r1.join();
  t0->Shutdown();
  t1->Shutdown();
  return std::max(s0, s1);
}

TEST(TcpAccept, IdleConnectionsDoNotDelayTheJob) {
  for (int n : {0, 1, 3, 12}) {
    Status st0, st1;
    double s = ConnectUnderAttack(n, Hostile::kIdle, &st0, &st1);
    printf("%2d idle connection(s) at rank 1's data port: connected in %.3f s\n", n, s);
    ASSERT_TRUE(st0.ok()) << st0.message();
    ASSERT_TRUE(st1.ok()) << st1.message();
    EXPECT_LT(s, 5.0) << n << " idle connections";
  }
}

TEST(TcpAccept, GarbageAndPartialHellosDoNotDelayTheJob) {
  for (Hostile kind : {Hostile::kGarbage, Hostile::kPartialHello}) {
    Status st0, st1;
    double s = ConnectUnderAttack(20, kind, &st0, &st1);
    printf("20 %s connections: connected in %.3f s\n",
           kind == Hostile::kGarbage ? "garbage" : "partial-hello", s);
    ASSERT_TRUE(st0.ok()) << st0.message();
    ASSERT_TRUE(st1.ok()) << st1.message();
    EXPECT_LT(s, 5.0);
  }
}

// More strangers than the accept side keeps pending: the oldest are
// dropped, the job still connects.
TEST(TcpAccept, ACrowdOfStrangersIsShed) {
  Status st0, st1;
  double s = ConnectUnderAttack(300, Hostile::kIdle, &st0, &st1);
  printf("300 idle connections: connected in %.3f s\n", s);
  ASSERT_TRUE(st0.ok()) << st0.message();
  ASSERT_TRUE(st1.ok()) << st1.message();
  EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace zc
