#include "collectives/links.h"

#include "collectives/collectives.h"
#include "common/deadline.h"

#include "common/log.h"

namespace zc::coll {
namespace {
// Control-message tag of link descriptors (the group adds its context).
constexpr uint64_t kLinkTag = ControlTag(0, TagClass::kLinks, 0);
}  // namespace

Links::Links(Group* dev, size_t chunk_bytes) : dev_(dev) {
  layout_.slots = kSlots;
  layout_.slot_bytes = (std::max<size_t>(chunk_bytes, 64) + 63) & ~size_t{63};
}

Links::~Links() {
  for (auto& [peer, l] : links_) {
    if (l->slots) IgnoreError(dev_->Free(l->slots->data()), "destructor: best effort");
    if (l->credit) IgnoreError(dev_->Free(l->credit->data()), "destructor: best effort");
  }
}

Status Links::Ensure(const std::vector<int>& peers, const Deadline& dl) {
  std::vector<int> todo;
  for (int p : peers)
    if (p != dev_->rank() && p >= 0 && p < dev_->size() && !links_.count(p) &&
        std::find(todo.begin(), todo.end(), p) == todo.end())
      todo.push_back(p);
  if (todo.empty()) return Status::Ok();
  // All sends first, then all receives: no cycle of waits whatever order
  // the peers list their links in.
  std::map<int, std::unique_ptr<Link>> fresh;
  Status st;
  for (int p : todo) {
    auto l = std::make_unique<Link>();
    st = dev_->Allocate(layout_.reader_bytes(), &l->slots);
    if (st.ok()) st = dev_->Allocate(kWordsBytes, &l->credit);
    if (!st.ok()) {
      if (l->slots) IgnoreError(dev_->Free(l->slots->data()), "cleanup after a failed allocation");
      break;
    }
    // Only the flags: a slot's header and payload are read after its flag
    // says they were written. (Zeroing megabytes of slots made every new
    // communicator touch all of its link memory up front.)
    memset(l->slots->data(), 0, layout_.flags_bytes());
    memset(l->credit->data(), 0, kWordsBytes);
    Link* raw = l.get();
    fresh[p] = std::move(l);
    std::string msg = raw->slots->remote().Serialize() + raw->credit->remote().Serialize();
    st = dev_->SendControl(p, kLinkTag, msg, dl);
    if (!st.ok()) break;
  }
  for (size_t i = 0; st.ok() && i < todo.size(); ++i) {
    int p = todo[i];
    std::string msg;
    st = dev_->RecvControl(p, kLinkTag, &msg, dl);
    if (!st.ok()) break;
    size_t half = msg.size() / 2;
    RemoteRegion their_slots, their_credit;
    st = RemoteRegion::Parse(msg.substr(0, half), &their_slots);
    if (st.ok()) st = RemoteRegion::Parse(msg.substr(half), &their_credit);
    if (st.ok() && their_slots.size < layout_.reader_bytes())
      st = Error(ZC_ERR_MISMATCH, "rank %d's collective slots hold %llu bytes, this rank needs %llu "
                 "(ZC_CHUNK differs between ranks?)", p,
                 static_cast<unsigned long long>(their_slots.size),
                 static_cast<unsigned long long>(layout_.reader_bytes()));
    if (st.ok() && their_credit.size < kWordsBytes)
      st = Error(ZC_ERR_MISMATCH, "rank %d's collective flags hold %llu bytes, this rank needs %llu "
                 "(a different zcomm build?)", p, static_cast<unsigned long long>(their_credit.size),
                 static_cast<unsigned long long>(kWordsBytes));
    if (!st.ok()) {
      st = st.with_context(Format("collective link with rank %d", p));
      break;
    }
    Link* l = fresh[p].get();
    Device* d = dev_->device();
    l->writer.Init(&d->channels(), &d->health(), dev_->device_rank(p), layout_, l->credit, their_slots);
    l->reader.Init(&d->channels(), &d->health(), dev_->device_rank(p), layout_, l->slots, their_credit);
    l->their_words = their_credit;
    links_[p] = std::move(fresh[p]);
    ZC_TRACE(kColl, "link with rank %d ready (%u slots of %llu bytes)", p, layout_.slots,
             static_cast<unsigned long long>(layout_.slot_bytes));
  }
  if (!st.ok()) {
    for (auto& [p, l] : fresh) {
      if (!l) continue;  // moved into links_
      // Cleanup: st (the first failure) is what the caller needs to see.
      if (l->slots) IgnoreError(dev_->Free(l->slots->data()), "cleanup after a failed link setup");
      if (l->credit) IgnoreError(dev_->Free(l->credit->data()), "cleanup after a failed link setup");
    }
  }
  return st;
}

Status Links::Quiesce(const Deadline& dl) {
  for (auto& [p, l] : links_) ZC_RETURN_IF_ERROR(l->writer.Drain(dl));
  return Status::Ok();
}

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
  ZC_RETURN_IF_ERROR(dev_->channel(peer, static_cast<int>(j)).Write(src, bytes, dst, dst_off, &flag, dl_));
  ++l.direct_sent[j];
  return Status::Ok();
}

Status OpCtx::AwaitDirect(int peer, uint32_t q) {
  Link& l = links_->at(peer);
  const uint32_t j = q % Links::kSlots;
  ZC_RETURN_IF_ERROR(dev_->WaitFlag(FlagAt(l.credit, Links::DirectFlagOffset(j)),
                                    l.direct_seen[j] + 1, peer, dl_, "a direct write"));
  ++l.direct_seen[j];
  return Status::Ok();
}

Status OpCtx::BeginAgreement() {
  if (size_ < 2) return Status::Ok();
  ZC_RETURN_IF_ERROR(Ensure(RingPeers(rank_, size_)));
  ZC_RETURN_IF_ERROR(Send((rank_ + 1) % size_, nullptr, 0, MessageTag(kAgreeStep, 0)));
  agree_from_ = (rank_ + size_ - 1) % size_;
  return Status::Ok();
}

Status OpCtx::EndAgreement() { return agree_from_ >= 0 ? TakeAgreement() : Status::Ok(); }

Status OpCtx::TakeAgreement() {
  const int from = agree_from_;
  agree_from_ = -1;
  const void* payload = nullptr;
  ZC_RETURN_IF_ERROR(Recv(from, 0, MessageTag(kAgreeStep, 0), &payload));
  return Release(from);
}

Status OpCtx::AwaitWatchingAgreement(int peer) {
  // A link delivers in order: the neighbour's agreement precedes its data.
  if (peer == agree_from_) return TakeAgreement();
  const SlotReader& data = links_->at(peer).reader;
  const SlotReader& agree = links_->at(agree_from_).reader;
  Backoff backoff;
  while (!data.Ready()) {
    if (agree.Ready()) return TakeAgreement();
    backoff.Pause();
    if (backoff.Due()) {
      ZC_RETURN_IF_ERROR(dev_->Health(peer));
      ZC_RETURN_IF_ERROR(dev_->Health(agree_from_));
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

Status OpCtx::Release(int peer) {
  // The credit only matters to the peer's next message. A peer that has
  // finished and exited (the last message of a collective before
  // zc_finalize) is not an error here; a peer that really died fails the
  // next wait or write that needs it.
  return IgnorePeerLost(links_->at(peer).reader.Release(dl_));
}

}  // namespace zc::coll
