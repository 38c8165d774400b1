// Job supervision: forwards every rank's output, reaps the ranks, and ends
// the job when one fails (reporting the first cause: see OnRanksExited), when zcrun gets SIGINT/SIGTERM/SIGHUP, or at the
// --timeout: the other ranks' process groups get SIGTERM (or the signal
// zcrun received), and SIGKILL after a grace period.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "output.h"

namespace zc::launcher {

struct RankProcess {
  int rank = 0;
  std::string host;
  pid_t pid = -1;          // also its process group
  int out_fd = -1, err_fd = -1;
  std::unique_ptr<LineForwarder> out, err;
  bool reaped = false;
  int wait_status = 0;
  bool via_remote_shell = false;  // pid is ssh's: its exit code is the rank's
};

struct SupervisorOptions {
  double timeout_s = 0;       // 0: none
  double kill_grace_s = 3.0;  // SIGTERM -> SIGKILL
  double drain_grace_s = 2.0; // after the last rank: wait for pipe EOF
  // Runs once when a failing job is about to be stopped (a rank failed, the
  // --timeout, a signal to zcrun), before the other ranks get the signal:
  // the flight-recorder dumps (trace_collect.h).
  std::function<void(const std::vector<RankProcess>&)> before_stop;
};

// Signals zcrun handles through `signal_fd` (a signalfd): the caller blocks
// these before starting any thread and creates the fd with them.
void HandledSignals(sigset_t* set);

// "SIGKILL (9)".
std::string SignalDescription(int sig);

class Supervisor {
 public:
  Supervisor(std::vector<RankProcess>* ranks, int signal_fd,
             SupervisorOptions opts)
      : ranks_(ranks), signal_fd_(signal_fd), opts_(opts),
        start_(Clock::now()) {}

  // Starts the end of the job before Run() (a rank could not be spawned).
  void Abort(int exit_code);
  // Runs until every rank is reaped and its output drained. Returns
  // zcrun's exit status.
  int Run();

 private:
  void Reap();
  void OnRanksExited(const std::vector<RankProcess*>& batch);
  void ReportCause(RankProcess& r);
  static std::string Failure(const RankProcess& r, int* code, bool* by_signal);
  void OnSignal(int sig);
  void BeginTermination(int sig, int exit_code);
  void KillAll(int sig);
  void DrainRank(RankProcess& r);
  void CloseRankPipes(RankProcess& r);
  bool AllReaped() const;
  bool AnyPipeOpen() const;

  std::vector<RankProcess>* ranks_;
  int signal_fd_;
  SupervisorOptions opts_;
  Clock::time_point start_;
  bool terminating_ = false;
  bool killed_ = false;
  int exit_code_ = 0;
  Clock::time_point kill_at_{};
  Clock::time_point drain_until_{};
  Clock::time_point give_up_at_{};  // after SIGKILL: stop waiting
  bool draining_ = false;
  // An error exit waiting to be reported: a signal death that shows up
  // before cause_until_ is reported instead (see OnRanksExited).
  static constexpr int kCauseWindowMs = 250;
  RankProcess* cause_ = nullptr;
  Clock::time_point cause_until_{};
};

}  // namespace zc::launcher
