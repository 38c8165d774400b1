#include "elastic_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bootstrap/join_queue.h"
#include "common/log.h"
#include "hosts.h"

namespace zc::launcher {
namespace {

void Say(const std::string& line) {
  std::string s = "zcrun: " + line + "\n";
  WriteFully(2, s.data(), s.size());
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// What a discovery script prints: "host:slots" or "host" lines (Horovod's
// format; a hostfile's "host slots=N" is accepted too).
Status RunDiscovery(const std::string& script, std::map<std::string, int>* out) {
  FILE* f = popen(script.c_str(), "r");
  if (!f) return SystemError(errno, "cannot run the host discovery script '%s'", script.c_str());
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int st = pclose(f);
  if (st != 0)
    return Error(ZC_ERR_SYSTEM, "the host discovery script '%s' failed (wait status %d)", script.c_str(), st);
  std::vector<HostSlots> hosts;
  ZC_RETURN_IF_ERROR(ParseHostfileText(text, "the host discovery script's output", &hosts));
  out->clear();
  // This machine under one name, whatever the script calls it.
  for (const HostSlots& h : hosts) (*out)[IsLocalHost(h.name) ? "localhost" : h.name] += h.slots;
  return Status::Ok();
}

// The name a host is counted under: this machine is "localhost" whatever the
// script or -H call it.
std::string HostKey(const std::string& host) { return IsLocalHost(host) ? "localhost" : host; }

}  // namespace

ElasticSupervisor::Exit ElasticSupervisor::Describe(const RankProcess& p) {
  Exit e;
  const int st = p.wait_status;
  if (WIFEXITED(st)) {
    e.code = WEXITSTATUS(st);
    e.clean = e.code == 0;
    e.what = Format("exited with code %d", e.code);
  } else if (WIFSIGNALED(st)) {
    e.code = 128 + WTERMSIG(st);
    e.what = "was killed by signal " + SignalDescription(WTERMSIG(st));
  }
  return e;
}

std::string ElasticSupervisor::Name(const RankProcess& p) const {
  // Joiners are numbered from 1000 on (their rank is the job's to give).
  if (p.rank >= 1000) return Format("joiner %d (pid %d on %s)", p.rank - 1000, static_cast<int>(p.pid), p.host.c_str());
  return Format("rank %d (pid %d on %s)", p.rank, static_cast<int>(p.pid), p.host.c_str());
}

int ElasticSupervisor::Alive() const {
  int n = 0;
  for (const RankProcess& p : procs_) n += p.reaped ? 0 : 1;
  return n;
}

bool ElasticSupervisor::AllDone() const {
  for (const RankProcess& p : procs_)
    if (!p.reaped || p.out_fd >= 0 || p.err_fd >= 0) return false;
  return true;
}

void ElasticSupervisor::BeginTermination(int sig, int exit_code) {
  if (terminating_) return;
  terminating_ = true;
  if (exit_code_ == 0) exit_code_ = exit_code;
  for (RankProcess& p : procs_)
    if (!p.reaped && killpg(p.pid, sig) != 0) kill(p.pid, sig);
  kill_at_ = Clock::now() + Seconds(opts_.kill_grace_s);
}

void ElasticSupervisor::OnExit(RankProcess& p) {
  Exit e = Describe(p);
  if (withdrawn_.count(p.pid) || terminating_) return;
  if (removed_.count(p.pid)) {
    // Stopped by zcrun: not a failure, whatever its status.
    const int alive = Alive();
    if (alive < opts_.min_np) {
      Say(Format("%s (its host left) %s; %d process%s left, fewer than --min-np %d: ending the job", Name(p).c_str(),
                 e.what.c_str(), alive, alive == 1 ? "" : "es", opts_.min_np));
      BeginTermination(SIGTERM, 1);
      return;
    }
    Say(Format("%s (its host left) %s; %d process%s go on", Name(p).c_str(), e.what.c_str(), alive,
               alive == 1 ? "" : "es"));
    return;
  }
  if (e.clean) {
    finishing_ = true;  // the job is ending: replace nobody
    return;
  }
  ++failures_;
  if (finishing_) {
    Say(Format("%s %s after the job began to finish", Name(p).c_str(), e.what.c_str()));
    if (exit_code_ == 0) exit_code_ = e.code;
    return;
  }
  const int alive = Alive();
  if (alive < opts_.min_np) {
    Say(Format("%s %s; %d process%s left, fewer than --min-np %d: ending the job", Name(p).c_str(), e.what.c_str(),
               alive, alive == 1 ? "" : "es", opts_.min_np));
    BeginTermination(SIGTERM, e.code ? e.code : 1);
    return;
  }
  Say(Format("%s %s; %d process%s go on (--min-np %d)", Name(p).c_str(), e.what.c_str(), alive,
             alive == 1 ? "" : "es", opts_.min_np));
}

void ElasticSupervisor::ReapExited() {
  for (;;) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    for (size_t i = 0; i < procs_.size(); ++i) {
      if (procs_[i].pid != pid || procs_[i].reaped) continue;
      procs_[i].reaped = true;
      procs_[i].wait_status = st;
      OnExit(procs_[i]);
      break;
    }
  }
}

void ElasticSupervisor::Discover() {
  if (opts_.discovery_script.empty()) {
    slots_ = opts_.fixed_hosts;
    return;
  }
  if (Clock::now() < next_discovery_) return;
  next_discovery_ = Clock::now() + Seconds(opts_.discovery_interval_s);
  std::map<std::string, int> found;
  Status st = RunDiscovery(opts_.discovery_script, &found);
  if (!st.ok()) {
    Say("warning: " + st.message() + "; keeping the hosts known before");
    return;
  }
  if (found != slots_) {
    std::string list;
    for (auto& [h, n] : found) list += Format("%s%s:%d", list.empty() ? "" : ",", h.c_str(), n);
    ZC_INFO(kLauncher, "discovered hosts: %s", list.c_str());
    if (discovered_) StopProcessesOnRemovedSlots(found);
  }
  slots_ = std::move(found);
  discovered_ = true;
}

void ElasticSupervisor::StopProcessesOnRemovedSlots(const std::map<std::string, int>& found) {
  if (terminating_) return;
  // Per host, its live processes in the order they started; those beyond
  // the slots the script lists now go, the newest first (all when the host
  // is gone). Only hosts the script listed before: its output is the truth
  // about them, not about the hosts of -H.
  std::map<std::string, std::vector<RankProcess*>> on_host;
  for (RankProcess& p : procs_)
    if (!p.reaped && !removed_.count(p.pid) && !withdrawn_.count(p.pid)) on_host[HostKey(p.host)].push_back(&p);
  std::vector<std::pair<RankProcess*, std::string>> stop;
  for (auto& [host, list] : on_host) {
    auto before = slots_.find(host);
    if (before == slots_.end()) continue;
    auto now = found.find(host);
    const size_t keep = now == found.end() ? 0 : static_cast<size_t>(now->second);
    const std::string why = now == found.end() ? "left the host discovery script's output"
                                               : Format("has %zu slot%s now", keep, keep == 1 ? "" : "s");
    for (size_t i = list.size(); i > keep; --i) stop.push_back({list[i - 1], why});
  }
  if (stop.empty()) return;
  const int left = Alive() - static_cast<int>(stop.size());
  if (left < opts_.min_np) {
    Say(Format("host %s %s: %d process%s would be left, fewer than --min-np %d: ending the job",
               stop[0].first->host.c_str(), stop[0].second.c_str(), left, left == 1 ? "" : "es", opts_.min_np));
    BeginTermination(SIGTERM, 1);
    return;
  }
  const Clock::time_point kill_at = Clock::now() + Seconds(opts_.kill_grace_s);
  for (auto& [p, why] : stop) {
    Say(Format("host %s %s: stopping %s (SIGTERM, SIGKILL after %g s)", p->host.c_str(), why.c_str(),
               Name(*p).c_str(), opts_.kill_grace_s));
    removed_[p->pid] = kill_at;
    if (killpg(p->pid, SIGTERM) != 0) kill(p->pid, SIGTERM);
  }
}

void ElasticSupervisor::KillRemovedAfterGrace() {
  const Clock::time_point now = Clock::now();
  for (RankProcess& p : procs_) {
    auto it = removed_.find(p.pid);
    if (p.reaped || it == removed_.end() || now < it->second) continue;
    if (killpg(p.pid, SIGKILL) != 0) kill(p.pid, SIGKILL);
    it->second = Clock::time_point::max();  // once
  }
}

void ElasticSupervisor::StartJoiners() {
  if (finishing_ || terminating_) return;
  // A program that fails at once must not be restarted for ever.
  const int budget = 4 * std::max(opts_.max_np, 1) + 4;
  for (;;) {
    if (Alive() >= opts_.max_np) return;
    std::map<std::string, int> used;
    for (const RankProcess& p : procs_)
      if (!p.reaped) ++used[HostKey(p.host)];
    std::string host;
    for (auto& [h, n] : slots_) {
      if (used[h] < n) {
        host = h;
        break;
      }
    }
    if (host.empty()) return;
    if (joiners_started_ >= budget) {
      if (joiners_started_ == budget) {
        Say(Format("started %d joiners already: starting no more", budget));
        ++joiners_started_;
      }
      return;
    }
    RankProcess p;
    Status st = spawn_(host, ++joiners_started_, &p);
    if (!st.ok()) {
      Say("cannot start a joiner on " + host + ": " + st.message());
      return;
    }
    Say(Format("started %s to join the job", Name(p).c_str()));
    procs_.push_back(std::move(p));
  }
}

void ElasticSupervisor::StopWaitingJoiners() {
  // Once the ranks finish, joiners still queued are never admitted: when
  // every process left is one of them, stop them (their status is no failure).
  if (!finishing_ || terminating_) return;
  const int alive = Alive();
  if (alive == 0) return;
  if (!store_ && !StoreClient::Connect(opts_.store_addr, opts_.job_key, Deadline(5), &store_).ok()) return;
  int pending = 0;
  if (!JoinQueue(store_.get()).Pending(&pending).ok() || pending < alive) return;
  for (RankProcess& p : procs_) {
    if (p.reaped) continue;
    withdrawn_.insert(p.pid);
    if (killpg(p.pid, SIGTERM) != 0) kill(p.pid, SIGTERM);
  }
  ZC_INFO(kLauncher, "stopped %d joiner(s) that no grow admitted", alive);
}

void ElasticSupervisor::CheckSignals() {
  struct signalfd_siginfo si;
  while (read(signal_fd_, &si, sizeof(si)) == sizeof(si)) {
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below
    if (terminating_) {
      Say(Format("received %s again: killing every process", SignalDescription(sig).c_str()));
      kill_at_ = Clock::now();
      continue;
    }
    Say(Format("received %s: forwarding it to every process", SignalDescription(sig).c_str()));
    BeginTermination(sig, 128 + sig);
  }
}

void ElasticSupervisor::ForwardOutput(int timeout_ms) {
  std::vector<struct pollfd> fds;
  std::vector<std::pair<size_t, bool>> owners;  // (process index, is stderr)
  fds.push_back({signal_fd_, POLLIN, 0});
  owners.push_back({0, false});
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (procs_[i].out_fd >= 0) {
      fds.push_back({procs_[i].out_fd, POLLIN, 0});
      owners.push_back({i, false});
    }
    if (procs_[i].err_fd >= 0) {
      fds.push_back({procs_[i].err_fd, POLLIN, 0});
      owners.push_back({i, true});
    }
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t k = 1; k < fds.size(); ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    RankProcess& p = procs_[owners[k].first];
    int* fd = owners[k].second ? &p.err_fd : &p.out_fd;
    LineForwarder* fw = owners[k].second ? p.err.get() : p.out.get();
    if (*fd >= 0 && !fw->ReadFrom(*fd)) {
      fw->Flush();
      close(*fd);
      *fd = -1;
    }
  }
}

int ElasticSupervisor::Run() {
  const Clock::time_point timeout_at = start_ + Seconds(opts_.timeout_s);
  Clock::time_point give_up_at{};
  while (!AllDone()) {
    CheckSignals();
    ReapExited();
    const Clock::time_point now = Clock::now();
    if (opts_.timeout_s > 0 && !terminating_ && now >= timeout_at) {
      Say(Format("job timed out after %g s", opts_.timeout_s));
      BeginTermination(SIGTERM, 124);
    }
    if (terminating_ && !killed_ && now >= kill_at_) {
      for (RankProcess& p : procs_)
        if (!p.reaped && killpg(p.pid, SIGKILL) != 0) kill(p.pid, SIGKILL);
      killed_ = true;
      give_up_at = now + std::chrono::seconds(10);
    }
    if (Alive() == 0 && killed_ && now >= give_up_at) break;  // pipes held by strays
    if (Alive() == 0 && !killed_) {
      // Every process ended: give strays holding the pipes a moment.
      killed_ = true;
      give_up_at = now + std::chrono::seconds(2);
    }
    if (killed_ && now >= give_up_at && give_up_at != Clock::time_point{}) {
      for (RankProcess& p : procs_)
        if (!p.reaped) {
          Say(Format("%s did not exit after SIGKILL; giving up on it", Name(p).c_str()));
          p.reaped = true;
        }
      for (RankProcess& p : procs_)
        for (int* fd : {&p.out_fd, &p.err_fd})
          if (*fd >= 0) {
            close(*fd);
            *fd = -1;
          }
      break;
    }
    Discover();
    KillRemovedAfterGrace();
    StartJoiners();
    StopWaitingJoiners();
    ForwardOutput(100);
  }
  if (exit_code_ == 0 && !finishing_ && failures_ > 0) exit_code_ = 1;  // nobody finished
  return exit_code_;
}

}  // namespace zc::launcher
