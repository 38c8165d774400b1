// Socket's send side (one message per system call, the lazy flag) and
// receive side (the buffered stream), and SocketTuner: see tcp_socket.h.
#include "p2p/tcp/tcp_socket.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/socket.h"
#include "common/socket_sliced.h"
#include "p2p/tcp/tcp_progress.h"

namespace zc::tcp {

using tcp_wire::MsgHeader;

Status Socket::Closed() const {
  return host->Health(peer).ok() ? Error(ZC_ERR_PEER_LOST, "connection to peer %d is closed", peer)
                                 : host->Health(peer);
}

Status Socket::PeerLost() const {
  Status h = host->Health(peer);
  return h.code() == ZC_ERR_PEER_LOST ? h : Status::Ok();
}

Status Socket::SendMsgV(const MsgHeader& h, const SrcPiece* pieces, int n, const Deadline& dl) {
  std::lock_guard<std::mutex> lock(send_mu);
  if (dead.load()) return Closed();
  struct iovec iov[9];
  int k = 0;
  if (has_deferred) iov[k++] = {&deferred, sizeof(MsgHeader)};  // rides along
  iov[k++] = {const_cast<MsgHeader*>(&h), sizeof(h)};
  for (int i = 0; i < n && k < 9; ++i)
    if (pieces[i].bytes) iov[k++] = {const_cast<void*>(pieces[i].data), pieces[i].bytes};
  return SendIov(iov, k, dl);
}

Status Socket::SendIov(struct iovec* iov, int k, const Deadline& dl) {
  size_t total = 0;
  for (int i = 0; i < k; ++i) total += iov[i].iov_len;
  Status st = total > kBlockingMin && io_sliced
                  ? net::SendAllvBlocking(fd, iov, k, dl, [this] { return PeerLost(); })
                  : net::SendAllv(fd, iov, k, dl);
  ClearDeferred();
  if (!st.ok() && st.code() == ZC_ERR_PEER_LOST) {
    dead.store(true);
    host->OnPeerLost(peer, st.with_context(Format("tcp send to peer %d", peer)));
    // As the health record says it ("peer N lost: ...", or the alert of the
    // rank that saw it go first), the words every other path uses, so that
    // a write that meets the closed socket before the reader notices names
    // the lost peer the same way.
    Status lost = PeerLost();
    if (!lost.ok()) return lost;
  }
  return st.ok() ? st : st.with_context(Format("tcp write to peer %d", peer));
}

Status Socket::SendBatch(const MsgHeader* hs, const GatherWrite* w, int n, const Deadline& dl) {
  std::lock_guard<std::mutex> lock(send_mu);
  if (dead.load()) return Closed();
  struct iovec iov[kMaxBatch * 8 + 1];
  int k = 0;
  if (has_deferred) iov[k++] = {&deferred, sizeof(MsgHeader)};  // rides along
  for (int i = 0; i < n; ++i) {
    iov[k++] = {const_cast<MsgHeader*>(&hs[i]), sizeof(MsgHeader)};
    for (int j = 0, used = 0; j < w[i].n && used < 7; ++j)
      if (w[i].src[j].bytes) {
        iov[k++] = {const_cast<void*>(w[i].src[j].data), w[i].src[j].bytes};
        ++used;
      }
  }
  return SendIov(iov, k, dl);
}

Status Socket::SendFlagLazy(const MsgHeader& h, const Deadline& dl) {
  {
    std::lock_guard<std::mutex> lock(send_mu);
    if (dead.load()) return Closed();
    const bool same = !has_deferred || (deferred.flag_region_id == h.flag_region_id &&
                                        deferred.flag_offset == h.flag_offset);
    if (same) {
      deferred = h;
      if (!has_deferred) deferred_at = Clock::now();
      has_deferred = true;
      deferred_flag.store(true, std::memory_order_seq_cst);
      // The progress thread announces a long sleep, then looks at
      // deferred_flag: one of us sees the other.
      if (!group || !group->long_sleep.load(std::memory_order_seq_cst)) return Status::Ok();
    }
  }
  return SendMsg(h, nullptr, dl);  // (carries the waiting one first)
}

bool Socket::TrySendNow(const MsgHeader& h, const void* payload, size_t bytes) {
  std::unique_lock<std::mutex> lock(send_mu, std::try_to_lock);
  if (!lock.owns_lock() || dead.load()) return false;
  struct iovec iov[3];
  int k = 0;
  if (has_deferred) iov[k++] = {&deferred, sizeof(MsgHeader)};  // rides along
  iov[k++] = {const_cast<MsgHeader*>(&h), sizeof(h)};
  if (bytes) iov[k++] = {const_cast<void*>(payload), bytes};
  size_t total = 0;
  for (int i = 0; i < k; ++i) total += iov[i].iov_len;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(k);
  net::NoteSent();
  ssize_t n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  ClearDeferred();
  if (n < 0 || static_cast<size_t>(n) == total) {
    if (n < 0 && !dead.exchange(true))
      host->OnPeerLost(peer, Error(ZC_ERR_PEER_LOST, "tcp send to peer %d: %s", peer, strerror(errno)));
    return true;
  }
  // Cut short: the rest must follow before any other message.
  size_t done = static_cast<size_t>(n);
  int first = 0;
  while (first < k && done >= iov[first].iov_len) done -= iov[first++].iov_len;
  iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + done;
  iov[first].iov_len -= done;
  IgnoreError(SendIov(iov + first, k - first, Deadline(timeout_s)), "a lost peer is reported by SendIov");
  return true;
}

void Socket::FlushDeferred(std::chrono::microseconds min_age, const std::atomic<bool>& stopping) {
  if (!deferred_flag.load(std::memory_order_seq_cst)) return;
  // A send in progress carries the waiting flag (SendMsgV puts it first),
  // and no flag can be deferred before it ends (SendFlagLazy takes
  // send_mu): nothing to do. Blocking here instead would keep this
  // progress thread, its sockets' only reader, behind a large write
  // (a posted receive's payload) that waits for the peer to read, while
  // the peer's progress thread may wait the same way for ours.
  std::unique_lock<std::mutex> lock(send_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (!has_deferred || dead.load() || Clock::now() - deferred_at < min_age) return;
  struct iovec iov[1] = {{&deferred, sizeof(MsgHeader)}};
  Status st = net::SendAllv(fd, iov, 1, Deadline(timeout_s));
  ClearDeferred();
  if (!st.ok() && st.code() == ZC_ERR_PEER_LOST && !dead.exchange(true) && !stopping.load())
    host->OnPeerLost(peer, st.with_context(Format("tcp send to peer %d", peer)));
}

Status Socket::TakeBytes(void* dst, size_t n, const Deadline& dl) {
  const size_t have = std::min(n, rend - rpos);
  if (have) {
    memcpy(dst, rbuf.get() + rpos, have);
    rpos += have;
  }
  if (n == have) return Status::Ok();
  // The rest is usually on its way (a message larger than one loopback
  // segment arrives in two): look again for a few microseconds before
  // RecvAll sleeps in poll, which costs a wake-up. Only for the last
  // kBlockingMin bytes: a larger rest is taken by one blocking recv (see
  // kBlockingMin), since spinning on it took it in as many pieces as the
  // sender's segments, each recv contending for the socket's lock with the
  // sender (2 ranks, tcp allreduce: 4-32 MiB 0.8-0.9x of the time).
  char* p = static_cast<char*>(dst) + have;
  size_t left = n - have;
  for (int spin = 0; spin < 200 && left && left <= kBlockingMin; ++spin) {
    net::NoteReceiving();
    ssize_t got = recv(fd, p, left, MSG_DONTWAIT);
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
  if (!left) return Status::Ok();
  if (left > kBlockingMin && io_sliced) {
    const bool quiet = group && served_by_driver;
    if (quiet) group->Quiet(this);
    Status st = net::RecvAllBlocking(fd, p, left, dl, [this] { return PeerLost(); });
    if (quiet) group->Loud(this);
    return st;
  }
  return net::RecvAll(fd, p, left, dl);
}

Status Socket::Drain(uint64_t bytes) {
  char buf[16384];
  Deadline dl(timeout_s);
  while (bytes) {
    size_t n = bytes < sizeof(buf) ? bytes : sizeof(buf);
    ZC_RETURN_IF_ERROR(TakeBytes(buf, n, dl));
    bytes -= n;
  }
  return Status::Ok();
}

bool SocketTuner::Tune(int fd) {
  net::SetNoDelay(fd);
  Status sliced = net::SetIoSlice(fd, net::kIoSliceMs);
  if (!sliced.ok()) ZC_TRACE(kTcp, "%s (large payloads go through poll)", sliced.message().c_str());
  Congestion(fd);
  return sliced.ok();
}

void SocketTuner::Congestion(int fd) {
  const std::string& want = want_;
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

}  // namespace zc::tcp
