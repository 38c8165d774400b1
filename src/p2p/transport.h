// The transport contract. A transport moves bytes between this process and
// its peers one-sidedly: the initiator names local memory and a peer's
// RemoteRegion, and the peer's CPU takes no part (or only its progress
// thread, for tcp). Everything above (flags, slots, rendezvous, collectives)
// is written against this file only.
//
// Threading: Write/Read may be called from any thread, concurrently on
// different connections; calls on one Connection are serialized by the
// caller (the Channel holds a mutex). Transports own their progress threads.
//
// Ordering promise (the reason flags work): when Write() is given a flag, the
// flag word becomes visible to the peer's CPU only after every byte of the
// payload of this and of all earlier Writes on the same Connection:
//   shm   - memcpy into the peer's mapping, then a release store of the flag;
//   tcp   - one message; the receiver's progress thread reads the payload into
//           the region, then release-stores the flag;
//   verbs - RDMA_WRITE of the payload, then RDMA_WRITE_WITH_IMM whose receive
//           completion makes the receiver's CQ thread store the flag (or the
//           opt-in single write with a trailing flag on NICs that place data
//           in ascending order).
//
// Completion: Write returns when the source buffer may be reused (the data
// may still be in flight); Read returns when the destination holds the data.
// Both fail with ZC_ERR_PEER_LOST when the connection breaks, ZC_ERR_TIMEOUT
// at the deadline, ZC_ERR_ABORTED after PeerHealth::Abort, and
// ZC_ERR_INVALID_ARG when the range lies outside the remote region.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/deadline.h"
#include "common/socket.h"
#include "common/status.h"
#include "p2p/mem_region.h"
#include "p2p/region_hold.h"

namespace zc {

// Where and what to store as the completion flag of a Write.
struct FlagWrite {
  const RemoteRegion* region = nullptr;  // flag's region (owned by the peer)
  uint64_t offset = 0;                   // 8-byte aligned offset in region
  uint64_t value = 0;                    // monotonic sequence number
};

// What every backend is told when it is created (Device::CreateTransports,
// through TransportEntry::create).
struct TransportSetup {
  int rank = 0;
  int size = 1;
  Config config;
  std::string job_key;  // authenticates data connections (tcp)
  // More ranks on this host than cores: a waiting thread sleeps at once
  // (its polling would keep the rank that must answer it off the core).
  bool oversubscribed = false;
};

// What a backend is told before it connects: the peers it serves and the
// domain descriptor every rank published for it (PeerInfo; "" where a rank
// did not find it viable). tcp compares host ids to stay on loopback.
struct LinkPlan {
  std::vector<int> peers;
  std::string my_domain;
  std::vector<std::string> domains;  // by rank
};

// A message a peer offers to one of this rank's receives (receiver-matched
// messages, p2p/recv_post.h "Offers"): where its payload goes once a
// receive takes it.
struct OfferTarget {
  char* dst = nullptr;     // the receive's buffer
  uint64_t token = 0;      // the receive's post (what the sender's verdict names)
  void* cookie = nullptr;  // the host's, handed back to OfferEnded
};
// What a receiving host says to an offer: a receive takes it (kTake), one
// may still come (kLater: the transport keeps the offer waiting, unread,
// for a while), or none will (kRefuse: the sender sends it another way).
enum class OfferMatch { kTake, kLater, kRefuse };

// Services a backend needs from the Device that owns it while it runs:
// peer health (PeerHealth), and the local regions its progress threads and
// the NIC use (LocalRegions).
class TransportHost {
 public:
  virtual ~TransportHost() = default;
  // A connection broke or an error completion arrived: fail waits on peer.
  virtual void OnPeerLost(int peer, const Status& why) = 0;
  // Non-OK once the device is aborted or `peer` is lost: waits poll this.
  virtual Status Health(int peer) const = 0;
  // Looks up one of my regions by id (tcp's progress thread places incoming
  // data with it). Returns nullptr when unknown.
  virtual MemRegion* FindLocalRegion(uint64_t id) = 0;
  // True when id was issued for one of my regions that has since been freed:
  // a peer's late write or credit into it (shutdown) is harmless and is
  // dropped silently, while an id never issued is still worth a warning.
  virtual bool RegionRetired(uint64_t id) const { (void)id; return false; }
  // A progress thread holds this shared while it reads or writes a region
  // it looked up with FindLocalRegion; the Device holds it exclusively to
  // free or replace a region, so no region goes away under a transfer.
  virtual std::shared_mutex& region_use() = 0;
  // The region that holds [ptr, ptr+bytes) for a transfer that uses it
  // after this call (its descriptor went to a peer, its registration to the
  // NIC): a pool region, or user memory registered now through the
  // registration cache, held exposed until the transfer gives it back.
  virtual Status HoldLocalRegion(const void* ptr, size_t bytes, RegionHold* out) = 0;
  // An offer of `bytes` from peer for the receive of `key` (the meta tag
  // of its context and tag), sent when the last message of the key's
  // bucket to us ended at position `prev` of the peer's control stream.
  // kTake fills *out; the target stays valid until OfferEnded.
  virtual OfferMatch MatchOffer(int peer, uint64_t key, uint64_t prev, uint64_t bytes, OfferTarget* out) {
    (void)peer, (void)key, (void)prev, (void)bytes, (void)out;
    return OfferMatch::kRefuse;
  }
  // A taken offer's payload is in its target (landed), or could not be read.
  virtual void OfferEnded(const OfferTarget& target, bool landed) { (void)target, (void)landed; }
  // An offer from peer was refused (no receive in time, or another size).
  virtual void OfferRefused(int peer, uint64_t key) { (void)peer, (void)key; }
};

// One piece of the source of a gathered write.
struct SrcPiece {
  const void* data;
  size_t bytes;
};

// One write of a batch (Connection::WriteBatch): src[0..n) to dst_off, then flag.
struct GatherWrite {
  const SrcPiece* src;
  int n;
  uint64_t dst_off;
  FlagWrite flag;
};

// One connection to one peer (the paper's QP).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual int peer() const = 0;
  // Writes bytes from src into dst at dst_off; then, if flag != nullptr,
  // stores flag->value at flag->offset of flag->region (see ordering above).
  // bytes == 0 with a flag is a flag-only write (credits, acks).
  virtual Status Write(const void* src, size_t bytes, const RemoteRegion& dst,
                       uint64_t dst_off, const FlagWrite* flag,
                       const Deadline& deadline) = 0;
  // Reads bytes from src at src_off into dst.
  virtual Status Read(void* dst, size_t bytes, const RemoteRegion& src,
                      uint64_t src_off, const Deadline& deadline) = 0;
  // Writes the n pieces, in order, to consecutive bytes of dst from dst_off,
  // then the flag: Write() of their concatenation without joining them
  // first. The default issues one Write per piece (the flag with the last);
  // tcp sends one message.
  // A flag-only write that may wait for the next write on this connection,
  // to travel in the same system call (a credit returned just before a
  // reply), but at most about a millisecond. Later writes of the same flag
  // replace a waiting one (flags only grow).
  virtual Status WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) {
    return Write(nullptr, 0, *flag.region, 0, &flag, deadline);
  }
  // Several gathered writes into dst, in order (each one's flag after its
  // data): WriteGather for each; tcp sends them in one system call.
  virtual Status WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst,
                            const Deadline& deadline) {
    for (int i = 0; i < n; ++i)
      ZC_RETURN_IF_ERROR(WriteGather(w[i].src, w[i].n, dst, w[i].dst_off, &w[i].flag, deadline));
    return Status::Ok();
  }
  virtual Status WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst,
                             uint64_t dst_off, const FlagWrite* flag,
                             const Deadline& deadline) {
    int last = -1;  // the flag rides with the last non-empty piece
    for (int i = 0; i < n; ++i)
      if (src[i].bytes) last = i;
    if (last < 0) return flag ? Write(nullptr, 0, dst, dst_off, flag, deadline) : Status::Ok();
    for (int i = 0; i <= last; ++i) {
      if (src[i].bytes) {
        Status st = Write(src[i].data, src[i].bytes, dst, dst_off, i == last ? flag : nullptr, deadline);
        if (!st.ok()) return st;
      }
      dst_off += src[i].bytes;
    }
    return Status::Ok();
  }
  // A message for the peer to match to one of its receives (MatchOffer):
  // the payload under `key`, sent after position `prev` of our control
  // stream to it; the peer's verdict comes back into `verdict`'s word: 8
  // bytes at verdict.offset + 8 (the token of the post the payload landed
  // in, 0 when refused), then the flag. tcp only.
  virtual Status WriteOffer(const void* src, size_t bytes, uint64_t key, uint64_t prev, const FlagWrite& verdict,
                            const Deadline& deadline) {
    (void)src, (void)bytes, (void)key, (void)prev, (void)verdict, (void)deadline;
    return Error(ZC_ERR_UNSUPPORTED, "offers travel on tcp only");
  }
  // This process's load/store address of byte 0 of dst when the peer's
  // memory is mapped here (shm segments), else nullptr. Valid while the
  // transport lives. Slot streams use it for their small messages: a
  // memcpy and a release store, with no per-write lookup (the fast path of
  // Open MPI's shared-memory fastboxes). Stores through it follow the same
  // ordering rule as Write: data first, then the flag with release order.
  virtual char* DirectAddress(const RemoteRegion& dst) {
    (void)dst;
    return nullptr;
  }
};

// Write() through a DirectAddress (base: byte 0 of the region the pieces and
// the flag belong to): the pieces to consecutive bytes from off, then the
// flag with release order. The caller checked the ranges once. A send to
// another process, as a socket's: TSan builds release (net::NoteSent), for
// what it causes may come back here over tcp (a ring of shm and tcp links).
inline void WriteMapped(char* base, uint64_t off, const SrcPiece* src, int n, const FlagWrite* flag) {
  for (int i = 0; i < n; ++i) {
    if (src[i].bytes) memcpy(base + off, src[i].data, src[i].bytes);
    off += src[i].bytes;
  }
  if (flag)
    reinterpret_cast<std::atomic<uint64_t>*>(base + flag->offset)
        ->store(flag->value, std::memory_order_release);
  net::NoteSent();
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportKind kind() const = 0;
  // Makes a region reachable through this transport and fills this
  // transport's part of region->mutable_remote() (verbs: ibv_reg_mr, access key).
  // Called for every pool chunk and every registered user range; slices of
  // a chunk inherit the chunk's registration (see MemRegion::parent).
  virtual Status Expose(MemRegion* region) = 0;
  // Undoes Expose (before the memory is unmapped or returned to the user).
  virtual void Unexpose(MemRegion* region) = 0;
  // Connecting takes two calls around one exchange that the Device runs for
  // all backends at once (PeerAddresses): Listen() prepares to accept the
  // plan's peers and returns what they need to reach this rank ("" when
  // nothing); Connect() gets every rank's address for this backend (by
  // rank, "" where a rank published none). Afterwards connection(p, i)
  // works for every peer p of the plan, 0 <= i < connections_per_peer().
  virtual Status Listen(const LinkPlan& plan, std::string* address) = 0;
  virtual Status Connect(const std::vector<std::string>& addresses) = 0;
  virtual int connections_per_peer() const = 0;
  // Who sleeps for a thread waiting on this transport's peers (WaitDriver),
  // or nullptr: Wakeup::Sleep.
  virtual WaitDriver* wait_driver() { return nullptr; }
  virtual Connection* connection(int peer, int index) = 0;
  // A receive from peer that may take an offer was just armed: an offer
  // from peer kept waiting for one is looked at again now, on this thread.
  virtual void ServeOffers(int peer) { (void)peer; }
  // Stops progress threads and closes connections; idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace zc
