// The store refuses strangers (wrong key, garbage, truncated or silent
// handshakes) and counts them, while an authenticated client keeps working.
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "bootstrap/store_client.h"
#include "bootstrap/store_server.h"
#include "common/auth.h"
#include "common/socket.h"

namespace zc {
namespace {

const char* kKey = "the-real-job-key";

class StoreAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreServer::Options o;
    o.bind_host = "127.0.0.1";
    o.job_key = kKey;
    o.auth_timeout_s = 0.5;  // short, so the silent client is dropped quickly
    Status st = StoreServer::Start(o, &server_);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(net::ParseHostPort(server_->address(), &host_, &port_).ok());
  }
  net::ScopedFd Raw() {
    int fd = -1;
    EXPECT_TRUE(net::Connect(host_, port_, Deadline(10), &fd).ok());
    return net::ScopedFd(fd);
  }
  // Waits (bounded) until the server has refused `n` connections.
  bool WaitRefused(uint64_t n) {
    Deadline dl(20);
    while (server_->refused_connections() < n && !dl.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return server_->refused_connections() == n;
  }
  // True when the server closes fd (EOF or reset) before the deadline.
  static bool ServerCloses(int fd) {
    char b[256];
    Status st;
    do st = net::RecvAll(fd, b, 1, Deadline(20)); while (st.ok());
    return st.code() == ZC_ERR_PEER_LOST;
  }
  std::unique_ptr<StoreServer> server_;
  std::string host_;
  int port_ = 0;
};

TEST_F(StoreAuthTest, WrongKeyIsRefused) {
  std::unique_ptr<StoreClient> c;
  Status st = StoreClient::Connect(server_->address(), "not-the-key",
                                   Deadline(10), &c);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("authentication failed"), std::string::npos)
      << st.message();
  EXPECT_FALSE(c);
  EXPECT_TRUE(WaitRefused(1));
}

TEST_F(StoreAuthTest, StrangersAreRefusedWhileAGoodClientWorks) {
  std::unique_ptr<StoreClient> good;
  ASSERT_TRUE(StoreClient::Connect(server_->address(), kKey, Deadline(10), &good).ok());

  // 1. Silent: connects and says nothing (dropped after auth_timeout_s).
  net::ScopedFd silent = Raw();
  // 2. Garbage of the right size for a hello.
  net::ScopedFd garbage = Raw();
  std::string junk(net::AuthHandshake::kHelloBytes, '\x5a');
  ASSERT_TRUE(net::SendAll(garbage.get(), junk.data(), junk.size(), Deadline(5)).ok());
  // 3. Truncated hello, then the stranger waits (times out on the server).
  net::ScopedFd truncated = Raw();
  net::AuthHandshake hs(net::AuthRole::kClient, kKey);
  std::string hello = hs.Start();
  ASSERT_TRUE(net::SendAll(truncated.get(), hello.data(), 11, Deadline(5)).ok());
  // 4. Truncated hello followed by a hang-up.
  {
    net::ScopedFd hangup = Raw();
    ASSERT_TRUE(net::SendAll(hangup.get(), hello.data(), 30, Deadline(5)).ok());
  }
  // 5. An HTTP request (longer than a hello, wrong magic).
  net::ScopedFd http = Raw();
  std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: probe\r\n\r\n";
  ASSERT_TRUE(net::SendAll(http.get(), get.data(), get.size(), Deadline(5)).ok());

  // While all of that is pending, the good client is served at once.
  for (int i = 0; i < 20; ++i) {
    std::string v = std::string(static_cast<size_t>(i * 3 + 1), 'a' + i % 26);
    ASSERT_TRUE(good->Set(Format("k%d", i), v).ok());
    std::string got;
    ASSERT_TRUE(good->Get(Format("k%d", i), &got, 5).ok());
    ASSERT_EQ(got, v);
  }

  EXPECT_TRUE(ServerCloses(garbage.get()));
  EXPECT_TRUE(ServerCloses(http.get()));
  EXPECT_TRUE(ServerCloses(silent.get()));
  EXPECT_TRUE(ServerCloses(truncated.get()));
  EXPECT_TRUE(WaitRefused(5)) << server_->refused_connections();

  // And a new good client still gets in afterwards.
  std::unique_ptr<StoreClient> late;
  ASSERT_TRUE(StoreClient::Connect(server_->address(), kKey, Deadline(10), &late).ok());
  std::string got;
  ASSERT_TRUE(late->Get("k19", &got, 5).ok());
  EXPECT_EQ(got.size(), 58u);
  EXPECT_EQ(server_->refused_connections(), 5u);
}

TEST_F(StoreAuthTest, ManyStrangersDoNotBlockGoodClients) {
  std::vector<net::ScopedFd> strangers;
  for (int i = 0; i < 40; ++i) strangers.push_back(Raw());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::unique_ptr<StoreClient> c;
      if (!StoreClient::Connect(server_->address(), kKey, Deadline(10), &c).ok()) return;
      int64_t v;
      if (c->Add("n", t + 1, &v).ok()) ++ok;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_TRUE(WaitRefused(40));
}

}  // namespace
}  // namespace zc
