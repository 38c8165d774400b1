#include "p2p/slot_stream.h"

#include <algorithm>
#include <cstring>

#include "p2p/channel_table.h"
#include "p2p/peer_health.h"

namespace zc {

void SlotWriter::Init(ChannelTable* channels, const PeerHealth* health, int peer,
                      const SlotLayout& layout, MemRegion* local, const RemoteRegion& remote,
                      int channel_index) {
  channels_ = channels;
  health_ = health;
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

Channel& SlotWriter::channel(int index) { return channels_->at(peer_, index); }

char* SlotWriter::ResolveDirect() {
  direct_resolved_ = true;
  if (remote_.Contains(0, layout_.reader_bytes()))
    direct_ = channel(channel_).DirectAddress(remote_);
  return direct_;
}

bool SlotWriter::HasCredits(uint32_t n) { return CreditCovers(n); }

Status SlotWriter::WaitCredit(const Deadline& dl, uint32_t n) {
  if (CreditCovers(n)) return Status::Ok();
  ZC_RETURN_IF_ERROR(health_->WaitFlag(FlagAt(local_, 0), sent_ + n - layout_.slots, peer_, dl,
                                    "a free slot (credit)"));
  credits_ = FlagAt(local_, 0)->load(std::memory_order_acquire);
  return Status::Ok();
}

Status SlotWriter::Drain(const Deadline& dl) {
  if (sent_ == 0 || !local_) return Status::Ok();
  return health_->WaitFlag(FlagAt(local_, 0), sent_, peer_, dl, "the last credits");
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
  ZC_RETURN_IF_ERROR(WaitCredit(dl));
  const SrcPiece pieces[2] = {{a, abytes}, {b, bbytes}};
  return WriteSlot(pieces, 2, abytes + bbytes, aux, naux, dl);
}

Status SlotWriter::PutSpan(const SrcPiece* pieces, int npieces, uint64_t total, uint32_t n,
                           uint64_t* aux, int naux, const Deadline& dl) {
  if (n == 0 || n > layout_.slots || naux < 2 || naux > layout_.aux_words() ||
      total > n * layout_.slot_bytes ||
      (n > 1 && total <= (n - 1) * layout_.slot_bytes))
    return Error(ZC_ERR_INTERNAL, "slot span of %llu bytes in %u slots (of %u, %llu bytes each)",
                 static_cast<unsigned long long>(total), n, layout_.slots,
                 static_cast<unsigned long long>(layout_.slot_bytes));
  // All n slots first: the reader waits for the later parts once it has
  // seen the first, so they must never wait for its credits.
  if (n > kMaxSpan) return Error(ZC_ERR_INTERNAL, "slot span of %u slots (at most %u)", n, kMaxSpan);
  ZC_RETURN_IF_ERROR(WaitCredit(dl, n));
  aux[1] = n;
  // Part i: header i, then the next min(slot_bytes, rest) bytes of the
  // pieces (at most 8 of them).
  SlotHeader heads[kMaxSpan];
  SrcPiece sub[kMaxSpan][9];
  GatherWrite parts[kMaxSpan];
  int pi = 0;
  uint64_t pofs = 0;  // bytes of pieces[pi] already placed
  for (uint32_t part = 0; part < n; ++part) {
    uint64_t want = std::min<uint64_t>(layout_.slot_bytes, total - part * layout_.slot_bytes);
    heads[part] = SlotHeader{};
    heads[part].bytes = want;
    for (int i = 0; i < naux; ++i) heads[part].aux[i] = aux[i];
    int ns = 0;
    sub[part][ns++] = {&heads[part], layout_.header_bytes()};
    while (want && pi < npieces && ns < 9) {
      uint64_t take = std::min<uint64_t>(want, pieces[pi].bytes - pofs);
      if (take) sub[part][ns++] = {static_cast<const char*>(pieces[pi].data) + pofs, take};
      want -= take;
      pofs += take;
      if (pofs == pieces[pi].bytes) {
        ++pi;
        pofs = 0;
      }
    }
    if (want) return Error(ZC_ERR_INTERNAL, "slot span: pieces shorter than %llu bytes",
                           static_cast<unsigned long long>(total));
    const uint32_t k = layout_.slot_of(sent_ + part);
    parts[part] = GatherWrite{sub[part], ns, layout_.header_offset(k),
                              FlagWrite{&remote_, layout_.flag_offset(k), sent_ + part + 1}};
  }
  if (char* d = Direct()) {
    ZC_RETURN_IF_ERROR(health_->KnownHealth(peer_));
    for (uint32_t part = 0; part < n; ++part)
      WriteMapped(d, parts[part].dst_off, parts[part].src, parts[part].n, &parts[part].flag);
  } else {
    // One batch on one connection (one system call on tcp): the reader
    // gets the whole message at once, in order.
    ZC_RETURN_IF_ERROR(channel(channel_).WriteBatch(parts, static_cast<int>(n), remote_, dl));
  }
  sent_ += n;
  return Status::Ok();
}

Status SlotWriter::WriteSlot(const SrcPiece* src, int n, uint64_t bytes, const uint64_t* aux,
                             int naux, const Deadline& dl) {
  if (naux > layout_.aux_words())
    return Error(ZC_ERR_INTERNAL, "slot message with %d header words, the layout holds %d", naux,
                 layout_.aux_words());
  const uint32_t k = layout_.slot_of(sent_);
  if (char* d = Direct()) {
    // Mapped slots (shm): plain stores straight into the slot, no staging
    // of the header and no per-write lookup; the flag's release store
    // orders all of it (a small message is some 60 instructions).
    // (Health is OK in a fault-tolerant scope of an aborted job: write on.)
    if (!health_->KnownHealthy(peer_)) ZC_RETURN_IF_ERROR(health_->Health(peer_));
    uint64_t* head = reinterpret_cast<uint64_t*>(d + layout_.header_offset(k));
    head[0] = bytes;
    const int words = layout_.aux_words();
    for (int i = 0; i < words; ++i) head[1 + i] = i < naux ? aux[i] : 0;
    char* at = d + layout_.payload_offset(k);
    for (int i = 0; i < n; ++i) {
      if (src[i].bytes) memcpy(at, src[i].data, src[i].bytes);
      at += src[i].bytes;
    }
    reinterpret_cast<std::atomic<uint64_t>*>(d + layout_.flag_offset(k))
        ->store(sent_ + 1, std::memory_order_release);
    net::NoteSent();  // TSan builds: as WriteMapped
    ++sent_;
    return Status::Ok();
  }
  SlotHeader h;  // only its first header_bytes() are written
  h.bytes = bytes;
  for (int i = 0; i < layout_.aux_words(); ++i) h.aux[i] = i < naux ? aux[i] : 0;
  // Header and payload are adjacent in the slot: one gathered write (one
  // message on tcp), the flag ordered after all of it.
  SrcPiece pieces[9] = {{&h, layout_.header_bytes()}};
  int np = 1;
  for (int i = 0; i < n && np < 9; ++i)
    if (src[i].bytes) pieces[np++] = src[i];
  FlagWrite flag{&remote_, layout_.flag_offset(k), sent_ + 1};
  // Large messages spread over the peer's connections (tcp sockets, verbs
  // QPs) and their progress threads by slot; each message's payload and
  // flag stay on one ordered connection. Credits (Release) stay on
  // channel_: they are one word that must never be overwritten by an
  // older value.
  const bool spread = layout_.spread && bytes >= SlotLayout::kSpreadMin;
  Channel& ch = channel(channel_ + (spread ? static_cast<int>(k) : 0));
  ZC_RETURN_IF_ERROR(ch.WriteGather(pieces, np, remote_, layout_.header_offset(k), &flag, dl));
  ++sent_;
  return Status::Ok();
}

void SlotReader::Init(ChannelTable* channels, const PeerHealth* health, int peer,
                      const SlotLayout& layout, MemRegion* local, const RemoteRegion& remote,
                      int channel_index) {
  channels_ = channels;
  health_ = health;
  peer_ = peer;
  layout_ = layout;
  local_ = local;
  remote_ = remote;
  channel_ = channel_index;
  consumed_.store(0, std::memory_order_relaxed);
  holding_ = false;
  credited_ = 0;
  direct_ = nullptr;
  direct_resolved_ = false;
}

Channel& SlotReader::channel(int index) { return channels_->at(peer_, index); }

Status SlotReader::Peek(uint32_t ahead, const SlotHeader** header, const void** payload,
                        const Deadline& dl) {
  if (ahead >= layout_.slots) return Error(ZC_ERR_INTERNAL, "slot peek %u ahead of %u slots", ahead, layout_.slots);
  const uint64_t c = consumed_.load(std::memory_order_relaxed) + ahead;
  const uint32_t k = layout_.slot_of(c);
  ZC_RETURN_IF_ERROR(health_->WaitFlag(FlagAt(local_, layout_.flag_offset(k)), c + 1, peer_,
                                    dl, "a slot message"));
  char* base = static_cast<char*>(local_->data());
  *header = reinterpret_cast<const SlotHeader*>(base + layout_.header_offset(k));
  *payload = base + layout_.payload_offset(k);
  holding_ = true;
  return Status::Ok();
}

Status SlotReader::ReleaseRefused(uint32_t n) const {
  return Error(ZC_ERR_INTERNAL, "slot release of %u without a message", n);
}

Status SlotReader::WriteCredit(uint64_t c, const Deadline& dl, bool lazy) {
  credited_ = c;
  if (!direct_resolved_) {
    direct_resolved_ = true;
    if (remote_.Contains(0, 8)) direct_ = channel(channel_).DirectAddress(remote_);
  }
  FlagWrite credit{&remote_, 0, c};
  if (direct_) {
    // Release order: our reads of the slot happen before the writer may reuse it.
    WriteMapped(direct_, 0, nullptr, 0, &credit);
    return Status::Ok();
  }
  if (lazy && layout_.lazy_credit) return channel(channel_).WriteFlagLazy(credit, dl);
  return channel(channel_).WriteFlag(credit, dl);
}

}  // namespace zc
