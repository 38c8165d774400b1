// GrowBootstrap: the fresh rendezvous of one membership generation of a
// grown job (api/grow_c.cpp) in the job's store, under "zc.grow<g>/".
// As StoreBootstrap, but no wait trusts that every participant will come:
// each wait is cut into short slices, and between them it fails at once
// when the generation was aborted (a participant saw a failure and said so
// in the store), when a participant on this host has died (every one
// publishes its pid first; a newcomer's is known from when it queued), or when the caller's check says so (a grow's
// survivors watch the old communicator's peers). So a rank or newcomer that
// dies during a grow never makes the others wait for ZC_TIMEOUT.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_client.h"

namespace zc {

class GrowBootstrap : public Bootstrap {
 public:
  // A failure seen outside the store (non-OK: the grow fails with it).
  using Check = std::function<Status()>;
  // config: store, job_key, timeout_s, launcher_pid; rank and size in the
  // grown communicator; generation >= 1.
  static Status Create(const Config& config, int generation, Check check, std::unique_ptr<Bootstrap>* out);

  const char* kind() const override { return "store"; }
  Status Put(const std::string& key, const std::string& value) override;
  Status Fence(double timeout_s) override;
  Status Get(int rank, const std::string& key, std::string* value, double timeout_s) override;
  LauncherInfo Launcher() override;

  // Drops the caller's check once the grow is over: it watches the old
  // communicator, which may be finalized before this bootstrap goes.
  void ForgetCheck() { check_ = nullptr; }

  // Marks the generation aborted (why), so that every participant's next
  // wait fails; the first mark wins.
  static void MarkAborted(StoreClient* store, int generation, const std::string& why);

 private:
  GrowBootstrap() = default;
  // Waits for key until timeout_s, a slice at a time, checking for failures.
  Status WaitKey(const std::string& key, std::string* value, double timeout_s, const std::string& what);
  Status CheckFailures();
  // Rank r's "<pid> <host id>" ("" while unknown).
  Status FindPid(int r, std::string* pid_host);
  std::string Key(const std::string& rest) const { return key_prefix_ + rest; }

  std::unique_ptr<StoreClient> client_;
  Check check_;
  int generation_ = 0;
  uint64_t fences_ = 0;
  int launcher_pid_ = -1;
  // Participants on this host, by rank (pid 0: not known yet, or elsewhere).
  std::vector<pid_t> local_pids_;
  std::vector<bool> pid_known_;
};

}  // namespace zc
