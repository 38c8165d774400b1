// ChunkSlots: static placement (§3.2 of the paper) addressed by chunk, the
// parameter server's transfer primitive. A writer rank owns one slot per
// chunk in the reader's registered memory; a message is one one-sided write
// of [header][payload] into the chunk's slot followed by the chunk's flag
// (its sequence number: monotonic, never cleared). The reader hands the
// slot back with a credit word per chunk in the writer's memory.
//
// Unlike SlotStream (a FIFO of K slots), slots are chosen by chunk, so the
// server's threads can consume different chunks of one stream in parallel
// and a reply lands in the chunk's own place.
//
//   reader memory:  [flag 0 .. flag n-1 (one cache line each)][slot 0 .. slot n-1]
//   slot:           [MsgHeader (64 bytes)][payload (capacity bytes)]
//   writer memory:  [credit 0 .. credit n-1 (one cache line each)]
//
// The writer and reader may be the same process (a worker and its
// co-located server): then the "remote" region is local memory, written
// with plain stores.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/mem_region.h"

namespace zc {
class Device;
}

namespace zc::ps {

// The first 64 bytes of every slot.
struct MsgHeader {
  uint64_t kind;   // MsgKind (protocol.h)
  uint64_t round;  // the key's round (push/reply), or a request number
  uint64_t bytes;  // payload bytes
  uint64_t key;    // the key, for checks and error messages
  uint64_t pad[4];
};
static_assert(sizeof(MsgHeader) == 64, "header is one cache line");

struct ChunkSlotLayout {
  uint32_t n = 0;         // chunks (slots)
  uint64_t capacity = 0;  // payload bytes of the largest chunk
  uint64_t stride() const { return sizeof(MsgHeader) + ((capacity + 63) & ~uint64_t{63}); }
  uint64_t flag_offset(uint32_t k) const { return uint64_t{k} * 64; }
  uint64_t slot_offset(uint32_t k) const { return uint64_t{n} * 64 + k * stride(); }
  uint64_t reader_bytes() const { return uint64_t{n} * 64 + n * stride(); }
  uint64_t writer_bytes() const { return uint64_t{n} * 64; }
};

// Store `value` into the word at `offset` of `remote` (a peer's flag or
// credit word, or an alert word), ordered after earlier writes on the same
// connection. peer is a Device rank (may be this rank).
Status WriteRemoteWord(Device* dev, int peer, const RemoteRegion& remote, uint64_t offset,
                       uint64_t value, int channel, const Deadline& dl);

class ChunkSlotWriter {
 public:
  // local: my credit region (>= writer_bytes, zeroed); remote: the reader's
  // slot region. peer: the reader's Device rank.
  void Init(Device* dev, int peer, const ChunkSlotLayout& layout, MemRegion* local,
            const RemoteRegion& remote);
  // True when chunk k's slot is free (the previous message was consumed).
  bool HasCredit(uint32_t k) const;
  const std::atomic<uint64_t>* credit(uint32_t k) const;
  uint64_t sent(uint32_t k) const { return sent_[k]; }
  // Writes header + payload into slot k and sets its flag. The slot must be
  // free (HasCredit: the caller waits). bytes <= capacity. Thread-safe for
  // different k.
  Status Put(uint32_t k, const MsgHeader& h, const void* payload, uint64_t bytes, const Deadline& dl);
  // A message whose payload goes elsewhere in the reader's memory: the
  // payload into [target_off, +bytes) of `target` (a region of the
  // reader's, addressed over the channel: !mapped()), then the header into
  // slot k and its flag, on the same connection (so the flag follows the
  // payload). The slot must be free.
  Status PutInto(uint32_t k, const MsgHeader& h, const void* payload, uint64_t bytes,
                 const RemoteRegion& target, uint64_t target_off, const Deadline& dl);
  int peer() const { return peer_; }
  // The transport that carries this writer's messages.
  TransportKind transport() const;
  // True when the reader's memory is mapped here (this very process, or a
  // shared-memory peer): the reader can map ours as well.
  bool mapped() const { return direct_ != nullptr; }

 private:
  Device* dev_ = nullptr;
  int peer_ = -1;
  ChunkSlotLayout layout_;
  MemRegion* local_ = nullptr;
  RemoteRegion remote_;
  char* direct_ = nullptr;  // the reader's slots mapped here (shm, same process)
  std::vector<uint64_t> sent_;
};

class ChunkSlotReader {
 public:
  // local: my slot region (>= reader_bytes, zeroed); remote: the writer's
  // credit region. peer: the writer's Device rank.
  void Init(Device* dev, int peer, const ChunkSlotLayout& layout, MemRegion* local,
            const RemoteRegion& remote);
  // True when message number consumed(k)+1 has arrived in slot k.
  bool Ready(uint32_t k) const;
  const std::atomic<uint64_t>* flag(uint32_t k) const;
  uint64_t consumed(uint32_t k) const { return consumed_[k]; }
  const MsgHeader* header(uint32_t k) const;
  const void* payload(uint32_t k) const;
  // Hands slot k back (a credit write into the writer's memory). Thread-safe
  // for different k.
  Status Release(uint32_t k, const Deadline& dl);
  int peer() const { return peer_; }

 private:
  Device* dev_ = nullptr;
  int peer_ = -1;
  ChunkSlotLayout layout_;
  MemRegion* local_ = nullptr;
  RemoteRegion remote_;
  char* direct_ = nullptr;  // the writer's credits mapped here
  std::vector<uint64_t> consumed_;
};

}  // namespace zc::ps
