// StoreBootstrap: ranks launched by zcrun meet in its key-value store
// (ZC_STORE, authenticated with ZC_JOB_KEY). Keys are namespaced
// "<rank>/<key>"; Fence is a per-fence counter plus a "done" key set by the
// last rank to arrive, so nothing polls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_client.h"

namespace zc {

class StoreBootstrap : public Bootstrap {
 public:
  // Needs config.rank, config.size and config.store. local_rank/local_size
  // default to values derived from host ids when unset (< 0).
  static Status Create(const Config& config, std::unique_ptr<Bootstrap>* out,
                       const std::string& key_prefix = "");

  const char* kind() const override { return "store"; }
  Status Put(const std::string& key, const std::string& value) override;
  Status Fence(double timeout_s) override;
  Status Get(int rank, const std::string& key, std::string* value,
             double timeout_s) override;

  // zcrun (ZC_LAUNCHER_PID) and a duplicate of the store connection, when
  // launched by zcrun.
  LauncherInfo Launcher() override;

  // The underlying connection, for callers that need counters or waits.
  StoreClient* client() { return client_.get(); }

 private:
  StoreBootstrap() = default;
  std::unique_ptr<StoreClient> client_;
  uint64_t fences_ = 0;
  int launcher_pid_ = -1;  // config.launcher_pid
};

}  // namespace zc
