#include "common/trace_signal.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/flight_recorder.h"
#include "common/log.h"

namespace zc::trace {
namespace {

// Never destroyed: the thread may be dumping while the process exits.
std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::vector<FlightRecorder*>& Recorders() {
  static auto* v = new std::vector<FlightRecorder*>;
  return *v;
}
std::atomic<int> g_wake_fd{-1};  // the pipe's write end, for the handler
bool g_started = false;          // under Mu()
bool g_armed = false;            // under Mu()

void OnSigusr2(int) {
  const int saved = errno;
  const int fd = g_wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char c = 's';
    ssize_t n = write(fd, &c, 1);  // full pipe: a dump is pending anyway
    (void)n;
  }
  errno = saved;
}

void DumpLoop(int read_fd) {
  char buf[64];
  for (;;) {
    ssize_t n = read(read_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(Mu());
    std::vector<std::string> dirs;
    for (FlightRecorder* r : Recorders()) {
      r->DumpToDir("signal");
      if (std::find(dirs.begin(), dirs.end(), r->dump_dir()) == dirs.end()) dirs.push_back(r->dump_dir());
    }
    // Tells whoever sent the signal (zcrun) that this process is done.
    for (const std::string& d : dirs) {
      std::string marker = d + "/.zctrace-p" + std::to_string(getpid()) + ".done";
      int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
    }
  }
}

// fork(): the child has neither the dumping thread nor, once it makes
// communicators of its own, any use for the parent's list; it starts afresh
// (the parent's handler stays installed and is taken over).
void BeforeFork() { Mu().lock(); }
void AfterForkParent() { Mu().unlock(); }
void AfterForkChild() {
  new (&Mu()) std::mutex;  // the parent's thread may have held it
  Recorders().clear();
  g_wake_fd.store(-1);
  g_started = false;
  g_armed = false;
}

// Under Mu(): the pipe, the thread, and the handler where SIGUSR2 is free
// (or ours, in a forked child).
void Start() {
  static bool atfork = pthread_atfork(BeforeFork, AfterForkParent, AfterForkChild) == 0;
  (void)atfork;
  g_started = true;
  struct sigaction old = {};
  if (sigaction(SIGUSR2, nullptr, &old) != 0 || (old.sa_handler != SIG_DFL && old.sa_handler != OnSigusr2) ||
      (old.sa_flags & SA_SIGINFO)) {
    ZC_INFO(kCommon, "SIGUSR2 has a handler already: flight recorder dumps on SIGUSR2 are off");
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ZC_WARN(kCommon, "flight recorder: pipe: %s; no dumps on SIGUSR2", strerror(errno));
    return;
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  std::thread(DumpLoop, fds[0]).detach();
  g_wake_fd.store(fds[1]);
  struct sigaction sa = {};
  sa.sa_handler = OnSigusr2;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR2, &sa, nullptr) != 0) {
    ZC_WARN(kCommon, "flight recorder: sigaction(SIGUSR2): %s; no dumps on SIGUSR2", strerror(errno));
    return;
  }
  g_armed = true;
}

}  // namespace

void RegisterForSignal(FlightRecorder* recorder) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!g_started) Start();
  Recorders().push_back(recorder);
}

void UnregisterForSignal(FlightRecorder* recorder) {
  std::lock_guard<std::mutex> lock(Mu());
  auto& v = Recorders();
  v.erase(std::remove(v.begin(), v.end(), recorder), v.end());
}

bool SignalDumpsArmed() {
  std::lock_guard<std::mutex> lock(Mu());
  return g_armed;
}

}  // namespace zc::trace
