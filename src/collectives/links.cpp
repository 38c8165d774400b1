#include "collectives/links.h"

#include <cstring>

#include "common/log.h"

namespace zc::coll {
namespace {
// Control-message tag of link descriptors (the group adds its context).
constexpr uint64_t kLinkTag = ControlTag(0, TagClass::kLinks, 0);
}  // namespace

Links::Links(Group* group, size_t chunk_bytes) : group_(group) {
  layout_.slots = kSlots;
  layout_.slot_bytes = (std::max<size_t>(chunk_bytes, 64) + 63) & ~size_t{63};
  // OpCtx::Release(peer, reply_follows) may leave a credit to ride with
  // the next message to the peer.
  layout_.lazy_credit = true;
}

Links::~Links() {
  for (auto& [peer, l] : links_) {
    if (l->slots) IgnoreError(group_->Free(l->slots->data()), "destructor: best effort");
    if (l->credit) IgnoreError(group_->Free(l->credit->data()), "destructor: best effort");
  }
}

Status Links::Ensure(const std::vector<int>& peers, const Deadline& dl) {
  std::vector<int> todo;
  for (int p : peers)
    if (p != group_->rank() && p >= 0 && p < group_->size() && !links_.count(p) &&
        std::find(todo.begin(), todo.end(), p) == todo.end())
      todo.push_back(p);
  if (todo.empty()) return Status::Ok();
  // All sends first, then all receives: no cycle of waits whatever order
  // the peers list their links in.
  std::map<int, std::unique_ptr<Link>> fresh;
  Status st;
  for (int p : todo) {
    auto l = std::make_unique<Link>();
    st = group_->Allocate(layout_.reader_bytes(), &l->slots);
    if (st.ok()) st = group_->Allocate(kWordsBytes, &l->credit);
    if (!st.ok()) {
      if (l->slots) IgnoreError(group_->Free(l->slots->data()), "cleanup after a failed allocation");
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
    st = group_->SendControl(p, kLinkTag, msg, dl);
    if (!st.ok()) break;
  }
  for (size_t i = 0; st.ok() && i < todo.size(); ++i) {
    int p = todo[i];
    std::string msg;
    st = group_->RecvControl(p, kLinkTag, &msg, dl);
    if (!st.ok()) break;
    st = Connect(p, msg, fresh[p].get());
    if (!st.ok()) {
      st = st.with_context(Format("collective link with rank %d", p));
      break;
    }
    links_[p] = std::move(fresh[p]);
    ZC_TRACE(kColl, "link with rank %d ready (%u slots of %llu bytes)", p, layout_.slots,
             static_cast<unsigned long long>(layout_.slot_bytes));
  }
  if (!st.ok()) {
    for (auto& [p, l] : fresh) {
      if (!l) continue;  // moved into links_
      // Cleanup: st (the first failure) is what the caller needs to see.
      if (l->slots) IgnoreError(group_->Free(l->slots->data()), "cleanup after a failed link setup");
      if (l->credit) IgnoreError(group_->Free(l->credit->data()), "cleanup after a failed link setup");
    }
  }
  return st;
}

Status Links::Connect(int p, const std::string& msg, Link* l) {
  size_t half = msg.size() / 2;
  RemoteRegion their_slots, their_credit;
  ZC_RETURN_IF_ERROR(RemoteRegion::Parse(msg.substr(0, half), &their_slots));
  ZC_RETURN_IF_ERROR(RemoteRegion::Parse(msg.substr(half), &their_credit));
  if (their_slots.size < layout_.reader_bytes())
    return Error(ZC_ERR_MISMATCH, "rank %d's collective slots hold %llu bytes, this rank needs %llu "
                 "(ZC_CHUNK differs between ranks?)", p, static_cast<unsigned long long>(their_slots.size),
                 static_cast<unsigned long long>(layout_.reader_bytes()));
  if (their_credit.size < kWordsBytes)
    return Error(ZC_ERR_MISMATCH, "rank %d's collective flags hold %llu bytes, this rank needs %llu "
                 "(a different zcomm build?)", p, static_cast<unsigned long long>(their_credit.size),
                 static_cast<unsigned long long>(kWordsBytes));
  // Over tcp a direct write lands where the receiver's progress thread
  // reads the socket: straight into the final buffer, no slot in between,
  // no copy out of it and no credit to return. On shm and verbs a slot
  // costs no more. Both ends see the same transport for the pair.
  l->direct = group_->transport_to(p) == TransportKind::kTcp;
  Device* d = group_->device();
  l->writer.Init(&d->channels(), &d->health(), group_->device_rank(p), layout_, l->credit, their_slots);
  l->reader.Init(&d->channels(), &d->health(), group_->device_rank(p), layout_, l->slots, their_credit);
  l->their_words = their_credit;
  return Status::Ok();
}

Status Links::Quiesce(const Deadline& dl) {
  for (auto& [p, l] : links_) ZC_RETURN_IF_ERROR(l->writer.Drain(dl));
  return Status::Ok();
}

}  // namespace zc::coll
