// SlotStream: static placement (§3.2 of the paper) as a reusable primitive.
// A one-way stream of messages from a writer rank to a reader rank through K
// slots preallocated in the reader's memory. Per message the writer does one
// one-sided write of header+payload and sets the slot's flag to the message's
// sequence number (flags are monotonic, never cleared: no clear-then-write
// race). The reader returns credits (its consumed count) into a word in the
// writer's memory; the writer reuses a slot only after that credit.
//
//   reader memory:  [flag 0 .. flag K-1 (one cache line each)][slot 0 .. slot K-1]
//   slot:           [Header (64 bytes)][payload (slot_bytes)]
//   writer memory:  [credit word (one cache line)]
//
// Compact layout (small messages, e.g. the control plane): the flag moves
// into its slot and the header shrinks to bytes + two aux words, so flag,
// header and the first 32 payload bytes share one cache line:
//
//   slot:           [flag][bytes][aux 0][aux 1][payload (slot_bytes)]   (64-byte aligned)
//
// A small message then costs the reader one cache-line transfer instead of
// three (flag, header, payload lines).
//
// The writer remembers the last credit it read and reads the credit word
// again only when that one does not cover the slots it needs, so in steady
// state the credit line crosses between the cores about once per K messages.
//
// Each side is set up with its local region and the peer's descriptor (sent
// once, over control messages or the bootstrap).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/mem_region.h"
#include "p2p/transport.h"

namespace zc {

class Channel;
class ChannelTable;
class PeerHealth;

struct SlotHeader {
  uint64_t bytes;    // payload bytes in this slot
  uint64_t aux[7];   // caller's words: operation signature, tags, offsets...
};                   // (compact layout: only bytes, aux[0] and aux[1] exist)
static_assert(sizeof(SlotHeader) == 64, "header is one cache line");

struct SlotLayout {
  uint32_t slots = 4;
  uint64_t slot_bytes = 1 << 20;  // payload capacity of one slot
  // Messages of at least kSpreadMin bytes in slot k travel on connection
  // channel + k (bandwidth: several sockets or QPs and their progress
  // threads); smaller ones, and all when spread is off, on connection
  // channel (latency: one progress thread per hop). A message is one
  // gathered write, so any connection may carry it.
  bool spread = true;
  // The reader's credits at the end of a receive may ride with its next
  // write to the writer (Connection::WriteFlagLazy): control streams, whose
  // reader usually answers.
  bool lazy_credit = false;
  static constexpr uint64_t kSpreadMin = 64 * 1024;
  bool compact = false;
  static constexpr uint64_t kCompactHeaderBytes = 24;  // bytes, aux[0], aux[1]
  int aux_words() const { return compact ? 2 : 7; }
  // What a message's writer puts before the payload (the flag excluded).
  uint64_t header_bytes() const { return compact ? kCompactHeaderBytes : sizeof(SlotHeader); }
  uint64_t flags_bytes() const { return compact ? 0 : uint64_t{slots} * 64; }
  uint64_t slot_stride() const {
    return compact ? (8 + kCompactHeaderBytes + slot_bytes + 63) & ~uint64_t{63}
                   : sizeof(SlotHeader) + ((slot_bytes + 63) & ~uint64_t{63});
  }
  uint64_t reader_bytes() const { return flags_bytes() + slots * slot_stride(); }
  static constexpr uint64_t kWriterBytes = 64;
  uint64_t flag_offset(uint32_t k) const {
    return compact ? uint64_t{k} * slot_stride() : uint64_t{k} * 64;
  }
  uint64_t header_offset(uint32_t k) const {
    return compact ? flag_offset(k) + 8 : flags_bytes() + k * slot_stride();
  }
  uint64_t payload_offset(uint32_t k) const { return header_offset(k) + header_bytes(); }
  // The slot of message number seq (a mask for the usual power-of-two K:
  // a 64-bit division costs more than the rest of a small message's
  // bookkeeping).
  uint32_t slot_of(uint64_t seq) const {
    return static_cast<uint32_t>((slots & (slots - 1)) == 0 ? seq & (slots - 1) : seq % slots);
  }
};

// The word at byte `offset` of a local region, as an atomic flag.
inline std::atomic<uint64_t>* FlagAt(MemRegion* r, uint64_t offset) {
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(r->data()) + offset);
}

class SlotWriter {
 public:
  SlotWriter() = default;
  // local: my credit region (>= kWriterBytes, zero-initialised);
  // remote: the reader's slot region. Writes go on channels to peer
  // (channel_index picks the connection), waits ask health.
  void Init(ChannelTable* channels, const PeerHealth* health, int peer, const SlotLayout& layout,
            MemRegion* local, const RemoteRegion& remote, int channel_index = 0);
  // Waits for a free slot (credit), then writes header + payload + flag.
  // bytes <= layout.slot_bytes. src may be any memory.
  Status Put(const void* src, uint64_t bytes, const uint64_t* aux, int naux,
             const Deadline& dl);
  // Two-part payload without a staging copy (a header the caller built
  // plus the data).
  Status Put2(const void* a, uint64_t abytes, const void* b, uint64_t bbytes,
              const uint64_t* aux, int naux, const Deadline& dl);
  // A message of several slots: the pieces' concatenation cut into n
  // consecutive slots (n <= layout.slots, each part <= slot_bytes), written
  // back to back once all n slots are free, so that the reader, having seen
  // the first, only waits for data already in flight. aux[0..naux) goes in
  // every part's header; aux word 1 (naux >= 2 required) is set to n.
  Status PutSpan(const SrcPiece* pieces, int npieces, uint64_t total, uint32_t n, uint64_t* aux,
                 int naux, const Deadline& dl);
  static constexpr uint32_t kMaxSpan = 16;
  // The small-message path of a mapped, compact stream (shared memory's
  // control plane): when the next slot is free and mapped here, writes
  // [a][b] into it with plain stores and sets its flag (some 30 instructions
  // and the copies); false, writing nothing, when the caller must take
  // Put2 (no credit yet, not mapped, not compact, too long). The caller
  // checked the job's health.
  bool TryPutMapped(const void* a, uint64_t abytes, const void* b, uint64_t bbytes, uint64_t aux0,
                    uint64_t aux1) {
    const uint64_t bytes = abytes + bbytes;
    if (!direct_ || !layout_.compact || bytes > layout_.slot_bytes || !CreditCovers(1)) return false;
    char* slot = direct_ + layout_.flag_offset(layout_.slot_of(sent_));
    uint64_t* head = reinterpret_cast<uint64_t*>(slot + 8);
    head[0] = bytes;
    head[1] = aux0;
    head[2] = aux1;
    char* payload = slot + 8 + SlotLayout::kCompactHeaderBytes;
    if (abytes) memcpy(payload, a, abytes);
    if (bbytes) memcpy(payload + abytes, b, bbytes);
    reinterpret_cast<std::atomic<uint64_t>*>(slot)->store(++sent_, std::memory_order_release);
    net::NoteSent();  // TSan builds: as WriteMapped
    return true;
  }
  // True when the next Put needs no wait: a slot is free (its credit has
  // come back). Non-blocking; for callers that must not wait for the peer.
  bool HasCredit() { return HasCredits(1); }
  // True when the next n slots are free.
  bool HasCredits(uint32_t n);
  uint64_t sent() const { return sent_; }
  int peer() const { return peer_; }
  const SlotLayout& layout() const { return layout_; }
  // Waits until the reader has returned the credit of every message sent,
  // so that no late credit lands in the local region after it is freed.
  Status Drain(const Deadline& dl);

 private:
  Status WaitCredit(const Deadline& dl, uint32_t n = 1);
  // Whether the credits seen so far free the next n slots; reads the credit
  // word (a line the reader writes) only when the remembered value does not.
  bool CreditCovers(uint32_t n) {
    // Slots sent_ .. sent_+n-1 are free once the reader has consumed
    // sent_ + n - K messages.
    if (sent_ + n <= layout_.slots + credits_) return true;
    credits_ = FlagAt(local_, 0)->load(std::memory_order_acquire);
    return sent_ + n <= layout_.slots + credits_;
  }
  // One slot's write: header + pieces + flag (the slot is free).
  Status WriteSlot(const SrcPiece* pieces, int n, uint64_t bytes, const uint64_t* aux, int naux,
                   const Deadline& dl);
  char* Direct() { return direct_resolved_ ? direct_ : ResolveDirect(); }
  char* ResolveDirect();
  Channel& channel(int index);
  ChannelTable* channels_ = nullptr;
  const PeerHealth* health_ = nullptr;
  int peer_ = -1, channel_ = 0;
  SlotLayout layout_;
  MemRegion* local_ = nullptr;
  RemoteRegion remote_;
  uint64_t sent_ = 0;
  uint64_t credits_ = 0;  // the reader's consumed count, as last read
  // The reader's slots mapped here (shm), resolved on first use; then a
  // message is two memcpys and a release store.
  char* direct_ = nullptr;
  bool direct_resolved_ = false;
};

class SlotReader {
 public:
  SlotReader() = default;
  // local: my slot region (>= layout.reader_bytes(), zero-initialised);
  // remote: the writer's credit region.
  void Init(ChannelTable* channels, const PeerHealth* health, int peer, const SlotLayout& layout,
            MemRegion* local, const RemoteRegion& remote, int channel_index = 0);
  // Waits for the next message; the pointers stay valid until Release().
  Status Next(const SlotHeader** header, const void** payload, const Deadline& dl) {
    return Peek(0, header, payload, dl);
  }
  // Waits for the message `ahead` places after the next one (0: the next;
  // ahead < layout.slots), leaving it unconsumed; valid until Release().
  Status Peek(uint32_t ahead, const SlotHeader** header, const void** payload, const Deadline& dl);
  // True when the next message has arrived (no wait). Safe to call without
  // the owner's lock, as a hint.
  bool Ready() const {
    const uint64_t c = consumed_.load(std::memory_order_relaxed);
    return FlagAt(local_, layout_.flag_offset(layout_.slot_of(c)))->load(std::memory_order_acquire) >= c + 1;
  }
  // Returns the next n slots (read with Next/Peek) to the writer: one
  // flag-only write of the credit. credit = false leaves the write to a
  // later Release or Credit (one write for several messages), unless half
  // the slots would then wait for it.
  Status Release(const Deadline& dl, uint32_t n = 1, bool credit = true) {
    if (!holding_ || n == 0 || n > layout_.slots) return ReleaseRefused(n);
    holding_ = false;
    const uint64_t c = consumed_.load(std::memory_order_relaxed) + n;
    consumed_.store(c, std::memory_order_relaxed);
    if (!credit && c - credited_ < (layout_.slots + 1) / 2) return Status::Ok();
    return Credit(dl);
  }
  // Writes the credit of every message released so far, if not yet written
  // (lazily: layout.lazy_credit, Connection::WriteFlagLazy).
  Status Credit(const Deadline& dl, bool lazy = false) {
    const uint64_t c = consumed_.load(std::memory_order_relaxed);
    if (c == credited_) return Status::Ok();
    if (!direct_) return WriteCredit(c, dl, lazy);
    // Mapped (shm): one release store; our reads of the slots happen
    // before the writer may reuse them.
    credited_ = c;
    reinterpret_cast<std::atomic<uint64_t>*>(direct_)->store(c, std::memory_order_release);
    return Status::Ok();
  }
  // The next message if it has arrived, without waiting: its header
  // (*payload: its payload), held until Release(); nullptr when none has.
  const SlotHeader* TryNext(const void** payload) {
    const uint64_t c = consumed_.load(std::memory_order_relaxed);
    const uint32_t k = layout_.slot_of(c);
    if (FlagAt(local_, layout_.flag_offset(k))->load(std::memory_order_acquire) < c + 1)
      return nullptr;
    char* base = static_cast<char*>(local_->data());
    holding_ = true;
    *payload = base + layout_.payload_offset(k);
    return reinterpret_cast<const SlotHeader*>(base + layout_.header_offset(k));
  }
  bool credit_pending() const { return credited_ != consumed_.load(std::memory_order_relaxed); }
  uint64_t received() const { return consumed_.load(std::memory_order_relaxed); }
  int peer() const { return peer_; }

 private:
  Channel& channel(int index);
  ChannelTable* channels_ = nullptr;
  const PeerHealth* health_ = nullptr;
  int peer_ = -1, channel_ = 0;
  SlotLayout layout_;
  MemRegion* local_ = nullptr;
  RemoteRegion remote_;
  // Changed only by the reader's owner; atomic so that Ready() may also be
  // asked, as a hint, by threads that do not hold the owner's lock.
  std::atomic<uint64_t> consumed_{0};
  bool holding_ = false;
  uint64_t credited_ = 0;  // the last credit written
  // Credit() when the credit word is not (yet) mapped: resolves the mapping,
  // then writes c through it or the channel.
  Status WriteCredit(uint64_t c, const Deadline& dl, bool lazy);
  Status ReleaseRefused(uint32_t n) const;  // Release's error
  // The writer's credit word mapped here (shm), resolved on first use.
  char* direct_ = nullptr;
  bool direct_resolved_ = false;
};

}  // namespace zc
