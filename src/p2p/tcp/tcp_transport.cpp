// TcpTransport: the tcp backend's Transport (p2p/transport.h), and the
// wiring of its parts:
//   tcp_socket.h      Socket: one data socket, its send and receive sides
//   tcp_connection.h  TcpConnection: one-sided write/read/flag on a socket
//   tcp_listener.h    Listener: the data port, incoming handshakes
//   tcp_progress.h    Progress: progress threads, the driving waiter
//   tcp_messages.h    MessageHandler: what each incoming message does
//   tcp_responder.h   Responder: answers one-sided reads off the progress thread
//   tcp_wire.h        the wire format and the checks on what peers send
// This file holds what the Transport itself does: Listen (pick the address),
// Connect (make the sockets, dial the higher ranks while the Listener
// accepts the lower ones, start Progress) and Shutdown.
#include "p2p/tcp/tcp_transport.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/config.h"
#include "common/log.h"
#include "common/socket.h"
#include "p2p/tcp/tcp_connection.h"
#include "p2p/tcp/tcp_listener.h"
#include "p2p/tcp/tcp_progress.h"
#include "p2p/tcp/tcp_socket.h"
#include "p2p/tcp/tcp_wire.h"

namespace zc {
namespace tcp {
namespace {

constexpr int kConnectAttempts = 5;  // a handshake the peer cut short is retried
using tcp_wire::kBye;
using tcp_wire::kMagic;
using tcp_wire::MsgHeader;

class TcpTransport final : public Transport {
 public:
  TcpTransport(TransportHost* host, const TransportSetup& setup)
      : host_(host), setup_(setup), key_(setup.job_key), tuner_(setup.config.tcp_congestion),
        listener_(setup, &tuner_),
        progress_(host, &reads_, setup.config.timeout_s, setup.oversubscribed ? 0 : setup.config.tcp_poll_us) {}
  ~TcpTransport() override { Shutdown(); }

  TransportKind kind() const override { return TransportKind::kTcp; }
  Status Expose(MemRegion* region) override {
    region->mutable_remote().owner = setup_.rank;
    return Status::Ok();
  }
  void Unexpose(MemRegion*) override {}
  int connections_per_peer() const override { return per_peer_; }
  WaitDriver* wait_driver() override { return &progress_; }
  Connection* connection(int peer, int index) override {
    if (peer < 0 || peer >= static_cast<int>(conns_.size()) || conns_[peer].empty()) return nullptr;
    return conns_[peer][index % per_peer_].get();
  }
  void ServeOffers(int peer) override {
    if (peer >= 0 && peer < static_cast<int>(by_peer_.size())) progress_.ServeOffers(by_peer_[peer]);
  }

  Status Listen(const LinkPlan& plan, std::string* address) override;
  Status Connect(const std::vector<std::string>& addresses) override;
  void Shutdown() override;

 private:
  // Connect's steps.
  // The sockets and connections of every peer, without descriptors yet;
  // returns how many the lower ranks will connect to us.
  int MakeSockets();
  // Dials the higher ranks while the Listener accepts the lower ones.
  Status ConnectSockets(const std::vector<std::string>& all, int expected);
  Status DialPeers(const std::vector<std::string>& all, const Deadline& dl);
  Status DialPeer(int p, const std::string& address, const Deadline& dl);
  // One socket to host:port, retried when the peer cut the handshake short.
  Status Dial(int peer, const std::string& host, int port, int index, Socket* s, const Deadline& dl);
  Status ConnectWhileAlive(int peer, const std::string& host, int port, const Deadline& dl, int* fd);
  // The first peer of the plan known lost (or the Device's abort), else OK:
  // one lost member dooms the whole Connect, whichever peer is being dialed
  // (a survivor that saw it gave up and closed its listener, and refuses).
  Status PeersHealth() const;
  Status ClientHandshake(int fd, int index, const Deadline& dl);
  // Shutdown's first step: the lazy flags, then a goodbye on every live socket.
  void SayGoodbye();

  TransportHost* host_;
  const TransportSetup setup_;
  std::string key_;
  std::vector<int> peers_;  // from Listen
  int per_peer_ = 1;
  std::vector<std::vector<std::unique_ptr<TcpConnection>>> conns_;
  std::vector<std::unique_ptr<Socket>> sockets_;  // all, owned
  std::vector<std::vector<Socket*>> by_peer_;
  PendingReads reads_;
  SocketTuner tuner_;
  Listener listener_;
  Progress progress_;
  bool shut_ = false;
};

Status TcpTransport::Listen(const LinkPlan& plan, std::string* address) {
  const Config& cfg = setup_.config;
  per_peer_ = cfg.sockets_per_peer;
  peers_ = plan.peers;
  std::string ip, ifname;
  Status st;
  // The tcp domain descriptor is the host id: equal means the same host.
  bool all_local = !plan.peers.empty() && !plan.my_domain.empty();
  for (int p : plan.peers)
    all_local &= p >= 0 && static_cast<size_t>(p) < plan.domains.size() && plan.domains[p] == plan.my_domain;
  if (cfg.socket_ifname.empty() && all_local) {
    // Every tcp peer is on this host: listen and connect on loopback only,
    // not on a network card. An explicit ZC_SOCKET_IFNAME still wins.
    ip = "127.0.0.1";
    ifname = "loopback: every tcp peer is on this host";
  } else {
    st = net::PickInterfaceAddress(cfg.socket_ifname, &ip, &ifname);
  }
  int port = 0;
  if (st.ok()) st = listener_.Open(ip, &port);
  ZC_RETURN_IF_ERROR(st.with_context("tcp: cannot listen"));
  *address = Format("%s:%d", ip.c_str(), port);
  ZC_INFO(kTcp, "listening on %s (%s), %d socket(s) per peer", address->c_str(), ifname.c_str(), per_peer_);
  return Status::Ok();
}

Status TcpTransport::Connect(const std::vector<std::string>& all) {
  const int n = setup_.size;
  if (static_cast<int>(all.size()) != n)
    return Error(ZC_ERR_INTERNAL, "tcp: address exchange returned %zu records for %d ranks", all.size(), n);
  const int expected = MakeSockets();
  ZC_RETURN_IF_ERROR(ConnectSockets(all, expected));
  listener_.Close();
  return progress_.Start(sockets_, setup_.config.num_cqs);
}

int TcpTransport::MakeSockets() {
  const int n = setup_.size, me = setup_.rank;
  conns_.clear();
  conns_.resize(n);
  by_peer_.assign(n, {});
  int expected = 0;
  for (int p : peers_) {
    for (int i = 0; i < per_peer_; ++i) {
      auto s = std::make_unique<Socket>(host_, p, setup_.config.timeout_s);
      by_peer_[p].push_back(s.get());
      conns_[p].push_back(std::make_unique<TcpConnection>(s.get(), &reads_, progress_.read_driver()));
      sockets_.push_back(std::move(s));
    }
    if (p < me) expected += per_peer_;
  }
  return expected;
}

Status TcpTransport::ConnectSockets(const std::vector<std::string>& all, int expected) {
  Deadline dl(setup_.config.timeout_s);
  std::atomic<bool> accepted{false};
  std::thread acceptor([this, expected, dl, &accepted] {
    listener_.Run(&by_peer_, per_peer_, expected, dl);
    accepted.store(true);
  });
  Status cst = DialPeers(all, dl);
  // The lower ranks dial us: one that died (a process of this host that
  // exited) never will, so do not wait for it until the deadline.
  while (cst.ok() && !accepted.load()) {
    cst = PeersHealth();
    if (cst.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!cst.ok()) listener_.Stop();
  acceptor.join();
  ZC_RETURN_IF_ERROR(cst);
  return listener_.status();
}

Status TcpTransport::DialPeers(const std::vector<std::string>& all, const Deadline& dl) {
  for (int p : peers_) {
    if (p < setup_.rank) continue;
    Status st = DialPeer(p, all[p], dl);
    if (!st.ok()) return st.with_context(Format("tcp: connecting to peer %d at %s", p, all[p].c_str()));
  }
  return Status::Ok();
}

Status TcpTransport::DialPeer(int p, const std::string& address, const Deadline& dl) {
  std::string host;
  int port;
  ZC_RETURN_IF_ERROR(net::ParseHostPort(address, &host, &port));
  for (int i = 0; i < per_peer_; ++i) ZC_RETURN_IF_ERROR(Dial(p, host, port, i, by_peer_[p][i], dl));
  return Status::Ok();
}

Status TcpTransport::Dial(int peer, const std::string& host, int port, int index, Socket* s, const Deadline& dl) {
  for (int attempt = 1;; ++attempt) {
    int fd;
    Status st = ConnectWhileAlive(peer, host, port, dl, &fd);
    if (!st.ok()) return st;
    st = ClientHandshake(fd, index, Deadline(std::min(dl.remaining_s(), 2 * kHandshakeSeconds)));
    if (st.ok()) {
      s->io_sliced = tuner_.Tune(fd);
      s->fd = fd;
      return st;
    }
    close(fd);
    // The peer shed our connection among a crowd of strangers: again.
    if (st.code() != ZC_ERR_PEER_LOST || attempt == kConnectAttempts || dl.expired())
      return st.with_context(Format("attempt %d of %d", attempt, kConnectAttempts));
  }
}

// net::Connect in slices of a quarter second: its listener was up when it
// published its address, so a peer that keeps refusing may have died, or
// given up because another member did; a dead process of this host is seen
// between slices (PeersHealth), not at dl.
Status TcpTransport::ConnectWhileAlive(int peer, const std::string& host, int port, const Deadline& dl, int* fd) {
  for (;;) {
    Deadline slice(std::max(0.001, std::min(dl.remaining_s(), 0.25)));
    Status st = net::Connect(host, port, slice, fd);
    if (st.code() != ZC_ERR_TIMEOUT || dl.expired()) return st;
    ZC_RETURN_IF_ERROR(host_->Health(peer));
    ZC_RETURN_IF_ERROR(PeersHealth());
  }
}

Status TcpTransport::PeersHealth() const {
  for (int p : peers_) ZC_RETURN_IF_ERROR(host_->Health(p));
  return Status::Ok();
}

// The client side of the handshake that Listener serves: the job key, then
// the hello (tcp_wire.h).
Status TcpTransport::ClientHandshake(int fd, int index, const Deadline& dl) {
  ZC_RETURN_IF_ERROR(net::AuthClient(fd, key_, dl));
  uint32_t hello[2] = {static_cast<uint32_t>(setup_.rank), static_cast<uint32_t>(index)};
  return net::SendAll(fd, hello, sizeof(hello), dl);
}

void TcpTransport::Shutdown() {
  if (shut_) return;
  shut_ = true;
  SayGoodbye();
  progress_.Stop();
  for (auto& s : sockets_)
    if (s->fd >= 0) {
      close(s->fd);
      s->fd = -1;
    }
  listener_.Close();
}

void TcpTransport::SayGoodbye() {
  // Say goodbye so peers report "finalized" rather than a reset.
  for (auto& s : sockets_) {
    if (s->fd < 0 || s->dead.load()) continue;
    s->FlushDeferred(std::chrono::microseconds(0), progress_.stopping());
    MsgHeader bye{};
    bye.magic = kMagic;
    bye.type = kBye;
    std::lock_guard<std::mutex> lock(s->send_mu);
    IgnoreError(net::SendAll(s->fd, &bye, sizeof(bye), Deadline(0.5)),
                "goodbye at shutdown: best effort (the peer may be gone)");
  }
}

}  // namespace
}  // namespace tcp

Status CreateTcpTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<tcp::TcpTransport>(host, setup);
  return Status::Ok();
}

}  // namespace zc
