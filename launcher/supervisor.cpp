#include "supervisor.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "common/log.h"
#include "common/status.h"
#include "remote_command.h"

namespace zc::launcher {
namespace {

void Say(const std::string& line) {
  std::string s = line + "\n";
  WriteFully(2, s.data(), s.size());
}

int MsUntil(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                t - Clock::now()).count();
  if (ms < 0) return 0;
  return static_cast<int>(std::min<long long>(ms + 1, 60000));
}

}  // namespace

void HandledSignals(sigset_t* set) {
  sigemptyset(set);
  sigaddset(set, SIGCHLD);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGHUP);
}

std::string SignalDescription(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev) return Format("SIG%s (%d)", abbrev, sig);
  return Format("signal %d", sig);
}

void Supervisor::Abort(int exit_code) { BeginTermination(SIGTERM, exit_code); }

bool Supervisor::AllReaped() const {
  for (const RankProcess& r : *ranks_)
    if (!r.reaped) return false;
  return true;
}

bool Supervisor::AnyPipeOpen() const {
  for (const RankProcess& r : *ranks_)
    if (r.out_fd >= 0 || r.err_fd >= 0) return true;
  return false;
}

void Supervisor::KillAll(int sig) {
  for (RankProcess& r : *ranks_) {
    if (r.pid <= 0) continue;
    // The group: the rank and whatever it started. A reaped leader's group
    // may still hold its children.
    if (killpg(r.pid, sig) != 0 && !r.reaped) kill(r.pid, sig);
  }
}

void Supervisor::BeginTermination(int sig, int exit_code) {
  if (terminating_) return;
  terminating_ = true;
  exit_code_ = exit_code;
  int alive = 0;
  for (const RankProcess& r : *ranks_)
    if (!r.reaped) ++alive;
  if (opts_.before_stop && exit_code != 0) opts_.before_stop(*ranks_);
  ZC_INFO(kLauncher, "sending %s to %d running ranks",
          SignalDescription(sig).c_str(), alive);
  KillAll(sig);
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(opts_.kill_grace_s));
}

void Supervisor::DrainRank(RankProcess& r) {
  if (r.out_fd >= 0 && !r.out->ReadFrom(r.out_fd)) {
    r.out->Flush();
    close(r.out_fd);
    r.out_fd = -1;
  }
  if (r.err_fd >= 0 && !r.err->ReadFrom(r.err_fd)) {
    r.err->Flush();
    close(r.err_fd);
    r.err_fd = -1;
  }
}

void Supervisor::CloseRankPipes(RankProcess& r) {
  DrainRank(r);
  if (r.out_fd >= 0) {
    r.out->Flush();
    close(r.out_fd);
    r.out_fd = -1;
  }
  if (r.err_fd >= 0) {
    r.err->Flush();
    close(r.err_fd);
    r.err_fd = -1;
  }
}

// What went wrong with a finished rank: "" when it exited with code 0.
std::string Supervisor::Failure(const RankProcess& r, int* code, bool* by_signal) {
  int st = r.wait_status;
  *by_signal = false;
  if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    *code = WEXITSTATUS(st);
    if (r.via_remote_shell) {
      int sig = 0;
      std::string what = RemoteShellFailure(*code, &sig);
      if (sig) {
        *by_signal = true;
        return "was killed by signal " + SignalDescription(sig) +
               Format(" (exit status %d through the remote shell)", *code);
      }
      if (!what.empty()) return what;
    }
    return Format("exited with code %d", *code);
  }
  if (WIFSIGNALED(st)) {
    *by_signal = true;
    *code = 128 + WTERMSIG(st);
    return "was killed by signal " + SignalDescription(WTERMSIG(st));
  }
  return "";
}

void Supervisor::ReportCause(RankProcess& r) {
  cause_ = nullptr;
  int code = 0;
  bool by_signal = false;
  std::string what = Failure(r, &code, &by_signal);
  Say(Format("zcrun: rank %d (pid %d on host %s) %s", r.rank, (int)r.pid,
             r.host.c_str(), what.c_str()));
  int others = 0;
  for (const RankProcess& o : *ranks_)
    if (!o.reaped) ++others;
  if (others > 0)
    Say(Format("zcrun: stopping the other %d rank%s", others,
               others == 1 ? "" : "s"));
  BeginTermination(SIGTERM, code);
}

void Supervisor::OnRanksExited(const std::vector<RankProcess*>& batch) {
  for (RankProcess* r : batch) {
    // What the rank wrote before dying comes before our message about it.
    DrainRank(*r);
    ZC_INFO(kLauncher, "rank %d (pid %d on %s) finished: status 0x%x", r->rank,
            (int)r->pid, r->host.c_str(), r->wait_status);
  }
  if (terminating_) return;  // ranks we stopped are no news
  // The first cause wins. waitpid() hands out exits in its own order, not in
  // the order they happened: a rank killed by a signal is usually followed
  // by survivors exiting with an error (peer lost), and those may come
  // first. A signal death therefore outranks error exits, at once; an error
  // exit is reported after a short window in which a signal death of
  // another rank may still show up.
  for (RankProcess* r : batch) {
    int code = 0;
    bool by_signal = false;
    if (Failure(*r, &code, &by_signal).empty()) continue;
    if (by_signal) {
      ReportCause(*r);
      return;
    }
    if (!cause_) {
      cause_ = r;
      cause_until_ = Clock::now() + std::chrono::milliseconds(kCauseWindowMs);
    }
  }
  if (cause_ && AllReaped()) ReportCause(*cause_);  // nobody left to outrank it
}

void Supervisor::Reap() {
  std::vector<RankProcess*> batch;
  while (true) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;  // none left to reap now (0) or no children (ECHILD)
    for (RankProcess& r : *ranks_) {
      if (r.pid == pid && !r.reaped) {
        r.reaped = true;
        r.wait_status = st;
        batch.push_back(&r);
        break;
      }
    }
  }
  // Every exit pending now is known before deciding which came first.
  if (!batch.empty()) OnRanksExited(batch);
}

void Supervisor::OnSignal(int sig) {
  if (sig == SIGCHLD) {
    Reap();
    return;
  }
  if (terminating_) {
    // A second interrupt: stop waiting for the ranks to exit cleanly.
    Say(Format("zcrun: received %s again: killing all ranks",
               SignalDescription(sig).c_str()));
    KillAll(SIGKILL);
    killed_ = true;
    give_up_at_ = Clock::now() + std::chrono::seconds(10);
    return;
  }
  Say(Format("zcrun: received %s: forwarding it to every rank",
             SignalDescription(sig).c_str()));
  BeginTermination(sig, 128 + sig);
}

int Supervisor::Run() {
  Clock::time_point timeout_at{};
  bool has_timeout = opts_.timeout_s > 0;
  if (has_timeout)
    timeout_at = start_ + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(opts_.timeout_s));
  // A child may have exited before the signalfd was read the first time.
  Reap();

  std::vector<struct pollfd> fds;
  std::vector<std::pair<RankProcess*, bool>> owners;  // (rank, is_stderr)
  while (true) {
    bool all_reaped = AllReaped();
    if (all_reaped && !AnyPipeOpen()) break;
    Clock::time_point now = Clock::now();

    if (all_reaped && !draining_) {
      // Every rank is gone; pipes still open belong to processes they left
      // behind. Give those a moment to finish writing, then stop them.
      draining_ = true;
      drain_until_ = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(opts_.drain_grace_s));
    }
    if (draining_ && now >= drain_until_) {
      KillAll(SIGKILL);
      for (RankProcess& r : *ranks_) CloseRankPipes(r);
      break;
    }
    if (cause_ && !terminating_ && now >= cause_until_) ReportCause(*cause_);
    if (has_timeout && !terminating_ && now >= timeout_at) {
      Say(Format("zcrun: job timed out after %g s", opts_.timeout_s));
      BeginTermination(SIGTERM, 124);
    }
    if (terminating_ && !killed_ && now >= kill_at_) {
      int alive = 0;
      for (const RankProcess& r : *ranks_)
        if (!r.reaped) ++alive;
      if (alive > 0)
        Say(Format("zcrun: %d rank%s still running after %g s: sending SIGKILL",
                   alive, alive == 1 ? "" : "s", opts_.kill_grace_s));
      KillAll(SIGKILL);
      killed_ = true;
      give_up_at_ = now + std::chrono::seconds(10);
    }
    if (killed_ && !all_reaped && give_up_at_ != Clock::time_point{} &&
        now >= give_up_at_) {
      // A process in uninterruptible sleep ignores SIGKILL for now; do not
      // hang the job on it.
      for (RankProcess& r : *ranks_) {
        if (r.reaped) continue;
        Say(Format("zcrun: rank %d (pid %d on host %s) did not exit after "
                   "SIGKILL; giving up on it", r.rank, (int)r.pid,
                   r.host.c_str()));
        r.reaped = true;
        CloseRankPipes(r);
      }
      continue;
    }

    // Wake for the nearest deadline; otherwise at least once a minute.
    int wait_ms = 60000;
    if (has_timeout && !terminating_) wait_ms = std::min(wait_ms, MsUntil(timeout_at));
    if (terminating_ && !killed_) wait_ms = std::min(wait_ms, MsUntil(kill_at_));
    if (killed_ && give_up_at_ != Clock::time_point{})
      wait_ms = std::min(wait_ms, MsUntil(give_up_at_));
    if (draining_) wait_ms = std::min(wait_ms, MsUntil(drain_until_));
    if (cause_ && !terminating_) wait_ms = std::min(wait_ms, MsUntil(cause_until_));

    fds.clear();
    owners.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    owners.push_back({nullptr, false});
    for (RankProcess& r : *ranks_) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.push_back({&r, false});
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.push_back({&r, true});
      }
    }
    int n = poll(fds.data(), fds.size(), wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      Say(Format("zcrun: poll failed: %s; killing the job", strerror(errno)));
      KillAll(SIGKILL);
      if (exit_code_ == 0) exit_code_ = 1;
      killed_ = terminating_ = true;
      give_up_at_ = Clock::now() + std::chrono::seconds(10);
      // Still reap below through the signalfd on the next rounds.
      continue;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      RankProcess* r = owners[i].first;
      int* fd = owners[i].second ? &r->err_fd : &r->out_fd;
      LineForwarder* fw = owners[i].second ? r->err.get() : r->out.get();
      if (*fd >= 0 && !fw->ReadFrom(*fd)) {
        fw->Flush();
        close(*fd);
        *fd = -1;
      }
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (true) {
        ssize_t r = read(signal_fd_, &si, sizeof(si));
        if (r != sizeof(si)) break;
        OnSignal(static_cast<int>(si.ssi_signo));
      }
    }
  }
  return exit_code_;
}

}  // namespace zc::launcher
