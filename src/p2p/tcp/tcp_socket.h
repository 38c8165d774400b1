// One data socket of the tcp transport, and what the threads that share it
// do with it. Private to src/p2p/tcp.
//
//   send side     any thread, one at a time (send_mu): a message is its
//                 header and payload pieces in one system call, straight
//                 from the caller's buffers; a flag-only write may wait to
//                 ride with the socket's next message (the lazy flag, which
//                 the socket's progress thread flushes when nothing comes);
//   receive side  one thread at a time (service_req, Progress::Service):
//                 one recv fills rbuf with as many messages as arrived;
//                 MessageHandler (tcp_messages.h) takes them off it.
//
// Also SocketTuner: the options both ends give a data socket.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/tcp/tcp_wire.h"
#include "p2p/transport.h"

namespace zc::tcp {

struct ProgressGroup;  // tcp_progress.h

struct Socket {
  Socket(TransportHost* host, int peer, double timeout_s) : peer(peer), host(host), timeout_s(timeout_s) {}

  int fd = -1;
  int peer = -1;
  TransportHost* host;  // the peer's health, and where a send that lost it reports
  double timeout_s;     // ZC_TIMEOUT: a flushed lazy flag's deadline, and a drained payload's
  std::mutex send_mu;
  // One thread at a time takes messages off the socket (and uses rbuf): its
  // progress thread, or a waiting thread that drives (Progress::Sleep).
  // Every Service call adds a request; the one that finds none pending
  // serves, and passes again over the socket while requests came in
  // meanwhile. The others return at once instead of blocking: the epolls
  // are edge-triggered, and a segment that arrives while the driver reads
  // the one before (a message of more than 64 KiB on loopback) woke the
  // progress thread, which then took the rest of the message and had to
  // wake the driver: two wake-ups per message instead of one.
  std::atomic<uint32_t> service_req{0};
  // Passes over the socket started so far (Progress::Service): a progress
  // thread that left a socket to the driver serves it later only when no
  // pass started since (Progress::ProgressLoop).
  std::atomic<uint32_t> passes{0};
  bool served_by_driver = false;  // the current pass's (its serving thread only)
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
  tcp_wire::MsgHeader deferred{};
  bool has_deferred = false;
  Clock::time_point deferred_at;
  std::atomic<bool> deferred_flag{false};
  ProgressGroup* group = nullptr;  // of its progress thread
  // Payloads (and whole messages) above kBlockingMin go through one
  // blocking system call, as a plain socket transfer does, where a
  // non-blocking loop took 1 MiB in about six pieces, each after a poll or
  // an epoll wake-up (docs/PERFORMANCE.md, "TCP point to point against a
  // plain loopback socket"). io_sliced: SO_RCVTIMEO/SO_SNDTIMEO bound each
  // such call (SocketTuner::Tune), so the deadline and the peer's health
  // are checked every net::kIoSliceMs while it waits; without them the
  // non-blocking loop serves.
  static constexpr size_t kBlockingMin = 64 * 1024;
  bool io_sliced = false;
  // An offer (kOffer) that no receive has taken yet (MessageHandler::
  // HandleOffer): the socket is left unread behind its header until a
  // receive takes it (Transport::ServeOffers) or kOfferWait has passed
  // and it is refused. Messages behind it on the socket wait as long.
  // offer and offer_since: the serving thread only; offer_pending is also
  // read by the threads that look at the socket from outside.
  // Long enough for a receive whose thread lost its core for a time slice
  // (a loaded host): a refused offer costs its payload twice.
  static constexpr auto kOfferWait = std::chrono::milliseconds(5);
  tcp_wire::MsgHeader offer{};
  Clock::time_point offer_since;
  std::atomic<bool> offer_pending{false};
  bool OfferWaiting() const { return offer_pending.load(std::memory_order_relaxed); }

  // --- Send side: any thread (send_mu). ---
  Status SendMsg(const tcp_wire::MsgHeader& h, const void* payload, const Deadline& dl) {
    SrcPiece p{payload, payload ? h.bytes : 0};
    return SendMsgV(h, &p, p.bytes ? 1 : 0, dl);
  }
  // One message: the header, then the pieces (h.bytes in all, at most 7).
  Status SendMsgV(const tcp_wire::MsgHeader& h, const SrcPiece* pieces, int n, const Deadline& dl);
  // Several messages in one system call: hs[i] then its pieces (at most 7
  // non-empty ones each, kMaxBatch messages).
  static constexpr int kMaxBatch = 16;
  Status SendBatch(const tcp_wire::MsgHeader* hs, const GatherWrite* w, int n, const Deadline& dl);
  // A flag-only message kept until the socket's next message, or until its
  // progress thread's next turn a millisecond on (FlushDeferred); sent at
  // once when that thread sleeps long or another flag waits already.
  Status SendFlagLazy(const tcp_wire::MsgHeader& h, const Deadline& dl);
  // One small message now, or false when another thread is sending on the
  // socket or its buffer is full (the caller queues it for the Responder):
  // a reading thread must not wait behind a large write. A message cut
  // short by a full buffer is finished, waiting for the peer.
  bool TrySendNow(const tcp_wire::MsgHeader& h, const void* payload, size_t bytes);
  // Sends the waiting flag, if any (older than min_age). A lost peer is
  // reported to the host unless the transport is stopping.
  void FlushDeferred(std::chrono::microseconds min_age, const std::atomic<bool>& stopping);

  // --- Receive side: the one serving thread (service_req). ---
  // n bytes of the stream: the buffered ones, then straight from the socket.
  Status TakeBytes(void* dst, size_t n, const Deadline& dl);
  // Takes `bytes` of the stream and throws them away (a payload nobody wants).
  Status Drain(uint64_t bytes);

 private:
  // Why a send on a dead socket fails: the host's verdict on the peer, or a closed connection.
  Status Closed() const;
  // What ends a blocking transfer between its slices besides its deadline:
  // the peer's loss. Not an abort or a revocation of the communicator: a
  // message cut short leaves the stream unreadable, so the transfer in
  // progress ends as before, at its deadline or the peer's loss.
  Status PeerLost() const;
  // The iovecs out (under send_mu, a deferred flag first when there was
  // one); a lost peer marks the socket dead and tells the host.
  Status SendIov(struct iovec* iov, int k, const Deadline& dl);
  void ClearDeferred() {
    has_deferred = false;
    deferred_flag.store(false, std::memory_order_relaxed);
  }
};

// A data socket's options, set by both ends (Listener, TcpTransport::Dial):
// TCP_NODELAY, the slice that bounds its blocking calls (Socket::io_sliced),
// and the congestion control that ZC_TCP_CONGESTION asks for.
// auto: reno to a peer on this host. The
// system's default here, bbr, paces every socket by its estimate of the
// path's bandwidth, which on loopback is below what the kernel carries:
// a large write left in pieces from pacing timers, and the reader took
// them in hundreds of recvs (2 ranks, 2 MiB allreduce: 570-607 recvfrom
// and 1.42-1.70 ms of CPU per call with bbr, 132 and 1.05 ms with reno;
// 727-874 -> 532 us, docs/PERFORMANCE.md "TCP allreduce vs Gloo").
class SocketTuner {
 public:
  explicit SocketTuner(std::string congestion) : want_(std::move(congestion)) {}
  // Returns whether the blocking calls are bounded (Socket::io_sliced).
  bool Tune(int fd);

 private:
  void Congestion(int fd);
  const std::string want_;  // ZC_TCP_CONGESTION
  std::atomic<bool> congestion_warned_{false};
};

}  // namespace zc::tcp
