// Job-key handshake: matching keys pass, different keys fail on both sides,
// and garbage, truncated or silent peers fail without crash or hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "common/auth.h"
#include "common/socket.h"

namespace zc::net {
namespace {

void TcpPair(ScopedFd* client, ScopedFd* server) {
  int lfd = -1, port = 0;
  ASSERT_TRUE(Listen("127.0.0.1", 0, &lfd, &port).ok());
  ScopedFd l(lfd);
  int c = -1, s = -1;
  ASSERT_TRUE(Connect("127.0.0.1", port, Deadline(10), &c).ok());
  ASSERT_TRUE(Accept(lfd, Deadline(10), &s, nullptr).ok());
  client->reset(c);
  server->reset(s);
}

struct Result {
  Status server, client;
};

Result RunBoth(const std::string& server_key, const std::string& client_key) {
  ScopedFd c, s;
  TcpPair(&c, &s);
  Result r;
  std::thread t([&] { r.server = AuthServer(s.get(), server_key, Deadline(10)); });
  r.client = AuthClient(c.get(), client_key, Deadline(10));
  t.join();
  return r;
}

TEST(Auth, SameKeySucceeds) {
  for (const std::string& key : {std::string("k"), std::string(100, 'z'),
                                std::string("bin\0ary\xff!", 10), std::string()}) {
    Result r = RunBoth(key, key);
    EXPECT_TRUE(r.server.ok()) << r.server.message();
    EXPECT_TRUE(r.client.ok()) << r.client.message();
  }
}

TEST(Auth, DifferentKeysFailOnBothSides) {
  Result r = RunBoth("job-key-1", "job-key-2");
  EXPECT_EQ(r.server.code(), ZC_ERR_SYSTEM);
  EXPECT_EQ(r.client.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(r.server.message().find("authentication failed"), std::string::npos)
      << r.server.message();
  EXPECT_NE(r.client.message().find("authentication failed"), std::string::npos)
      << r.client.message();
}

TEST(Auth, KeyPrefixIsNotEnough) {
  Result r = RunBoth("secret", "secret-and-more");
  EXPECT_FALSE(r.server.ok());
  EXPECT_FALSE(r.client.ok());
}

TEST(Auth, GarbageFailsFast) {
  ScopedFd c, s;
  TcpPair(&c, &s);
  std::string junk = "GET / HTTP/1.1\r\nHost: example\r\n\r\n....";
  junk.resize(AuthHandshake::kHelloBytes, '.');
  ASSERT_TRUE(SendAll(c.get(), junk.data(), junk.size(), Deadline(5)).ok());
  // A long deadline: the error must come from the content, not the clock.
  Status st = AuthServer(s.get(), "key", Deadline(60));
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("magic"), std::string::npos) << st.message();
}

TEST(Auth, TruncatedHelloIsAnError) {
  ScopedFd c, s;
  TcpPair(&c, &s);
  AuthHandshake hs(AuthRole::kClient, "key");
  std::string hello = hs.Start();
  ASSERT_TRUE(SendAll(c.get(), hello.data(), 17, Deadline(5)).ok());
  c.reset();  // then hang up
  Status st = AuthServer(s.get(), "key", Deadline(60));
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM) << st.message();
  EXPECT_NE(st.message().find("authentication failed"), std::string::npos);
}

TEST(Auth, TruncatedProofIsAnError) {
  ScopedFd c, s;
  TcpPair(&c, &s);
  std::thread t([&] {
    AuthHandshake hs(AuthRole::kClient, "key");
    std::string hello = hs.Start();
    ASSERT_TRUE(SendAll(c.get(), hello.data(), hello.size(), Deadline(5)).ok());
    ASSERT_TRUE(SendAll(c.get(), "0123456789", 10, Deadline(5)).ok());
    c.reset();
  });
  Status st = AuthServer(s.get(), "key", Deadline(60));
  t.join();
  EXPECT_FALSE(st.ok());
}

TEST(Auth, SilentPeerTimesOut) {
  ScopedFd c, s;
  TcpPair(&c, &s);
  Status st = AuthServer(s.get(), "key", Deadline(0.3));
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
  EXPECT_NE(st.message().find("authentication failed"), std::string::npos);
}

TEST(Auth, WrongRoleRefused) {
  // Two clients talking to each other (or a reflected hello) must not pass.
  ScopedFd c, s;
  TcpPair(&c, &s);
  Status a, b;
  std::thread t([&] { a = AuthClient(s.get(), "key", Deadline(5)); });
  b = AuthClient(c.get(), "key", Deadline(5));
  t.join();
  EXPECT_FALSE(a.ok());
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.message().find("role"), std::string::npos) << b.message();
}

TEST(AuthHandshake, StateMachineInMemory) {
  AuthHandshake srv(AuthRole::kServer, "k"), cli(AuthRole::kClient, "k");
  std::string to_cli = srv.Start(), to_srv = cli.Start(), r1, r2;
  ASSERT_EQ(srv.want(), AuthHandshake::kHelloBytes);
  ASSERT_TRUE(srv.OnMessage(reinterpret_cast<const uint8_t*>(to_srv.data()),
                            to_srv.size(), &r1).ok());
  ASSERT_TRUE(cli.OnMessage(reinterpret_cast<const uint8_t*>(to_cli.data()),
                            to_cli.size(), &r2).ok());
  ASSERT_EQ(r1.size(), AuthHandshake::kProofBytes);
  // Flip one bit of the client's proof: the server refuses.
  std::string bad = r2;
  bad[5] ^= 0x10;
  std::string verdict;
  Status st = srv.OnMessage(reinterpret_cast<const uint8_t*>(bad.data()),
                            bad.size(), &verdict);
  EXPECT_FALSE(st.ok());
  ASSERT_EQ(verdict, std::string(1, '\0'));
  EXPECT_EQ(srv.want(), 0u);
  std::string none;
  EXPECT_TRUE(cli.OnMessage(reinterpret_cast<const uint8_t*>(r1.data()),
                            r1.size(), &none).ok());
  Status st2 = cli.OnMessage(reinterpret_cast<const uint8_t*>(verdict.data()),
                             1, &none);
  EXPECT_FALSE(st2.ok());
  EXPECT_NE(st2.message().find("refused"), std::string::npos);
}

}  // namespace
}  // namespace zc::net
