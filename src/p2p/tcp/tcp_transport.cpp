#include "p2p/tcp/tcp_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/auth.h"
#include "common/config.h"
#include "common/log.h"
#include "common/rate_limit.h"
#include "common/socket.h"
#include "common/wakeup.h"
#include "p2p/tcp/tcp_wire.h"

namespace zc {
namespace {

// The accept side runs every handshake at once; a connection that has not
// authenticated and said who it is by then is closed, and beyond
// kMaxPendingHandshakes the oldest pending one is dropped for a newcomer.
// A real peer connects right after the address exchange and finishes in
// three round trips; strangers cost the job nothing but a descriptor.
constexpr double kHandshakeSeconds = 5;
constexpr size_t kMaxPendingHandshakes = 64;
constexpr int kConnectAttempts = 5;  // a handshake the peer cut short is retried
using tcp_wire::kBye;
using tcp_wire::kMagic;
using tcp_wire::kReadReq;
using tcp_wire::kReadResp;
using tcp_wire::kWrite;
using tcp_wire::MsgHeader;

class TcpTransport;
struct Responder;

struct Socket {
  int fd = -1;
  int peer = -1;
  std::mutex send_mu;
  // One thread at a time takes messages off the socket (and uses rbuf): its
  // progress thread, or a waiting thread that drives (TcpTransport::Sleep).
  // Every Service call adds a request; the one that finds none pending
  // serves, and passes again over the socket while requests came in
  // meanwhile. The others return at once instead of blocking: the epolls
  // are edge-triggered, and a segment that arrives while the driver reads
  // the one before (a message of more than 64 KiB on loopback) woke the
  // progress thread, which then took the rest of the message and had to
  // wake the driver: two wake-ups per message instead of one.
  std::atomic<uint32_t> service_req{0};
  std::atomic<bool> dead{false};
  std::atomic<bool> said_bye{false};  // the peer finalized; every earlier message on this socket was handled
  // What one recv took off the socket beyond the message being handled
  // (its progress thread only): a burst of small messages costs one system
  // call, not two per message (header, then payload).
  static constexpr size_t kRecvBuf = 16384;
  std::unique_ptr<char[]> rbuf{new char[kRecvBuf]};
  size_t rpos = 0, rend = 0;
  // A flag-only write waiting to ride with the next message (WriteFlagLazy),
  // under send_mu; deferred_flag mirrors has_deferred for the progress thread.
  MsgHeader deferred{};
  bool has_deferred = false;
  Clock::time_point deferred_at;
  std::atomic<bool> deferred_flag{false};
  Responder* group = nullptr;  // of its progress thread
};

// Answers the read requests that one progress thread receives, on a thread
// of its own. A progress thread is the only reader of its sockets, so it
// must never block in a write: a reply larger than the socket buffers
// waits for the peer to read it, and two ranks reading from each other at
// once (bidirectional rendezvous) would each have their progress thread
// stuck writing a reply that the other's stuck progress thread never reads.
struct Responder {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<Socket*, MsgHeader>> requests;  // kReadReq headers, in arrival order
  std::thread thread;
  // The progress thread sleeps long (idle): a lazy flag is then sent at once.
  std::atomic<bool> long_sleep{false};
  // Passes of the driver (TcpTransport::Sleep) over these sockets that took
  // messages. When the driver took most of them in the last millisecond
  // (a ping-pong), the progress thread spends the next one off the sockets'
  // wait queues (ProgressLoop): a message of more than one loopback segment (64 KiB)
  // wakes the driver with its first, and the next ones, arriving while the
  // driver reads, would wake the progress thread too (the driver has left
  // epoll_wait): a second wake-up per message, ~10 us one way here.
  std::atomic<uint64_t> driven{0};
};

struct PendingRead {
  void* dst;
  uint64_t bytes;
  std::atomic<int> state{0};  // 0 waiting, 1 done, 2 failed
  Status status;
};

class TcpConnection : public Connection {
 public:
  TcpConnection(TcpTransport* t, Socket* s) : t_(t), s_(s) {}
  int peer() const override { return s_->peer; }
  Status Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
               const FlagWrite* flag, const Deadline& deadline) override;
  Status Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
              const Deadline& deadline) override;
  Status WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst, uint64_t dst_off,
                     const FlagWrite* flag, const Deadline& deadline) override;
  Status WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst, const Deadline& deadline) override;
  Status WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) override;

 private:
  TcpTransport* t_;
  Socket* s_;
};

class TcpTransport : public Transport, public WaitDriver {
 public:
  TcpTransport(TransportHost* host, const TransportSetup& setup)
      : host_(host), setup_(setup), key_(setup.job_key) {}
  ~TcpTransport() override { Shutdown(); }

  TransportKind kind() const override { return TransportKind::kTcp; }
  Status Expose(MemRegion* region) override {
    region->mutable_remote().owner = setup_.rank;
    return Status::Ok();
  }
  void Unexpose(MemRegion*) override {}
  int connections_per_peer() const override { return per_peer_; }
  WaitDriver* wait_driver() override { return this; }
  // WaitDriver: one waiting thread at a time waits in epoll on every socket
  // and takes what arrives off the socket itself (one wake-up per message,
  // not two: the progress thread's, then the waiter's). The progress
  // threads' epoll entries are exclusive and registered after the
  // driver's, so while it waits the kernel wakes it alone.
  void Sleep(uint32_t epoch, int timeout_us) override { Sleep(epoch, timeout_us, true); }
  // count: the passes that take messages count in Responder::driven.
  void Sleep(uint32_t epoch, int timeout_us, bool count);
  // Sleep's wait in epoll, as the one driving thread.
  void Drive(uint32_t epoch, int timeout_us, bool count);
  // Drives for a one-sided read, without counting in Responder::driven: a
  // window of rendezvous reads is bulk data, where the progress threads
  // take their share (muting them cost ~10% of 512 KiB bandwidth).
  struct ReadDriver : WaitDriver {
    explicit ReadDriver(TcpTransport* t) : t(t) {}
    void Sleep(uint32_t epoch, int timeout_us) override { t->Sleep(epoch, timeout_us, false); }
    TcpTransport* t;
  };
  WaitDriver* read_driver() { return &read_driver_; }
  Connection* connection(int peer, int index) override {
    if (peer < 0 || peer >= static_cast<int>(conns_.size()) || conns_[peer].empty()) return nullptr;
    return conns_[peer][index % per_peer_].get();
  }

  Status Listen(const LinkPlan& plan, std::string* address) override;
  Status Connect(const std::vector<std::string>& addresses) override;
  void Shutdown() override;

  Status SendMsg(Socket* s, const MsgHeader& h, const void* payload, const Deadline& dl) {
    SrcPiece p{payload, payload ? h.bytes : 0};
    return SendMsgV(s, h, &p, p.bytes ? 1 : 0, dl);
  }
  // One message: the header, then the pieces (h.bytes in all, at most 7).
  Status SendMsgV(Socket* s, const MsgHeader& h, const SrcPiece* pieces, int n, const Deadline& dl) {
    std::lock_guard<std::mutex> lock(s->send_mu);
    if (s->dead.load()) return host_->Health(s->peer).ok()
                                   ? Error(ZC_ERR_PEER_LOST, "connection to peer %d is closed", s->peer)
                                   : host_->Health(s->peer);
    struct iovec iov[9];
    int k = 0;
    if (s->has_deferred) iov[k++] = {&s->deferred, sizeof(MsgHeader)};  // rides along
    iov[k++] = {const_cast<MsgHeader*>(&h), sizeof(h)};
    for (int i = 0; i < n && k < 9; ++i)
      if (pieces[i].bytes) iov[k++] = {const_cast<void*>(pieces[i].data), pieces[i].bytes};
    return SendIov(s, iov, k, dl);
  }

  // The iovecs out (under s->send_mu, a deferred flag first when there was
  // one); a lost peer marks the socket dead and tells the host.
  Status SendIov(Socket* s, struct iovec* iov, int k, const Deadline& dl) {
    Status st = net::SendAllv(s->fd, iov, k, dl);
    ClearDeferred(s);
    if (!st.ok() && st.code() == ZC_ERR_PEER_LOST) {
      s->dead.store(true);
      host_->OnPeerLost(s->peer, st.with_context(Format("tcp send to peer %d", s->peer)));
    }
    return st.ok() ? st : st.with_context(Format("tcp write to peer %d", s->peer));
  }

  // Several messages in one system call: hs[i] then its pieces (at most 7
  // non-empty ones each, kMaxBatch messages).
  static constexpr int kMaxBatch = 16;
  Status SendBatch(Socket* s, const MsgHeader* hs, const GatherWrite* w, int n, const Deadline& dl) {
    std::lock_guard<std::mutex> lock(s->send_mu);
    if (s->dead.load()) return host_->Health(s->peer).ok()
                                   ? Error(ZC_ERR_PEER_LOST, "connection to peer %d is closed", s->peer)
                                   : host_->Health(s->peer);
    struct iovec iov[kMaxBatch * 8 + 1];
    int k = 0;
    if (s->has_deferred) iov[k++] = {&s->deferred, sizeof(MsgHeader)};  // rides along
    for (int i = 0; i < n; ++i) {
      iov[k++] = {const_cast<MsgHeader*>(&hs[i]), sizeof(MsgHeader)};
      for (int j = 0, used = 0; j < w[i].n && used < 7; ++j)
        if (w[i].src[j].bytes) {
          iov[k++] = {const_cast<void*>(w[i].src[j].data), w[i].src[j].bytes};
          ++used;
        }
    }
    return SendIov(s, iov, k, dl);
  }

  // A flag-only message kept until the socket's next message, or until its
  // progress thread's next turn a millisecond on (FlushDeferred); sent at
  // once when that thread sleeps long or another flag waits already.
  Status SendFlagLazy(Socket* s, const MsgHeader& h, const Deadline& dl) {
    {
      std::lock_guard<std::mutex> lock(s->send_mu);
      if (s->dead.load()) return host_->Health(s->peer).ok()
                                     ? Error(ZC_ERR_PEER_LOST, "connection to peer %d is closed", s->peer)
                                     : host_->Health(s->peer);
      const bool same = !s->has_deferred || (s->deferred.flag_region_id == h.flag_region_id &&
                                              s->deferred.flag_offset == h.flag_offset);
      if (same) {
        s->deferred = h;
        if (!s->has_deferred) s->deferred_at = Clock::now();
        s->has_deferred = true;
        s->deferred_flag.store(true, std::memory_order_seq_cst);
        // The progress thread announces a long sleep, then looks at
        // deferred_flag: one of us sees the other.
        if (!s->group || !s->group->long_sleep.load(std::memory_order_seq_cst)) return Status::Ok();
      }
    }
    return SendMsg(s, h, nullptr, dl);  // (carries the waiting one first)
  }
  // Sends the waiting flag of s, if any (older than min_age).
  void FlushDeferred(Socket* s, std::chrono::microseconds min_age) {
    if (!s->deferred_flag.load(std::memory_order_seq_cst)) return;
    std::lock_guard<std::mutex> lock(s->send_mu);
    if (!s->has_deferred || s->dead.load() || Clock::now() - s->deferred_at < min_age) return;
    struct iovec iov[1] = {{&s->deferred, sizeof(MsgHeader)}};
    Status st = net::SendAllv(s->fd, iov, 1, Deadline(setup_.config.timeout_s));
    ClearDeferred(s);
    if (!st.ok() && st.code() == ZC_ERR_PEER_LOST && !s->dead.exchange(true) && !stop_.load())
      host_->OnPeerLost(s->peer, st.with_context(Format("tcp send to peer %d", s->peer)));
  }
  static void ClearDeferred(Socket* s) {
    s->has_deferred = false;
    s->deferred_flag.store(false, std::memory_order_relaxed);
  }

  uint64_t AddPending(std::shared_ptr<PendingRead> p) {
    std::lock_guard<std::mutex> lock(pending_mu_);
    uint64_t t = ++next_token_;
    pending_[t] = p;
    return t;
  }
  void RemovePending(uint64_t token) {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.erase(token);
  }
  TransportHost* host() { return host_; }

 private:
  Status ClientHandshake(int fd, int index, const Deadline& dl);
  struct Incoming;
  void AcceptLoop(int expected, Deadline dl);
  void AcceptReady(std::deque<Incoming>* pending);
  // Advances one handshake without blocking; true when it is finished
  // (in->fd handed over to its Socket) or failed (closed, logged).
  bool Advance(Incoming* in, short revents);
  void RefuseIncoming(Incoming* in, const std::string& why);
  // A data socket's options: TCP_NODELAY, and the congestion control that
  // ZC_TCP_CONGESTION asks for. auto: reno to a peer on this host. The
  // system's default here, bbr, paces every socket by its estimate of the
  // path's bandwidth, which on loopback is below what the kernel carries:
  // a large write left in pieces from pacing timers, and the reader took
  // them in hundreds of recvs (2 ranks, 2 MiB allreduce: 570-607 recvfrom
  // and 1.42-1.70 ms of CPU per call with bbr, 132 and 1.05 ms with reno;
  // 727-874 -> 532 us, docs/PERFORMANCE.md "TCP allreduce vs Gloo").
  void Tune(int fd);
  std::atomic<bool> congestion_warned_{false};
  void ProgressLoop(std::vector<Socket*> sockets, Responder* responder, int ep);
  // Pump (one thread at a time, see Socket::service_req), then what a
  // dropped or finished socket needs.
  // Returns whether it took a message off the socket.
  bool Service(Socket* s);
  // Removes a dead socket from the epolls (its fd stays open until Shutdown).
  void Unwatch(Socket* s);
  // Wakeup::Notify, and the driving thread when it waits in epoll.
  void Notify() {
    Wakeup::Notify();
    if (driver_waiting_.load(std::memory_order_seq_cst) && drive_evfd_ >= 0) {
      uint64_t one = 1;
      IgnoreError(write(drive_evfd_, &one, sizeof(one)) == sizeof(one) ? Status::Ok()
                                                                         : Error(ZC_ERR_SYSTEM, "eventfd"),
                  "the driver then wakes at its timeout");
    }
  }
  // Handles one message; returns non-OK when the socket must be dropped.
  // Read requests are queued for responder, never answered here.
  Status HandleMessage(Socket* s, Responder* responder);
  // Recv into the socket's buffer and handle every whole message there,
  // until the socket had no more bytes (edge-triggered epoll: nobody is
  // woken again for bytes already there).
  Status Pump(Socket* s, Responder* responder, bool* took);
  // n bytes of the stream: the buffered ones, then straight from the socket.
  Status TakeBytes(Socket* s, void* dst, size_t n, const Deadline& dl);
  void ResponderLoop(Responder* r);
  // Sends the reply to one read request (the bytes, or a refusal).
  Status AnswerRead(Socket* s, const MsgHeader& req);
  // True when every socket to peer has received the peer's goodbye.
  bool AllSaidBye(int peer) const {
    for (auto& s : sockets_)
      if (s->peer == peer && !s->said_bye.load()) return false;
    return true;
  }
  Status Drain(Socket* s, uint64_t bytes);

  TransportHost* host_;
  const TransportSetup setup_;
  std::string key_;
  std::vector<int> peers_;  // from Listen
  int per_peer_ = 1;
  int listen_fd_ = -1;
  std::vector<std::vector<std::unique_ptr<TcpConnection>>> conns_;
  std::vector<std::unique_ptr<Socket>> sockets_;  // all, owned
  std::vector<std::vector<Socket*>> by_peer_;
  std::mutex accept_mu_;
  Status accept_status_;
  WarnLimiter refusal_log_{5, 10};
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<Responder>> responders_;  // one per progress thread
  std::vector<int> progress_eps_;                       // one epoll per progress thread
  int drive_ep_ = -1;    // every socket, and drive_evfd_
  int drive_evfd_ = -1;  // wakes the driver when another thread set a flag
  std::mutex drive_mu_;  // the one driving thread
  std::atomic<bool> driver_waiting_{false};
  // Threads that found another driving and sleep in Wakeup::Sleep: the
  // driver wakes them when it leaves, so that one drives next (the progress
  // threads may be off the sockets for a millisecond, ProgressLoop).
  std::atomic<int> passengers_{0};
  ReadDriver read_driver_{this};
  std::atomic<bool> stop_{false};
  bool shut_ = false;

  std::mutex pending_mu_;
  std::map<uint64_t, std::shared_ptr<PendingRead>> pending_;
  uint64_t next_token_ = 0;
};

Status TcpTransport::ClientHandshake(int fd, int index, const Deadline& dl) {
  ZC_RETURN_IF_ERROR(net::AuthClient(fd, key_, dl));
  uint32_t hello[2] = {static_cast<uint32_t>(setup_.rank), static_cast<uint32_t>(index)};
  return net::SendAll(fd, hello, sizeof(hello), dl);
}

// One connection being accepted: the server side of the job-key handshake,
// then the 8-byte hello (rank, socket index), all non-blocking.
struct TcpTransport::Incoming {
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

void TcpTransport::Tune(int fd) {
  net::SetNoDelay(fd);
  const std::string& want = setup_.config.tcp_congestion;
  if (want == "system") return;
  const bool automatic = want == "auto";
  if (automatic && !net::PeerIsLocal(fd)) return;
  Status st = net::SetCongestion(fd, automatic ? "reno" : want);
  if (st.ok()) return;
  if (automatic) ZC_TRACE(kTcp, "%s (the system's default stays)", st.message().c_str());
  else if (!congestion_warned_.exchange(true))
    ZC_WARN(kTcp, "ZC_TCP_CONGESTION=%s refused: %s (the system's default stays)", want.c_str(),
            st.message().c_str());
}

void TcpTransport::RefuseIncoming(Incoming* in, const std::string& why) {
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

bool TcpTransport::Advance(Incoming* in, short revents) {
  if (revents & POLLNVAL) {
    RefuseIncoming(in, "descriptor became invalid");
    return true;
  }
  while (!in->out.empty()) {
    ssize_t n = send(in->fd, in->out.data(), in->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      in->out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    RefuseIncoming(in, Format("send during the handshake: %s", strerror(errno)));
    return true;
  }
  for (;;) {
    size_t want = in->want();
    net::NoteReceiving();
    ssize_t n = recv(in->fd, in->in + in->have, want - in->have, MSG_DONTWAIT);
    if (n == 0) {
      RefuseIncoming(in, Format("connection closed during the handshake (after %zu of %zu "
                                "bytes)", in->have, want));
      return true;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      RefuseIncoming(in, Format("recv during the handshake: %s", strerror(errno)));
      return true;
    }
    in->have += static_cast<size_t>(n);
    if (in->have < want) continue;
    in->have = 0;
    if (!in->auth->done()) {
      std::string reply;
      Status st = in->auth->OnMessage(in->in, want, &reply);
      in->out += reply;
      if (!st.ok()) {
        RefuseIncoming(in, st.message());
        return true;
      }
      if (!in->out.empty()) return Advance(in, 0);  // send, then read on
      continue;
    }
    int peer = -1, idx = -1;
    Status hello = tcp_wire::ParseHello(in->in, setup_.size, per_peer_, &peer, &idx);
    if (hello.ok() && by_peer_[peer].empty())
      hello = Error(ZC_ERR_SYSTEM, "tcp: hello from rank %d, which is not a tcp peer of this rank", peer);
    if (!hello.ok()) {
      RefuseIncoming(in, hello.message());
      return true;
    }
    std::lock_guard<std::mutex> lock(accept_mu_);
    Socket* sock = by_peer_[peer][idx];
    if (sock->fd >= 0) {
      ZC_WARN(kTcp, "duplicate connection from rank %d socket %d (%s) refused", peer, idx,
              in->addr.c_str());
      close(in->fd);
      in->fd = -1;
      return true;
    }
    Status st = net::SetNonBlocking(in->fd, false);
    if (!st.ok()) {
      RefuseIncoming(in, st.message());
      return true;
    }
    Tune(in->fd);
    sock->fd = in->fd;
    in->fd = -1;
    return true;
  }
}

void TcpTransport::AcceptReady(std::deque<Incoming>* pending) {
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

// Runs every pending handshake at once (poll, non-blocking I/O), so an idle
// or hostile connection delays nobody.
void TcpTransport::AcceptLoop(int expected, Deadline dl) {
  std::deque<Incoming> pending;
  auto connected = [&] {
    std::lock_guard<std::mutex> lock(accept_mu_);
    int got = 0;
    for (int p = 0; p < setup_.rank; ++p)
      for (Socket* s : by_peer_[p]) got += s->fd >= 0 ? 1 : 0;
    return got;
  };
  std::vector<pollfd> fds;
  while (connected() < expected && !stop_.load()) {
    if (dl.expired()) {
      std::string missing;
      {
        std::lock_guard<std::mutex> lock(accept_mu_);
        for (int p = 0; p < setup_.rank; ++p)
          for (Socket* s : by_peer_[p])
            if (s->fd < 0 && !by_peer_[p].empty()) {
              missing += (missing.empty() ? "" : ", ") + std::to_string(p);
              break;
            }
      }
      std::lock_guard<std::mutex> lock(accept_mu_);
      accept_status_ = Error(ZC_ERR_TIMEOUT, "tcp: waiting for peers to connect: no connection "
                             "from peer(s) %s before the deadline (ZC_TIMEOUT %.3g s)",
                             missing.c_str(), setup_.config.timeout_s);
      break;
    }
    fds.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    auto next = Clock::now() + std::chrono::milliseconds(100);  // notices stop_
    next = std::min(next, dl.at());
    for (auto& in : pending) {
      fds.push_back({in.fd, static_cast<short>(in.out.empty() ? POLLIN : POLLOUT), 0});
      next = std::min(next, in.deadline);
    }
    int ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1));
    int r = poll(fds.data(), fds.size(), ms);
    if (r < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lock(accept_mu_);
      accept_status_ = SystemError(errno, "tcp: waiting for peers to connect: poll");
      break;
    }
    auto now = Clock::now();
    size_t i = 1;
    for (auto it = pending.begin(); it != pending.end(); ++i) {
      bool finished = false;
      if (r > 0 && fds[i].revents) finished = Advance(&*it, fds[i].revents);
      if (!finished && it->deadline <= now) {
        RefuseIncoming(&*it, Format("no handshake within %.3g s", kHandshakeSeconds));
        finished = true;
      }
      it = finished ? pending.erase(it) : it + 1;
    }
    if (r > 0 && (fds[0].revents & POLLIN)) AcceptReady(&pending);
  }
  for (auto& in : pending) close(in.fd);
  uint64_t n = refusal_log_.TakeSuppressed(true);
  if (n)
    ZC_WARN(kTcp, "%llu more connection(s) to the data port refused (not logged one by one)",
            static_cast<unsigned long long>(n));
}

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
  if (st.ok()) st = net::Listen(ip, 0, &listen_fd_, &port);
  ZC_RETURN_IF_ERROR(st.with_context("tcp: cannot listen"));
  *address = Format("%s:%d", ip.c_str(), port);
  ZC_INFO(kTcp, "listening on %s (%s), %d socket(s) per peer", address->c_str(), ifname.c_str(), per_peer_);
  return Status::Ok();
}

Status TcpTransport::Connect(const std::vector<std::string>& all) {
  const Config& cfg = setup_.config;
  const std::vector<int>& peers = peers_;
  int n = setup_.size, me = setup_.rank;
  if (static_cast<int>(all.size()) != n)
    return Error(ZC_ERR_INTERNAL, "tcp: address exchange returned %zu records for %d ranks", all.size(), n);

  conns_.clear();
  conns_.resize(n);
  by_peer_.assign(n, {});
  int expected = 0;
  for (int p : peers) {
    for (int i = 0; i < per_peer_; ++i) {
      auto s = std::make_unique<Socket>();
      s->peer = p;
      by_peer_[p].push_back(s.get());
      conns_[p].push_back(std::make_unique<TcpConnection>(this, s.get()));
      sockets_.push_back(std::move(s));
    }
    if (p < me) expected += per_peer_;
  }
  Deadline dl(cfg.timeout_s);
  std::thread acceptor([this, expected, dl] { AcceptLoop(expected, dl); });
  Status cst;
  for (int p : peers) {
    if (p < me) continue;
    std::string host;
    int pport;
    cst = net::ParseHostPort(all[p], &host, &pport);
    for (int i = 0; cst.ok() && i < per_peer_; ++i) {
      for (int attempt = 1;; ++attempt) {
        int fd;
        cst = net::Connect(host, pport, dl, &fd);
        if (!cst.ok()) break;
        cst = ClientHandshake(fd, i, Deadline(std::min(dl.remaining_s(), 2 * kHandshakeSeconds)));
        if (cst.ok()) {
          Tune(fd);
          by_peer_[p][i]->fd = fd;
          break;
        }
        close(fd);
        // The peer shed our connection among a crowd of strangers: again.
        if (cst.code() != ZC_ERR_PEER_LOST || attempt == kConnectAttempts || dl.expired()) {
          cst = cst.with_context(Format("attempt %d of %d", attempt, kConnectAttempts));
          break;
        }
      }
    }
    if (!cst.ok()) {
      cst = cst.with_context(Format("tcp: connecting to peer %d at %s", p, all[p].c_str()));
      break;
    }
  }
  if (!cst.ok()) stop_.store(true);
  acceptor.join();
  ZC_RETURN_IF_ERROR(cst);
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    ZC_RETURN_IF_ERROR(accept_status_);
  }
  close(listen_fd_);
  listen_fd_ = -1;
  // Sockets round-robin over the progress threads (the paper's CQ threads).
  int nthreads = std::max(1, std::min<int>(cfg.num_cqs, static_cast<int>(sockets_.size())));
  std::vector<std::vector<Socket*>> groups(nthreads);
  for (size_t i = 0; i < sockets_.size(); ++i) groups[i % nthreads].push_back(sockets_[i].get());
  // The driver's epoll first: on each socket's wait queue its exclusive
  // entry comes before the progress thread's (Sleep).
  drive_ep_ = epoll_create1(EPOLL_CLOEXEC);
  drive_evfd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (drive_ep_ < 0 || drive_evfd_ < 0) return Error(ZC_ERR_SYSTEM, "tcp: epoll/eventfd: %s", strerror(errno));
  // Edge-triggered: a thread that finds another serving a socket returns
  // (Service) and must not be woken again and again for the same bytes.
  auto watch = [](int ep, int fd, void* ptr) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLET;
    ev.data.ptr = ptr;
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? Status::Ok()
                                                      : Error(ZC_ERR_SYSTEM, "tcp: epoll_ctl: %s", strerror(errno));
  };
  ZC_RETURN_IF_ERROR(watch(drive_ep_, drive_evfd_, nullptr));
  for (auto& s : sockets_) ZC_RETURN_IF_ERROR(watch(drive_ep_, s->fd, s.get()));
  for (auto& g : groups) {
    if (g.empty()) continue;
    responders_.push_back(std::make_unique<Responder>());
    Responder* r = responders_.back().get();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return Error(ZC_ERR_SYSTEM, "tcp: epoll: %s", strerror(errno));
    progress_eps_.push_back(ep);
    for (Socket* s : g) {
      s->group = r;
      ZC_RETURN_IF_ERROR(watch(ep, s->fd, s));
    }
  }
  size_t gi = 0;
  for (auto& g : groups) {
    if (g.empty()) continue;
    Responder* r = responders_[gi].get();
    int ep = progress_eps_[gi++];
    r->thread = std::thread([this, r] { ResponderLoop(r); });
    threads_.emplace_back([this, g, r, ep] { ProgressLoop(g, r, ep); });
  }
  return Status::Ok();
}

Status TcpTransport::TakeBytes(Socket* s, void* dst, size_t n, const Deadline& dl) {
  const size_t have = std::min(n, s->rend - s->rpos);
  if (have) {
    memcpy(dst, s->rbuf.get() + s->rpos, have);
    s->rpos += have;
  }
  if (n == have) return Status::Ok();
  // The rest is usually on its way (a message larger than one loopback
  // segment arrives in two): look again for a few microseconds before
  // RecvAll sleeps in poll, which costs a wake-up. Only for the last
  // kRecvLowatMin bytes: a larger rest is left to RecvAll's low-water wait
  // (one wake-up when it is there), since spinning on it took it in as
  // many pieces as the sender's segments, each recv contending for the
  // socket's lock with the sender (2 ranks, tcp allreduce: 4-32 MiB
  // 0.8-0.9x of the time).
  char* p = static_cast<char*>(dst) + have;
  size_t left = n - have;
  for (int spin = 0; spin < 200 && left && left <= net::kRecvLowatMin; ++spin) {
    net::NoteReceiving();
    ssize_t got = recv(s->fd, p, left, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      left -= static_cast<size_t>(got);
      spin = 0;
    } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      break;  // RecvAll reports it
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  return left ? net::RecvAll(s->fd, p, left, dl) : Status::Ok();
}

Status TcpTransport::Pump(Socket* s, Responder* responder, bool* took) {
  for (;;) {
    // Room for this recv: what was handled goes, a partial message moves to
    // the front.
    if (s->rpos == s->rend) {
      s->rpos = s->rend = 0;
    } else if (s->rpos > 0) {
      memmove(s->rbuf.get(), s->rbuf.get() + s->rpos, s->rend - s->rpos);
      s->rend -= s->rpos;
      s->rpos = 0;
    }
    const size_t room = Socket::kRecvBuf - s->rend;
    net::NoteReceiving();
    ssize_t n = recv(s->fd, s->rbuf.get() + s->rend, room, MSG_DONTWAIT);
    if (n == 0)
      return Error(ZC_ERR_PEER_LOST, "tcp: recv from peer %d: connection closed by peer", s->peer);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return Error(ZC_ERR_PEER_LOST, "tcp: recv from peer %d: %s", s->peer, strerror(errno));
    }
    s->rend += static_cast<size_t>(n);
    while (s->rend - s->rpos >= sizeof(MsgHeader) && !s->said_bye.load()) {
      *took = true;
      ZC_RETURN_IF_ERROR(HandleMessage(s, responder));
    }
    // A short recv found the socket empty: a byte that came after it raised
    // a new edge (a Service request). A full buffer may have left more.
    if (static_cast<size_t>(n) < room || s->said_bye.load()) return Status::Ok();
  }
}

Status TcpTransport::Drain(Socket* s, uint64_t bytes) {
  char buf[16384];
  Deadline dl(setup_.config.timeout_s);
  while (bytes) {
    size_t n = bytes < sizeof(buf) ? bytes : sizeof(buf);
    ZC_RETURN_IF_ERROR(TakeBytes(s, buf, n, dl));
    bytes -= n;
  }
  return Status::Ok();
}

Status TcpTransport::HandleMessage(Socket* s, Responder* responder) {
  MsgHeader h;
  Deadline dl(setup_.config.timeout_s);
  ZC_RETURN_IF_ERROR(TakeBytes(s, &h, sizeof(h), dl));
  ZC_RETURN_IF_ERROR(tcp_wire::CheckHeader(h, s->peer));
  switch (h.type) {
    case kWrite: {
      std::shared_lock<std::shared_mutex> use(host_->region_use());
      if (h.bytes) {
        MemRegion* r = host_->FindLocalRegion(h.region_id);
        if (!r || !tcp_wire::RangeInside(h.offset, h.bytes, r->size())) {
          if (!r && host_->RegionRetired(h.region_id))
            ZC_TRACE(kTcp, "peer %d wrote %llu bytes to freed region %llu: dropped", s->peer,
                     static_cast<unsigned long long>(h.bytes),
                     static_cast<unsigned long long>(h.region_id));
          else
            ZC_WARN(kTcp, "peer %d wrote %llu bytes to unknown or too small region %llu: dropped",
                    s->peer, static_cast<unsigned long long>(h.bytes),
                    static_cast<unsigned long long>(h.region_id));
          ZC_RETURN_IF_ERROR(Drain(s, h.bytes));
        } else {
          // Zero copy: straight from the socket into the target region.
          ZC_RETURN_IF_ERROR(TakeBytes(s, static_cast<char*>(r->data()) + h.offset, h.bytes, dl));
        }
      }
      if (h.flag_region_id) {
        MemRegion* f = host_->FindLocalRegion(h.flag_region_id);
        if (!f && host_->RegionRetired(h.flag_region_id)) {
          // A credit or flag that crossed our free of the region (a peer's
          // last credit at shutdown): nobody waits on it any more.
          ZC_TRACE(kTcp, "peer %d set a flag in freed region %llu: dropped", s->peer,
                   static_cast<unsigned long long>(h.flag_region_id));
        } else if (!f || !tcp_wire::FlagInside(h.flag_offset, f->size())) {
          ZC_WARN(kTcp, "peer %d set a flag in unknown region %llu: dropped", s->peer,
                  static_cast<unsigned long long>(h.flag_region_id));
        } else {
          reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(f->data()) + h.flag_offset)
              ->store(h.flag_value, std::memory_order_release);
          Notify();
        }
      }
      return Status::Ok();
    }
    case kReadReq: {
      // Answered by the responder, so that this thread goes on reading
      // (a reply may wait for the peer to read, see Responder).
      {
        std::lock_guard<std::mutex> lock(responder->mu);
        responder->requests.emplace_back(s, h);
      }
      responder->cv.notify_one();
      return Status::Ok();
    }
    case kReadResp: {
      std::shared_ptr<PendingRead> p;
      {
        std::lock_guard<std::mutex> lock(pending_mu_);
        auto it = pending_.find(h.token);
        if (it != pending_.end()) p = it->second;
      }
      if (!p || !tcp_wire::ReadRespFits(h, p->bytes)) {
        // The reader gave up (deadline): throw the data away.
        return Drain(s, h.bytes);
      }
      if (h.status) {
        p->status = tcp_wire::RefusedRead(h, s->peer);
        p->state.store(2, std::memory_order_release);
        Notify();
        return Status::Ok();
      }
      Status st = TakeBytes(s, p->dst, h.bytes, dl);
      p->status = st;
      p->state.store(st.ok() ? 1 : 2, std::memory_order_release);
      Notify();
      return st;
    }
    case kBye:
      // Not an error yet: data the peer sent before finalizing may still be
      // in flight on its other sockets. The caller reports the peer gone once
      // every socket of it has said goodbye.
      s->said_bye.store(true);
      return Status::Ok();
    default:
      return Error(ZC_ERR_PEER_LOST, "tcp: unknown message type %u from peer %d", h.type, s->peer);
  }
}

Status TcpTransport::AnswerRead(Socket* s, const MsgHeader& req) {
  // Held shared while the region's bytes go out: it is not freed under us.
  std::shared_lock<std::shared_mutex> use(host_->region_use());
  MemRegion* r = host_->FindLocalRegion(req.region_id);
  MsgHeader resp{};
  resp.magic = kMagic;
  resp.type = kReadResp;
  resp.token = req.token;
  const void* src = nullptr;
  if (!r || !tcp_wire::RangeInside(req.offset, req.bytes, r->size())) {
    resp.status = ZC_ERR_INVALID_ARG;
  } else {
    resp.bytes = req.bytes;
    src = static_cast<char*>(r->data()) + req.offset;
  }
  return SendMsg(s, resp, src, Deadline(setup_.config.timeout_s));
}

void TcpTransport::ResponderLoop(Responder* r) {
  for (;;) {
    std::pair<Socket*, MsgHeader> req;
    {
      std::unique_lock<std::mutex> lock(r->mu);
      r->cv.wait(lock, [&] { return stop_.load() || !r->requests.empty(); });
      if (stop_.load()) return;
      req = r->requests.front();
      r->requests.pop_front();
    }
    Socket* s = req.first;
    if (s->dead.load()) continue;  // the reader learns of the loss from its Health check
    Status st = AnswerRead(s, req.second);
    // As when the progress thread answered: a reply that cannot be sent
    // (timeout: the peer reads nothing) drops the connection.
    if (!st.ok() && !s->dead.exchange(true) && !stop_.load())
      host_->OnPeerLost(s->peer, st.with_context("answering a one-sided read"));
  }
}

void TcpTransport::Unwatch(Socket* s) {
  if (drive_ep_ >= 0) epoll_ctl(drive_ep_, EPOLL_CTL_DEL, s->fd, nullptr);
  for (int ep : progress_eps_) epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, nullptr);
}

bool TcpTransport::Service(Socket* s) {
  // Another thread serves the socket: it passes again for this request.
  if (s->service_req.fetch_add(1, std::memory_order_acq_rel) != 0) return false;
  Status st;
  bool took = false;
  bool ended = false;  // dead before, or this pass ended the socket
  bool lost = false;   // this pass ended it: report below
  for (uint32_t n = 1;;) {
    if (!ended && s->dead.load()) {
      ended = true;
      Unwatch(s);  // dropped by a failed send: it may stay readable (EOF)
    } else if (!ended) {
      st = Pump(s, s->group, &took);
      if (!st.ok() || s->said_bye.load()) {
        ended = true;
        lost = !s->dead.exchange(true);
      }
    }
    // The requests this pass answered; those that came meanwhile get another.
    const uint32_t left = s->service_req.fetch_sub(n, std::memory_order_acq_rel) - n;
    if (left == 0) break;
    n = left;
  }
  if (!lost) return took;
  Unwatch(s);
  if (stop_.load()) return took;
  if (st.ok()) {
    if (AllSaidBye(s->peer))
      host_->OnPeerLost(s->peer, Error(ZC_ERR_PEER_LOST, "peer %d has finalized", s->peer));
  } else {
    host_->OnPeerLost(s->peer, st);
  }
  Notify();
  return took;
}

void TcpTransport::ProgressLoop(std::vector<Socket*> sockets, Responder* responder, int ep) {
  epoll_event evs[32];
  int active_turns = 0;
  // Passes that took messages in the current window of kMuteWindow: the
  // driver's (from responder->driven) and this thread's.
  constexpr auto kMuteWindow = std::chrono::milliseconds(1);
  constexpr uint64_t kMuteMinDriven = 4;  // per millisecond
  uint64_t driven = responder->driven.load(std::memory_order_relaxed);
  uint64_t took = 0;
  auto window_start = Clock::now();
  bool muted = false;
  while (!stop_.load(std::memory_order_relaxed)) {
    size_t live = 0;
    for (Socket* s : sockets) live += !s->dead.load();
    if (!live) return;
    // A waiting thread took most messages off these sockets in the last
    // window (a ping-pong): it takes what comes, so this thread sleeps a
    // window without waiting on them (not woken by them, see
    // Responder::driven), then takes what was left. Where it took few
    // (windows of isend/irecv, which the P2pEngine's thread polls, and one
    // blocking ack per window), this thread waits on them.
    const auto now = Clock::now();
    if (muted || now - window_start >= kMuteWindow) {
      const uint64_t d = responder->driven.load(std::memory_order_relaxed);
      const uint64_t ms = std::max<uint64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(now - window_start).count());
      muted = d - driven >= kMuteMinDriven * ms && d - driven > 2 * took;
      driven = d;
      took = 0;
      window_start = now;
    }
    // Blocking wait: an idle rank costs no CPU; 100 ms bounds shutdown time.
    // For 100 ms after traffic, 1 ms turns send lazy flags on time
    // (SendFlagLazy); before a long sleep, any waiting one goes now.
    const bool long_sleep = active_turns == 0 && !muted;
    if (long_sleep) {
      responder->long_sleep.store(true, std::memory_order_seq_cst);
      for (Socket* s : sockets) FlushDeferred(s, std::chrono::microseconds(0));
    }
    int n;
    if (muted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      n = epoll_wait(ep, evs, 32, 0);
      active_turns = 100;
    } else {
      n = epoll_wait(ep, evs, 32, long_sleep ? 100 : 1);
    }
    responder->long_sleep.store(false, std::memory_order_relaxed);
    if (n > 0) active_turns = 100;
    else if (active_turns > 0) --active_turns;
    for (Socket* s : sockets) FlushDeferred(s, std::chrono::microseconds(muted || n > 0 ? 1000 : 0));
    for (int i = 0; i < n && !stop_.load(); ++i) took += Service(static_cast<Socket*>(evs[i].data.ptr));
  }
}

void TcpTransport::Sleep(uint32_t epoch, int timeout_us, bool count) {
  std::unique_lock<std::mutex> drive(drive_mu_, std::try_to_lock);
  if (!drive.owns_lock()) {
    // Counted, then tried again: a driver leaving after our first try
    // either sees the count (and wakes us) or left the lock to us.
    passengers_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!drive.try_lock()) {
      Wakeup::Sleep(epoch, timeout_us);
      passengers_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    passengers_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (stop_.load() || drive_ep_ < 0) {
    drive.unlock();
    Wakeup::Sleep(epoch, timeout_us);
    return;
  }
  Drive(epoch, timeout_us, count);
  drive.unlock();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (passengers_.load(std::memory_order_seq_cst) > 0) Wakeup::Notify();
}

void TcpTransport::Drive(uint32_t epoch, int timeout_us, bool count) {
  // Announce, then look at the epoch: a thread that set a flag after our
  // caller's check either changed the epoch before this load or sees
  // driver_waiting_ and writes the eventfd (Notify).
  driver_waiting_.store(true, std::memory_order_seq_cst);
  if (Wakeup::Epoch() != epoch) {
    driver_waiting_.store(false, std::memory_order_relaxed);
    return;
  }
  epoll_event evs[32];
  int n = epoll_wait(drive_ep_, evs, 32, std::max(1, timeout_us / 1000));
  driver_waiting_.store(false, std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    if (!evs[i].data.ptr) {
      uint64_t v;
      IgnoreError(read(drive_evfd_, &v, sizeof(v)) == sizeof(v) ? Status::Ok() : Error(ZC_ERR_SYSTEM, "eventfd"),
                  "drained by the next read");
      continue;
    }
    Socket* s = static_cast<Socket*>(evs[i].data.ptr);
    if (Service(s) && count && s->group) s->group->driven.fetch_add(1, std::memory_order_relaxed);
  }
}

void TcpTransport::Shutdown() {
  if (shut_) return;
  shut_ = true;
  // Say goodbye so peers report "finalized" rather than a reset.
  for (auto& s : sockets_) {
    if (s->fd < 0 || s->dead.load()) continue;
    FlushDeferred(s.get(), std::chrono::microseconds(0));
    MsgHeader bye{};
    bye.magic = kMagic;
    bye.type = kBye;
    std::lock_guard<std::mutex> lock(s->send_mu);
    IgnoreError(net::SendAll(s->fd, &bye, sizeof(bye), Deadline(0.5)),
                "goodbye at shutdown: best effort (the peer may be gone)");
  }
  stop_.store(true);
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto& r : responders_) {
    {
      std::lock_guard<std::mutex> lock(r->mu);  // no lost wakeup between its check and wait
    }
    r->cv.notify_all();
    r->thread.join();
  }
  responders_.clear();
  for (int ep : progress_eps_) close(ep);
  progress_eps_.clear();
  {
    std::lock_guard<std::mutex> lock(drive_mu_);  // no driver in epoll_wait
    if (drive_ep_ >= 0) close(drive_ep_);
    if (drive_evfd_ >= 0) close(drive_evfd_);
    drive_ep_ = drive_evfd_ = -1;
  }
  for (auto& s : sockets_)
    if (s->fd >= 0) {
      close(s->fd);
      s->fd = -1;
    }
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

Status TcpConnection::Write(const void* src, size_t bytes, const RemoteRegion& dst,
                            uint64_t dst_off, const FlagWrite* flag, const Deadline& deadline) {
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kWrite;
  h.region_id = dst.id;
  h.offset = dst_off;
  h.bytes = bytes;
  if (flag) {
    h.flag_region_id = flag->region->id;
    h.flag_offset = flag->offset;
    h.flag_value = flag->value;
  }
  return t_->SendMsg(s_, h, bytes ? src : nullptr, deadline);
}

Status TcpConnection::WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst,
                                  uint64_t dst_off, const FlagWrite* flag, const Deadline& deadline) {
  if (n > 7) return Connection::WriteGather(src, n, dst, dst_off, flag, deadline);
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kWrite;
  h.region_id = dst.id;
  h.offset = dst_off;
  for (int i = 0; i < n; ++i) h.bytes += src[i].bytes;
  if (flag) {
    h.flag_region_id = flag->region->id;
    h.flag_offset = flag->offset;
    h.flag_value = flag->value;
  }
  return t_->SendMsgV(s_, h, src, n, deadline);
}

Status TcpConnection::WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst,
                                 const Deadline& deadline) {
  bool small = n <= TcpTransport::kMaxBatch;
  for (int i = 0; small && i < n; ++i) {
    int used = 0;
    for (int j = 0; j < w[i].n; ++j) used += w[i].src[j].bytes != 0;
    small = used <= 7;
  }
  if (!small) return Connection::WriteBatch(w, n, dst, deadline);
  MsgHeader hs[TcpTransport::kMaxBatch] = {};
  for (int i = 0; i < n; ++i) {
    MsgHeader& h = hs[i];
    h.magic = kMagic;
    h.type = kWrite;
    h.region_id = dst.id;
    h.offset = w[i].dst_off;
    for (int j = 0; j < w[i].n; ++j) h.bytes += w[i].src[j].bytes;
    h.flag_region_id = w[i].flag.region->id;
    h.flag_offset = w[i].flag.offset;
    h.flag_value = w[i].flag.value;
  }
  return t_->SendBatch(s_, hs, w, n, deadline);
}

Status TcpConnection::WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) {
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kWrite;
  h.region_id = flag.region->id;
  h.flag_region_id = flag.region->id;
  h.flag_offset = flag.offset;
  h.flag_value = flag.value;
  return t_->SendFlagLazy(s_, h, deadline);
}

Status TcpConnection::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                           const Deadline& deadline) {
  auto pr = std::make_shared<PendingRead>();
  PendingRead& p = *pr;
  p.dst = dst;
  p.bytes = bytes;
  uint64_t token = t_->AddPending(pr);
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kReadReq;
  h.region_id = src.id;
  h.offset = src_off;
  h.bytes = bytes;
  h.token = token;
  Backoff backoff(/*notified=*/true, t_->read_driver());  // the progress thread (or this one, driving) notifies
  Status st = t_->SendMsg(s_, h, nullptr, deadline);
  while (st.ok()) {
    int state = p.state.load(std::memory_order_acquire);
    if (state == 1) break;
    if (state == 2) {
      st = p.status;
      break;
    }
    st = t_->host()->Health(s_->peer);
    if (st.ok() && deadline.expired())
      st = Error(ZC_ERR_TIMEOUT, "tcp read of %zu bytes from peer %d: no reply: waited %.1f s",
                 bytes, s_->peer, deadline.elapsed_s());
    backoff.Pause();
  }
  t_->RemovePending(token);
  // A read that failed while its data was arriving: wait for the progress
  // thread to finish with dst before returning it to the caller.
  while (p.state.load(std::memory_order_acquire) == 0 && !st.ok() && s_->dead.load() == false &&
         !deadline.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return st;
}

}  // namespace

Status CreateTcpTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<TcpTransport>(host, setup);
  return Status::Ok();
}

}  // namespace zc
