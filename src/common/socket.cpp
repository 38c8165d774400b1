#include "common/socket.h"
#include "common/socket_sliced.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/interfaces.h"
#include "common/log.h"

namespace zc::net {
namespace {

bool IsPeerLostErrno(int err) {
  return err == ECONNRESET || err == EPIPE || err == ENOTCONN ||
         err == ECONNABORTED || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == ENETRESET;
}

Status IoError(int err, const char* op, int fd) {
  std::string peer = PeerAddress(fd);
  if (IsPeerLostErrno(err))
    return Error(ZC_ERR_PEER_LOST, "%s %s: connection lost: %s", op,
                 peer.c_str(), strerror(err));
  return SystemError(err, "%s %s", op, peer.c_str());
}

std::string SockaddrToString(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return Format("%s:%d", host, port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return Format("[%s]:%d", host, port);
  }
  return "unknown-family";
}

// Waits until fd is ready for `events` or dl passes. `op` names the caller
// for the error message.
Status WaitReady(int fd, short events, const Deadline& dl, const char* op) {
  for (;;) {
    int ms = dl.remaining_ms();
    if (ms <= 0 && dl.expired())
      return Error(ZC_ERR_TIMEOUT, "%s %s: timed out", op,
                   PeerAddress(fd).c_str());
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return SystemError(errno, "%s: poll", op);
    }
    if (r == 0) continue;  // re-check the deadline
    if (p.revents & POLLNVAL)
      return Error(ZC_ERR_SYSTEM, "%s: fd %d is not open", op, fd);
    // POLLERR/POLLHUP: the next send/recv reports the precise cause.
    return Status::Ok();
  }
}

Status Resolve(const std::string& host, int port, bool passive,
               addrinfo** res) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                       &hints, res);
  if (rc != 0)
    return Error(ZC_ERR_SYSTEM, "resolve '%s': %s", host.c_str(),
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
  return Status::Ok();
}

// Retryable connect failures: the peer is not listening yet, or its accept
// queue is momentarily full.
bool IsRetryableConnectErrno(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH ||
         err == EHOSTUNREACH || err == ECONNRESET || err == EAGAIN ||
         err == ECONNABORTED;
}

// One non-blocking connect attempt to one address. Returns the errno of the
// failure (0 on success) and a connected fd.
int TryConnect(const addrinfo* ai, const Deadline& dl, int* out_fd) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                  ai->ai_protocol);
  if (fd < 0) return errno;
  int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS || err == EINTR) {
    for (;;) {
      pollfd p{fd, POLLOUT, 0};
      int ms = std::min(dl.remaining_ms(), 1000);
      int r = poll(&p, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) { err = errno; break; }
      if (r == 0) {
        if (dl.expired()) { err = ETIMEDOUT; break; }
        continue;
      }
      socklen_t len = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
      break;
    }
  }
  if (err == 0) {
    // Connecting to a free local port can "succeed" as a TCP self-connect
    // (source port == destination port): treat it as refused.
    sockaddr_storage a{}, b{};
    socklen_t la = sizeof(a), lb = sizeof(b);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) == 0 &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) == 0 &&
        la == lb && memcmp(&a, &b, la) == 0)
      err = ECONNREFUSED;
  }
  if (err != 0) {
    close(fd);
    return err;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    err = errno;
    close(fd);
    return err;
  }
  *out_fd = fd;
  return 0;
}

}  // namespace

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return Format("fd %d", fd);
  return SockaddrToString(reinterpret_cast<sockaddr*>(&ss));
}

Status ParseHostPort(const std::string& hostport, std::string* host,
                     int* port) {
  std::string h, p;
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close_br = hostport.find(']');
    if (close_br == std::string::npos || close_br + 1 >= hostport.size() ||
        hostport[close_br + 1] != ':')
      return Error(ZC_ERR_INVALID_ARG,
                   "bad address '%s': expected [ipv6]:port", hostport.c_str());
    h = hostport.substr(1, close_br - 1);
    p = hostport.substr(close_br + 2);
  } else {
    size_t colon = hostport.rfind(':');
    if (colon == std::string::npos)
      return Error(ZC_ERR_INVALID_ARG, "bad address '%s': expected host:port",
                   hostport.c_str());
    h = hostport.substr(0, colon);
    if (h.find(':') != std::string::npos)
      return Error(ZC_ERR_INVALID_ARG,
                   "bad address '%s': put IPv6 addresses in brackets",
                   hostport.c_str());
    p = hostport.substr(colon + 1);
  }
  if (p.empty() || p.size() > 5 ||
      !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Error(ZC_ERR_INVALID_ARG, "bad address '%s': port is not a number",
                 hostport.c_str());
  int v = std::stoi(p);
  if (v > 65535)
    return Error(ZC_ERR_INVALID_ARG, "bad address '%s': port above 65535",
                 hostport.c_str());
  *host = h;
  *port = v;
  return Status::Ok();
}

Status Listen(const std::string& host, int port, int* fd, int* bound_port) {
  if (port < 0 || port > 65535)
    return Error(ZC_ERR_INVALID_ARG, "listen: bad port %d", port);
  addrinfo* res = nullptr;
  ZC_RETURN_IF_ERROR(Resolve(host, port, true, &res).with_context("listen"));
  Status last = Error(ZC_ERR_SYSTEM, "listen on '%s': no address",
                      host.c_str());
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int s = socket(ai->ai_family,
                   ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                   ai->ai_protocol);
    if (s < 0) {
      last = SystemError(errno, "listen on '%s': socket", host.c_str());
      continue;
    }
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, ai->ai_addr, ai->ai_addrlen) != 0) {
      last = SystemError(errno, "listen on %s: bind",
                         SockaddrToString(ai->ai_addr).c_str());
      close(s);
      continue;
    }
    if (listen(s, SOMAXCONN) != 0) {
      last = SystemError(errno, "listen on %s",
                         SockaddrToString(ai->ai_addr).c_str());
      close(s);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last = SystemError(errno, "listen: getsockname");
      close(s);
      continue;
    }
    int bp = ss.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                 : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    freeaddrinfo(res);
    *fd = s;
    if (bound_port) *bound_port = bp;
    return Status::Ok();
  }
  freeaddrinfo(res);
  return last;
}

Status Accept(int listen_fd, const Deadline& dl, int* fd, std::string* peer) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int s = accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                    SOCK_CLOEXEC);
    if (s >= 0) {
      *fd = s;
      if (peer) *peer = SockaddrToString(reinterpret_cast<sockaddr*>(&ss));
      return Status::Ok();
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED) continue;
    if (err != EAGAIN && err != EWOULDBLOCK)
      return SystemError(err, "accept on fd %d", listen_fd);
    if (dl.expired())
      return Error(ZC_ERR_TIMEOUT, "accept on fd %d: no connection before the "
                   "deadline", listen_fd);
    pollfd p{listen_fd, POLLIN, 0};
    int r = poll(&p, 1, dl.remaining_ms());
    if (r < 0 && errno != EINTR) return SystemError(errno, "accept: poll");
    if (r > 0 && (p.revents & POLLNVAL))
      return Error(ZC_ERR_SYSTEM, "accept: fd %d is not open", listen_fd);
  }
}

Status Connect(const std::string& host, int port, const Deadline& dl,
               int* fd, std::atomic<int>* failed_attempts) {
  if (host.empty())
    return Error(ZC_ERR_INVALID_ARG, "connect: empty host (port %d)", port);
  int attempts = 0, last_err = 0;
  int sleep_ms = 5;
  Status resolve_st;
  for (;;) {
    addrinfo* res = nullptr;
    // Resolve inside the loop: a name may become resolvable later.
    resolve_st = Resolve(host, port, false, &res);
    if (resolve_st.ok()) {
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        ++attempts;
        last_err = TryConnect(ai, dl, fd);
        if (last_err == 0) {
          freeaddrinfo(res);
          return Status::Ok();
        }
        if (failed_attempts) failed_attempts->fetch_add(1);
        if (!IsRetryableConnectErrno(last_err)) {
          freeaddrinfo(res);
          return SystemError(last_err, "connect to %s:%d", host.c_str(), port);
        }
      }
      freeaddrinfo(res);
    }
    if (dl.expired()) break;
    // Back off between attempts (5 ms doubling to 200 ms): the listener
    // usually comes up soon, and we must not hammer it or the CPU.
    int ms = std::min(sleep_ms, dl.remaining_ms());
    if (ms > 0) usleep(static_cast<useconds_t>(ms) * 1000);
    sleep_ms = std::min(sleep_ms * 2, 200);
    if (dl.expired()) break;
  }
  if (!resolve_st.ok())
    return Error(ZC_ERR_TIMEOUT, "connect to %s:%d: timed out: %s",
                 host.c_str(), port, resolve_st.message().c_str());
  return Error(ZC_ERR_TIMEOUT,
               "connect to %s:%d: timed out after %d attempts, last: %s",
               host.c_str(), port, attempts,
               last_err ? strerror(last_err) : "none");
}

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_read_range(void* addr, unsigned long size);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
namespace {
char network_causality;  // a sync address only: never read or written
}  // namespace
void NoteSent() { __tsan_release(&network_causality); }
void NoteReceiving() { __tsan_acquire(&network_causality); }
#endif

namespace {
// One non-blocking sendmsg. TSan's interceptor records its read of the
// iovecs when the call returns, i.e. after the kernel copied them: on
// loopback the peer it woke (which often preempts this thread at that very
// return) may have answered by then, and a thread of ours written the
// answer into the bytes just sent (the tcp ring's allgather writes a block
// into the buffer that the reduce-scatter sent it from). That late read
// looks unordered with the write although the copy preceded it. So TSan
// builds record the read, release (NoteSent), then make the call with its
// memory accesses ignored (its socket release and the receive side's
// acquire stay): whatever the peer answers after reading these bytes is
// ordered after their read.
// flags: MSG_DONTWAIT, or 0 on a blocking socket (SendAllvBlocking).
ssize_t SendSome(int fd, msghdr* msg, int flags = MSG_DONTWAIT) {
#if defined(__SANITIZE_THREAD__)
  for (size_t i = 0; i < msg->msg_iovlen; ++i)
    __tsan_read_range(msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
  NoteSent();
  __tsan_ignore_thread_begin();
  ssize_t n = sendmsg(fd, msg, MSG_NOSIGNAL | flags);
  const int err = errno;
  __tsan_ignore_thread_end();
  errno = err;
  return n;
#else
  return sendmsg(fd, msg, MSG_NOSIGNAL | flags);
#endif
}
}  // namespace

Status SendAll(int fd, const void* buf, size_t len, const Deadline& dl) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    struct iovec iov = {const_cast<char*>(p), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ssize_t n = SendSome(fd, &msg);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    int err = errno;
    if (n < 0 && err == EINTR) continue;
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
      ZC_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, dl, "send to"));
      continue;
    }
    return IoError(n < 0 ? err : EPIPE, "send to", fd);
  }
  return Status::Ok();
}

namespace {
// Moves *iov past `done` bytes that went out, and past empty iovecs.
void Advance(struct iovec** iov, int* iovcnt, size_t done) {
  while (*iovcnt > 0 && done >= (*iov)->iov_len) {
    done -= (*iov)->iov_len;
    ++*iov;
    --*iovcnt;
  }
  if (*iovcnt > 0) {
    (*iov)->iov_base = static_cast<char*>((*iov)->iov_base) + done;
    (*iov)->iov_len -= done;
    while (*iovcnt > 0 && (*iov)->iov_len == 0) { ++*iov; --*iovcnt; }
  }
}
}  // namespace

Status SendAllv(int fd, struct iovec* iov, int iovcnt, const Deadline& dl) {
  while (iovcnt > 0 && iov->iov_len == 0) { ++iov; --iovcnt; }
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt, IOV_MAX));
    ssize_t n = SendSome(fd, &msg);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        ZC_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, dl, "send to"));
        continue;
      }
      return IoError(err, "send to", fd);
    }
    Advance(&iov, &iovcnt, static_cast<size_t>(n));
  }
  return Status::Ok();
}

namespace {
// SO_RCVLOWAT for the rest of one RecvAll; back to 1 byte when it ends.
class RecvLowat {
 public:
  explicit RecvLowat(int fd) : fd_(fd) {}
  ~RecvLowat() { Set(1); }
  void Set(size_t missing) {
    int v = static_cast<int>(std::min(missing, kRecvLowatMax));
    if (v == now_) return;
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0) now_ = v;
  }

 private:
  int fd_;
  int now_ = 1;
};
}  // namespace

Status RecvAll(int fd, void* buf, size_t len, const Deadline& dl) {
  char* p = static_cast<char*>(buf);
  size_t want = len;
  // Loopback tcp between two busy ranks on few cores (measured with the tcp
  // allreduce, docs/PERFORMANCE.md "TCP allreduce vs Gloo"): waking for every
  // 64 KiB segment of a large payload cost a third of the context switches
  // and a sixth of the CPU time per call.
  RecvLowat lowat(fd);
  while (len > 0) {
    NoteReceiving();
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0)
      return Error(ZC_ERR_PEER_LOST,
                   "recv from %s: connection closed by peer (after %zu of %zu "
                   "bytes)", PeerAddress(fd).c_str(), want - len, want);
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      lowat.Set(len > kRecvLowatMin ? len : 1);
      ZC_RETURN_IF_ERROR(WaitReady(fd, POLLIN, dl, "recv from"));
      continue;
    }
    return IoError(err, "recv from", fd);
  }
  return Status::Ok();
}

Status SetIoSlice(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
    return SystemError(errno, "SO_RCVTIMEO/SO_SNDTIMEO on fd %d", fd);
  return Status::Ok();
}

namespace {
// Between two slices of a blocking transfer: the caller's check, the
// deadline, then (a slice that timed out, or a non-blocking socket) a poll
// of at most one slice.
Status BetweenSlices(int fd, short events, bool idle, const Deadline& dl,
                     const std::function<Status()>& check, const char* op) {
  if (check) ZC_RETURN_IF_ERROR(check());
  if (dl.expired())
    return Error(ZC_ERR_TIMEOUT, "%s %s: timed out", op, PeerAddress(fd).c_str());
  if (!idle) return Status::Ok();
  Deadline slice(std::min(dl.remaining_s(), kIoSliceMs / 1000.0));
  Status st = WaitReady(fd, events, slice, op);
  return st.code() == ZC_ERR_TIMEOUT ? Status::Ok() : st;
}
}  // namespace

Status RecvAllBlocking(int fd, void* buf, size_t len, const Deadline& dl,
                       const std::function<Status()>& check) {
  char* p = static_cast<char*>(buf);
  const size_t want = len;
  while (len > 0) {
    NoteReceiving();
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      if (len) ZC_RETURN_IF_ERROR(BetweenSlices(fd, POLLIN, false, dl, check, "recv from"));
      continue;
    }
    if (n == 0)
      return Error(ZC_ERR_PEER_LOST,
                   "recv from %s: connection closed by peer (after %zu of %zu "
                   "bytes)", PeerAddress(fd).c_str(), want - len, want);
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) return IoError(err, "recv from", fd);
    ZC_RETURN_IF_ERROR(BetweenSlices(fd, POLLIN, true, dl, check, "recv from"));
  }
  return Status::Ok();
}

Status SendAllvBlocking(int fd, struct iovec* iov, int iovcnt, const Deadline& dl,
                        const std::function<Status()>& check) {
  while (iovcnt > 0 && iov->iov_len == 0) { ++iov; --iovcnt; }
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt, IOV_MAX));
    ssize_t n = SendSome(fd, &msg, 0);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) return IoError(err, "send to", fd);
      ZC_RETURN_IF_ERROR(BetweenSlices(fd, POLLOUT, true, dl, check, "send to"));
      continue;
    }
    Advance(&iov, &iovcnt, static_cast<size_t>(n));
    if (iovcnt > 0) ZC_RETURN_IF_ERROR(BetweenSlices(fd, POLLOUT, false, dl, check, "send to"));
  }
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    ZC_TRACE(kCommon, "TCP_NODELAY on fd %d: %s", fd, strerror(errno));
}

Status SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return SystemError(errno, "fcntl(F_GETFL) on fd %d", fd);
  int nf = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (nf != flags && fcntl(fd, F_SETFL, nf) < 0)
    return SystemError(errno, "fcntl(F_SETFL) on fd %d", fd);
  return Status::Ok();
}

void SetBufferSizes(int fd, int bytes) {
  if (bytes <= 0) return;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) != 0)
    ZC_TRACE(kCommon, "socket buffers of %d bytes on fd %d: %s", bytes, fd,
             strerror(errno));
}

bool PeerIsLocal(int fd) {
  sockaddr_storage mine{}, theirs{};
  socklen_t ml = sizeof(mine), tl = sizeof(theirs);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &tl) != 0 ||
      mine.ss_family != theirs.ss_family)
    return false;
  if (theirs.ss_family == AF_INET) {
    const in_addr a = reinterpret_cast<sockaddr_in*>(&theirs)->sin_addr;
    const in_addr b = reinterpret_cast<sockaddr_in*>(&mine)->sin_addr;
    return (ntohl(a.s_addr) >> 24) == 127 || a.s_addr == b.s_addr;
  }
  if (theirs.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<sockaddr_in6*>(&theirs)->sin6_addr;
    const in6_addr& b = reinterpret_cast<sockaddr_in6*>(&mine)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || memcmp(&a, &b, sizeof(a)) == 0;
  }
  return false;
}

Status SetCongestion(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) != 0)
    return SystemError(errno, "TCP_CONGESTION %s on fd %d", name.c_str(), fd);
  return Status::Ok();
}

Status PickInterfaceAddress(const std::string& spec, std::string* ip,
                            std::string* ifname) {
  std::vector<NetInterface> ifs;
  ZC_RETURN_IF_ERROR(ListInterfaces(&ifs));
  NetInterface chosen;
  ZC_RETURN_IF_ERROR(ChooseInterface(spec, ifs, &chosen));
  ZC_INFO(kCommon, "interface %s, address %s (ZC_SOCKET_IFNAME%s%s%s)", chosen.name.c_str(),
          chosen.ipv4.c_str(), spec.empty() ? " unset: automatic order" : "='",
          spec.c_str(), spec.empty() ? "" : "'");
  *ip = chosen.ipv4;
  if (ifname) *ifname = chosen.name;
  return Status::Ok();
}

}  // namespace zc::net
