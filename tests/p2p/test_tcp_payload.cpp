// A tcp Socket's large payloads (p2p/tcp/tcp_socket.h, Socket::kBlockingMin):
// one blocking recv or sendmsg takes the whole rest, bounded by the
// socket's slice (SO_RCVTIMEO/SO_SNDTIMEO), checking the deadline and the
// peer's health between slices. Over a loopback TCP connection, without
// ranks: a payload that arrives in many pieces (sizes either side of the
// threshold, unaligned destinations, part of it already buffered), a peer
// that closes mid-payload, a silent peer (deadline), a peer declared lost
// while the read waits, and the same for a large send the peer never reads.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "common/socket.h"
#include "p2p/tcp/tcp_socket.h"
#include "fake_transport_host.h"

namespace zc {
namespace {

using FakeHost = testing_fakes::FakeTransportHost;

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 131u) ^ (i >> 8) ^ (i >> 16)); }

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A connected loopback TCP pair; `ours` is a Socket to peer 1, tuned as the
// transport tunes its data sockets, `theirs` the raw other end.
class Pair {
 public:
  Pair() : ours(&host, /*peer=*/1, /*timeout_s=*/30) {
    int lfd = -1, port = 0;
    EXPECT_TRUE(net::Listen("127.0.0.1", 0, &lfd, &port).ok());
    int cfd = -1;
    EXPECT_TRUE(net::Connect("127.0.0.1", port, Deadline(10), &cfd).ok());
    EXPECT_TRUE(net::Accept(lfd, Deadline(10), &theirs, nullptr).ok());
    close(lfd);
    ours.fd = cfd;
    tcp::SocketTuner tuner("system");
    ours.io_sliced = tuner.Tune(cfd);
  }
  ~Pair() {
    if (ours.fd >= 0) close(ours.fd);
    if (theirs >= 0) close(theirs);
  }
  // Writes [from, to) of the pattern in pieces of the given sizes (cycled),
  // pausing between them so that the reader finds each piece alone.
  void WriteInPieces(size_t from, size_t to, const std::vector<size_t>& pieces) {
    std::vector<uint8_t> b(to - from);
    for (size_t i = from; i < to; ++i) b[i - from] = Pattern(i);
    size_t off = 0;
    for (size_t k = 0; off < b.size(); ++k) {
      const size_t n = std::min(pieces[k % pieces.size()], b.size() - off);
      ASSERT_TRUE(net::SendAll(theirs, b.data() + off, n, Deadline(10)).ok());
      off += n;
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  }

  FakeHost host;
  tcp::Socket ours;
  int theirs = -1;
};

// Sizes either side of the blocking threshold and of the receive buffer
// that may hold the payload's start, primes, and 4 MiB + 1; unaligned
// destinations; some bytes already buffered (as after the header's recv).
TEST(TcpPayload, ArrivesInManyPieces) {
  const size_t kMin = tcp::Socket::kBlockingMin, kBuf = tcp::Socket::kRecvBuf;
  for (size_t n : {kMin - 1, kMin, kMin + 1, kMin + kBuf - 1, kMin + kBuf + 1, size_t{262147},
                   size_t{1048573}, (size_t{4} << 20) + 1}) {
    for (size_t buffered : {size_t{0}, size_t{1}, size_t{777}}) {
      Pair p;
      ASSERT_TRUE(p.ours.io_sliced) << "SO_RCVTIMEO/SO_SNDTIMEO refused";
      for (size_t i = 0; i < buffered; ++i) p.ours.rbuf[i] = static_cast<char>(Pattern(i));
      p.ours.rpos = 0;
      p.ours.rend = buffered;
      std::vector<uint8_t> dst(n + 3, 0xEE);
      std::thread writer([&] { p.WriteInPieces(buffered, n, {4093, 65537, 131, 200003}); });
      Status st = p.ours.TakeBytes(dst.data() + 1, n, Deadline(30));
      writer.join();
      ASSERT_TRUE(st.ok()) << n << " bytes: " << st.message();
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += dst[i + 1] != Pattern(i);
      EXPECT_EQ(bad, 0u) << n << " bytes, " << buffered << " buffered";
      EXPECT_EQ(dst[0], 0xEE) << n << " bytes: wrote before the buffer";
      EXPECT_EQ(dst[n + 1], 0xEE) << n << " bytes: wrote past the buffer";
    }
  }
}

// The peer closes after half of a large payload: the read fails with
// ZC_ERR_PEER_LOST at once, not at its deadline.
TEST(TcpPayload, PeerClosesMidPayload) {
  Pair p;
  const size_t n = size_t{4} << 20;
  std::vector<uint8_t> dst(n);
  std::thread writer([&] {
    p.WriteInPieces(0, n / 2, {65536});
    close(p.theirs);
    p.theirs = -1;
  });
  const auto t0 = std::chrono::steady_clock::now();
  Status st = p.ours.TakeBytes(dst.data(), n, Deadline(60));
  writer.join();
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  EXPECT_NE(st.message().find("closed by peer"), std::string::npos) << st.message();
  EXPECT_LT(Since(t0), 20.0);
}

// A peer that stops sending mid-payload: the read ends at its deadline.
TEST(TcpPayload, SilentPeerMeetsTheDeadline) {
  Pair p;
  const size_t n = size_t{1} << 20;
  std::vector<uint8_t> dst(n);
  p.WriteInPieces(0, 300000, {100000});
  const auto t0 = std::chrono::steady_clock::now();
  Status st = p.ours.TakeBytes(dst.data(), n, Deadline(0.5));
  const double took = Since(t0);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 20.0);
}

// The peer is declared lost (its process died, as the launcher reports)
// while its connection stays open and silent: the read returns the host's
// verdict within a few slices, long before its deadline.
TEST(TcpPayload, PeerLostWhileTheReadWaits) {
  Pair p;
  const size_t n = size_t{2} << 20;
  std::vector<uint8_t> dst(n);
  p.WriteInPieces(0, 100000, {100000});
  std::atomic<bool> done{false};
  Status st;
  std::thread reader([&] {
    st = p.ours.TakeBytes(dst.data(), n, Deadline(40));
    done.store(true);
  });
  // The reader is inside the read: it took the bytes that came (the
  // socket's queue is empty; dst itself is the reader's until it returns).
  const auto t0 = std::chrono::steady_clock::now();
  int queued = 1;
  while ((ioctl(p.ours.fd, FIONREAD, &queued) != 0 || queued > 0) && Since(t0) < 30) std::this_thread::yield();
  EXPECT_EQ(queued, 0);
  EXPECT_FALSE(done.load());
  const auto lost_at = std::chrono::steady_clock::now();
  p.host.Lose();
  reader.join();
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  EXPECT_NE(st.message().find("peer 1 lost"), std::string::npos) << st.message();
  EXPECT_LT(Since(lost_at), 20.0);
}

// A large message to a peer that reads nothing: the blocking send ends at
// its deadline, and at the peer's loss when that comes first.
TEST(TcpPayload, BlockedSendMeetsDeadlineAndPeerLoss) {
  const size_t n = size_t{64} << 20;  // more than any socket buffer holds
  std::vector<uint8_t> src(n, 7);
  tcp_wire::MsgHeader h{};
  h.magic = tcp_wire::kMagic;
  h.type = tcp_wire::kWrite;
  h.bytes = n;
  {
    Pair p;
    const auto t0 = std::chrono::steady_clock::now();
    Status st = p.ours.SendMsg(h, src.data(), Deadline(0.5));
    EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT) << st.message();
    EXPECT_GE(Since(t0), 0.45);
    EXPECT_LT(Since(t0), 20.0);
  }
  {
    Pair p;
    std::thread loser([&] {
      // Once the send is under way (bytes wait at the other end).
      int queued = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while ((ioctl(p.theirs, FIONREAD, &queued) != 0 || queued == 0) && Since(t0) < 30)
        std::this_thread::yield();
      p.host.Lose();
    });
    const auto t0 = std::chrono::steady_clock::now();
    Status st = p.ours.SendMsg(h, src.data(), Deadline(40));
    loser.join();
    EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
    EXPECT_LT(Since(t0), 20.0);
  }
}

// A large message read slowly at the other end arrives whole and in order
// (header, then payload) through the blocking send.
TEST(TcpPayload, LargeSendArrivesWhole) {
  Pair p;
  const size_t n = (size_t{4} << 20) + 3;
  std::vector<uint8_t> src(n + 1);
  for (size_t i = 0; i < n; ++i) src[i + 1] = Pattern(i);
  tcp_wire::MsgHeader h{};
  h.magic = tcp_wire::kMagic;
  h.type = tcp_wire::kWrite;
  h.bytes = n;
  h.token = 42;
  std::vector<uint8_t> got(sizeof(h) + n);
  std::thread reader([&] {
    size_t have = 0;
    while (have < got.size()) {
      ssize_t r = recv(p.theirs, got.data() + have, std::min<size_t>(got.size() - have, 100003), 0);
      if (r <= 0) break;
      have += static_cast<size_t>(r);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  Status st = p.ours.SendMsg(h, src.data() + 1, Deadline(60));
  reader.join();
  ASSERT_TRUE(st.ok()) << st.message();
  tcp_wire::MsgHeader back;
  memcpy(&back, got.data(), sizeof(back));
  EXPECT_EQ(back.token, 42u);
  EXPECT_EQ(back.bytes, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += got[sizeof(h) + i] != Pattern(i);
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace zc
