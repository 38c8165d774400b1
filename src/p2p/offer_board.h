// OfferBoard: the receives of this rank that a sender's offer may land in
// (receiver-matched messages over tcp, the other half of recv_post.h).
//
// A receive-posted transfer needs the receiver's post to reach the sender
// first. In a ping-pong the post of the next receive leaves only once the
// rank's own send has returned, and its system call (4-5 us for a small
// message on loopback here) lies on the path of every message: the peer
// has its reply ready and waits for it. So a sender that finds no post
// sends the message at once, as an offer (kOffer: no target, the payload
// behind its header), and the receiving transport asks this board where
// it goes:
//   - a receive that is armed for it takes it: the payload goes from the
//     socket straight into its buffer, then the receive's post flag is set,
//     as if the sender had written into its post;
//   - no receive yet (kLater): the transport leaves the offer unread until
//     one is armed (it is served at once then) or until it has waited
//     Socket::kOfferWait, when it is refused;
//   - a receive of another size: refused at once.
// The sender learns the verdict from a word of its own that the receiver
// writes (the post's token, or 0) and sends a refused message the ordinary
// way.
//
// Which receive an offer is for follows the rule of posts
// (ControlPlane's "Offers"): only the receive next in line for its (peer,
// tag) is armed, after a look at the peer's stream that found nothing, with
// that look's position `seen`; an offer sent when the last message of the
// tag's bucket ended at position prev is its message when prev <= seen.
// A later offer (a message of the tag came between) waits for the next
// receive.
//
// Entries live in their receives (RecvPost); the board only points at
// them. A taken entry is being written: Disarm waits until the payload is
// in (or failed), so a receive never returns its buffer under a write.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "p2p/transport.h"

namespace zc {

class OfferBoard {
 public:
  enum State : int { kIdle, kArmed, kTaken, kLanded, kFailed };
  struct Entry {
    int peer = -1;
    uint64_t key = 0;   // MetaTag(context, tag)
    uint64_t seen = 0;  // where the receive's look left the peer's stream
    char* dst = nullptr;
    uint64_t bytes = 0;
    uint64_t token = 0;  // the receive's post
    std::atomic<uint64_t>* flag = nullptr;  // the post's flag word
    uint64_t value = 0;                     // what a landing stores there
    std::atomic<int> state{kIdle};
  };

  // The receive of e may take an offer sent up to position seen (again:
  // a later look moves seen on).
  void Arm(Entry* e, uint64_t seen);
  // e takes no offer from now on; waits while one is being read into it.
  // True when an offer landed in it.
  bool Disarm(Entry* e);
  // TransportHost::MatchOffer and OfferEnded.
  OfferMatch Match(int peer, uint64_t key, uint64_t prev, uint64_t bytes, OfferTarget* out);
  void Ended(const OfferTarget& target, bool landed);

  // Whether the last message of key from peer landed by offer: its sender
  // offers, so the next receive of key need not post (a post would cost
  // its system call before the receive is armed, and go unused).
  bool OfferedLast(int peer, uint64_t key) const;
  // A receive of key from peer took an ordinary message.
  void NoteOrdinary(int peer, uint64_t key);

  // Sender side: the posts that offers landed in, named by the verdicts.
  // A post that comes after its receive took an offer is stale, and its
  // position alone may not show it (no message of the tag went between).
  void Consumed(uint64_t token);
  // True (and forgotten) when token is such a post.
  bool TakeConsumed(uint64_t token);

  // The transport refused an offer from peer (TransportHost::OfferRefused).
  void NoteRefused(int peer, uint64_t key);
  // (peer, key)s whose last message came as an offer (tests).
  size_t offered_keys() const;
  // Offers that landed here, and that were refused here (tests, logs).
  uint64_t landed() const { return landed_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  // Verdicts whose post has not arrived yet: a post that never went out
  // leaves its token here, so the oldest are forgotten.
  static constexpr size_t kMaxConsumed = 256;
  // (peer, key)s remembered for OfferedLast: a program that uses a new tag
  // for every message must not grow the set without end; forgetting one
  // costs its next receive a post.
  static constexpr size_t kMaxOffered = 1024;
  mutable std::mutex mu_;
  std::vector<Entry*> armed_;
  std::set<std::pair<int, uint64_t>> offered_;  // (peer, key): OfferedLast
  std::deque<uint64_t> consumed_;
  std::atomic<uint64_t> landed_{0}, refused_{0};
};

}  // namespace zc
