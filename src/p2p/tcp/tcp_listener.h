// Listener: a rank's tcp data port, and the server side of the handshake of
// every incoming connection. Private to src/p2p/tcp.
//
// The handshake is the job-key authentication (common/auth.h, server role),
// then the client's 8-byte hello naming its rank and socket index
// (tcp_wire::ParseHello); the descriptor then goes to that Socket. The lower
// ranks connect to this one (TcpTransport::Connect dials the higher ones).
// Every pending handshake runs at once, in one poll loop with non-blocking
// I/O, so that an idle or hostile connection delays nobody.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/deadline.h"
#include "common/rate_limit.h"
#include "common/status.h"
#include "p2p/tcp/tcp_socket.h"
#include "p2p/transport.h"

namespace zc::tcp {

// The accept side runs every handshake at once; a connection that has not
// authenticated and said who it is by then is closed, and beyond
// kMaxPendingHandshakes the oldest pending one is dropped for a newcomer.
// A real peer connects right after the address exchange and finishes in
// three round trips; strangers cost the job nothing but a descriptor.
constexpr double kHandshakeSeconds = 5;
constexpr size_t kMaxPendingHandshakes = 64;

class Listener {
 public:
  explicit Listener(const TransportSetup& setup, SocketTuner* tuner)
      : rank_(setup.rank), size_(setup.size), key_(setup.job_key), timeout_s_(setup.config.timeout_s),
        tuner_(tuner) {}
  ~Listener() { Close(); }

  // Listens on ip, on a port the kernel picks.
  Status Open(const std::string& ip, int* port);
  // Accepts until `expected` sockets of the lower ranks have their
  // descriptor, dl passes or Stop is called (the acceptor thread of
  // TcpTransport::Connect). by_peer: the sockets by peer, per_peer of each.
  void Run(const std::vector<std::vector<Socket*>>* by_peer, int per_peer, int expected, Deadline dl);
  // Ends Run soon (the dialing side failed).
  void Stop() { stop_.store(true); }
  // Why Run ended early (a timeout, a failed poll), after it returned.
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  void Close();

 private:
  struct Incoming;
  enum class Step { kGoOn, kWait, kFinished };
  // Sockets of lower ranks that have their descriptor.
  int Connected();
  // The deadline passed: status_ names the peers missing.
  void TimedOut();
  // One poll over the listening socket and every pending handshake (*r:
  // poll's result); false when poll failed (status_ says why).
  bool Poll(const std::deque<Incoming>& pending, const Deadline& dl, std::vector<pollfd>* fds, int* r);
  // Advances the handshakes that poll found ready; drops the overdue ones.
  void AdvancePending(std::deque<Incoming>* pending, const std::vector<pollfd>& fds, int r);
  void AcceptReady(std::deque<Incoming>* pending);
  // Advances one handshake without blocking; true when it is finished
  // (in->fd handed over to its Socket) or failed (closed, logged).
  bool Advance(Incoming* in, short revents);
  // Sends what the handshake owes the peer.
  Step SendOwed(Incoming* in);
  // Reads the rest of the handshake's next message (*want bytes) into in->in.
  Step ReadMessage(Incoming* in, size_t* want);
  // The hello: the descriptor goes to the Socket it names.
  void TakeHello(Incoming* in);
  void RefuseIncoming(Incoming* in, const std::string& why);

  const int rank_;
  const int size_;
  const std::string key_;
  const double timeout_s_;
  SocketTuner* tuner_;
  int listen_fd_ = -1;
  const std::vector<std::vector<Socket*>>* by_peer_ = nullptr;  // from Run
  int per_peer_ = 1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // the descriptors handed to by_peer_'s sockets, and status_
  Status status_;
  WarnLimiter refusal_log_{5, 10};
};

}  // namespace zc::tcp
