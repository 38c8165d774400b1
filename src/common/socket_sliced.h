// Large transfers on a blocking socket (the tcp transport's payloads),
// beside socket.h's non-blocking loops; defined in socket.cpp, with which
// they share the send path (its ThreadSanitizer model).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <functional>

#include "common/deadline.h"
#include "common/status.h"

namespace zc::net {

// Blocking calls, as a plain socket transfer makes them: a recv sleeps in
// the kernel until bytes are there and returns what came (on loopback
// usually the whole rest), a sendmsg until the kernel has taken every
// byte; no poll, no return for EAGAIN, no epoll wake-up per piece. (Not
// recv with MSG_WAITALL: the reader then stays in the kernel until the
// last byte, and the window updates that free the sender's buffer came
// late: 4 MiB messages stalled for whole slices, 3-40 ms, 2026-11-27.)
// Each call is bounded by the socket's SO_RCVTIMEO or SO_SNDTIMEO
// (SetIoSlice); between slices, and after a call that returned short,
// `check` says whether to go on (the peer's health) and dl ends the wait
// with ZC_ERR_TIMEOUT. On a non-blocking socket they wait in poll for a
// slice instead. Errors as RecvAll / SendAllv.
constexpr int kIoSliceMs = 10;
Status SetIoSlice(int fd, int ms);
Status RecvAllBlocking(int fd, void* buf, size_t len, const Deadline& dl,
                       const std::function<Status()>& check);
Status SendAllvBlocking(int fd, struct iovec* iov, int iovcnt, const Deadline& dl,
                        const std::function<Status()>& check);

}  // namespace zc::net
