// Elastic supervision (zcrun --elastic, docs/launcher.md): as Supervisor,
// forwards every process's output and reaps it, but a failing rank does not
// end the job while at least --min-np processes live: zcrun starts joiners
// (ZC_JOIN=1) that wait in the job's store until the ranks grow their
// communicator (zc_comm_grow), up to --max-np and the slots of the hosts
// (those of -H/--hostfile, or what --host-discovery-script prints, asked
// again every second). The job ends when every process has exited (joiners
// still waiting once the ranks have finished are stopped), when fewer than
// --min-np live (the cause is printed, exit status non-zero), at --timeout
// or on a signal to zcrun. Exit status 0 when every rank that remained
// exited 0. As Horovod's elastic driver does, processes on a host that
// leaves the discovery script's output (or beyond the slots it lists now)
// are stopped (SIGTERM, SIGKILL after the grace); that is no failure, but
// fewer than --min-np left ends the job with that cause.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store_client.h"
#include "common/deadline.h"
#include "common/status.h"
#include "supervisor.h"

namespace zc::launcher {

struct ElasticOptions {
  int min_np = 1;
  int max_np = 1;
  std::string discovery_script;  // "": the fixed hosts below
  // Slots per host when there is no script (-H/--hostfile, or this host
  // with max_np slots).
  std::map<std::string, int> fixed_hosts;
  double discovery_interval_s = 1.0;
  double timeout_s = 0;  // --timeout; 0: none
  double kill_grace_s = 3.0;
  std::string store_addr, job_key;  // to count the joiners still waiting
};

// Starts one joiner on host; fills pid, pipes, forwarders and host of *out.
using SpawnJoinerFn = std::function<Status(const std::string& host, int joiner_no, RankProcess* out)>;

class ElasticSupervisor {
 public:
  ElasticSupervisor(std::vector<RankProcess> started, int signal_fd, ElasticOptions opts, SpawnJoinerFn spawn)
      : procs_(std::move(started)), signal_fd_(signal_fd), opts_(std::move(opts)), spawn_(std::move(spawn)),
        start_(Clock::now()) {}
  // Runs until every process has ended; returns zcrun's exit status.
  int Run();

 private:
  struct Exit {
    bool clean = false;
    int code = 0;
    std::string what;
  };
  static Exit Describe(const RankProcess& p);
  std::string Name(const RankProcess& p) const;
  void ForwardOutput(int timeout_ms);
  void ReapExited();
  void OnExit(RankProcess& p);
  void CheckSignals();
  void Discover();
  void StartJoiners();
  void StopWaitingJoiners();
  void StopProcessesOnRemovedSlots(const std::map<std::string, int>& found);
  void KillRemovedAfterGrace();
  void BeginTermination(int sig, int exit_code);
  int Alive() const;
  bool AllDone() const;

  std::vector<RankProcess> procs_;
  std::set<pid_t> withdrawn_;  // joiners nobody admitted, stopped by zcrun
  // Processes stopped because their host left the discovery script's
  // output, and when each gets SIGKILL if still running.
  std::map<pid_t, Clock::time_point> removed_;
  bool discovered_ = false;  // slots_ holds an output of the script
  int signal_fd_;
  ElasticOptions opts_;
  SpawnJoinerFn spawn_;
  Clock::time_point start_;
  std::map<std::string, int> slots_;  // the hosts now, and their slots
  Clock::time_point next_discovery_{};
  bool finishing_ = false;  // a rank exited 0: no more joiners
  int failures_ = 0;
  int joiners_started_ = 0;
  bool terminating_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_{};
  int exit_code_ = 0;
  std::unique_ptr<StoreClient> store_;
};

}  // namespace zc::launcher
