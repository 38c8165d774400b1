// Listener: the data port's accept loop and the server side of every
// handshake; see tcp_listener.h.
#include "p2p/tcp/tcp_listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "common/socket.h"
#include "p2p/tcp/tcp_wire.h"

namespace zc::tcp {

// One connection being accepted: the server side of the job-key handshake,
// then the 8-byte hello (rank, socket index), all non-blocking.
struct Listener::Incoming {
  int fd = -1;
  std::string addr;
  std::unique_ptr<net::AuthHandshake> auth;
  Clock::time_point deadline;
  std::string out;  // bytes not yet sent
  uint8_t in[net::AuthHandshake::kHelloBytes];
  size_t have = 0;
  bool failed = false;  // refused: send `out` (the verdict) best effort, then close
  size_t want() const { return auth->done() ? 8 : auth->want(); }
};

Status Listener::Open(const std::string& ip, int* port) { return net::Listen(ip, 0, &listen_fd_, port); }

void Listener::Close() {
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

// Runs every pending handshake at once (poll, non-blocking I/O), so an idle
// or hostile connection delays nobody.
void Listener::Run(const std::vector<std::vector<Socket*>>* by_peer, int per_peer, int expected, Deadline dl) {
  by_peer_ = by_peer;
  per_peer_ = per_peer;
  std::deque<Incoming> pending;
  std::vector<pollfd> fds;
  while (Connected() < expected && !stop_.load()) {
    if (dl.expired()) {
      TimedOut();
      break;
    }
    int r = 0;
    if (!Poll(pending, dl, &fds, &r)) break;
    AdvancePending(&pending, fds, r);
    if (r > 0 && (fds[0].revents & POLLIN)) AcceptReady(&pending);
  }
  for (auto& in : pending) close(in.fd);
  uint64_t n = refusal_log_.TakeSuppressed(true);
  if (n)
    ZC_WARN(kTcp, "%llu more connection(s) to the data port refused (not logged one by one)",
            static_cast<unsigned long long>(n));
}

int Listener::Connected() {
  std::lock_guard<std::mutex> lock(mu_);
  int got = 0;
  for (int p = 0; p < rank_; ++p)
    for (Socket* s : (*by_peer_)[p]) got += s->fd >= 0 ? 1 : 0;
  return got;
}

void Listener::TimedOut() {
  std::string missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int p = 0; p < rank_; ++p)
      for (Socket* s : (*by_peer_)[p])
        if (s->fd < 0 && !(*by_peer_)[p].empty()) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(p);
          break;
        }
  }
  std::lock_guard<std::mutex> lock(mu_);
  status_ = Error(ZC_ERR_TIMEOUT, "tcp: waiting for peers to connect: no connection "
                  "from peer(s) %s before the deadline (ZC_TIMEOUT %.3g s)",
                  missing.c_str(), timeout_s_);
}

bool Listener::Poll(const std::deque<Incoming>& pending, const Deadline& dl, std::vector<pollfd>* fds, int* r) {
  fds->clear();
  fds->push_back({listen_fd_, POLLIN, 0});
  auto next = Clock::now() + std::chrono::milliseconds(100);  // notices stop_
  next = std::min(next, dl.at());
  for (auto& in : pending) {
    fds->push_back({in.fd, static_cast<short>(in.out.empty() ? POLLIN : POLLOUT), 0});
    next = std::min(next, in.deadline);
  }
  int ms = static_cast<int>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1));
  *r = poll(fds->data(), fds->size(), ms);
  if (*r < 0 && errno != EINTR) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = SystemError(errno, "tcp: waiting for peers to connect: poll");
    return false;
  }
  return true;
}

void Listener::AdvancePending(std::deque<Incoming>* pending, const std::vector<pollfd>& fds, int r) {
  auto now = Clock::now();
  size_t i = 1;
  for (auto it = pending->begin(); it != pending->end(); ++i) {
    bool finished = false;
    if (r > 0 && fds[i].revents) finished = Advance(&*it, fds[i].revents);
    if (!finished && it->deadline <= now) {
      RefuseIncoming(&*it, Format("no handshake within %.3g s", kHandshakeSeconds));
      finished = true;
    }
    it = finished ? pending->erase(it) : it + 1;
  }
}

void Listener::AcceptReady(std::deque<Incoming>* pending) {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && !pending->empty()) {
        RefuseIncoming(&pending->front(), "dropped: out of file descriptors");
        pending->pop_front();
        continue;
      }
      return;  // EAGAIN, or an error the next poll reports again
    }
    if (pending->size() >= kMaxPendingHandshakes) {
      RefuseIncoming(&pending->front(), Format("dropped: %zu handshakes pending, this is the "
                                               "oldest", pending->size()));
      pending->pop_front();
    }
    Incoming in;
    in.fd = fd;
    in.addr = net::PeerAddress(fd);
    in.auth = std::make_unique<net::AuthHandshake>(net::AuthRole::kServer, key_);
    in.out = in.auth->Start();
    in.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kHandshakeSeconds));
    pending->push_back(std::move(in));
  }
}

bool Listener::Advance(Incoming* in, short revents) {
  if (revents & POLLNVAL) {
    RefuseIncoming(in, "descriptor became invalid");
    return true;
  }
  const Step sent = SendOwed(in);
  if (sent != Step::kGoOn) return sent == Step::kFinished;
  for (;;) {
    size_t want = 0;
    const Step read = ReadMessage(in, &want);
    if (read != Step::kGoOn) return read == Step::kFinished;
    if (in->auth->done()) {
      TakeHello(in);
      return true;
    }
    std::string reply;
    Status st = in->auth->OnMessage(in->in, want, &reply);
    in->out += reply;
    if (!st.ok()) {
      RefuseIncoming(in, st.message());
      return true;
    }
    if (!in->out.empty()) return Advance(in, 0);  // send, then read on
  }
}

Listener::Step Listener::SendOwed(Incoming* in) {
  while (!in->out.empty()) {
    ssize_t n = send(in->fd, in->out.data(), in->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      in->out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::kWait;
    RefuseIncoming(in, Format("send during the handshake: %s", strerror(errno)));
    return Step::kFinished;
  }
  return Step::kGoOn;
}

Listener::Step Listener::ReadMessage(Incoming* in, size_t* want) {
  for (;;) {
    *want = in->want();
    net::NoteReceiving();
    ssize_t n = recv(in->fd, in->in + in->have, *want - in->have, MSG_DONTWAIT);
    if (n == 0) {
      RefuseIncoming(in, Format("connection closed during the handshake (after %zu of %zu "
                                "bytes)", in->have, *want));
      return Step::kFinished;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kWait;
      RefuseIncoming(in, Format("recv during the handshake: %s", strerror(errno)));
      return Step::kFinished;
    }
    in->have += static_cast<size_t>(n);
    if (in->have < *want) continue;
    in->have = 0;
    return Step::kGoOn;
  }
}

void Listener::TakeHello(Incoming* in) {
  int peer = -1, idx = -1;
  Status hello = tcp_wire::ParseHello(in->in, size_, per_peer_, &peer, &idx);
  if (hello.ok() && (*by_peer_)[peer].empty())
    hello = Error(ZC_ERR_SYSTEM, "tcp: hello from rank %d, which is not a tcp peer of this rank", peer);
  if (!hello.ok()) {
    RefuseIncoming(in, hello.message());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Socket* sock = (*by_peer_)[peer][idx];
  if (sock->fd >= 0) {
    ZC_WARN(kTcp, "duplicate connection from rank %d socket %d (%s) refused", peer, idx,
            in->addr.c_str());
    close(in->fd);
    in->fd = -1;
    return;
  }
  Status st = net::SetNonBlocking(in->fd, false);
  if (!st.ok()) {
    RefuseIncoming(in, st.message());
    return;
  }
  sock->io_sliced = tuner_->Tune(in->fd);
  sock->fd = in->fd;
  in->fd = -1;
}

void Listener::RefuseIncoming(Incoming* in, const std::string& why) {
  if (!in->out.empty())  // a refusal verdict, so the peer learns why
    send(in->fd, in->out.data(), in->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(in->fd);
  in->fd = -1;
  uint64_t n = refusal_log_.TakeSuppressed();
  if (n)
    ZC_WARN(kTcp, "%llu more connection(s) to the data port refused in the last %.3g s",
            static_cast<unsigned long long>(n), refusal_log_.interval_s());
  if (refusal_log_.Admit())
    ZC_WARN(kTcp, "refused connection from %s: %s", in->addr.c_str(), why.c_str());
}

}  // namespace zc::tcp
