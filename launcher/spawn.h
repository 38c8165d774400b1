// Starting one rank: pipes for its stdout and stderr, /dev/null as stdin,
// its own process group (so a kill reaches its children too), CPU binding,
// SIGTERM when zcrun dies (PR_SET_PDEATHSIG), then exec. Everything the child needs is prepared before fork(): the
// parent has threads (the store), so the child only makes system calls.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "binding.h"
#include "common/status.h"
#include "remote_command.h"

namespace zc::launcher {

struct SpawnRequest {
  int rank = 0;
  std::vector<std::string> argv;     // argv[0] is searched in PATH
  std::vector<std::string> env;      // complete environment, "K=V"
  const Binder* binder = nullptr;    // null: leave affinity alone
  int local_rank = -1;
  std::string stdin_data;            // the rank's whole standard input (else /dev/null)
};

struct SpawnedRank {
  pid_t pid = -1;
  int out_fd = -1;  // read ends: non-blocking, close-on-exec
  int err_fd = -1;
};

Status SpawnRank(const SpawnRequest& req, SpawnedRank* out);

// This process's environment with `vars` set (replacing earlier values).
std::vector<std::string> MergeEnvironment(const EnvList& vars);

// Finds `prog` the way execvp will: a path with '/' is checked as is, else
// each PATH entry. Fills *resolved; an error says why it cannot run.
Status FindProgram(const std::string& prog, std::string* resolved);

}  // namespace zc::launcher
