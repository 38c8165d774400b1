// Key-value store: set/get/wait/add/check, binary values, timeouts, limits,
// many concurrent clients, and a server that survives bad clients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bootstrap/store_client.h"
#include "bootstrap/store_protocol.h"
#include "bootstrap/store_server.h"
#include "common/auth.h"
#include "common/socket.h"

namespace zc {
namespace {

const char* kKey = "test-job-key";

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = StoreServer::Start("127.0.0.1", 0, kKey, &server_);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  std::unique_ptr<StoreClient> NewClient() {
    std::unique_ptr<StoreClient> c;
    Status st = StoreClient::Connect(server_->address(), kKey, Deadline(10), &c);
    EXPECT_TRUE(st.ok()) << st.message();
    return c;
  }
  // Until the server holds n waiting GET/WAIT requests: a test acts while a
  // request is pending, not after a guessed delay. Polls the server's counter.
  bool WaitForWaiters(uint64_t n, double timeout_s = 10) {
    Deadline dl(timeout_s);
    while (server_->num_waiters() != n) {
      if (dl.expired()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  std::unique_ptr<StoreServer> server_;
};

std::string Value(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 29 + seed * 7) & 0xff);
  return s;
}

TEST_F(StoreTest, AddressIsUsable) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(server_->address(), Format("127.0.0.1:%d", server_->port()));
}

TEST_F(StoreTest, SetGetBinaryValuesOfOddSizes) {
  auto c = NewClient();
  ASSERT_TRUE(c);
  std::vector<std::pair<std::string, std::string>> kv = {
      {"a", ""},
      {std::string("k\0ey", 4), std::string("v\0\xff\x01", 4)},
      {std::string(4096, 'K'), Value(1, 1)},
      {"big", Value((5u << 20) + 3, 2)},
      {"x/y/z", Value(4093, 3)},
  };
  for (auto& [k, v] : kv) ASSERT_TRUE(c->Set(k, v).ok()) << k.size();
  for (auto& [k, v] : kv) {
    std::string got;
    Status st = c->Get(k, &got, 5);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(got, v) << "key of " << k.size() << " bytes";
  }
  ASSERT_TRUE(c->Set("a", "second").ok());  // overwrite
  std::string got;
  ASSERT_TRUE(c->Get("a", &got, 0).ok());
  EXPECT_EQ(got, "second");
}

TEST_F(StoreTest, LimitsAreCheckedOnTheClient) {
  auto c = NewClient();
  std::string v;
  EXPECT_EQ(c->Set("", "x").code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(c->Set(std::string(4097, 'k'), "x").code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(c->Set("k", std::string((64u << 20) + 1, 'v')).code(),
            ZC_ERR_INVALID_ARG);
  EXPECT_EQ(c->Get("k", &v, -1).code(), ZC_ERR_INVALID_ARG);
  // The connection is still fine.
  EXPECT_TRUE(c->Set("k", "ok").ok());
}

TEST_F(StoreTest, GetWaitsForALaterSet) {
  auto reader = NewClient();
  auto writer = NewClient();
  std::thread t([&] {
    EXPECT_TRUE(WaitForWaiters(1)) << "the GET never reached the server";
    EXPECT_TRUE(writer->Set("late", "value-17").ok());
  });
  std::string got;
  Status st = reader->Get("late", &got, 20);
  t.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got, "value-17");
}

TEST_F(StoreTest, GetTimesOutNamingTheKeyAndConnectionSurvives) {
  auto c = NewClient();
  std::string got;
  Status st = c->Get("never-set-key", &got, 0.2);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("never-set-key"), std::string::npos) << st.message();
  st = c->Get("also-missing", &got, 0);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT);
  ASSERT_TRUE(c->Set("after", "1").ok());
  ASSERT_TRUE(c->Get("after", &got, 1).ok());
  EXPECT_EQ(got, "1");
}

TEST_F(StoreTest, WaitForManyKeys) {
  auto waiter = NewClient();
  auto writer = NewClient();
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) keys.push_back(Format("w%d", i * i));
  keys.push_back("w0");  // duplicates are fine
  std::thread t([&] {
    EXPECT_TRUE(WaitForWaiters(1)) << "the WAIT never reached the server";
    for (int i = 6; i >= 0; --i)
      EXPECT_TRUE(writer->Set(Format("w%d", i * i), "x").ok());
  });
  Status st = waiter->Wait(keys, 20);
  t.join();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(waiter->Wait({}, 0).ok());

  st = waiter->Wait({"w1", "missing-a", "missing-b"}, 0.2);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("missing-a"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("missing-b"), std::string::npos);
  EXPECT_EQ(st.message().find("'w1'"), std::string::npos);
}

TEST_F(StoreTest, AddAndCheck) {
  auto c = NewClient();
  bool exists = true;
  ASSERT_TRUE(c->Check("ctr", &exists).ok());
  EXPECT_FALSE(exists);
  int64_t v = 0;
  ASSERT_TRUE(c->Add("ctr", 5, &v).ok());
  EXPECT_EQ(v, 5);
  ASSERT_TRUE(c->Add("ctr", -12, &v).ok());
  EXPECT_EQ(v, -7);
  ASSERT_TRUE(c->Add("ctr", 0, &v).ok());
  EXPECT_EQ(v, -7);
  ASSERT_TRUE(c->Check("ctr", &exists).ok());
  EXPECT_TRUE(exists);
  std::string text;
  ASSERT_TRUE(c->Get("ctr", &text, 0).ok());
  EXPECT_EQ(text, "-7");  // counters are decimal text
  ASSERT_TRUE(c->Set("notnum", "12abc").ok());
  EXPECT_EQ(c->Add("notnum", 1, &v).code(), ZC_ERR_INVALID_ARG);
  ASSERT_TRUE(c->Set("max", std::to_string(INT64_MAX)).ok());
  EXPECT_EQ(c->Add("max", 1, &v).code(), ZC_ERR_INVALID_ARG);
  ASSERT_TRUE(c->Add("ctr", 1, &v).ok());  // still usable
  EXPECT_EQ(v, -6);
}

TEST_F(StoreTest, SixteenConcurrentClients) {
  constexpr int kClients = 16, kKeys = 5;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<StoreClient> c;
      Status st = StoreClient::Connect(server_->address(), kKey, Deadline(20), &c);
      if (!st.ok()) { ++failures; ADD_FAILURE() << st.message(); return; }
      for (int k = 0; k < kKeys; ++k) {
        if (!c->Set(Format("%d/%d", t, k),
                    Value(static_cast<size_t>(t * 101 + k * 13 + 1), t + k)).ok())
          ++failures;
      }
      int64_t v;
      if (!c->Add("arrivals", t + 1, &v).ok()) ++failures;
      // Read every other client's keys, waiting for those not yet written.
      for (int o = 0; o < kClients; ++o) {
        for (int k = 0; k < kKeys; ++k) {
          std::string got;
          Status g = c->Get(Format("%d/%d", o, k), &got, 30);
          if (!g.ok() || got != Value(static_cast<size_t>(o * 101 + k * 13 + 1), o + k)) {
            ++failures;
            ADD_FAILURE() << "client " << t << " key " << o << "/" << k << ": "
                          << g.message();
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto c = NewClient();
  int64_t total = 0;
  ASSERT_TRUE(c->Add("arrivals", 0, &total).ok());
  EXPECT_EQ(total, kClients * (kClients + 1) / 2);
}

TEST_F(StoreTest, SharedClientAcrossThreads) {
  auto c = NewClient();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        int64_t v;
        EXPECT_TRUE(c->Add("shared", t + 1, &v).ok());
        EXPECT_TRUE(c->Set(Format("s%d", t), Value(i + 1, t)).ok());
      }
    });
  for (auto& th : threads) th.join();
  int64_t v = 0;
  ASSERT_TRUE(c->Add("shared", 0, &v).ok());
  EXPECT_EQ(v, 50 * (1 + 2 + 3 + 4));
}

// Opens an authenticated raw connection to speak the protocol by hand.
net::ScopedFd RawAuthed(const StoreServer& s) {
  std::string host;
  int port = 0, fd = -1;
  EXPECT_TRUE(net::ParseHostPort(s.address(), &host, &port).ok());
  EXPECT_TRUE(net::Connect(host, port, Deadline(10), &fd).ok());
  Status st = net::AuthClient(fd, kKey, Deadline(10));
  EXPECT_TRUE(st.ok()) << st.message();
  return net::ScopedFd(fd);
}

bool ClosedByServer(int fd) {
  char b[64];
  Status st;
  do st = net::RecvAll(fd, b, 1, Deadline(10)); while (st.ok());
  return st.code() == ZC_ERR_PEER_LOST;
}

TEST_F(StoreTest, MalformedMessagesCloseOnlyThatClient) {
  auto good = NewClient();
  ASSERT_TRUE(good->Set("before", "1").ok());
  struct Bad { uint32_t op; uint32_t key_len; uint32_t value_len; };
  for (Bad b : {Bad{99, 1, 0}, Bad{store::kSet, 5000, 1},
                Bad{store::kSet, 1, (64u << 20) + 1}, Bad{0, 0, 0}}) {
    net::ScopedFd raw = RawAuthed(*server_);
    store::Header h;
    h.op_or_status = b.op;
    h.key_len = b.key_len;
    h.value_len = b.value_len;
    uint8_t hb[store::kHeaderBytes];
    store::EncodeHeader(h, hb);
    ASSERT_TRUE(net::SendAll(raw.get(), hb, sizeof(hb), Deadline(5)).ok());
    EXPECT_TRUE(ClosedByServer(raw.get())) << "op " << b.op;
  }
  {
    // A WAIT whose key list is truncated.
    net::ScopedFd raw = RawAuthed(*server_);
    std::string list = store::EncodeKeyList({"abc"});
    list.pop_back();
    store::Header h;
    h.op_or_status = store::kWait;
    h.value_len = static_cast<uint32_t>(list.size());
    uint8_t hb[store::kHeaderBytes];
    store::EncodeHeader(h, hb);
    ASSERT_TRUE(net::SendAll(raw.get(), hb, sizeof(hb), Deadline(5)).ok());
    ASSERT_TRUE(net::SendAll(raw.get(), list.data(), list.size(), Deadline(5)).ok());
    EXPECT_TRUE(ClosedByServer(raw.get()));
  }
  std::string got;
  ASSERT_TRUE(good->Get("before", &got, 1).ok());
  ASSERT_TRUE(good->Set("after", "2").ok());
  EXPECT_EQ(server_->refused_connections(), 0u);
}

TEST_F(StoreTest, ClientVanishingWhileWaitingIsForgotten) {
  {
    net::ScopedFd raw = RawAuthed(*server_);
    store::Header h;
    h.op_or_status = store::kGet;
    h.id = 1;
    h.arg = 60000;  // would wait a minute
    h.key_len = 4;
    uint8_t buf[store::kHeaderBytes + 4];
    store::EncodeHeader(h, buf);
    memcpy(buf + store::kHeaderBytes, "gone", 4);
    ASSERT_TRUE(net::SendAll(raw.get(), buf, sizeof(buf), Deadline(5)).ok());
    ASSERT_TRUE(WaitForWaiters(1)) << "the GET never reached the server";
  }  // hang up with the GET pending
  ASSERT_TRUE(WaitForWaiters(0)) << "the vanished client's GET is still waiting";
  auto c = NewClient();
  ASSERT_TRUE(c->Set("gone", "v").ok());  // must not write to the dead client
  std::string got;
  ASSERT_TRUE(c->Get("gone", &got, 1).ok());
  EXPECT_EQ(got, "v");
  Deadline dl(10);  // the server notices the hang-up soon
  while (server_->num_clients() != 1 && !dl.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->num_clients(), 1u);
}

TEST_F(StoreTest, ServerGoneIsPeerLostAndSticky) {
  auto c = NewClient();
  ASSERT_TRUE(c->Set("k", "v").ok());
  std::thread t([&] {
    EXPECT_TRUE(WaitForWaiters(1)) << "the GET never reached the server";
    server_->Stop();
  });
  std::string got;
  Status st = c->Get("never", &got, 30);  // pending when the server stops
  t.join();
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  Status again = c->Set("k", "v");
  EXPECT_EQ(again.code(), ZC_ERR_PEER_LOST);
  EXPECT_EQ(again.message(), st.message());
}

TEST(StoreConnect, NoServerTimesOut) {
  int lfd = -1, port = 0;
  ASSERT_TRUE(net::Listen("127.0.0.1", 0, &lfd, &port).ok());
  close(lfd);
  std::unique_ptr<StoreClient> c;
  Status st = StoreClient::Connect(Format("127.0.0.1:%d", port), kKey,
                                   Deadline(0.3), &c);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
  EXPECT_EQ(StoreClient::Connect("nonsense", kKey, Deadline(1), &c).code(),
            ZC_ERR_INVALID_ARG);
}

TEST(StoreServerStart, WildcardAdvertisesARealAddress) {
  std::unique_ptr<StoreServer> s;
  ASSERT_TRUE(StoreServer::Start("", 0, kKey, &s).ok());
  std::string host;
  int port = 0;
  ASSERT_TRUE(net::ParseHostPort(s->address(), &host, &port).ok());
  EXPECT_NE(host, "");
  EXPECT_NE(host, "0.0.0.0");
  EXPECT_EQ(port, s->port());
  std::unique_ptr<StoreClient> c;
  Status st = StoreClient::Connect(s->address(), kKey, Deadline(10), &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(c->Set("k", "v").ok());
}

}  // namespace
}  // namespace zc
