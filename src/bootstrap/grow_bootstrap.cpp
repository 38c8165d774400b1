#include "bootstrap/grow_bootstrap.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "bootstrap/join_queue.h"
#include "bootstrap/store_protocol.h"
#include "common/deadline.h"
#include "common/log.h"

namespace zc {
namespace {

// A wait's slice: how late a failure seen only between slices is noticed.
constexpr double kSliceS = 0.05;

std::string Prefix(int generation) { return Format("zc.grow%d/", generation); }

}  // namespace

Status GrowBootstrap::Create(const Config& config, int generation, Check check, std::unique_ptr<Bootstrap>* out) {
  if (config.store.empty()) return Error(ZC_ERR_UNSUPPORTED, "grow: the job has no store (ZC_STORE)");
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size || generation < 1)
    return Error(ZC_ERR_INVALID_ARG, "grow: rank %d of %d, generation %d", config.rank, config.size, generation);
  std::unique_ptr<GrowBootstrap> b(new GrowBootstrap());
  b->rank_ = config.rank;
  b->size_ = config.size;
  b->host_id_ = LocalHostId();
  b->key_prefix_ = Prefix(generation);
  b->generation_ = generation;
  b->check_ = std::move(check);
  b->launcher_pid_ = config.launcher_pid;
  b->local_pids_.assign(static_cast<size_t>(config.size), 0);
  b->pid_known_.assign(static_cast<size_t>(config.size), false);
  Deadline dl(config.timeout_s);
  const std::string ctx = Format("rank %d: grow generation %d", config.rank, generation);
  ZC_RETURN_IF_ERROR(StoreClient::Connect(config.store, config.job_key, dl, &b->client_).with_context(ctx));
  b->client_->set_op_timeout(config.timeout_s);
  // The pid first, so that the others can tell when this process dies.
  ZC_RETURN_IF_ERROR(b->client_->Set(b->Key(Format("pid/%d", b->rank_)),
                                     Format("%d %s", static_cast<int>(getpid()), b->host_id_.c_str()))
                         .with_context(ctx));
  ZC_RETURN_IF_ERROR(b->FindLocalRanks(std::max(0.0, dl.remaining_s())));
  *out = std::move(b);
  return Status::Ok();
}

void GrowBootstrap::MarkAborted(StoreClient* store, int generation, const std::string& why) {
  int64_t n = 0;
  const std::string key = Prefix(generation) + "abort";
  if (!store->Add(key + "/count", 1, &n).ok() || n != 1) return;
  if (Status st = store->Set(key, why); !st.ok())
    ZC_WARN(kBootstrap, "grow generation %d: cannot mark it aborted: %s", generation, st.message().c_str());
}

Status GrowBootstrap::FindPid(int r, std::string* pid_host) {
  pid_host->clear();
  // Its own record, or for a newcomer the one it left when it queued.
  for (const std::string& key : {Key(Format("pid/%d", r)), std::string()}) {
    std::string where = key;
    if (where.empty()) {
      bool admitted = false;
      const std::string ticket_key = JoinQueue::GenerationTicketKey(generation_, r);
      ZC_RETURN_IF_ERROR(client_->Check(ticket_key, &admitted));
      if (!admitted) return Status::Ok();
      std::string ticket;
      ZC_RETURN_IF_ERROR(client_->Get(ticket_key, &ticket, 1.0));
      where = JoinQueue::PidKey(strtoll(ticket.c_str(), nullptr, 10));
    }
    bool there = false;
    ZC_RETURN_IF_ERROR(client_->Check(where, &there));
    if (there) return client_->Get(where, pid_host, 1.0);
  }
  return Status::Ok();
}

Status GrowBootstrap::CheckFailures() {
  bool aborted = false;
  ZC_RETURN_IF_ERROR(client_->Check(Key("abort"), &aborted));
  if (aborted) {
    std::string why;
    if (!client_->Get(Key("abort"), &why, 1.0).ok()) why = "(its reason could not be read)";
    return Error(ZC_ERR_ABORTED, "grow generation %d was aborted by another participant: %s", generation_,
                 why.c_str());
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!pid_known_[r]) {
      std::string v;
      ZC_RETURN_IF_ERROR(FindPid(r, &v));
      if (v.empty()) continue;
      int pid = 0;
      char host[512] = {0};
      if (sscanf(v.c_str(), "%d %511s", &pid, host) == 2 && host_id_ == host) local_pids_[r] = pid;
      pid_known_[r] = true;
    }
    if (local_pids_[r] > 0 && kill(local_pids_[r], 0) != 0 && errno == ESRCH) {
      Status lost = Error(ZC_ERR_PEER_LOST, "rank %d of the grown communicator (pid %d) died during the grow", r,
                          static_cast<int>(local_pids_[r]));
      MarkAborted(client_.get(), generation_, Format("rank %d: %s", rank_, lost.message().c_str()));
      return lost;
    }
  }
  if (check_) {
    Status st = check_();
    if (!st.ok()) {
      MarkAborted(client_.get(), generation_, Format("rank %d: %s", rank_, st.message().c_str()));
      return st;
    }
  }
  return Status::Ok();
}

Status GrowBootstrap::WaitKey(const std::string& key, std::string* value, double timeout_s, const std::string& what) {
  Deadline dl(timeout_s);
  for (;;) {
    ZC_RETURN_IF_ERROR(CheckFailures().with_context(what));
    double left = dl.remaining_s();
    if (left <= 0)
      return Error(ZC_ERR_TIMEOUT, "%s: timed out after %.3g s (ZC_TIMEOUT)", what.c_str(), dl.elapsed_s());
    Status st = client_->Get(key, value, std::min(left, kSliceS));
    if (st.code() != ZC_ERR_TIMEOUT) return st.with_context(what);
  }
}

Status GrowBootstrap::Put(const std::string& key, const std::string& value) {
  return client_->Set(Key(Format("%d/", rank_) + key), value)
      .with_context(Format("rank %d: grow generation %d: put %s", rank_, generation_, store::QuoteKey(key).c_str()));
}

Status GrowBootstrap::Get(int rank, const std::string& key, std::string* value, double timeout_s) {
  if (rank < 0 || rank >= size_)
    return Error(ZC_ERR_INVALID_ARG, "rank %d: grow: get from rank %d out of range [0, %d)", rank_, rank, size_);
  return WaitKey(Key(Format("%d/", rank) + key), value, timeout_s,
                 Format("rank %d: grow generation %d: get %s from rank %d", rank_, generation_,
                        store::QuoteKey(key).c_str(), rank));
}

Status GrowBootstrap::Fence(double timeout_s) {
  uint64_t n = ++fences_;
  const std::string counter = Key(Format("zc.fence/%llu", static_cast<unsigned long long>(n)));
  const std::string ctx =
      Format("rank %d: grow generation %d: fence #%llu", rank_, generation_, static_cast<unsigned long long>(n));
  int64_t arrived = 0;
  ZC_RETURN_IF_ERROR(client_->Add(counter, 1, &arrived).with_context(ctx));
  if (arrived > size_)
    return Error(ZC_ERR_INTERNAL, "%s: %lld arrivals for %d ranks", ctx.c_str(), static_cast<long long>(arrived),
                 size_);
  if (arrived == size_) return client_->Set(counter + "/done", "1").with_context(ctx);
  std::string ignored;
  return WaitKey(counter + "/done", &ignored, timeout_s, ctx);
}

LauncherInfo GrowBootstrap::Launcher() {
  LauncherInfo info;
  if (launcher_pid_ < 0) return info;
  info.pid = launcher_pid_;
  info.name = "zcrun";
  info.connection_fd = client_->DupConnection();
  return info;
}

}  // namespace zc
