// RemoteDumpFetcher: the flight-recorder dumps of ranks on other hosts
// (docs/debugging.md, "Jobs across hosts"). zcrun cannot signal a remote
// rank itself (the process it started is ssh), so one command per host,
// through the job's --rsh template, finds the job's ranks there (processes
// whose ZC_STORE is this job's store and that catch SIGUSR2), sends them
// SIGUSR2, waits briefly for their done markers and writes the host's dump
// folder to its standard output as a tar stream; zcrun unpacks it into its
// own folder (files it already has are kept: a shared file system). Every
// step has a deadline; a host that does not answer is named, never waited
// for.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace zc::launcher {

struct RemoteDumpSource {
  std::string rsh;         // the --rsh template ({host})
  std::string remote_dir;  // the ranks' ZC_TRACE_DIR on those hosts
  std::string store_addr;  // the job's ZC_STORE: tells its ranks apart
};

// A host whose dumps did not arrive, and why.
struct MissingHost {
  std::string host;
  std::string why;
};

class RemoteDumpFetcher {
 public:
  RemoteDumpFetcher(RemoteDumpSource source, std::vector<std::string> hosts)
      : source_(std::move(source)), hosts_(std::move(hosts)) {}

  // All hosts at once; returns when every host answered or after
  // deadline_s. Hosts that failed are in missing().
  void Fetch(const std::string& local_dir, double signal_wait_s, double deadline_s);
  // rm -rf of the remote folder on every host (zcrun's own folder only).
  void RemoveRemoteDirs(double deadline_s);
  const std::vector<MissingHost>& missing() const { return missing_; }

 private:
  std::vector<std::string> HostCommand(const std::string& host, const std::vector<std::string>& sh_args) const;

  RemoteDumpSource source_;
  std::vector<std::string> hosts_;
  std::vector<MissingHost> missing_;
};

// The shell script each host runs: $1 the folder, $2 the store address,
// $3 the wait for done markers in tenths of a second.
const char* RemoteDumpScript();

}  // namespace zc::launcher
