#include "bootstrap/store_bootstrap.h"

#include "bootstrap/store_protocol.h"
#include "common/log.h"

namespace zc {

Status StoreBootstrap::Create(const Config& config,
                              std::unique_ptr<Bootstrap>* out,
                              const std::string& key_prefix) {
  if (config.store.empty())
    return Error(ZC_ERR_INVALID_ARG, "store bootstrap: ZC_STORE is not set");
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size)
    return Error(ZC_ERR_INVALID_ARG,
                 "store bootstrap: need 0 <= ZC_RANK < ZC_SIZE (got rank %d, "
                 "size %d)", config.rank, config.size);
  if ((config.local_rank >= 0) != (config.local_size >= 0) ||
      (config.local_size >= 0 && config.local_rank >= config.local_size))
    return Error(ZC_ERR_INVALID_ARG,
                 "store bootstrap: need 0 <= ZC_LOCAL_RANK < ZC_LOCAL_SIZE, or "
                 "neither set (got %d, %d)", config.local_rank,
                 config.local_size);
  std::unique_ptr<StoreBootstrap> b(new StoreBootstrap());
  b->rank_ = config.rank;
  b->size_ = config.size;
  b->host_id_ = LocalHostId();
  b->key_prefix_ = key_prefix;
  b->launcher_pid_ = config.launcher_pid;
  Deadline dl(config.timeout_s);
  ZC_RETURN_IF_ERROR(
      StoreClient::Connect(config.store, config.job_key, dl, &b->client_)
          .with_context(Format("rank %d: bootstrap", config.rank)));
  b->client_->set_op_timeout(config.timeout_s);
  if (config.local_rank >= 0) {
    b->local_rank_ = config.local_rank;
    b->local_size_ = config.local_size;
  } else {
    // Not launched by zcrun: ranks sharing a host id are local peers.
    ZC_RETURN_IF_ERROR(b->FindLocalRanks(dl.remaining_s()));
  }
  ZC_INFO(kBootstrap, "rank %d of %d (local %d of %d) joined store %s",
          b->rank_, b->size_, b->local_rank_, b->local_size_,
          config.store.c_str());
  *out = std::move(b);
  return Status::Ok();
}

LauncherInfo StoreBootstrap::Launcher() {
  LauncherInfo info;
  if (launcher_pid_ < 0) return info;  // the store is not zcrun's
  info.pid = launcher_pid_;
  info.name = "zcrun";
  info.connection_fd = client_->DupConnection();
  return info;
}

Status StoreBootstrap::Put(const std::string& key, const std::string& value) {
  return client_->Set(key_prefix_ + Format("%d/", rank_) + key, value)
      .with_context(Format("rank %d: bootstrap put %s", rank_,
                           store::QuoteKey(key).c_str()));
}

Status StoreBootstrap::Get(int rank, const std::string& key,
                           std::string* value, double timeout_s) {
  if (rank < 0 || rank >= size_)
    return Error(ZC_ERR_INVALID_ARG, "rank %d: bootstrap get %s: rank %d out "
                 "of range [0, %d)", rank_, store::QuoteKey(key).c_str(), rank,
                 size_);
  return client_->Get(key_prefix_ + Format("%d/", rank) + key, value, timeout_s)
      .with_context(Format("rank %d: bootstrap get %s from rank %d", rank_,
                           store::QuoteKey(key).c_str(), rank));
}

Status StoreBootstrap::Fence(double timeout_s) {
  uint64_t n = ++fences_;
  std::string counter =
      key_prefix_ + Format("zc.fence/%llu", static_cast<unsigned long long>(n));
  std::string done = counter + "/done";
  std::string ctx = Format("rank %d: bootstrap fence #%llu", rank_,
                           static_cast<unsigned long long>(n));
  int64_t arrived = 0;
  // A per-rank mark beside the counter, so that a timeout names the ranks
  // that never arrived (the counter only says how many did).
  ZC_RETURN_IF_ERROR(client_->Set(counter + Format("/r%d", rank_), "1").with_context(ctx));
  ZC_RETURN_IF_ERROR(client_->Add(counter, 1, &arrived).with_context(ctx));
  if (arrived > size_)
    return Error(ZC_ERR_INTERNAL, "%s: %lld arrivals for %d ranks (ranks "
                 "disagree on the number of fences)", ctx.c_str(),
                 static_cast<long long>(arrived), size_);
  if (arrived == size_)
    return client_->Set(done, "1").with_context(ctx);
  std::string ignored;
  Status st = client_->Get(done, &ignored, timeout_s);
  if (st.code() == ZC_ERR_TIMEOUT) {
    int64_t now = 0;
    if (client_->Add(counter, 0, &now).ok()) {
      std::string missing;
      int nmissing = 0;
      for (int r = 0; r < size_; ++r) {
        bool there = true;
        if (!client_->Check(counter + Format("/r%d", r), &there).ok()) break;
        if (there) continue;
        if (++nmissing <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      if (nmissing > 16) missing += Format(", ... (%d in all)", nmissing);
      return Error(ZC_ERR_TIMEOUT, "%s: timed out after %.3g s: %lld of %d "
                   "ranks arrived; missing rank%s: %s", ctx.c_str(), timeout_s,
                   static_cast<long long>(now), size_, nmissing == 1 ? "" : "s",
                   nmissing ? missing.c_str() : "unknown");
    }
  }
  return st.with_context(ctx);
}

}  // namespace zc
