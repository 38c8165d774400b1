// Socket helpers: address parsing, listen/accept/connect, all-or-error I/O
// with odd sizes, peer loss and deadlines, interface selection.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/socket.h"

namespace zc::net {
namespace {

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return v;
}

// A connected TCP pair over loopback.
void TcpPair(ScopedFd* a, ScopedFd* b) {
  int lfd = -1, port = 0;
  ASSERT_TRUE(Listen("127.0.0.1", 0, &lfd, &port).ok());
  ScopedFd l(lfd);
  int c = -1, s = -1;
  ASSERT_TRUE(Connect("127.0.0.1", port, Deadline(10), &c).ok());
  std::string peer;
  ASSERT_TRUE(Accept(lfd, Deadline(10), &s, &peer).ok());
  EXPECT_NE(peer.find("127.0.0.1:"), std::string::npos);
  a->reset(c);
  b->reset(s);
}

TEST(ParseHostPort, Forms) {
  std::string h;
  int p = -1;
  ASSERT_TRUE(ParseHostPort("node01:29500", &h, &p).ok());
  EXPECT_EQ(h, "node01");
  EXPECT_EQ(p, 29500);
  ASSERT_TRUE(ParseHostPort("[::1]:7", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, 7);
  ASSERT_TRUE(ParseHostPort(":0", &h, &p).ok());
  EXPECT_EQ(h, "");
  EXPECT_EQ(p, 0);
  for (const char* bad : {"", "host", "host:", "host:x1", "host:65536",
                          "host:-1", "::1:80", "[::1]80", "[::1", "h:123456"}) {
    Status st = ParseHostPort(bad, &h, &p);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << bad;
  }
}

TEST(Socket, OddSizedTransfersBothWays) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  SetNoDelay(a.get());
  SetBufferSizes(a.get(), 1 << 16);
  // Larger than the socket buffers so that both sides must wait for space.
  for (size_t n : {size_t(1), size_t(7), size_t(4093), size_t(3 << 20) + 5}) {
    auto out = Pattern(n, static_cast<int>(n));
    std::vector<char> in(n, 0);
    std::thread t([&] { ASSERT_TRUE(SendAll(a.get(), out.data(), n, Deadline(30)).ok()); });
    Status st = RecvAll(b.get(), in.data(), n, Deadline(30));
    t.join();
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(in, out) << "size " << n;
  }
}

TEST(Socket, SendAllvManyPiecesAndEmptyOnes) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  // More pieces than IOV_MAX (1024), with empty ones sprinkled in.
  std::vector<std::vector<char>> parts;
  std::vector<char> expect;
  for (int i = 0; i < 1500; ++i) {
    size_t n = (i % 5 == 0) ? 0 : static_cast<size_t>((i * 37) % 301 + 1);
    parts.push_back(Pattern(n, i));
    expect.insert(expect.end(), parts.back().begin(), parts.back().end());
  }
  std::vector<iovec> iov;
  for (auto& p : parts) iov.push_back({p.data(), p.size()});
  std::vector<char> in(expect.size());
  std::thread t([&] {
    ASSERT_TRUE(SendAllv(a.get(), iov.data(), static_cast<int>(iov.size()),
                         Deadline(30)).ok());
  });
  Status st = RecvAll(b.get(), in.data(), in.size(), Deadline(30));
  t.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(in, expect);
}

TEST(Socket, EofIsPeerLost) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  ASSERT_TRUE(SendAll(a.get(), "abc", 3, Deadline(5)).ok());
  a.reset();
  char buf[8];
  Status st = RecvAll(b.get(), buf, 8, Deadline(5));
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST);
  EXPECT_NE(st.message().find("connection closed by peer"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("3 of 8"), std::string::npos) << st.message();
}

TEST(Socket, SendToClosedPeerIsPeerLost) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  b.reset();
  std::vector<char> big(1 << 20, 'x');
  Status st;
  // The first send may succeed into the buffer; a later one sees the reset.
  for (int i = 0; i < 50 && st.ok(); ++i)
    st = SendAll(a.get(), big.data(), big.size(), Deadline(5));
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
}

int RecvLowat(int fd) {
  int v = -1;
  socklen_t len = sizeof(v);
  EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &len), 0);
  return v;
}

// Waits (deadline 10 s) until the receiver on fd waits for a large payload
// with a raised low-water mark, as RecvAll does after a partial read.
bool AwaitRaisedLowat(int fd) {
  Deadline dl(10);
  while (!dl.expired())
    if (RecvLowat(fd) > 1) return true;
  return false;
}

// A large RecvAll that has to wait asks to be woken only when most of the
// rest is there (SO_RCVLOWAT), and leaves the mark at 1 byte however it
// ends, so that the next poll for a small header still wakes.
TEST(Socket, LargeRecvRaisesLowWaterMarkAndRestoresIt) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  const size_t total = 3 << 20, first = 100 << 10;
  std::vector<char> src = Pattern(total, 7), dst(total, 0);
  std::atomic<bool> raised{false};
  std::thread sender([&] {
    ASSERT_TRUE(SendAll(a.get(), src.data(), first, Deadline(10)).ok());
    raised = AwaitRaisedLowat(b.get());
    ASSERT_TRUE(SendAll(a.get(), src.data() + first, total - first, Deadline(10)).ok());
  });
  Status st = RecvAll(b.get(), dst.data(), total, Deadline(10));
  sender.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(raised.load()) << "RecvAll waited without raising SO_RCVLOWAT";
  EXPECT_EQ(dst, src);
  EXPECT_EQ(RecvLowat(b.get()), 1);
  // A small message after it is reported readable at once.
  ASSERT_TRUE(SendAll(a.get(), "hdr", 3, Deadline(5)).ok());
  pollfd p{b.get(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 5000), 1);
}

TEST(Socket, LowWaterMarkRestoredWhenThePeerGoesMidPayload) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  std::vector<char> src = Pattern(100 << 10, 3), dst(1 << 20, 0);
  std::thread sender([&] {
    ASSERT_TRUE(SendAll(a.get(), src.data(), src.size(), Deadline(10)).ok());
    EXPECT_TRUE(AwaitRaisedLowat(b.get()));
    a.reset();
  });
  Status st = RecvAll(b.get(), dst.data(), dst.size(), Deadline(10));
  sender.join();
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  EXPECT_EQ(RecvLowat(b.get()), 1);
}

// A loopback connection's peer is local (ZC_TCP_CONGESTION=auto keys on it).
TEST(Socket, LoopbackPeerIsLocal) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  EXPECT_TRUE(PeerIsLocal(a.get()));
  EXPECT_TRUE(PeerIsLocal(b.get()));
  ScopedFd unconnected(socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_FALSE(PeerIsLocal(unconnected.get()));
}

// SetCongestion sets the algorithm the socket then reports, and refuses a
// name the kernel lacks with an error naming it.
TEST(Socket, SetCongestion) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  ASSERT_TRUE(SetCongestion(a.get(), "reno").ok());
  char name[16] = {};
  socklen_t len = sizeof(name);
  ASSERT_EQ(getsockopt(a.get(), IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  EXPECT_STREQ(name, "reno");
  Status st = SetCongestion(a.get(), "no_such_cc");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no_such_cc"), std::string::npos) << st.message();
}

TEST(Socket, RecvDeadline) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  char buf[4];
  Status st = RecvAll(b.get(), buf, 4, Deadline(0.2));
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
}

TEST(Socket, AcceptDeadline) {
  int lfd = -1, port = 0;
  ASSERT_TRUE(Listen("", 0, &lfd, &port).ok());
  ScopedFd l(lfd);
  EXPECT_GT(port, 0);
  int fd = -1;
  Status st = Accept(lfd, Deadline(0.2), &fd, nullptr);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
}

TEST(Socket, ConnectRetriesUntilListenerAppears) {
  // Find a free port, close it, then listen on it once Connect has been
  // refused twice (so the retry path is what connects).
  int lfd = -1, port = 0;
  ASSERT_TRUE(Listen("127.0.0.1", 0, &lfd, &port).ok());
  close(lfd);
  std::atomic<int> failed{0};
  std::thread t([&] {
    Deadline refused(10);  // polls Connect's counter: an observable condition
    while (failed.load() < 2 && !refused.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_GE(failed.load(), 2) << "Connect gave up or connected after "
                                 << failed.load() << " failed attempt(s) (is the port taken?)";
    int l2 = -1, p2 = 0;
    ASSERT_TRUE(Listen("127.0.0.1", port, &l2, &p2).ok());
    int s = -1;
    Status st = Accept(l2, Deadline(10), &s, nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    if (st.ok()) close(s);
    close(l2);
  });
  int fd = -1;
  Status st = Connect("127.0.0.1", port, Deadline(10), &fd, &failed);
  t.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GE(failed.load(), 2);
  close(fd);
}

TEST(Socket, ConnectTimesOutWhenNobodyListens) {
  int lfd = -1, port = 0;
  ASSERT_TRUE(Listen("127.0.0.1", 0, &lfd, &port).ok());
  close(lfd);
  int fd = -1;
  Status st = Connect("127.0.0.1", port, Deadline(0.3), &fd);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
  EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos);
}

TEST(Socket, NonBlockingToggle) {
  ScopedFd a, b;
  TcpPair(&a, &b);
  EXPECT_TRUE(SetNonBlocking(a.get(), true).ok());
  char c;
  EXPECT_EQ(recv(a.get(), &c, 1, 0), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  EXPECT_TRUE(SetNonBlocking(a.get(), false).ok());
  EXPECT_FALSE(SetNonBlocking(-1, true).ok());
}

TEST(PickInterfaceAddress, Specs) {
  std::string ip, ifname;
  ASSERT_TRUE(PickInterfaceAddress("", &ip, &ifname).ok());
  EXPECT_FALSE(ip.empty());
  EXPECT_FALSE(ifname.empty());
  ASSERT_TRUE(PickInterfaceAddress("=lo", &ip, &ifname).ok());
  EXPECT_EQ(ifname, "lo");
  EXPECT_EQ(ip.rfind("127.", 0), 0u) << ip;
  ASSERT_TRUE(PickInterfaceAddress("l", &ip, &ifname).ok());
  EXPECT_EQ(ifname.rfind("l", 0), 0u);
  Status st = PickInterfaceAddress("^lo", &ip, &ifname);
  if (st.ok()) {
    EXPECT_NE(ifname, "lo");
  }
  st = PickInterfaceAddress("nosuchif", &ip, &ifname);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("nosuchif"), std::string::npos);
  EXPECT_FALSE(PickInterfaceAddress("=l", &ip, &ifname).ok());  // exact only
  // "^" names no interface: an error, not a silent choice.
  EXPECT_EQ(PickInterfaceAddress("^", &ip, &ifname).code(), ZC_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace zc::net
