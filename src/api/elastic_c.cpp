// C ABI: fault tolerance with MPI ULFM's semantics (docs/elastic.md).
// zc_comm_revoke aborts the current epoch of the communicator's World (every
// communicator sharing its connections shares its fate); zc_comm_agree is a
// fault-tolerant agreement (p2p/agreement.h); zc_comm_shrink agrees on the
// failed ranks and a fresh context id, starts a new epoch on the survivors
// (PeerHealth::AdvanceEpoch) and builds a communicator of the live ranks
// over the same Device: same connections, same pool, no rendezvous.
#include <zcomm/zcomm.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/checks.h"
#include "api/comm.h"
#include "collectives/collectives.h"
#include "common/log.h"
#include "p2p/agreement.h"
#include "p2p/segment.h"

namespace {

using namespace zc::api;
using zc::Status;

// "1, 3" (group ranks of the failed bits).
std::string RankList(const zc::AgreedValue& v, int size) {
  std::string out;
  for (int r = 0; r < size; ++r)
    if (v.IsFailed(r)) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// The agreed failed ranks are lost on this rank too (what one survivor saw,
// all know: a second shrink or agree starts from the same knowledge).
void DeclareFailed(zc_comm* comm, const zc::AgreedValue& v) {
  for (int r = 0; r < comm->size; ++r)
    if (r != comm->rank && v.IsFailed(r))
      comm->device->health().DeclareLost(comm->group->device_rank(r),
                                         zc::Format("rank %d of the communicator was agreed failed by the survivors", r));
}

Status AgreeOnce(zc_comm* comm, zc::AgreedValue* v, const zc::Deadline& dl) {
  return zc::Agree(comm->group.get(), comm->agree_seq++, v, dl);
}

// The lowest context id above every id this World has used or reserved:
// proposed by each survivor, the largest wins.
uint32_t NextFreshContext(zc::World* w) {
  std::lock_guard<std::mutex> lock(w->contexts_mu);
  uint32_t top = 0;
  if (!w->contexts.empty()) top = std::max(top, w->contexts.rbegin()->first);
  if (!w->retired_contexts.empty()) top = std::max(top, *w->retired_contexts.rbegin());
  return top + 1;
}

// Reserves ctx for a shrink when it is free here (then *token is set).
bool ReserveContext(zc::World* w, uint32_t ctx, uint64_t* token) {
  std::lock_guard<std::mutex> lock(w->contexts_mu);
  if (ctx == 0 || ctx > zc::kMaxContext || w->contexts.count(ctx) || w->retired_contexts.count(ctx)) return false;
  *token = w->next_token++;
  w->contexts[ctx] = *token;
  return true;
}

// Every id in use now belongs to the old epoch: retired; ctx becomes in use.
void RetireOldContexts(zc::World* w, uint32_t ctx) {
  std::lock_guard<std::mutex> lock(w->contexts_mu);
  for (auto& [id, token] : w->contexts)
    if (id != ctx) w->retired_contexts.insert(id);
  w->contexts[ctx] = 0;
}

// Shrink's agreements (see zc_comm_shrink in zcomm.h): *members the Device
// ranks of the survivors in rank order, *ctx their new context id
// (reserved here), *failed the agreed failed ranks of comm. Runs until one
// attempt sees no new failure.
Status AgreeOnSurvivors(zc_comm* comm, std::vector<int>* members, uint32_t* ctx, zc::AgreedValue* failed) {
  zc::World* w = comm->world.get();
  zc::Deadline dl = comm->group->NewDeadline();
  for (;;) {
    zc::AgreedValue first = zc::ProposalOf(comm->group.get());
    first.max = NextFreshContext(w);
    ZC_RETURN_IF_ERROR(AgreeOnce(comm, &first, dl));
    if (first.IsFailed(comm->rank))
      return zc::Error(ZC_ERR_PEER_LOST, "the other ranks agreed that this rank (%d) has failed", comm->rank);
    DeclareFailed(comm, first);
    uint64_t token = 0;
    const uint32_t candidate = static_cast<uint32_t>(first.max);
    const bool reserved = ReserveContext(w, candidate, &token);
    // Second: was the id free everywhere, and has nobody seen another failure?
    zc::AgreedValue second = zc::ProposalOf(comm->group.get());
    second.flags = reserved ? 1 : 0;
    Status st = AgreeOnce(comm, &second, dl);
    if (st.ok() && second.flags == 1 && second.failed == first.failed) {
      *ctx = candidate;
      *failed = first;
      members->clear();
      for (int r = 0; r < comm->size; ++r)
        if (!first.IsFailed(r)) members->push_back(comm->group->device_rank(r));
      return Status::Ok();
    }
    if (reserved) ReleaseContext(w, candidate);
    ZC_RETURN_IF_ERROR(st);
    if (second.IsFailed(comm->rank))
      return zc::Error(ZC_ERR_PEER_LOST, "the other ranks agreed that this rank (%d) has failed", comm->rank);
    if (dl.expired())
      return zc::Error(ZC_ERR_TIMEOUT, "no stable set of survivors within ZC_TIMEOUT (%g s)", comm->config.timeout_s);
    ZC_INFO(kCommon, "rank %d: shrink: another failure (ranks %s) or a busy context id (%u): again",
            comm->rank, RankList(second, comm->size).c_str(), candidate);
  }
}

}  // namespace

extern "C" {

zc_status zc_comm_revoke(zc_comm* comm) {
  ZC_CHECK_COMM(comm, "zc_comm_revoke");
  if (comm->group->stale()) return ZC_OK;  // revoked for good by a shrink
  zc::PeerHealth& h = comm->device->health();
  h.Revoke(zc::Error(ZC_ERR_ABORTED, "rank %d revoked the communicator", comm->rank));
  return ZC_OK;
}

zc_status zc_comm_is_revoked(zc_comm* comm, int* revoked) {
  ZC_CHECK_COMM(comm, "zc_comm_is_revoked");
  if (!revoked) return BadArg(comm, "zc_comm_is_revoked", "revoked is NULL");
  zc::HealthScope scope = comm->group->Scope();
  *revoked = comm->group->stale() || !comm->device->health().Health(-1).ok();
  return ZC_OK;
}

zc_status zc_comm_failed_ranks(zc_comm* comm, int* ranks, int* count) {
  ZC_CHECK_COMM(comm, "zc_comm_failed_ranks");
  if (!count) return BadArg(comm, "zc_comm_failed_ranks", "count is NULL");
  *count = 0;
  zc::HealthScope scope = zc::HealthScope::FaultTolerant(&comm->device->health());
  for (int r = 0; r < comm->size; ++r) {
    if (r == comm->rank || comm->group->Health(r).ok()) continue;
    if (ranks) ranks[*count] = r;
    ++*count;
  }
  return ZC_OK;
}

zc_status zc_comm_agree(zc_comm* comm, int* flag) {
  const char* op = "zc_comm_agree";
  ZC_CHECK_COMM(comm, op);
  if (!flag) return BadArg(comm, op, "flag is NULL");
  std::lock_guard<std::mutex> lock(comm->agree_mu);
  zc::AgreedValue v = zc::ProposalOf(comm->group.get());
  v.flags = static_cast<uint32_t>(*flag);
  Status st = AgreeOnce(comm, &v, comm->group->NewDeadline());
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
  *flag = static_cast<int>(static_cast<uint32_t>(v.flags));
  if (v.CountFailed() == 0) return ZC_OK;
  DeclareFailed(comm, v);
  return Fail(zc::Error(ZC_ERR_PEER_LOST, "rank %d: %s: ranks %s of the communicator have failed (flag agreed: %#x)",
                        comm->rank, op, RankList(v, comm->size).c_str(), static_cast<unsigned>(*flag)));
}

zc_status zc_comm_shrink(zc_comm* comm, zc_comm** newcomm) {
  const char* op = "zc_comm_shrink";
  ZC_CHECK_COMM(comm, op);
  if (!newcomm) return BadArg(comm, op, "newcomm is NULL");
  *newcomm = nullptr;
  std::lock_guard<std::mutex> world_lock(comm->world->shrink_mu);
  if (comm->group->stale())
    return BadArg(comm, op, "the communicator was revoked by an earlier shrink of its World; shrink the newest "
                  "communicator");
  std::lock_guard<std::mutex> lock(comm->agree_mu);
  zc::PeerHealth& health = comm->device->health();
  std::unique_ptr<zc_comm> made;
  for (int attempt = 1;; ++attempt) {
    // Every operation of this epoch, here and on every peer, fails from now on.
    health.Revoke(zc::Error(ZC_ERR_ABORTED, "rank %d revoked the communicator to shrink it", comm->rank));
    std::vector<int> members;
    uint32_t ctx = 0;
    zc::AgreedValue failed;
    Status st = AgreeOnSurvivors(comm, &members, &ctx, &failed);
    if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
    // Here the survivors start the new epoch; the old communicators stay revoked.
    health.AdvanceEpoch();
    RetireOldContexts(comm->world.get(), ctx);
    st = MakeComm(comm->world, members, ctx, comm->gpu.get(), &made);
    // The others may be waiting for this rank's part of the setup.
    if (!st.ok()) health.Revoke(st);
    // A member that died after the agreement can fail the new communicator's
    // setup on some survivors only: all keep it, or all start over.
    zc::AgreedValue verdict = zc::ProposalOf(comm->group.get());
    verdict.flags = st.ok() ? 1 : 0;
    Status agreed = AgreeOnce(comm, &verdict, comm->group->NewDeadline());
    if (agreed.ok() && verdict.flags == 1 && verdict.failed == failed.failed) break;
    ZC_INFO(kCommon, "rank %d: shrink attempt %d: the new communicator failed here (%s) or on another rank: again",
            comm->rank, attempt, st.ok() ? "ok" : st.message().c_str());
    health.Revoke(zc::Error(ZC_ERR_ABORTED, "rank %d: a member of the shrunk communicator failed", comm->rank));
    if (made) zc_finalize(made.release());
    {
      std::lock_guard<std::mutex> ctx_lock(comm->world->contexts_mu);
      comm->world->retired_contexts.insert(ctx);
    }
    if (!agreed.ok()) return Fail(agreed.with_context(zc::Format("rank %d: %s", comm->rank, op)));
    if (attempt >= comm->size)
      return Fail(st.ok() ? zc::Error(ZC_ERR_PEER_LOST, "rank %d: %s: ranks kept failing", comm->rank, op)
                          : st.with_context(zc::Format("rank %d: %s: the new communicator of %zu ranks",
                                                       comm->rank, op, members.size())));
  }
  // The dead cannot remove their shared-memory segments: one survivor per
  // host does (only segments whose owner is gone: their lock is free).
  if (made->local_rank == 0) zc::Segment::SweepStale();
  ZC_INFO(kCommon, "shrink: rank %d of %d -> rank %d of %d (context %u)", comm->rank, comm->size, made->rank,
          made->size, made->group->context());
  *newcomm = made.release();
  return ZC_OK;
}

}  // extern "C"
