#include "bootstrap/join_queue.h"

#include <algorithm>
#include <cstdio>

#include "common/log.h"

namespace zc {
namespace {

const char kWaiting[] = "zc.elastic/waiting";
const char kClaimed[] = "zc.elastic/claimed";
const char kScanned[] = "zc.elastic/scanned";
const char kGeneration[] = "zc.elastic/generation";

std::string TicketKey(int64_t t) { return Format("zc.elastic/ticket/%lld", static_cast<long long>(t)); }

// How long a joiner whose ticket a grow claimed waits for its answer past
// its own deadline: the grow's leader writes it right after agreeing.
constexpr double kClaimedAnswerGraceS = 30;

Status ParseAdmission(int64_t ticket, const std::string& v, Admission* out) {
  if (v.rfind("abort ", 0) == 0)
    return Error(ZC_ERR_ABORTED, "the grow that admitted this joiner (ticket %lld) failed: %s",
                 static_cast<long long>(ticket), v.substr(6).c_str());
  if (sscanf(v.c_str(), "%d %d %d", &out->generation, &out->rank, &out->size) != 3 || out->generation < 1 ||
      out->rank < 0 || out->rank >= out->size)
    return Error(ZC_ERR_INTERNAL, "malformed admission '%s' for ticket %lld", v.c_str(),
                 static_cast<long long>(ticket));
  return Status::Ok();
}

}  // namespace

std::string JoinQueue::PidKey(int64_t ticket) { return TicketKey(ticket) + "/pid"; }

std::string JoinQueue::GenerationTicketKey(int generation, int rank) {
  return Format("zc.grow%d/ticket/%d", generation, rank);
}

Status JoinQueue::Enqueue(const std::string& pid_host, int64_t* ticket) {
  ZC_RETURN_IF_ERROR(store_->Add(kWaiting, 1, ticket).with_context("join: taking a place in the job's queue"));
  return store_->Set(PidKey(*ticket), pid_host).with_context("join: taking a place in the job's queue");
}

Status JoinQueue::Claim(int64_t ticket, bool* won) {
  int64_t n = 0;
  ZC_RETURN_IF_ERROR(store_->Add(TicketKey(ticket) + "/claim", 1, &n));
  *won = n == 1;
  if (*won) ZC_RETURN_IF_ERROR(store_->Add(kClaimed, 1, &n));
  return Status::Ok();
}

Status JoinQueue::AwaitAdmission(int64_t ticket, const Deadline& dl, Admission* out) {
  std::string v;
  Status st = store_->Get(TicketKey(ticket), &v, std::max(0.0, dl.remaining_s()));
  if (st.code() == ZC_ERR_TIMEOUT) {
    bool withdrawn = false;
    ZC_RETURN_IF_ERROR(Claim(ticket, &withdrawn));
    if (withdrawn)
      return Error(ZC_ERR_TIMEOUT, "join: no grow admitted this process (ticket %lld) within ZC_TIMEOUT "
                   "(%.3g s): the job's ranks did not call zc_comm_grow; left the queue",
                   static_cast<long long>(ticket), dl.elapsed_s());
    // A grow claimed it just now: its answer follows.
    st = store_->Get(TicketKey(ticket), &v, kClaimedAnswerGraceS);
  }
  ZC_RETURN_IF_ERROR(st.with_context(Format("join: waiting for admission (ticket %lld)",
                                            static_cast<long long>(ticket))));
  return ParseAdmission(ticket, v, out);
}

Status JoinQueue::Pending(int* count) {
  int64_t waiting = 0, claimed = 0;
  ZC_RETURN_IF_ERROR(store_->Add(kWaiting, 0, &waiting));
  ZC_RETURN_IF_ERROR(store_->Add(kClaimed, 0, &claimed));
  *count = waiting > claimed ? static_cast<int>(waiting - claimed) : 0;
  return Status::Ok();
}

Status JoinQueue::BeginGeneration(int* generation, std::vector<int64_t>* admitted) {
  int64_t gen = 0, waiting = 0, scanned = 0;
  ZC_RETURN_IF_ERROR(store_->Add(kGeneration, 1, &gen));
  ZC_RETURN_IF_ERROR(store_->Add(kWaiting, 0, &waiting));
  ZC_RETURN_IF_ERROR(store_->Add(kScanned, 0, &scanned));
  admitted->clear();
  for (int64_t t = scanned + 1; t <= waiting; ++t) {
    bool won = false;
    ZC_RETURN_IF_ERROR(Claim(t, &won));
    if (won) admitted->push_back(t);
  }
  if (waiting > scanned) ZC_RETURN_IF_ERROR(store_->Add(kScanned, waiting - scanned, &scanned));
  *generation = static_cast<int>(gen);
  return Status::Ok();
}

Status JoinQueue::Admit(int generation, int old_size, const std::vector<int64_t>& admitted) {
  const int size = old_size + static_cast<int>(admitted.size());
  for (size_t i = 0; i < admitted.size(); ++i) {
    const int rank = old_size + static_cast<int>(i);
    ZC_RETURN_IF_ERROR(store_->Set(GenerationTicketKey(generation, rank), std::to_string(admitted[i])));
    ZC_RETURN_IF_ERROR(store_->Set(TicketKey(admitted[i]), Format("%d %d %d", generation, rank, size)));
  }
  return Status::Ok();
}

void JoinQueue::Refuse(const std::vector<int64_t>& admitted, const std::string& why) {
  for (int64_t t : admitted)
    if (Status st = store_->Set(TicketKey(t), "abort " + why); !st.ok())
      ZC_WARN(kBootstrap, "grow: cannot tell joiner (ticket %lld) of the failure: %s", static_cast<long long>(t),
              st.message().c_str());
}

}  // namespace zc
