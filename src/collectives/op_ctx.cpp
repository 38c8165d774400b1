#include "collectives/op_ctx.h"

#include "collectives/collectives.h"
#include "common/deadline.h"

namespace zc::coll {

Status OpCtx::Send(int peer, const void* src, size_t bytes, uint64_t tag, const Block* block) {
  uint64_t aux[kSigWords + 2];
  sig_.Pack(aux, tag, rank_);
  int naux = kSigWords;
  if (block) {
    aux[naux++] = static_cast<uint64_t>(block->owner);
    aux[naux++] = block->elems;
  }
  return links_->at(peer).writer.Put(src, bytes, aux, naux, dl_);
}

Status OpCtx::WriteDirect(int peer, const void* src, size_t bytes, const RemoteRegion& dst,
                          uint64_t dst_off, uint32_t q) {
  Link& l = links_->at(peer);
  const uint32_t j = q % Links::kSlots;
  FlagWrite flag{&l.their_words, Links::DirectFlagOffset(j), l.direct_sent[j] + 1};
  ZC_RETURN_IF_ERROR(group_->channel(peer, static_cast<int>(j)).Write(src, bytes, dst, dst_off, &flag, dl_));
  ++l.direct_sent[j];
  return Status::Ok();
}

Status OpCtx::HoldForDirect(void* buf, size_t bytes, RegionHold* out) {
  return group_->Hold(buf, bytes, out);
}

Status OpCtx::AwaitDirect(int peer, uint32_t q) {
  Link& l = links_->at(peer);
  const uint32_t j = q % Links::kSlots;
  ZC_RETURN_IF_ERROR(group_->WaitFlag(FlagAt(l.credit, Links::DirectFlagOffset(j)),
                                    l.direct_seen[j] + 1, peer, dl_, "a direct write"));
  ++l.direct_seen[j];
  return Status::Ok();
}

Status OpCtx::BeginAgreement() {
  if (size_ < 2) return Status::Ok();
  ZC_RETURN_IF_ERROR(Ensure(RingPeers(rank_, size_)));
  ZC_RETURN_IF_ERROR(Send(agreement_peer(), nullptr, 0, MessageTag(kAgreeStep, 0)));
  agree_from_ = (rank_ + size_ - 1) % size_;
  return Status::Ok();
}

Status OpCtx::EndAgreement() { return agree_from_ >= 0 ? TakeAgreement() : Status::Ok(); }

Status OpCtx::TakeAgreement() {
  const int from = agree_from_;
  agree_from_ = -1;
  const void* payload = nullptr;
  ZC_RETURN_IF_ERROR(Recv(from, 0, MessageTag(kAgreeStep, 0), &payload));
  // With 2 ranks my left neighbour is also my right one, which gets my
  // next message (this collective's data or the next one's agreement).
  return Release(from, /*reply_follows=*/from == agreement_peer());
}

Status OpCtx::AwaitWatchingAgreement(int peer) {
  // A link delivers in order: the neighbour's agreement precedes its data.
  if (peer == agree_from_) return TakeAgreement();
  const SlotReader& data = links_->at(peer).reader;
  const SlotReader& agree = links_->at(agree_from_).reader;
  Backoff backoff = group_->NewBackoff();
  while (!data.Ready()) {
    if (agree.Ready()) return TakeAgreement();
    backoff.Pause();
    if (backoff.Due()) {
      ZC_RETURN_IF_ERROR(group_->Health(peer));
      ZC_RETURN_IF_ERROR(group_->Health(agree_from_));
      if (dl_.expired()) break;  // Recv reports the timeout, naming what it waited for
    }
  }
  return Status::Ok();
}

Status OpCtx::Recv(int peer, size_t expect_bytes, uint64_t tag, const void** payload,
                   const Block* block) {
  if (agree_from_ >= 0) ZC_RETURN_IF_ERROR(AwaitWatchingAgreement(peer));
  const SlotHeader* h = nullptr;
  ZC_RETURN_IF_ERROR(links_->at(peer).reader.Next(&h, payload, dl_));
  return CheckSlotMessage(sig_, rank_, tag, expect_bytes, block, h->aux, h->bytes, peer);
}

Status OpCtx::Release(int peer, bool reply_follows) {
  // The credit only matters to the peer's next message. A peer that has
  // finished and exited (the last message of a collective before
  // zc_finalize) is not an error here; a peer that really died fails the
  // next wait or write that needs it.
  SlotReader& reader = links_->at(peer).reader;
  if (!reply_follows) return IgnorePeerLost(reader.Release(dl_));
  // Credits owed for half the slots still go at once (Release), so the
  // peer never waits for a lazy one while it has messages to send.
  ZC_RETURN_IF_ERROR(IgnorePeerLost(reader.Release(dl_, 1, /*credit=*/false)));
  return IgnorePeerLost(reader.Credit(dl_, /*lazy=*/true));
}

}  // namespace zc::coll
