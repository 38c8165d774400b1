#include "bootstrap/bootstrap.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "bootstrap/single_bootstrap.h"
#include "bootstrap/store_bootstrap.h"
#include "common/deadline.h"
#include "common/log.h"
#include "zc_build_config.h"
#if ZC_HAVE_PMIX
#include "bootstrap/pmix_bootstrap.h"
#endif

namespace zc {

Status Bootstrap::FindLocalRanks(double timeout_s) {
  std::vector<std::string> hosts;
  ZC_RETURN_IF_ERROR(AllGather("zc.host_id", host_id_, &hosts, timeout_s));
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (hosts[r] != host_id_) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }
  return Status::Ok();
}

Status Bootstrap::AllGather(const std::string& key, const std::string& mine,
                            std::vector<std::string>* all, double timeout_s) {
  Deadline dl(timeout_s);
  ZC_RETURN_IF_ERROR(Put(key, mine));
  ZC_RETURN_IF_ERROR(Fence(dl.remaining_s()));
  std::vector<std::string> out(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      out[r] = mine;
      continue;
    }
    // After the fence every value is there; the timeout only guards against
    // a store that lost it.
    double left = dl.remaining_s();
    ZC_RETURN_IF_ERROR(Get(r, key, &out[r], left > 0 ? left : 0));
  }
  *all = std::move(out);
  return Status::Ok();
}

Status Bootstrap::Create(const Config& config, std::unique_ptr<Bootstrap>* out,
                         const std::string& key_prefix) {
  if (!config.store.empty()) return StoreBootstrap::Create(config, out, key_prefix);
  if (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE")) {
#if ZC_HAVE_PMIX
    return PmixBootstrap::Create(config, out, key_prefix);
#else
    return Error(ZC_ERR_UNSUPPORTED,
                 "started by a PMIx launcher (PMIX_RANK/PMIX_NAMESPACE set) "
                 "but zcomm was built without PMIx; rebuild with -Dpmix=enabled "
                 "or launch with zcrun");
#endif
  }
  if (config.size > 1)
    return Error(ZC_ERR_INVALID_ARG,
                 "ZC_SIZE=%d but ZC_STORE is not set and no PMIx launcher was "
                 "found: launch with zcrun or mpirun", config.size);
  *out = std::make_unique<SingleBootstrap>();
  return Status::Ok();
}

std::string LocalHostId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string id = host[0] ? host : "unknown-host";
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (f && std::getline(f, boot)) {
    while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' '))
      boot.pop_back();
    if (!boot.empty()) id += "/" + boot;
  }
  return id;
}

}  // namespace zc
