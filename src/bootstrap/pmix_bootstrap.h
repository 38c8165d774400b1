// PmixBootstrap: ranks started by mpirun or srun learn rank, size and local
// rank from PMIx and exchange keys with PMIx_Put/Commit/Fence/Get.
// Compiled only when ZC_HAVE_PMIX.
#pragma once

#include <memory>
#include <string>

#include "bootstrap/bootstrap.h"

namespace zc {

class PmixBootstrap : public Bootstrap {
 public:
  static Status Create(const Config& config, std::unique_ptr<Bootstrap>* out,
                       const std::string& key_prefix = "");
  ~PmixBootstrap() override;  // PMIx_Finalize

  const char* kind() const override { return "pmix"; }
  Status Put(const std::string& key, const std::string& value) override;
  Status Fence(double timeout_s) override;
  Status Get(int rank, const std::string& key, std::string* value,
             double timeout_s) override;
  // The parent process (mpirun's daemon, or slurmstepd): PMIx tells us
  // nothing when it dies, so LauncherWatch watches the process itself.
  LauncherInfo Launcher() override;

 private:
  PmixBootstrap() = default;
  pid_t parent_ = 0;  // getppid() at PMIx_Init
  struct State;
  std::unique_ptr<State> st_;
  uint64_t fences_ = 0;
};

}  // namespace zc
