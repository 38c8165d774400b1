#include "bootstrap/launcher_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/log.h"

namespace zc {

Status LauncherWatch::Start(int rank, LauncherInfo info, double grace_s, OnDeath on_death,
                            std::unique_ptr<LauncherWatch>* out) {
  out->reset();
  std::unique_ptr<LauncherWatch> w(new LauncherWatch());
  w->rank_ = rank;
  w->grace_s_ = grace_s;
  w->on_death_ = std::move(on_death);
  w->conn_fd_ = info.connection_fd;
  info.connection_fd = -1;
  bool dead_already = false;
  if (info.pid > 0) {
    w->pid_fd_ = static_cast<int>(syscall(SYS_pidfd_open, info.pid, 0));
    if (w->pid_fd_ < 0 && errno == ESRCH) {
      dead_already = true;
    } else if (w->pid_fd_ < 0) {
      // An old kernel (pidfd_open is Linux 5.3): the connection and zcrun's
      // PR_SET_PDEATHSIG remain.
      ZC_INFO(kBootstrap, "rank %d: cannot watch launcher pid %d (%s)", rank,
              static_cast<int>(info.pid), strerror(errno));
    }
  }
  w->info_ = info;
  w->dead_at_start_ = dead_already;
  if (w->pid_fd_ < 0 && w->conn_fd_ < 0 && !dead_already) return Status::Ok();
  w->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->stop_fd_ < 0)
    return SystemError(errno, "rank %d: launcher watch: eventfd", rank);
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  *out = std::move(w);
  return Status::Ok();
}

LauncherWatch::~LauncherWatch() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof(one));
    (void)ignored;
    thread_.join();
  }
  for (int fd : {pid_fd_, conn_fd_, stop_fd_})
    if (fd >= 0) close(fd);
}

void LauncherWatch::Run() {
  struct pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {pid_fd_, POLLIN, 0}, {conn_fd_, POLLRDHUP, 0}};
  bool died = dead_at_start_;
  while (!died) {
    int n = poll(fds, 3, -1);  // a negative fd is skipped
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ZC_WARN(kBootstrap, "rank %d: launcher watch: poll: %s", rank_, strerror(errno));
      return;
    }
    if (fds[0].revents) return;  // stopped
    died = fds[1].revents || fds[2].revents;
  }
  Status why;
  if (info_.pid > 0)
    why = Error(ZC_ERR_ABORTED, "launcher %s (pid %d) died", info_.name.c_str(),
                static_cast<int>(info_.pid));
  else
    why = Error(ZC_ERR_ABORTED, "launcher %s on another host died (its connection closed)",
                info_.name.c_str());
  on_death_(why);
  // The process's own error path first; then the signal.
  struct pollfd stop = {stop_fd_, POLLIN, 0};
  int ms = static_cast<int>(std::ceil(grace_s_ * 1000));
  while (poll(&stop, 1, ms) < 0 && errno == EINTR) {
  }
  if (stop.revents) return;
  kill(getpid(), SIGTERM);
}

}  // namespace zc
