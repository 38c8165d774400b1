// ControlPlane: small messages between every pair of ranks (descriptors,
// rendezvous meta data, acknowledgements), carried by SlotStreams in pool
// memory, so control rides on the same one-sided writes and flags as data
// and works on every transport. Messages carry a 64-bit tag; a receiver
// asking for one tag queues the others it meets.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/spin_lock.h"
#include "p2p/slot_stream.h"

namespace zc {

class ChannelTable;
class LocalRegions;
class PeerHealth;

class ControlPlane {
 public:
  // The largest message to a peer on this host (shm), and to a peer across
  // the network, which gets larger slots so that zc_send can stay eager
  // longer where a rendezvous costs network round trips.
  static constexpr uint64_t kMaxMessage = 16 * 1024 - 64;
  static constexpr uint64_t kMaxNetworkMessage = 32 * 1024 + 64;
  static constexpr uint32_t kSlots = 8;
  // To a tcp peer a message may span up to kSpanSlots slots
  // (SlotWriter::PutSpan), so that zc_send stays eager, one hop and one
  // copy, up to 256 KiB, where a rendezvous costs three hops of some 30 us
  // each (issue 14); the receiver gets the parts in place, as pieces.
  static constexpr uint32_t kSpanSlots = 8;
  static constexpr uint64_t kMaxSpanMessage = kSpanSlots * kMaxNetworkMessage;
  // A tcp stream has one slot more than its largest message spans: a
  // receive posts (recv_post.h) only when a slot is free, and its peer
  // returns the slots of a message it has read with its own next message
  // (lazy credit). With every slot taken by a 256 KiB eager message, the
  // next receive went unposted, so the next message went eager too, and a
  // ping-pong stayed eager from its first missed post on (24 us more a
  // message, docs/PERFORMANCE.md "TCP point to point against a plain
  // loopback socket").
  static constexpr uint32_t kTcpSlots = kSpanSlots + 1;

  // An exchange through the bootstrap (Device::AllGather): every rank
  // calls it with the same key and gets every rank's record.
  using Exchange = std::function<Status(const std::string& key, const std::string& mine,
                                        std::vector<std::string>* all)>;
  // Collective: allocates mailboxes and the alert word from regions,
  // exchanges their descriptors; messages then travel on the channels
  // (connection 0 of each peer) and wait as health says.
  static Status Create(ChannelTable* channels, PeerHealth* health, LocalRegions* regions,
                       const Exchange& exchange, std::unique_ptr<ControlPlane>* out);

  Status Send(int peer, uint64_t tag, const void* data, size_t bytes, const Deadline& dl);
  // A message of two parts (a header the caller built, then data), sent
  // without joining them first.
  Status Send2(int peer, uint64_t tag, const void* a, size_t abytes, const void* b, size_t bbytes,
               const Deadline& dl);
  // Send2's shared-memory path alone: true when the message went out now as
  // a few stores (one slot, free, to a peer known healthy); false, with
  // nothing sent, where Send2 would wait for a slot or write through the
  // transport.
  bool TrySendNow(int peer, uint64_t tag, const void* a, size_t abytes, const void* b, size_t bbytes);
  Status Recv(int peer, uint64_t tag, std::string* msg, const Deadline& dl);
  // Receives the next message with this tag by handing it to consume, which
  // must not keep the pointers: when it is the next one to arrive it is read
  // in place from its slot(s), with no copy or allocation (small zc_recv): the
  // message is the concatenation of the n pieces (n > 1 only for a message
  // spanning several slots). consume's status is returned.
  struct Piece {
    const char* data;
    size_t bytes;
  };
  using Consumer = Status (*)(void* ctx, const Piece* pieces, int n);
  // Whether a message with the tag is this receiver's (accept, may be
  // null: all are): given the first piece, before consume. A message it
  // declines stays queued for the next receiver of the tag (a receive whose
  // buffer its post's payload filled declines, p2p/recv_post.h), and the
  // next one with the tag is looked at.
  using Acceptor = bool (*)(void* ctx, const Piece& first);
  // stop (may be null): RecvWith returns Ok without a message once
  // stop(ctx) holds (what the receive waited for came another way).
  using Stop = bool (*)(void* ctx);
  Status RecvWith(int peer, uint64_t tag, Consumer consume, void* ctx, const Deadline& dl,
                  Acceptor accept = nullptr, Stop stop = nullptr);
  // Non-blocking: a queued or arrived message with this tag, if any.
  // defer_credit: the slots' credits may wait for FlushCredits, which the
  // caller promises to call soon (one credit write for many messages).
  bool TryRecv(int peer, uint64_t tag, std::string* msg, Status* st, bool defer_credit = false);
  // Non-blocking RecvWith: true when a message with this tag was handed to
  // consume (*st: consume's status, or the stream's error).
  // seen (may be null): when no message was taken, where the stream from
  // peer stood after this look (see "Offers" below).
  bool TryRecvWith(int peer, uint64_t tag, Consumer consume, void* ctx, Status* st,
                   bool defer_credit = false, Acceptor accept = nullptr, uint64_t* seen = nullptr);
  // Non-blocking, for a message nobody waits for (an offer, below): a queued
  // message with this tag, or the next arrival when it has the tag. An
  // arrival with another tag stays in its slot for its own receiver, not
  // copied into the queue (an eager payload is copied once, by its receive).
  bool TryRecvNext(int peer, uint64_t tag, std::string* msg, Status* st);
  // Writes the credits that deferring receives left pending.
  Status FlushCredits();
  // Non-blocking Send2: *sent = false (and Ok) when no slot is free now or
  // another thread is sending to this peer; the caller retries later. Never
  // waits for the peer (the write itself may take as long as the transfer).
  Status TrySend2(int peer, uint64_t tag, const void* a, size_t abytes, const void* b,
                  size_t bbytes, bool* sent);

  // ---- Offers (the receiver-posted protocol, p2p/recv_post.h) ----
  // A receiver that looked for tag T from peer p and found nothing may
  // offer p to take its next T message in another way (a post: straight
  // into its buffer). p may answer only while its next T message would
  // still be that one: no T message of p's may be on its way, unseen by
  // that look. Positions count the slots of one direction's stream (its
  // writer's sent, its reader's received): the look gives `seen`
  // (TryRecvWith), the offer carries it back, and Answer runs `write` only
  // when no message with a tag of T's bucket went to peer after `seen`
  // (tags hash into kTagBuckets; another tag of the bucket only makes an
  // offer look stale, never wrongly fresh); *fresh = false then, and
  // nothing runs. `write` runs under the stream's send lock, so no message
  // of the tag overtakes it, and must go on connection 0 (the control
  // plane's), so that the peer has every earlier message once it sees the
  // answer. Answer waits for the lock; TryAnswer does not (*ran).
  static constexpr uint32_t kTagBuckets = 256;
  using AnswerWrite = std::function<Status()>;
  Status Answer(int peer, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* fresh);
  Status TryAnswer(int peer, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* ran, bool* fresh);
  // Whether the last message with a tag of tag's bucket to peer was an
  // answer: the peer's receives offer, so the next offer is worth waiting
  // for (recv_post.h DirectSend::AwaitPost).
  bool AnsweredLast(int peer, uint64_t tag);
  // ---- Offers the other way (receiver-matched messages, recv_post.h) ----
  // A sender that found no post may send its message at once, for the
  // receiver to match to a receive there (TransportHost::MatchOffer) by
  // the same rule: `write(prev)` runs under the stream's send lock, prev
  // being where the writer stood after the last message of tag's bucket;
  // the offer then counts as the bucket's latest message.
  using OfferWrite = std::function<Status(uint64_t prev)>;
  Status Offer(int peer, uint64_t tag, const OfferWrite& write);
  // The receiver's verdict on an offer. After a refusal the bucket's sends
  // wait for posts again (OfferWanted is false) until one goes into a post
  // or an offer is taken: a receiver that refuses (late, or a receive of
  // another size) does not get every message twice.
  void NoteOffer(int peer, uint64_t tag, bool taken);
  bool OfferWanted(int peer, uint64_t tag);

  // The word peers write to report an abort (value: code << 32 | rank + 1).
  std::atomic<uint64_t>* alert_word() const;
  const RemoteRegion& peer_alert(int peer) const { return peer_alert_[peer]; }
  // The CPU this rank's threads last waited on (Backoff::WatchSetter), in
  // the alert word's region at kCpuWordOffset, where a peer on this host
  // reads it through its mapping of peer_alert (PeerHealth::AttachCpuWords).
  static constexpr uint64_t kCpuWordOffset = 64;
  std::atomic<uint64_t>* cpu_word() const;

 private:
  struct Peer {
    SpinLock send_mu, recv_mu;  // short holds (the small-message path)
    uint64_t max_message = kMaxMessage;  // one slot's payload
    uint32_t max_span = 1;                // slots one message may span
    SlotWriter writer;
    SlotReader reader;
    std::deque<std::pair<uint64_t, std::string>> queued;
    std::atomic<size_t> queued_n{0};  // queued.size(), readable without recv_mu
    std::atomic<bool> credit_pending{false};  // reader's credit deferred (FlushCredits)
    // Where the writer stood after the last message of each tag bucket
    // (Offers), under send_mu.
    std::array<uint64_t, kTagBuckets> last_at{};
    std::array<bool, kTagBuckets> answered{};  // the last one was an answer
    std::array<bool, kTagBuckets> offer_refused{};  // the last offer was refused (NoteOffer)
  };
  // The peer's state, or null for a rank outside the job or this rank.
  Peer* PeerAt(int peer) const {
    return peer >= 0 && peer < static_cast<int>(peers_.size()) ? peers_[peer].get() : nullptr;
  }
  static uint32_t Bucket(uint64_t tag) {
    // splitmix64's finalizer: tags that differ only in their class or
    // context bits (a post and its meta) land apart.
    tag = (tag ^ (tag >> 30)) * 0xbf58476d1ce4e5b9ull;
    tag = (tag ^ (tag >> 27)) * 0x94d049bb133111ebull;
    return static_cast<uint32_t>((tag ^ (tag >> 31)) & (kTagBuckets - 1));
  }
  // What one look at a stream does besides the tag: accept (null: every
  // message), next_only (TryRecvNext: stop at an arrival with another tag).
  struct Look {
    Acceptor accept = nullptr;
    bool next_only = false;
  };
  // One step of a receive under p.recv_mu: a queued message with the tag, or
  // the next arrival (consumed in place when it has the tag, queued if not).
  // Credits for all messages it consumed: one write at its end, or none
  // when defer_credit (then p.credit_pending is set).
  Status TryTake(Peer& p, uint64_t tag, Consumer consume, void* ctx, bool* done, const Deadline& dl,
                 bool defer_credit, const Look& look);
  Status TakeOne(Peer& p, uint64_t tag, Consumer consume, void* ctx, bool* done, const Deadline& dl,
                 const Look& look);
  // One message of n slots (SpanOf) to p, under p.send_mu; notes its tag's
  // position (Offers).
  Status Write(Peer& p, uint64_t tag, const void* a, size_t abytes, const void* b, size_t bbytes,
               uint32_t n, const Deadline& dl);
  // The message of one slot as a few stores when the slot is free and the
  // peer known healthy (shared memory), under p.send_mu; notes its tag's
  // position as Write does. False: nothing was sent.
  bool PutNow(Peer& p, int peer, uint64_t tag, const void* a, size_t abytes, const void* b, size_t bbytes);
  // Answer's work under p.send_mu.
  Status RunAnswer(Peer& p, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* fresh);
  static Status CopyOut(void* ctx, const Piece* pieces, int n);  // into a std::string
  // Slots a message of `bytes` takes, or an error when it is too large.
  Status SpanOf(const Peer& p, int peer, size_t bytes, uint32_t* n) const;

  PeerHealth* health_ = nullptr;
  MemRegion* alert_ = nullptr;
  std::vector<RemoteRegion> peer_alert_;
  std::vector<std::unique_ptr<Peer>> peers_;
};

}  // namespace zc
