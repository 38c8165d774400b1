#include "bootstrap/single_bootstrap.h"

#include "bootstrap/store_protocol.h"
#include "common/deadline.h"

namespace zc {

SingleBootstrap::SingleBootstrap() {
  rank_ = 0;
  size_ = 1;
  local_rank_ = 0;
  local_size_ = 1;
  host_id_ = LocalHostId();
}

Status SingleBootstrap::Put(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status SingleBootstrap::Fence(double) { return Status::Ok(); }

Status SingleBootstrap::Get(int rank, const std::string& key,
                            std::string* value, double timeout_s) {
  if (rank != 0)
    return Error(ZC_ERR_INVALID_ARG, "rank 0: bootstrap get %s: rank %d out "
                 "of range (single-process job)", store::QuoteKey(key).c_str(),
                 rank);
  std::unique_lock<std::mutex> lock(mu_);
  // Another thread of this process may still Put the key.
  bool found = cv_.wait_for(lock, std::chrono::duration<double>(
                                      timeout_s > 0 ? timeout_s : 0),
                            [&] { return kv_.count(key) > 0; });
  if (!found)
    return Error(ZC_ERR_TIMEOUT, "rank 0: bootstrap get %s: timed out after "
                 "%.3g s: the key was never put", store::QuoteKey(key).c_str(),
                 timeout_s);
  *value = kv_[key];
  return Status::Ok();
}

}  // namespace zc
