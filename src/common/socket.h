// TCP socket helpers shared by the store, the bootstrap and the tcp transport.
// Every blocking operation takes a Deadline; I/O uses MSG_DONTWAIT plus poll,
// so it honours the deadline whether or not the fd is in non-blocking mode.
// Errors: ZC_ERR_PEER_LOST for reset/EOF/EPIPE, ZC_ERR_TIMEOUT for the
// deadline, ZC_ERR_SYSTEM otherwise; messages name the peer address.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "common/deadline.h"
#include "common/status.h"

namespace zc::net {

// "host:port" or "[v6addr]:port". An empty host (":port") is allowed and
// means "all interfaces" to Listen().
Status ParseHostPort(const std::string& hostport, std::string* host, int* port);

// Listening socket (CLOEXEC, non-blocking, SO_REUSEADDR). host "" = all IPv4
// interfaces; port 0 = ephemeral; *bound_port is the port actually bound.
Status Listen(const std::string& host, int port, int* fd, int* bound_port);

// Waits up to dl for a connection; *fd is blocking and CLOEXEC; *peer is
// "ip:port" (may be null).
Status Accept(int listen_fd, const Deadline& dl, int* fd, std::string* peer);

// Connects, retrying refused/unreachable attempts until dl (the peer may not
// be listening yet). *fd is blocking and CLOEXEC. failed_attempts, when
// given, counts the attempts that failed, as they fail (a test watches it to
// start a listener only once the retry path is being taken).
Status Connect(const std::string& host, int port, const Deadline& dl, int* fd,
               std::atomic<int>* failed_attempts = nullptr);

// ThreadSanitizer cannot see causality through the kernel: what this process
// sent may have made a peer send what a thread of it receives later (a
// ring's reduced block comes back into the buffer this rank sent it from).
// Its builds model that: every send releases (after its read of the bytes,
// before the system call: SendSome in socket.cpp; shared-memory slot
// writes too, WriteMapped), every receive acquires one sync address per
// process. No code in other builds.
#if defined(__SANITIZE_THREAD__)
void NoteSent();
void NoteReceiving();
#else
inline void NoteSent() {}
inline void NoteReceiving() {}
#endif

Status SendAll(int fd, const void* buf, size_t len, const Deadline& dl);
// Sends every iovec; advances iov in place as bytes go out.
Status SendAllv(int fd, struct iovec* iov, int iovcnt, const Deadline& dl);
// EOF before len bytes -> ZC_ERR_PEER_LOST "connection closed by peer".
// While more than kRecvLowatMin bytes are missing, the wait for them asks
// the kernel (SO_RCVLOWAT) to wake it only when min(missing, kRecvLowatMax)
// have arrived, not at every segment; the socket's low-water mark is back
// at 1 byte when RecvAll returns.
constexpr size_t kRecvLowatMin = 64 * 1024;
constexpr size_t kRecvLowatMax = 1 << 20;
Status RecvAll(int fd, void* buf, size_t len, const Deadline& dl);

void SetNoDelay(int fd);
Status SetNonBlocking(int fd, bool on);
// Best effort SO_SNDBUF/SO_RCVBUF (the kernel may clamp).
void SetBufferSizes(int fd, int bytes);
// True when a connected socket's peer is on this host: a loopback address,
// or the socket's own address (the kernel then carries it over loopback).
bool PeerIsLocal(int fd);
// TCP_CONGESTION: the socket's congestion control algorithm by name (the
// kernel refuses names it lacks, and unprivileged callers may only pick
// those in net.ipv4.tcp_allowed_congestion_control; reno always is).
Status SetCongestion(int fd, const std::string& name);

// Chooses the local IPv4 address to advertise: the interface that
// ZC_SOCKET_IFNAME's value spec picks (NCCL_SOCKET_IFNAME's grammar,
// common/interfaces.h; "" = NCCL's automatic order), logged at INFO.
Status PickInterfaceAddress(const std::string& spec, std::string* ip,
                            std::string* ifname);

// "ip:port" of the remote end, or "fd N" when it cannot be determined.
std::string PeerAddress(int fd);

// Owns a file descriptor; closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.release()) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace zc::net
