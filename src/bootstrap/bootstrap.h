// Bootstrap: how ranks find each other before any data connection exists.
// Three implementations, chosen by Create() from the environment:
//   StoreBootstrap  - zcrun's TCP key-value store (ZC_STORE, ZC_JOB_KEY)
//   PmixBootstrap   - PMIx under mpirun / srun (PMIX_RANK in the environment)
//   SingleBootstrap - neither: a job of one rank
// Usage pattern (PMIx semantics): Put your own keys, Fence, then Get any
// rank's keys. Every call has a deadline.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace zc {

// The process that launched this rank, for LauncherWatch: a rank must not
// outlive it.
struct LauncherInfo {
  pid_t pid = 0;           // on this host; 0: not here (or unknown)
  std::string name;        // "zcrun", or the parent's command name
  int connection_fd = -1;  // a duplicate of a connection to it (caller closes)
};

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // A string that is equal for ranks on the same host (hostname + boot id).
  const std::string& host_id() const { return host_id_; }
  // Which bootstrap this is: "store", "pmix" or "single".
  virtual const char* kind() const = 0;

  // Publishes key=value for this rank (visible to others after Fence()).
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  // Collective: every rank's Puts before the fence are visible after it.
  virtual Status Fence(double timeout_s) = 0;
  // Reads key as published by `rank`; waits up to timeout_s for it.
  virtual Status Get(int rank, const std::string& key, std::string* value,
                     double timeout_s) = 0;

  // The launcher to watch; pid 0 and fd -1 when there is none (a job of
  // one, a communicator made from a unique id).
  virtual LauncherInfo Launcher() { return {}; }

  // Put + Fence + Get from every rank. `all` is indexed by rank.
  Status AllGather(const std::string& key, const std::string& mine,
                   std::vector<std::string>* all, double timeout_s);

  // Picks the bootstrap from the environment (see above). key_prefix keeps
  // the keys of several bootstraps of one process over the same store or
  // PMIx job apart (a second zc_init, a communicator from a unique id).
  static Status Create(const Config& config, std::unique_ptr<Bootstrap>* out,
                       const std::string& key_prefix = "");

 protected:
  // Sets local_rank_ and local_size_ from every rank's host id (AllGather
  // of host_id_): ranks sharing a host id are local peers. Collective.
  Status FindLocalRanks(double timeout_s);

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string key_prefix_;
  std::string host_id_;
};

// A string identifying this host (hostname plus /proc/sys/kernel/random/boot_id
// when readable), used to decide which peers share memory.
std::string LocalHostId();

}  // namespace zc
