#include "p2p/slot_stream.h"

#include <cstring>

#include "p2p/device.h"

namespace zc {

void SlotWriter::Init(Device* dev, int peer, const SlotLayout& layout, MemRegion* local,
                      const RemoteRegion& remote, int channel_index) {
  dev_ = dev;
  peer_ = peer;
  layout_ = layout;
  local_ = local;
  remote_ = remote;
  channel_ = channel_index;
  sent_ = 0;
  credits_ = 0;
  direct_ = nullptr;
  direct_resolved_ = false;
}

char* SlotWriter::Direct() {
  if (!direct_resolved_) {
    direct_resolved_ = true;
    if (remote_.Contains(0, layout_.reader_bytes()))
      direct_ = dev_->channel(peer_, channel_).DirectAddress(remote_);
  }
  return direct_;
}

bool SlotWriter::CreditCovers() {
  // Slot sent_ % K is free once the reader has consumed sent_ - K + 1 messages.
  if (sent_ < layout_.slots + credits_) return true;
  credits_ = FlagAt(local_, 0)->load(std::memory_order_acquire);
  return sent_ < layout_.slots + credits_;
}

bool SlotWriter::HasCredit() { return CreditCovers(); }

Status SlotWriter::WaitCredit(const Deadline& dl) {
  if (CreditCovers()) return Status::Ok();
  ZC_RETURN_IF_ERROR(dev_->WaitFlag(FlagAt(local_, 0), sent_ - layout_.slots + 1, peer_, dl,
                                    "a free slot (credit)"));
  credits_ = FlagAt(local_, 0)->load(std::memory_order_acquire);
  return Status::Ok();
}

Status SlotWriter::Drain(const Deadline& dl) {
  if (sent_ == 0 || !local_) return Status::Ok();
  return dev_->WaitFlag(FlagAt(local_, 0), sent_, peer_, dl, "the last credits");
}

Status SlotWriter::Put(const void* src, uint64_t bytes, const uint64_t* aux, int naux,
                       const Deadline& dl) {
  return Put2(src, bytes, nullptr, 0, aux, naux, dl);
}

Status SlotWriter::Put2(const void* a, uint64_t abytes, const void* b, uint64_t bbytes,
                        const uint64_t* aux, int naux, const Deadline& dl) {
  if (abytes + bbytes > layout_.slot_bytes)
    return Error(ZC_ERR_INTERNAL, "slot message of %llu bytes exceeds slot capacity %llu",
                 static_cast<unsigned long long>(abytes + bbytes),
                 static_cast<unsigned long long>(layout_.slot_bytes));
  if (naux > layout_.aux_words())
    return Error(ZC_ERR_INTERNAL, "slot message with %d header words, the layout holds %d", naux,
                 layout_.aux_words());
  ZC_RETURN_IF_ERROR(WaitCredit(dl));
  const uint32_t k = layout_.slot_of(sent_);
  SlotHeader h;  // only its first header_bytes() are written
  h.bytes = abytes + bbytes;
  for (int i = 0; i < layout_.aux_words(); ++i) h.aux[i] = i < naux ? aux[i] : 0;
  // Header and payload are adjacent in the slot: one gathered write (one
  // message on tcp), the flag ordered after all of it.
  const SrcPiece pieces[3] = {{&h, layout_.header_bytes()}, {a, abytes}, {b, bbytes}};
  FlagWrite flag{&remote_, layout_.flag_offset(k), sent_ + 1};
  if (char* d = Direct()) {
    // Mapped slots (shm): plain stores, no per-write lookup.
    ZC_RETURN_IF_ERROR(dev_->KnownHealth(peer_));
    WriteMapped(d, layout_.header_offset(k), pieces, 3, &flag);
  } else {
    // Large messages spread over the peer's connections (tcp sockets, verbs
    // QPs) and their progress threads by slot; each message's payload and
    // flag stay on one ordered connection. Credits (Release) stay on
    // channel_: they are one word that must never be overwritten by an
    // older value.
    const bool spread = layout_.spread && abytes + bbytes >= SlotLayout::kSpreadMin;
    Channel& ch = dev_->channel(peer_, channel_ + (spread ? static_cast<int>(k) : 0));
    ZC_RETURN_IF_ERROR(ch.WriteGather(pieces, 3, remote_, layout_.header_offset(k), &flag, dl));
  }
  ++sent_;
  return Status::Ok();
}

void SlotReader::Init(Device* dev, int peer, const SlotLayout& layout, MemRegion* local,
                      const RemoteRegion& remote, int channel_index) {
  dev_ = dev;
  peer_ = peer;
  layout_ = layout;
  local_ = local;
  remote_ = remote;
  channel_ = channel_index;
  consumed_.store(0, std::memory_order_relaxed);
  holding_ = false;
  direct_ = nullptr;
  direct_resolved_ = false;
}

bool SlotReader::Ready() const {
  const uint64_t c = consumed_.load(std::memory_order_relaxed);
  const uint32_t k = layout_.slot_of(c);
  return FlagAt(local_, layout_.flag_offset(k))->load(std::memory_order_acquire) >= c + 1;
}

Status SlotReader::Next(const SlotHeader** header, const void** payload, const Deadline& dl) {
  const uint64_t c = consumed_.load(std::memory_order_relaxed);
  const uint32_t k = layout_.slot_of(c);
  ZC_RETURN_IF_ERROR(dev_->WaitFlag(FlagAt(local_, layout_.flag_offset(k)), c + 1, peer_,
                                    dl, "a slot message"));
  char* base = static_cast<char*>(local_->data());
  *header = reinterpret_cast<const SlotHeader*>(base + layout_.header_offset(k));
  *payload = base + layout_.payload_offset(k);
  holding_ = true;
  return Status::Ok();
}

Status SlotReader::Release(const Deadline& dl) {
  if (!holding_) return Error(ZC_ERR_INTERNAL, "slot release without a message");
  holding_ = false;
  const uint64_t c = consumed_.load(std::memory_order_relaxed) + 1;
  consumed_.store(c, std::memory_order_relaxed);
  if (!direct_resolved_) {
    direct_resolved_ = true;
    if (remote_.Contains(0, 8)) direct_ = dev_->channel(peer_, channel_).DirectAddress(remote_);
  }
  FlagWrite credit{&remote_, 0, c};
  if (direct_) {
    // Release order: our reads of the slot happen before the writer may reuse it.
    WriteMapped(direct_, 0, nullptr, 0, &credit);
    return Status::Ok();
  }
  return dev_->channel(peer_, channel_).WriteFlag(credit, dl);
}

}  // namespace zc
