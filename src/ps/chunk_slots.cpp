#include "ps/chunk_slots.h"

#include <cstring>

#include "common/stream_copy.h"
#include "common/wakeup.h"
#include "p2p/device.h"
#include "p2p/slot_stream.h"
#include "ps/protocol.h"

namespace zc::ps {
namespace {

// Load/store address of byte 0 of `remote` in this process: the region
// itself when this rank owns it, the shm mapping of a local peer's, else
// null (tcp, verbs: writes go through the channel).
char* Resolve(Device* dev, int peer, const RemoteRegion& remote, uint64_t bytes) {
  if (!remote.Contains(0, bytes)) return nullptr;
  if (peer == dev->rank()) return reinterpret_cast<char*>(remote.addr);
  return dev->channel(peer, 0).DirectAddress(remote);
}

// Big chunks go over the peer's several connections (their progress
// threads); a chunk's data and its flag and credit words always share one.
int ChannelFor(uint32_t k) { return static_cast<int>(k); }

}  // namespace

Status WriteRemoteWord(Device* dev, int peer, const RemoteRegion& remote, uint64_t offset,
                       uint64_t value, int channel, const Deadline& dl) {
  FlagWrite f{&remote, offset, value};
  if (char* d = Resolve(dev, peer, remote, offset + 8)) {
    if (peer != dev->rank()) ZC_RETURN_IF_ERROR(dev->health().KnownHealth(peer));
    WriteMapped(d, 0, nullptr, 0, &f);
    Wakeup::Notify();  // a co-located waiter may sleep on notifications
    return Status::Ok();
  }
  return dev->channel(peer, channel).WriteFlag(f, dl);
}

void ChunkSlotWriter::Init(Device* dev, int peer, const ChunkSlotLayout& layout, MemRegion* local,
                           const RemoteRegion& remote) {
  dev_ = dev;
  peer_ = peer;
  layout_ = layout;
  local_ = local;
  remote_ = remote;
  sent_.assign(layout.n, 0);
  direct_ = Resolve(dev, peer, remote, layout.reader_bytes());
}

const std::atomic<uint64_t>* ChunkSlotWriter::credit(uint32_t k) const {
  return FlagAt(local_, layout_.flag_offset(k));
}

bool ChunkSlotWriter::HasCredit(uint32_t k) const {
  return credit(k)->load(std::memory_order_acquire) >= sent_[k];
}

Status ChunkSlotWriter::Put(uint32_t k, const MsgHeader& h, const void* payload, uint64_t bytes,
                            const Deadline& dl) {
  if (k >= layout_.n || bytes > layout_.capacity)
    return Error(ZC_ERR_INTERNAL, "chunk slot %u: message of %llu bytes, capacity %llu", k,
                 static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(layout_.capacity));
  if (!HasCredit(k)) return Error(ZC_ERR_INTERNAL, "chunk slot %u written before its credit", k);
  const SrcPiece pieces[2] = {{&h, sizeof(h)}, {payload, bytes}};
  FlagWrite flag{&remote_, layout_.flag_offset(k), sent_[k] + 1};
  if (direct_ && peer_ != dev_->rank()) {
    // Another process's memory, read next by its core: the payload with
    // non-temporal stores (and a fence), then the flag (release).
    ZC_RETURN_IF_ERROR(dev_->health().KnownHealth(peer_));
    char* slot = direct_ + layout_.slot_offset(k);
    memcpy(slot, &h, sizeof(h));
    CopyForReader(slot + sizeof(h), payload, bytes, kPsStreamFrom);
    WriteMapped(direct_, 0, nullptr, 0, &flag);
    Wakeup::Notify();
  } else if (direct_) {
    // This process (a co-located server that reduces it next, in cache).
    WriteMapped(direct_, layout_.slot_offset(k), pieces, 2, &flag);
    Wakeup::Notify();
  } else {
    ZC_RETURN_IF_ERROR(dev_->channel(peer_, ChannelFor(k))
                           .WriteGather(pieces, 2, remote_, layout_.slot_offset(k), &flag, dl));
  }
  ++sent_[k];
  return Status::Ok();
}

Status ChunkSlotWriter::PutInto(uint32_t k, const MsgHeader& h, const void* payload, uint64_t bytes,
                                const RemoteRegion& target, uint64_t target_off, const Deadline& dl) {
  if (k >= layout_.n || direct_) return Error(ZC_ERR_INTERNAL, "chunk slot %u: no payload target here", k);
  if (!HasCredit(k)) return Error(ZC_ERR_INTERNAL, "chunk slot %u written before its credit", k);
  Channel& ch = dev_->channel(peer_, ChannelFor(k));
  if (bytes) ZC_RETURN_IF_ERROR(ch.Write(payload, bytes, target, target_off, nullptr, dl));
  const SrcPiece head[1] = {{&h, sizeof(h)}};
  FlagWrite flag{&remote_, layout_.flag_offset(k), sent_[k] + 1};
  ZC_RETURN_IF_ERROR(ch.WriteGather(head, 1, remote_, layout_.slot_offset(k), &flag, dl));
  ++sent_[k];
  return Status::Ok();
}

TransportKind ChunkSlotWriter::transport() const {
  if (peer_ == dev_->rank()) return TransportKind::kNone;
  return dev_->channel(peer_, 0).kind();
}

void ChunkSlotReader::Init(Device* dev, int peer, const ChunkSlotLayout& layout, MemRegion* local,
                           const RemoteRegion& remote) {
  dev_ = dev;
  peer_ = peer;
  layout_ = layout;
  local_ = local;
  remote_ = remote;
  consumed_.assign(layout.n, 0);
  direct_ = Resolve(dev, peer, remote, layout.writer_bytes());
}

const std::atomic<uint64_t>* ChunkSlotReader::flag(uint32_t k) const {
  return FlagAt(local_, layout_.flag_offset(k));
}

bool ChunkSlotReader::Ready(uint32_t k) const {
  return flag(k)->load(std::memory_order_acquire) >= consumed_[k] + 1;
}

const MsgHeader* ChunkSlotReader::header(uint32_t k) const {
  return reinterpret_cast<const MsgHeader*>(static_cast<const char*>(local_->data()) +
                                            layout_.slot_offset(k));
}

const void* ChunkSlotReader::payload(uint32_t k) const {
  return static_cast<const char*>(local_->data()) + layout_.slot_offset(k) + sizeof(MsgHeader);
}

Status ChunkSlotReader::Release(uint32_t k, const Deadline& dl) {
  const uint64_t c = ++consumed_[k];
  FlagWrite credit{&remote_, layout_.flag_offset(k), c};
  if (direct_) {
    // Release order: our reads of the slot happen before the writer reuses it.
    WriteMapped(direct_, 0, nullptr, 0, &credit);
    Wakeup::Notify();
    return Status::Ok();
  }
  return dev_->channel(peer_, ChannelFor(k)).WriteFlag(credit, dl);
}

}  // namespace zc::ps
