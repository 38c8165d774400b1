// Messenger: nonblocking point-to-point (zc_isend / zc_irecv, and zc_send /
// zc_recv as an isend or irecv plus its wait) for one communicator.
//
// Requests are non-blocking state machines over the control plane (the wire
// format is in p2p_protocol.h, the same as the blocking zc::Send/zc::Recv):
//   send:  post meta (eager: with the payload; needs a control slot credit,
//          taken with ControlPlane::TrySend2, never waited for)
//          -> [rendezvous] await the receiver's ack -> done
//             (kAckNeedStaged: copy into pool memory, send it -> await ack)
//   recv:  await meta (ControlPlane::TryRecvWith; only the oldest receive of
//          each (peer, tag) looks, so messages of one (peer, tag) match in
//          posting order; a receive from any source looks at every peer's
//          stream, below) -> [rendezvous] one-sided Read into the user's
//          buffer (this may block for the transfer itself) -> send the ack
//          (again only when a slot is free) -> done
// Receiver-posted (tcp, p2p/recv_post.h): a receive of at least
// kTcpDirectMin bytes that is next in line and finds no meta posts its
// buffer to the sender; a send that finds the post still fresh writes the
// payload straight into that buffer (this blocks for the transfer itself)
// and is done; the receive is done when the payload's flag is set:
//   send:  [write the payload into the posted buffer] -> done
//   recv:  await meta or, posted, the payload's flag -> done
// One progress thread per messenger drives them, started on the first request;
// it sleeps on a condition variable when nothing is pending and backs off
// (yield, then 20-100 us sleeps) while requests wait for their peers. No
// request ever blocks another one while it waits for a peer, so any set of
// requests that MPI would complete completes here.
//
// Receives from any source (peer kAnySource) match as MPI's do: each pass
// goes over the requests in posting order, and every receive takes the next
// message of its tag from a stream that no earlier receive of this pass
// wanted and found empty. So among the messages of one sender and tag an
// any-source receive takes the earliest, and a receive posted earlier (from
// that sender or from any source) is matched first. Across senders there is
// no order to keep (each writes its own stream): an any-source receive looks
// at the peers round-robin, starting after the sender the last any-source
// match took from, and takes the first message it finds, so a message that
// has already arrived is matched at once and no sender is starved.
//
// Every request has a deadline (ZC_TIMEOUT from the time it was posted) and
// fails promptly when its peer is lost or the Device is aborted; a receive
// from any source that has not matched yet fails when any peer of the
// communicator is lost (the message it waits for may have been the lost
// peer's; as MPI's ULFM has it), after taking what had already arrived.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace zc {
namespace p2p_wire {
struct Arrival;  // p2p_protocol.h
}  // namespace p2p_wire

class Device;

// Completion state of one Isend or Irecv, shared by the messenger and the caller.
class P2pRequest {
 public:
  P2pRequest(bool is_send, size_t bytes) : is_send_(is_send), bytes_(bytes) {}
  // Never blocks: true when the request is complete, *st (may be null) its status.
  bool Test(Status* st) const;
  // Sleeps on a condition variable until the request completes (its status)
  // or dl passes (ZC_ERR_TIMEOUT; the request stays pending). The messenger
  // completes every request by its own deadline, so Deadline::Never() is safe.
  Status Wait(const Deadline& dl);
  bool is_send() const { return is_send_; }
  size_t bytes() const { return bytes_; }
  // A receive's sender (communicator rank) once it is known: set when a
  // message matched, before the request completes; -1 (kAnySource) while a
  // receive from any source has matched nothing. A send's peer.
  int source() const { return source_.load(std::memory_order_acquire); }

 private:
  friend class Messenger;
  void Complete(const Status& st);

  const bool is_send_;
  const size_t bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::atomic<int> source_{-1};
  Status status_;
};

class Messenger {
 public:
  // The peer of a receive from any source (ZC_ANY_SOURCE).
  static constexpr int kAnySource = -1;

  // One per communicator. members[r] is the Device rank of communicator rank
  // r; my_rank is mine in the communicator; context (< 0x10000) scopes every
  // control tag, so that communicators sharing one Device never take each
  // other's messages. Context 0 speaks with the blocking zc::Send/zc::Recv.
  Messenger(Device* dev, std::vector<int> members, int my_rank, uint32_t context);
  // Pending requests complete with ZC_ERR_ABORTED; the progress thread is joined.
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  // Nonblocking; peer and tag in communicator terms; the buffer belongs to
  // zcomm until the request completes. Argument errors are returned at once
  // (and no request is made); everything else through the request. Irecv's
  // peer may be kAnySource; the request's source() names the sender.
  Status Isend(const void* buf, size_t bytes, int peer, int tag, std::shared_ptr<P2pRequest>* req);
  Status Irecv(void* buf, size_t bytes, int peer, int tag, std::shared_ptr<P2pRequest>* req);
  // Blocking: Isend/Irecv and its Wait (the same protocol and matching order).
  // source (may be null): the sender once one matched, else kAnySource.
  Status Send(const void* buf, size_t bytes, int peer, int tag);
  Status Recv(void* buf, size_t bytes, int peer, int tag, int* source = nullptr);
  // Send when it is over at once (zc::TrySendNow, with no request pending):
  // true when the message went out; false, with nothing sent, when Send
  // would wait or the arguments are bad (Send then does the work or names
  // the error). A caller records such a send once it has gone out.
  bool TrySendNow(const void* buf, size_t bytes, int peer, int tag);

  int rank() const { return my_rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  uint32_t context() const { return context_; }
  // Requests posted and not yet complete.
  size_t pending() const { return pending_.load(std::memory_order_relaxed); }
  // Whether the progress thread was started (by the first request handed
  // to it; a send that went out on the caller's thread starts none).
  bool progress_started() const {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_.joinable();
  }

 private:
  struct Op;
  bool Valid(const void* buf, size_t bytes, int peer) const {
    return peer >= 0 && peer < size() && peer != my_rank_ && (buf || !bytes);
  }
  Status Check(const void* buf, size_t bytes, int peer, const char* what) const {
    if (Valid(buf, bytes, peer)) return Status::Ok();
    return CheckFailed(bytes, peer, what);
  }
  Status CheckAnySource(const void* buf, size_t bytes) const;
  Status CheckFailed(size_t bytes, int peer, const char* what) const;  // the error Check names
  void Post(std::unique_ptr<Op> op);
  void Loop();
  // What one pass has learnt so far.
  struct PassState {
    bool moved = false;                          // some request moved on
    std::set<int> send_blocked;                  // peers whose next meta found no slot
    std::set<std::pair<int, int>> recv_blocked;  // (peer, tag) whose oldest receive found nothing
    std::set<std::pair<int, int>> ack_keys;      // (peer, tag) with requests awaiting ack-class messages
  };
  bool Pass();  // one turn over every request; true when any moved on
  // One step of a request in each state; true when it moved on.
  bool PostMeta(Op& op, PassState* pass);
  bool SendRestaged(Op& op);
  bool AwaitMeta(Op& op, PassState* pass);
  bool SendAck(Op& op);
  // Receiver-posted (recv_post.h). The send's direct path: true when it
  // took the op this pass (done, failed, or waiting for a slot); *moved:
  // it moved on.
  bool SendDirect(Op& op, PassState* pass, bool* moved);
  bool AwaitsPost(Op& op);
  // A receive next in line that found nothing (the stream as it left it:
  // seen) posts its buffer, once.
  void PostBuffer(Op& op, uint64_t seen);
  // A posted receive's payload has landed in its buffer.
  static bool Landed(const Op& op);
  bool TakeAcks(const std::set<std::pair<int, int>>& keys);
  void FailIfLostOrLate(Op& op);
  static const char* WaitingFor(const Op& op);
  void Matched(Op& op, const Status& st, p2p_wire::Arrival* in);
  // A receive from any source looks at every peer's stream that no earlier
  // receive of this pass found empty; true when it took a message (or failed).
  bool MatchAnySource(Op& op, std::set<std::pair<int, int>>* recv_blocked);
  // The first peer of the communicator known lost (its status), or Ok.
  Status AnyPeerLost(int* lost) const;
  void HandleMeta(Op& op);
  void StartRead(Op& op);
  void Dispatch(int dpeer, int tag, const std::string& msg);
  void Complete(Op& op, const Status& st);

  Device* dev_;
  const std::vector<int> members_;
  // The Device epoch of the communicator (Group::epoch): its operations run
  // in that epoch's HealthScope and fail as revoked after a shrink.
  const uint64_t epoch_;
  const int my_rank_;
  const uint32_t context_;
  std::atomic<uint32_t> next_seq_{1};
  std::atomic<size_t> pending_{0};
  // The last Isend went out on the caller's thread and no Irecv came since:
  // the next Isend is part of a burst, which the progress thread streams.
  std::atomic<bool> inline_burst_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<Op>> incoming_;  // posted, not yet seen by the progress thread
  bool stop_ = false;
  std::thread thread_;
  // Only the progress thread touches these (and the destructor after the join).
  std::list<std::unique_ptr<Op>> ops_;  // in posting order
  int any_next_ = 0;  // the peer an any-source receive looks at first
};

}  // namespace zc
