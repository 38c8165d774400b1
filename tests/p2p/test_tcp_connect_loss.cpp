// The tcp transport's connect side when a member is lost while it dials:
// the peer being dialed is alive but refuses (it saw the loss first, gave
// up and closed its listener), another member of the plan is gone. Connect
// must fail with that loss at once, not dial the refusing peer until
// ZC_TIMEOUT (an elastic grow whose survivor died hung that way).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <shared_mutex>
#include <string>
#include <vector>

#include "common/socket.h"
#include "p2p/tcp/tcp_transport.h"
#include "fake_transport_host.h"

namespace zc {
namespace {


// "127.0.0.1:<port>" of a port that refuses: bound, then closed.
std::string RefusingAddress() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return "";
  close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

TransportSetup Setup(int rank, int size, double timeout_s) {
  TransportSetup s;
  s.rank = s.config.rank = rank;
  s.size = s.config.size = size;
  s.config.timeout_s = timeout_s;
  s.config.socket_ifname = "lo";
  s.config.sockets_per_peer = 1;
  s.config.num_cqs = 1;
  s.job_key = "job-key";
  return s;
}

// Rank 0 of 3 dials ranks 1 and 2; rank 1 refuses, rank `lost` is gone.
Status ConnectWithLoss(int lost) {
  testing_fakes::FakeTransportHost host(lost);
  std::unique_ptr<Transport> t;
  Status st = CreateTcpTransport(&host, Setup(0, 3, /*timeout_s=*/20), &t);
  if (!st.ok()) return st;
  LinkPlan plan;
  plan.peers = {1, 2};
  std::string mine;
  st = t->Listen(plan, &mine);
  if (!st.ok()) return st;
  std::vector<std::string> all = {mine, RefusingAddress(), RefusingAddress()};
  st = t->Connect(all);
  t->Shutdown();
  return st;
}

TEST(TcpConnectLoss, AnotherMemberLostWhileDialingARefusingPeer) {
  Status st = ConnectWithLoss(2);
  printf("rank 0's Connect: %s\n", st.message().c_str());
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  EXPECT_NE(st.message().find("peer 2 lost"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("connecting to peer 1"), std::string::npos) << st.message();
}

TEST(TcpConnectLoss, TheDialedPeerLost) {
  Status st = ConnectWithLoss(1);
  EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
  EXPECT_NE(st.message().find("peer 1 lost"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace zc
