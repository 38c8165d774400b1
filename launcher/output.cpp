#include "output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zc::launcher {

bool WriteFully(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w > 0) {
      buf += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout may be a non-blocking descriptor we inherited: wait for
      // room rather than drop a line.
      struct pollfd p = {fd, POLLOUT, 0};
      if (poll(&p, 1, 1000) < 0 && errno != EINTR) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool LineForwarder::ReadFrom(int in_fd) {
  char buf[65536];
  for (int reads = 0; reads < 16; ++reads) {  // bounded: be fair to others
    ssize_t r = read(in_fd, buf, sizeof(buf));
    if (r > 0) {
      Feed(buf, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // EOF or error
  }
  return true;
}

void LineForwarder::Feed(const char* data, size_t n) {
  while (n > 0) {
    const char* nl = static_cast<const char*>(memchr(data, '\n', n));
    if (!nl) {
      pending_.append(data, n);
      while (pending_.size() > kMaxLine) {  // = kMaxLine may still end
        Emit(pending_.data(), kMaxLine, /*add_newline=*/tag_);
        pending_.erase(0, kMaxLine);
      }
      return;
    }
    size_t len = static_cast<size_t>(nl - data) + 1;
    if (pending_.empty()) {
      Emit(data, len, false);
    } else {
      pending_.append(data, len);
      Emit(pending_.data(), pending_.size(), false);
      pending_.clear();
    }
    data += len;
    n -= len;
  }
}

void LineForwarder::Flush() {
  if (pending_.empty()) return;
  Emit(pending_.data(), pending_.size(), /*add_newline=*/tag_);
  pending_.clear();
}

void LineForwarder::Emit(const char* data, size_t n, bool add_newline) {
  ++lines_;
  if (broken_) return;
  line_.clear();
  if (tag_) line_ += prefix_;
  line_.append(data, n);
  if (add_newline) line_ += '\n';
  // One write per line: nothing else writes between the prefix and the end.
  if (!WriteFully(out_fd_, line_.data(), line_.size())) broken_ = true;
}

}  // namespace zc::launcher
