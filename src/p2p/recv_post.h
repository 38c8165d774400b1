// Receiver-posted transfers (tcp): a receive that is posted before its
// message has arrived announces its buffer to the sender (a Post, wire
// format in p2p_protocol.h), and a sender that finds the post writes its
// message once, from its buffer through the socket straight into the
// receiver's, then a flag: one network hop and no copy, where the
// rendezvous costs three hops (meta, read request, reply) and the eager
// path a copy out of the control slots. A message whose receive was not
// posted in time travels as before (eager or rendezvous).
//
//   PostBook    the flag words that posted receives wait on (one per Device)
//   RecvPost    the receiver's side of one post
//   DirectSend  the sender's side: the post of a tag, the write
// and the other way round, when the post has not come (offer_board.h): the
// sender offers the message at once and the receiver's transport matches
// it to a receive armed for it (RecvPost::Arm, DirectSend::Offer).
//
// Why a direct message always reaches the receive that posted for it, in
// its turn:
//  - only the receive next in line for its (peer, tag) posts, after a look
//    at the peer's stream that found no message of the tag
//    (ControlPlane::TryRecvWith's seen): it takes the first message of the
//    tag that comes after that look;
//  - the sender writes through ControlPlane::Answer, which refuses when a
//    message of the tag may have gone out since that look (the post is
//    stale: the receive takes that message, as before), and holds the
//    stream's send lock over the write, on the control plane's connection:
//    no later message of the tag overtakes it;
//  - so the receive completes when its flag is set, and once it is set
//    leaves the metas of its tag to the next receives (AcceptMeta): they
//    came after the payload.
// A receive that ends without the payload (deadline, lost peer, abort)
// withdraws its post and makes sure no late write lands: its flag word is
// never used again and a registration of its user memory is dropped; in
// pool memory a late write lands in the buffer while it stays allocated
// (zc_mem_free retires the slice's region: later writes are dropped).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/control_plane.h"
#include "p2p/mem_region.h"
#include "p2p/offer_board.h"
#include "p2p/p2p_protocol.h"
#include "p2p/region_hold.h"

namespace zc {

class Device;
class LocalRegions;

// Receives of at least this many bytes from a tcp peer post themselves:
// below it the eager copy out of the control slots costs less than the
// post's extra control message.
constexpr size_t kTcpDirectMin = 64 * 1024;

// Whether a message of `bytes` to or from Device rank peer may travel
// receiver-posted (tcp, at least kTcpDirectMin, ZC_TCP_RECV_POST on).
bool DirectWanted(Device* dev, int peer, size_t bytes);

// The flag words of posted receives, in one pool region made on first use.
// Each word's values only grow (a post's value is the word's next one), and
// a word whose post ended without its write is never handed out again, so a
// late write can never complete a later post.
class PostBook {
 public:
  static constexpr uint32_t kWords = 512;
  static constexpr uint64_t kStride = 64;  // one cache line per word
  explicit PostBook(LocalRegions* regions) : regions_(regions) {}
  ~PostBook();
  PostBook(const PostBook&) = delete;
  PostBook& operator=(const PostBook&) = delete;

  struct Word {
    uint32_t index = 0;
    uint64_t value = 0;  // what the write stores
    uint64_t token = 0;  // names the post; 0: none
  };
  // A free word and its next value; false when none is left (or the region
  // cannot be made): the receive then goes unposted.
  bool Take(Word* out);
  // The post is over and no write for it can come any more.
  void Give(const Word& w);
  // The post is over, but a late write may still come: never again.
  void Retire(const Word& w);
  std::atomic<uint64_t>* flag(const Word& w) const;
  const MemRegion* region() const { return region_; }
  // Posts whose payload landed so far, and words retired (tests, logs).
  uint64_t landed() const { return landed_.load(std::memory_order_relaxed); }
  uint64_t retired() const { return retired_.load(std::memory_order_relaxed); }
  void NoteLanded() { landed_.fetch_add(1, std::memory_order_relaxed); }

 private:
  LocalRegions* regions_;
  mutable std::mutex mu_;
  MemRegion* region_ = nullptr;  // kWords * kStride bytes, zeroed
  std::vector<uint32_t> free_;
  std::vector<uint64_t> gen_;  // the last value of each word
  bool made_ = false;
  std::atomic<uint64_t> landed_{0}, retired_{0};
};

// ControlPlane acceptor for meta messages (ctx: an Arrival): a receive
// whose post's payload has landed takes no meta (the next receive's).
bool AcceptMeta(void* ctx, const ControlPlane::Piece& first);
// ControlPlane stop for a receive's wait (ctx: an Arrival): its post's
// payload has landed.
bool PostLanded(void* ctx);

// The receiver's side of one post: made when the receive is next in line
// and found nothing (Make), sent once (Message), then ended one way or
// another (End).
class RecvPost {
 public:
  RecvPost() = default;
  ~RecvPost() { End(); }
  RecvPost(const RecvPost&) = delete;
  RecvPost& operator=(const RecvPost&) = delete;

  // Takes a flag word and the buffer's region for a receive from Device
  // rank peer with this context and tag; false when either cannot be had
  // (the receive goes unposted).
  bool Make(Device* dev, int peer, uint32_t context, int tag, void* buf, size_t bytes);
  bool made() const { return word_.token != 0; }
  uint64_t token() const { return word_.token; }
  // The receive may take an offer sent up to position seen (its look's;
  // OfferBoard). The caller then has the transport look at an offer that
  // waits (Device::ServeOffers) and watches the post's flag (Landed),
  // whether or not the post's message goes out.
  void Arm(uint64_t seen);
  bool armed() const { return armed_; }
  // The receive takes no offer from now on (waiting while one is being
  // read into its buffer). True when an offer landed in it.
  bool Disarm();
  // The post's message, for a look that left the stream at seen.
  std::string Message(uint64_t seen) const;
  // The message went out: from now on a write may come.
  void Sent() { sent_ = true; }
  bool sent() const { return sent_; }
  // The payload has landed (its flag is set), written through the post or
  // taken from an offer.
  bool Landed() const;
  // The receive took another message of the tag after its post: the post
  // is stale, no write can come for it.
  void Superseded();
  // The receive's deadline passed: the post is withdrawn (best effort,
  // waiting at most kWithdrawGrace for a slot). A sender that has not used
  // it yet drops it (DirectSend::Take); a payload already on its way is
  // given kWithdrawGrace to land (a message sent as the deadline passed is
  // then taken, not lost, and a sender that acts on the timeout finds the
  // withdrawal first).
  void Withdraw();
  bool withdrawn() const { return withdrawn_; }
  // Withdraw, then wait up to kWithdrawGrace: true when the payload landed.
  bool WithdrawAndWait();
  static constexpr std::chrono::milliseconds kWithdrawGrace{100};
  // Gives the word back, or, when a write may still come, withdraws the
  // post (if not yet) and retires the word and the buffer's registration.
  void End();

 private:

  Device* dev_ = nullptr;
  int peer_ = -1;
  int tag_ = 0;
  uint32_t context_ = 0;
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  PostBook::Word word_;
  MemRegion* region_ = nullptr;  // the buffer's: a pool slice, or held user memory
  RegionHold hold_;              // user memory
  bool sent_ = false;
  bool stale_ = false;
  bool withdrawn_ = false;
  OfferBoard::Entry entry_;  // on the board while armed_
  bool armed_ = false;
  bool offer_landed_ = false;
};

// The sender's side of one message: the post that came for its tag, then
// the payload into the posted buffer.
class DirectSend {
 public:
  // Takes the posts that came from peer for (context, tag) and keeps the
  // latest that was not withdrawn (an earlier post of the tag belongs to a
  // receive that has ended). True when one of `bytes` is kept; a post of
  // another size is dropped: its receive takes the ordinary message and
  // reports the mismatch.
  // Posts that an offer made stale (OfferBoard::Consumed) are dropped.
  bool FindPost(Device* dev, int peer, uint32_t context, int tag, size_t bytes, Status* st);
  // The message as an offer (offer_board.h), when no post has come: it
  // goes at once, and the receiver's verdict says whether a receive took
  // it (*taken; else it must go another way). Needs a free flag word for
  // the verdict (else *taken = false at once). A sender that had an offer
  // refused waits for posts again (ControlPlane::OfferWanted).
  Status Offer(Device* dev, int peer, uint32_t context, int tag, const void* buf, size_t bytes, bool* taken);
  static bool OfferWanted(Device* dev, int peer, uint32_t context, int tag);
  // FindPost, waiting up to kPostWait for a post that may be on its way
  // when one is likely (PostLikely). In a ping-pong the peer's post for our
  // next message leaves only after our last message has reached it, and
  // races with our next send.
  bool AwaitPost(Device* dev, int peer, uint32_t context, int tag, size_t bytes, Status* st);
  // Whether a post not found yet is worth waiting for: the ordinary way
  // costs two more hops (above the eager limit: a rendezvous, whose slow
  // completion would also make every later post come a hop too late), or
  // the last message of the tag went direct (the peer's receives post).
  static bool PostLikely(Device* dev, int peer, uint32_t context, int tag, size_t bytes);
  static constexpr std::chrono::microseconds kPostWait{50};
  // The payload straight into the posted buffer, then the flag, while the
  // post is fresh (ControlPlane::Answer, for tag: the meta tag); *fresh =
  // false: stale (dropped here), send the ordinary way. TryWrite does not
  // wait for another thread's send to the peer (*ran).
  Status Write(Device* dev, int peer, uint64_t tag, const void* buf, size_t bytes, const Deadline& dl,
               bool* fresh);
  Status TryWrite(Device* dev, int peer, uint64_t tag, const void* buf, size_t bytes, const Deadline& dl,
                  bool* ran, bool* fresh);

 private:
  // One message on connection 0, as ControlPlane::Answer requires.
  Status WritePayload(Device* dev, int peer, const void* buf, size_t bytes, const Deadline& dl);
  // One post message from the peer: kept, or a withdrawal applied (a post
  // that an offer made stale is dropped).
  void Take(Device* dev, const std::string& msg);

  p2p_wire::Post post_{};
  RemoteRegion data_, flag_;
  bool have_ = false;
};

}  // namespace zc
