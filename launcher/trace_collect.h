// TraceCollector: the flight-recorder dumps of a job that fails or times out
// (docs/debugging.md). Before the job starts it chooses the ranks'
// ZC_TRACE_DIR: the user's (set in zcrun's environment or with -x; kept),
// or a temporary folder of its own, made only when a dump is written (the
// ranks make it) and removed at the end; ranks on other hosts get the same
// path (the user's) or a temporary folder of zcrun's there. When the job
// fails, before its ranks are stopped, it sends SIGUSR2 to every rank that
// catches it and waits briefly for their dumps, and fetches the dumps of
// the other hosts into its folder (remote_dumps.h); after the job it
// records what became of each rank's process and prints the diagnosis of
// `python3 -m zcomm.trace` for the whole job.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "remote_dumps.h"
#include "remote_command.h"
#include "supervisor.h"

namespace zc::launcher {

class TraceCollector {
 public:
  TraceCollector() = default;
  ~TraceCollector();
  TraceCollector(const TraceCollector&) = delete;
  TraceCollector& operator=(const TraceCollector&) = delete;

  // Chooses the folder; adds ZC_TRACE_DIR to *rank_env when it is zcrun's.
  // job_tag: unguessable and unique to the job (a hash of its key), for
  // the folder's name. exports: the -x variables (the user's ZC_TRACE_DIR
  // may be there).
  void Prepare(bool all_local, const std::string& job_tag, const EnvList& exports, EnvList* rank_env);
  // A job with ranks on other hosts: how to reach them (the --rsh
  // template, the hosts, the job's store address) to fetch their dumps.
  void PrepareRemote(const std::string& rsh, const std::vector<std::string>& hosts, const std::string& store_addr);
  bool active() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // The ZC_TRACE_DIR of a rank on this host or on another one.
  const std::string& DirForRank(bool local) const { return local ? dir_ : remote_dir_; }

  // The job is failing: SIGUSR2 to every running rank that handles it
  // (a zcomm process with ZC_TRACE_DIR), then a wait of at most wait_s for
  // each to say its dumps are written. Notes what each process is doing
  // (running, stopped, exited) for the diagnosis.
  void RequestDumps(const std::vector<RankProcess>& ranks, double wait_s = 3.0);
  // After a failed job: the diagnosis, each line after "zcrun: ".
  void Report();

 private:
  std::string dir_;
  bool owned_ = false;       // a temporary folder of zcrun's: removed at the end
  bool requested_ = false;   // RequestDumps ran
  std::string remote_dir_;   // the ranks' folder on other hosts
  bool remote_owned_ = false;  // zcrun's: removed there after the diagnosis
  std::unique_ptr<RemoteDumpFetcher> remote_;
};

// "R" running, "S" sleeping, "T" stopped, ...: field 3 of /proc/PID/stat
// ('?' when unreadable). Whether the process catches signal `sig` (its
// SigCgt mask in /proc/PID/status).
char ProcessState(pid_t pid);
bool CatchesSignal(pid_t pid, int sig);

}  // namespace zc::launcher
