// OpCtx: one collective call as its algorithm sees it. It stamps every
// message with the call's signature (signature.h), checks the signature of
// every message it reads, and moves data in chunks of at most chunk_bytes
// over the communicator's links (links.h). Algorithms reach their peers only
// through here, by group rank: they never see a transport or the Device.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/links.h"
#include "collectives/signature.h"
#include "p2p/region_hold.h"

namespace zc::coll {

class OpCtx {
 public:
  OpCtx(Group* group, Links* links, const Signature& sig, size_t elem_size)
      : group_(group), links_(links), sig_(sig), es_(elem_size ? elem_size : 1),
        chunk_elems_(std::max<size_t>(1, links->chunk_bytes() / (elem_size ? elem_size : 1))),
        dl_(group->NewDeadline()), rank_(group->rank()), size_(group->size()) {}

  Group* group() const { return group_; }
  const Signature& sig() const { return sig_; }
  const Deadline& deadline() const { return dl_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t es() const { return es_; }
  size_t chunk_elems() const { return chunk_elems_; }
  // Number of chunk messages for n elements (at least one: an empty message
  // still carries the signature).
  size_t Chunks(size_t n) const { return n == 0 ? 1 : (n + chunk_elems_ - 1) / chunk_elems_; }

  Status Ensure(const std::vector<int>& peers) { return links_->Ensure(peers, dl_); }

  // Vector collectives: which rank's block a message belongs to and how many
  // elements that whole block has (aux[5], aux[6]). Ranks that disagree on
  // counts fail on the first chunk with ZC_ERR_MISMATCH naming both counts,
  // before the chunk sizes or chunk numbers go out of step.
  using Block = MessageBlock;

  // One slot message of `bytes` (<= chunk bytes) to `peer`.
  Status Send(int peer, const void* src, size_t bytes, uint64_t tag, const Block* block = nullptr);
  // Waits for the next message from `peer`, checks its signature, tag,
  // block (when given) and size; *payload stays valid until Release(peer).
  Status Recv(int peer, size_t expect_bytes, uint64_t tag, const void** payload,
              const Block* block = nullptr);
  // Returns the slot to `peer`. reply_follows: my next message goes to
  // the same peer soon (a pairwise exchange; with 2 ranks, the next
  // collective's agreement), so over tcp the credit may wait to travel in
  // that message's system call (SlotLayout::lazy_credit; at most about a
  // millisecond when none comes): one send per step, not two. A credit
  // whose peer gets nothing back from me (a ring) goes at once.
  Status Release(int peer, bool reply_follows = false);

  // ---- direct writes (the ring allreduce's allgather half) ----
  // True when writes to `peer` had better go straight into its buffer
  // (WriteDirect) than through the link's slots; the same answer on both
  // ends of the link. Needs a link to peer (Ensure).
  bool CanWriteDirect(int peer) const { return links_->direct(peer); }
  // Exposes my buffer [buf, buf+bytes) to peers' direct writes until *out
  // is released: its region and buf's offset in it go to the writer.
  Status HoldForDirect(void* buf, size_t bytes, RegionHold* out);
  // `bytes` from src straight into the peer's memory `dst` at dst_off, no
  // slot and no copy on arrival, completed by one of the link's kSlots flags. The q-th direct
  // write of a call travels on connection q % kSlots with flag q % kSlots:
  // each flag's writes share one ordered connection, while the payloads
  // spread over the connections and their progress threads. AwaitDirect(q)
  // on the receiver waits for the sender's WriteDirect(q); both sides must
  // number their writes alike.
  Status WriteDirect(int peer, const void* src, size_t bytes, const RemoteRegion& dst,
                     uint64_t dst_off, uint32_t q);
  Status AwaitDirect(int peer, uint32_t q);

  // Rooted collectives whose ranks could disagree on the root without any
  // message showing it (broadcast, reduce: two roots only send, or each
  // waits for a parent that is not sending to it). BeginAgreement sends an
  // empty message carrying this rank's signature to its right ring
  // neighbour; the left neighbour's is checked before EndAgreement returns,
  // and every Recv in between takes it as soon as it is there, so ranks
  // that disagree fail at once (ZC_ERR_MISMATCH naming both roots) instead
  // of waiting for each other. Costs one small message per rank, no extra
  // round of latency.
  Status BeginAgreement();
  Status EndAgreement();
  // The rank every agreement of mine goes to (my right ring neighbour).
  // A credit owed to it may wait for that message (Release's reply_follows).
  int agreement_peer() const { return (rank_ + 1) % size_; }

  // Sends send_n elements from src to `to` and receives recv_n elements
  // from `from`, chunk by chunk in lockstep (send chunk i, then receive chunk
  // i), so two ranks exchanging with each other never deadlock whatever the
  // sizes. to or from may be -1. consume(elem_offset, payload, elems) is
  // called for every received chunk, in order.
  template <typename Consume>
  Status Exchange(int to, const void* src, size_t send_n, int from, size_t recv_n, uint32_t step,
                  Consume&& consume) {
    return ExchangeBlocks(to, src, send_n, nullptr, from, recv_n, nullptr, step, consume);
  }
  // Exchange whose messages also carry (and check) the block they belong to.
  template <typename Consume>
  Status ExchangeBlocks(int to, const void* src, size_t send_n, const Block* send_block, int from,
                        size_t recv_n, const Block* recv_block, uint32_t step, Consume&& consume) {
    const char* s = static_cast<const char*>(src);
    size_t ns = to >= 0 ? Chunks(send_n) : 0, nr = from >= 0 ? Chunks(recv_n) : 0;
    for (size_t i = 0; i < ns || i < nr; ++i) {
      size_t off = i * chunk_elems_;
      if (i < ns) {
        size_t m = send_n > off ? std::min(chunk_elems_, send_n - off) : 0;
        ZC_RETURN_IF_ERROR(
            Send(to, m ? s + off * es_ : nullptr, m * es_, MessageTag(step, i), send_block));
      }
      if (i < nr) {
        size_t m = recv_n > off ? std::min(chunk_elems_, recv_n - off) : 0;
        const void* payload = nullptr;
        ZC_RETURN_IF_ERROR(Recv(from, m * es_, MessageTag(step, i), &payload, recv_block));
        if (m) consume(off, payload, m);
        ZC_RETURN_IF_ERROR(Release(from, /*reply_follows=*/from == to));
      }
    }
    return Status::Ok();
  }

 private:
  Group* group_;
  Links* links_;
  Signature sig_;
  size_t es_, chunk_elems_;
  Deadline dl_;
  int rank_, size_;
  int agree_from_ = -1;  // left neighbour whose agreement is not yet checked

  static constexpr uint32_t kAgreeStep = 0xffffffffu;
  Status TakeAgreement();
  // Waits until `peer`'s next message is there, taking the agreement on the way.
  Status AwaitWatchingAgreement(int peer);
};

// For acknowledgements (credits, "done" flags) that only matter to a peer's
// next message: a peer that finished and exited is not an error.
inline Status IgnorePeerLost(const Status& st) {
  return st.code() == ZC_ERR_PEER_LOST ? Status::Ok() : st;
}

// Balanced split of n elements into `parts` segments: the first n % parts
// segments get one more element.
inline size_t SegBegin(size_t n, int parts, int k) {
  size_t base = n / parts, rem = n % parts;
  return base * k + std::min<size_t>(k, rem);
}
inline size_t SegLen(size_t n, int parts, int k) {
  return n / parts + (static_cast<size_t>(k) < n % parts ? 1 : 0);
}

}  // namespace zc::coll
