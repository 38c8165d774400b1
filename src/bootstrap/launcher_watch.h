// LauncherWatch: a rank must not outlive its launcher. A thread waits for
// the launcher process to end (a pidfd, when it runs on this host) or for
// the connection to it to close (zcrun's store, from any host). Then it
// calls on_death once with the cause (the owner aborts its Device there, so
// that every wait returns, and releases its shared memory), gives the
// process grace_s to end by itself (its failed calls make it exit), and
// sends it SIGTERM, which also ends a rank that is computing without calls.
// Under zcrun the kernel sends that SIGTERM at once (PR_SET_PDEATHSIG set
// by zcrun); under other launchers this thread is what notices.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "common/status.h"

namespace zc {

class LauncherWatch {
 public:
  using OnDeath = std::function<void(const Status& why)>;
  // Takes info.connection_fd. *out stays null when there is nothing to
  // watch (no launcher pid here and no connection).
  static Status Start(int rank, LauncherInfo info, double grace_s, OnDeath on_death,
                      std::unique_ptr<LauncherWatch>* out);
  // Stops the thread (at once, also during the grace period).
  ~LauncherWatch();

  LauncherWatch(const LauncherWatch&) = delete;
  LauncherWatch& operator=(const LauncherWatch&) = delete;

 private:
  LauncherWatch() = default;
  void Run();

  int rank_ = 0;
  LauncherInfo info_;
  double grace_s_ = 1.0;
  OnDeath on_death_;
  int pid_fd_ = -1;   // readable when the launcher has exited
  int conn_fd_ = -1;  // POLLRDHUP when the launcher's end closed
  int stop_fd_ = -1;
  bool dead_at_start_ = false;  // pidfd_open found no such process  // eventfd: the destructor's wake-up
  std::thread thread_;
};

}  // namespace zc
