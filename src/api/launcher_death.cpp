#include "api/launcher_death.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api/comm.h"
#include "p2p/segment.h"

namespace zc::api {
namespace {

// Process-wide, because a signal handler can reach nothing else: what the
// SIGTERM handler needs, filled in before it is installed and never freed.
constexpr int kMaxTags = 8;
struct TermState {
  std::atomic<int> ntags{0};
  char tags[kMaxTags][24] = {};  // job tags of this process's Devices
  int rank = -1;
  pid_t installer = 0;           // getpid() when installed: a forked child inherits the handlers
  pid_t parent = 0;              // getppid() when installed
  pid_t launcher_pid = 0;
  int launcher_fd = -1;          // its pidfd: readable once it has exited
  char launcher[32] = {};
  std::atomic<int> reported{0};  // 1: being written, 2: written
};
TermState g_term;
std::atomic<bool> g_installed{false};

// Appends s to buf (async-signal-safe), never past cap.
size_t Append(char* buf, size_t at, size_t cap, const char* s) {
  while (*s && at + 1 < cap) buf[at++] = *s++;
  return at;
}
size_t AppendInt(char* buf, size_t at, size_t cap, long v) {
  char tmp[24];
  int n = 0;
  bool neg = v < 0;
  unsigned long u = neg ? static_cast<unsigned long>(-v) : static_cast<unsigned long>(v);
  do {
    tmp[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && n < 23);
  if (neg) tmp[n++] = '-';
  while (n > 0 && at + 1 < cap) buf[at++] = tmp[--n];
  return at;
}

// The one line that names the cause, once per process (the watch thread and
// the handler may both get there). The handler writes it unless it has been
// written completely: it may interrupt the thread halfway, and then ends the
// process; a rare repeated line beats a missing one.
void SayLauncherDied(int rank, const char* launcher, pid_t pid, bool from_handler) {
  if (from_handler ? g_term.reported.load() == 2 : g_term.reported.exchange(1) != 0) return;
  char line[160];
  size_t n = Append(line, 0, sizeof(line), "zcomm rank ");
  n = AppendInt(line, n, sizeof(line), rank);
  n = Append(line, n, sizeof(line), ": launcher ");
  n = Append(line, n, sizeof(line), launcher);
  if (pid > 0) {
    n = Append(line, n, sizeof(line), " (pid ");
    n = AppendInt(line, n, sizeof(line), pid);
    n = Append(line, n, sizeof(line), ") died; exiting\n");
  } else {
    n = Append(line, n, sizeof(line), " on another host died; exiting\n");
  }
  ssize_t ignored = write(2, line, n);  // our stderr may be a dead pipe
  (void)ignored;
  g_term.reported.store(2);
}

// The names of this process's segments (async-signal-safe).
void UnlinkOwnSegments() {
  int ntags = g_term.ntags.load();
  for (int i = 0; i < ntags && i < kMaxTags; ++i) Segment::UnlinkOwned(g_term.tags[i], getpid());
}

// Whether the launcher's pidfd says it has exited, within wait_ms
// (async-signal-safe). Only POLLIN is proof: an invalid descriptor polls
// as POLLNVAL, which says nothing about the launcher.
bool LauncherExited(int wait_ms) {
  if (g_term.launcher_fd < 0) return false;
  struct pollfd p = {g_term.launcher_fd, POLLIN, 0};
  return poll(&p, 1, wait_ms) > 0 && (p.revents & POLLIN);
}

// Whether the launcher is gone: reparented, or exited within wait_ms
// (async-signal-safe).
bool LauncherGone(int wait_ms) { return getppid() != g_term.parent || LauncherExited(wait_ms); }

void OnSigterm(int sig) {
  int saved = errno;
  const bool mine = getpid() == g_term.installer;  // not a forked child's
  UnlinkOwnSegments();
  // Is the launcher gone, or is it stopping us (a failed job, ^C)? Reparented
  // means gone. Not yet reparented proves nothing: PR_SET_PDEATHSIG fires
  // when the launcher's *thread* that forked us exits, and the kernel gives
  // us to one of its other threads first while they are being killed; the
  // pidfd turns readable a moment later, when the last one is gone. A
  // SIGTERM from a living launcher waits those 100 ms in vain.
  if (mine && LauncherGone(100)) SayLauncherDied(g_term.rank, g_term.launcher, g_term.launcher_pid, true);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  raise(sig);  // delivered, with the default action, when we return
  errno = saved;
}

// A normal exit without zc_finalize (a rank whose call failed because a
// peer saw the launcher die first, and which returned before its own watch
// thread ran) skips the watch's clean-up as SIGTERM would: the segments'
// names go, and the line names the cause when the launcher is gone.
void OnExit() {
  if (getpid() != g_term.installer) return;  // a forked child: its parent is not the launcher
  UnlinkOwnSegments();
  // The line only on proof that the launcher has exited (its pidfd), not
  // from a changed parent: an exit is no signal from the launcher.
  if (LauncherExited(0)) SayLauncherDied(g_term.rank, g_term.launcher, g_term.launcher_pid, false);
}

void InstallSigterm(int rank, const LauncherInfo& info, const std::string& tag) {
  int i = g_term.ntags.load();
  if (i < kMaxTags) {
    strncpy(g_term.tags[i], tag.c_str(), sizeof(g_term.tags[i]) - 1);
    g_term.ntags.store(i + 1);
  }
  if (g_installed.exchange(true)) return;
  g_term.rank = rank;
  g_term.installer = getpid();
  g_term.parent = getppid();
  g_term.launcher_pid = info.pid;
  strncpy(g_term.launcher, info.name.c_str(), sizeof(g_term.launcher) - 1);
  if (info.pid > 0) g_term.launcher_fd = static_cast<int>(syscall(SYS_pidfd_open, info.pid, 0));
  atexit(OnExit);
  struct sigaction old;
  if (sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
      (old.sa_flags & SA_SIGINFO))
    return;  // the program handles SIGTERM itself: leave it alone
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

Status WatchLauncher(World* world, std::unique_ptr<LauncherWatch>* out) {
  LauncherInfo info = world->bootstrap->Launcher();
  if (info.pid <= 0 && info.connection_fd < 0) return Status::Ok();
  int rank = world->bootstrap->rank();
  Device* dev = world->device.get();
  std::string tag = dev->job_tag();
  InstallSigterm(rank, info, tag);
  std::string name = info.name;
  pid_t pid = info.pid;
  return LauncherWatch::Start(
      rank, std::move(info), /*grace_s=*/1.0,
      [dev, rank, tag, name, pid](const Status& why) {
        // Segments first: the process may be killed any moment now.
        Segment::UnlinkOwned(tag.c_str(), getpid());
        SayLauncherDied(rank, name.c_str(), pid, false);
        dev->health().Abort(why);
      },
      out);
}

}  // namespace zc::api
