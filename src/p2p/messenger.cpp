#include "p2p/messenger.h"

#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "common/log.h"
#include "p2p/control_plane.h"
#include "p2p/device.h"
#include "p2p/p2p_protocol.h"
#include "p2p/recv_post.h"
#include "p2p/send_recv.h"

namespace zc {

using namespace p2p_wire;

// ---- P2pRequest ----

bool P2pRequest::Test(Status* st) const {
  if (!done_.load(std::memory_order_acquire)) return false;
  if (st) {
    std::lock_guard<std::mutex> lock(mu_);
    *st = status_;
  }
  return true;
}

Status P2pRequest::Wait(const Deadline& dl) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, dl.at(), [this] { return done_.load(std::memory_order_relaxed); }))
    return Error(ZC_ERR_TIMEOUT, "%s of %zu bytes: not complete before the wait's deadline",
                 is_send_ ? "isend" : "irecv", bytes_);
  return status_;
}

void P2pRequest::Complete(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = st;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

// ---- the request state machine ----

struct Messenger::Op {
  enum State {
    kPostMeta,      // send: meta (and eager payload) waits for a control slot
    kAwaitAck,      // send, rendezvous: the receiver reads; waits for its ack
    kRestage,       // send: a pool copy's meta waits for a control slot
    kAwaitMeta,     // recv: waits for the sender's meta
    kSendAck,       // recv: the ack waits for a control slot
    kAwaitRestage,  // recv: asked for a pool copy; waits for its meta
    kWithdrawn,     // recv, posted: past its deadline, the post withdrawn; a payload on its way may land
    kDone,
  };
  bool send = false;
  State state = kPostMeta;
  std::shared_ptr<P2pRequest> req;
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  size_t bytes = 0;
  int peer = 0, dpeer = 0, tag = 0;
  Deadline dl{0};
  Meta meta{};
  std::string desc;         // rendezvous: the source's descriptor
  RegionHold source;        // send, rendezvous: the source, held until the op completes
  MemRegion* staged = nullptr;  // send: the pool copy after kAckNeedStaged
  bool restaged = false;    // the pool copy was sent (send) or asked for (recv)
  uint32_t ack_code = 0;    // recv, kSendAck: what to send
  Status final_status;      // recv, kSendAck: the result once the ack is out
  bool any = false;         // recv from any source: peer and dpeer are -1 until a message matches
  std::unique_ptr<DirectSend> direct;  // send, receiver-posted: the receive's post
  Clock::time_point post_until{};      // send: until when a post may still be on its way
  std::unique_ptr<RecvPost> post;      // recv: its post to the sender, once made
  Clock::time_point grace_until{};     // recv, kWithdrawn: until when a payload may land
  bool unposted = false;               // recv: will not post (too small, not tcp, no flag word)

  bool Unmatched() const { return any && peer < 0; }
  std::string What() const {
    if (Unmatched()) return Format("irecv of %zu bytes from any source (tag %d)", bytes, tag);
    return Format("%s of %zu bytes %s peer %d (tag %d%s)", send ? "isend" : "irecv", bytes,
                  send ? "to" : "from", peer, tag, any ? ", any source" : "");
  }
};

namespace {

}  // namespace

Messenger::Messenger(Device* dev, std::vector<int> members, int my_rank, uint32_t context)
    : dev_(dev),
      members_(std::move(members)),
      epoch_(dev->health().epoch()),
      my_rank_(my_rank),
      context_(context & kMaxContext) {}

Messenger::~Messenger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  ops_.splice(ops_.end(), incoming_);
  for (auto& op : ops_)
    if (op->state != Op::kDone)
      Complete(*op, Error(ZC_ERR_ABORTED, "%s: the communicator's messenger (point to point) was destroyed",
                          op->What().c_str()));
  ops_.clear();
}

Status Messenger::CheckFailed(size_t bytes, int peer, const char* what) const {
  if (peer < 0 || peer >= size())
    return Error(ZC_ERR_INVALID_ARG, "%s: peer %d out of range [0, %d)", what, peer, size());
  if (peer == my_rank_)
    return Error(ZC_ERR_INVALID_ARG, "%s: peer %d is the calling rank itself (self)", what, peer);
  return Error(ZC_ERR_INVALID_ARG, "%s: null buffer of %zu bytes", what, bytes);
}

Status Messenger::CheckAnySource(const void* buf, size_t bytes) const {
  if (!buf && bytes)
    return Error(ZC_ERR_INVALID_ARG, "irecv from any source: null buffer of %zu bytes", bytes);
  if (size() < 2)
    return Error(ZC_ERR_INVALID_ARG,
                 "irecv from any source: rank %d is alone in its communicator (no peer could send)",
                 my_rank_);
  return Status::Ok();
}

Status Messenger::Isend(const void* buf, size_t bytes, int peer, int tag,
                        std::shared_ptr<P2pRequest>* req) {
  ZC_RETURN_IF_ERROR(Check(buf, bytes, peer, "isend"));
  // A lone send (the first, or the first after a receive was posted) with
  // nothing pending whose message goes out at once (eager, a free
  // shared-memory slot), as a blocking send's does: complete already, with
  // no hand-over to the progress thread, whose wake-up would cost more than
  // the send. A burst of sends goes to the progress thread, which streams
  // it while the caller posts the rest (sending a window of small messages
  // on the caller's thread cost osu_bw's window a third of its bandwidth
  // at 512 B-4 KiB here).
  if (inline_burst_.load(std::memory_order_relaxed)) {
    inline_burst_.store(false, std::memory_order_relaxed);
  } else if (TrySendNow(buf, bytes, peer, tag)) {
    inline_burst_.store(true, std::memory_order_relaxed);
    *req = std::make_shared<P2pRequest>(true, bytes);
    (*req)->source_.store(peer, std::memory_order_relaxed);
    (*req)->Complete(Status::Ok());
    return Status::Ok();
  }
  auto op = std::make_unique<Op>();
  op->send = true;
  op->state = Op::kPostMeta;
  op->sbuf = buf;
  op->bytes = bytes;
  op->peer = peer;
  op->dpeer = members_[peer];
  op->tag = tag;
  op->dl = dev_->NewDeadline();
  uint32_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  if (seq == 0) seq = next_seq_.fetch_add(1, std::memory_order_relaxed);  // 0: blocking zc::Send
  op->meta = Meta{bytes, kEager, seq, 0};
  if (DirectWanted(dev_, op->dpeer, bytes)) op->direct = std::make_unique<DirectSend>();
  if (bytes > EagerLimit(dev_->transport_to(op->dpeer))) {
    // Rendezvous: expose the source where it lies (pool memory: zero copy).
    Status st = dev_->regions().Hold(buf, bytes, &op->source);
    if (!st.ok()) return st.with_context(op->What());
    op->meta.mode = kRendezvous;
    op->meta.offset = op->source->offset_of(buf);
    op->desc = op->source->remote().Serialize();
  }
  op->req = std::make_shared<P2pRequest>(true, bytes);
  op->req->source_.store(peer, std::memory_order_relaxed);
  *req = op->req;
  Post(std::move(op));
  return Status::Ok();
}

Status Messenger::Irecv(void* buf, size_t bytes, int peer, int tag,
                        std::shared_ptr<P2pRequest>* req) {
  const bool any = peer == kAnySource;
  ZC_RETURN_IF_ERROR(any ? CheckAnySource(buf, bytes) : Check(buf, bytes, peer, "irecv"));
  inline_burst_.store(false, std::memory_order_relaxed);
  auto op = std::make_unique<Op>();
  op->send = false;
  op->state = Op::kAwaitMeta;
  op->rbuf = buf;
  op->bytes = bytes;
  op->any = any;
  op->peer = peer;
  op->dpeer = any ? -1 : members_[peer];
  op->tag = tag;
  op->dl = dev_->NewDeadline();
  op->req = std::make_shared<P2pRequest>(false, bytes);
  op->req->source_.store(peer, std::memory_order_relaxed);
  *req = op->req;
  Post(std::move(op));
  return Status::Ok();
}

// With nothing pending, a blocking call runs the same protocol inline in the
// caller's thread (zc::Send/zc::Recv with this context): no hand-over to the
// progress thread and back, which would cost the small-message latency. With
// requests pending it queues behind them, keeping the posting order.
Status Messenger::Send(const void* buf, size_t bytes, int peer, int tag) {
  HealthScope scope = HealthScope::ForEpoch(&dev_->health(), epoch_);
  if (pending() == 0) {
    ZC_RETURN_IF_ERROR(Check(buf, bytes, peer, "send"));
    return zc::Send(dev_, buf, bytes, members_[peer], tag, context_);
  }
  std::shared_ptr<P2pRequest> req;
  ZC_RETURN_IF_ERROR(Isend(buf, bytes, peer, tag, &req));
  return req->Wait(Deadline::Never());
}

bool Messenger::TrySendNow(const void* buf, size_t bytes, int peer, int tag) {
  if (pending() != 0 || !Valid(buf, bytes, peer)) return false;
  HealthScope scope = HealthScope::ForEpoch(&dev_->health(), epoch_);
  return zc::TrySendNow(dev_, buf, bytes, members_[peer], tag, context_);
}

Status Messenger::Recv(void* buf, size_t bytes, int peer, int tag, int* source) {
  HealthScope scope = HealthScope::ForEpoch(&dev_->health(), epoch_);
  if (source) *source = kAnySource;
  if (peer != kAnySource && pending() == 0) {
    ZC_RETURN_IF_ERROR(Check(buf, bytes, peer, "recv"));
    if (source) *source = peer;
    return zc::Recv(dev_, buf, bytes, members_[peer], tag, context_);
  }
  // From any source, or behind pending requests: through the progress thread.
  std::shared_ptr<P2pRequest> req;
  ZC_RETURN_IF_ERROR(Irecv(buf, bytes, peer, tag, &req));
  Status st = req->Wait(Deadline::Never());
  if (source) *source = req->source();
  return st;
}

void Messenger::Post(std::unique_ptr<Op> op) {
  pending_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      // Only during destruction (a caller racing the destructor).
      Complete(*op, Error(ZC_ERR_ABORTED, "%s: the communicator's messenger (point to point) is being destroyed",
                          op->What().c_str()));
      return;
    }
    incoming_.push_back(std::move(op));
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  cv_.notify_one();
}

void Messenger::Complete(Op& op, const Status& st) {
  op.state = Op::kDone;
  // Before the caller has the buffer back: a post that may still be
  // written to is withdrawn and its registration dropped (RecvPost::End).
  if (op.post) op.post->End();
  op.direct.reset();
  if (op.staged) {
    // The op's result is st; the pool copy's free cannot change it.
    IgnoreError(dev_->regions().Free(op.staged->data()), "freeing the staged copy of a finished op");
    op.staged = nullptr;
  }
  // The peer is done with the source: give it back before the caller
  // learns of completion (it may deregister or free the memory next).
  op.source.reset();
  pending_.fetch_sub(1, std::memory_order_relaxed);
  op.req->Complete(st.ok() ? st : dev_->health().OperationFailed(st));
}

void Messenger::Loop() {
  HealthScope scope = HealthScope::ForEpoch(&dev_->health(), epoch_);
  int idle = 0;      // passes in a row that moved nothing
  int sleep_us = 0;  // current back-off sleep
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (ops_.empty()) {
        // Nothing pending: sleep until a request is posted.
        cv_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
      } else if (idle > 0 && incoming_.empty() && !stop_) {
        // Requests wait for their peers: yield briefly, then sleep 20..100 us
        // (a new request ends the sleep at once).
        if (idle < 16) {
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
        } else {
          sleep_us = sleep_us ? std::min(sleep_us * 2, 100) : 20;
          cv_.wait_for(lock, std::chrono::microseconds(sleep_us),
                       [this] { return stop_ || !incoming_.empty(); });
        }
      }
      if (stop_) return;
      ops_.splice(ops_.end(), incoming_);
    }
    if (Pass()) {
      idle = 0;
      sleep_us = 0;
    } else {
      ++idle;
    }
  }
}

bool Messenger::Pass() {
  PassState pass;
  for (auto& ptr : ops_) {
    Op& op = *ptr;
    switch (op.state) {
      case Op::kPostMeta: pass.moved |= PostMeta(op, &pass); break;
      case Op::kRestage: pass.moved |= SendRestaged(op); break;
      case Op::kAwaitMeta: pass.moved |= AwaitMeta(op, &pass); break;
      case Op::kSendAck: pass.moved |= SendAck(op); break;
      case Op::kWithdrawn:
        if (Landed(op)) {
          Complete(op, Status::Ok());
          pass.moved = true;
        }
        break;
      case Op::kAwaitAck:
      case Op::kAwaitRestage: pass.ack_keys.insert({op.dpeer, op.tag}); break;
      case Op::kDone: break;
    }
  }
  pass.moved |= TakeAcks(pass.ack_keys);
  // One credit write per peer for all the messages this pass took.
  IgnoreError(dev_->control()->FlushCredits(), "a lost peer fails its requests through Health below");
  for (auto& ptr : ops_) FailIfLostOrLate(*ptr);
  ops_.remove_if([](const std::unique_ptr<Op>& op) { return op->state == Op::kDone; });
  return pass.moved;
}

bool Messenger::PostMeta(Op& op, PassState* pass) {
  // Sends to one peer go out in posting order: once one finds no slot,
  // later ones wait for the next turn.
  if (pass->send_blocked.count(op.dpeer)) return false;
  bool moved = false;
  if (op.direct && SendDirect(op, pass, &moved)) return moved;
  bool sent = false;
  const bool eager = op.meta.mode == kEager;
  Status st = dev_->control()->TrySend2(op.dpeer, MetaTag(context_, op.tag), &op.meta, sizeof(op.meta),
                                        eager ? op.sbuf : op.desc.data(), eager ? op.bytes : op.desc.size(),
                                        &sent);
  if (!st.ok()) {
    Complete(op, st.with_context(op.What()));
    return false;
  }
  if (!sent) {
    pass->send_blocked.insert(op.dpeer);
    return false;
  }
  if (eager) Complete(op, Status::Ok());
  else op.state = Op::kAwaitAck;
  return true;
}

bool Messenger::SendRestaged(Op& op) {
  Ack a{kAckRestaged, op.meta.seq, op.bytes};
  std::string head(reinterpret_cast<const char*>(&a), sizeof(a));
  head.append(reinterpret_cast<const char*>(&op.meta), sizeof(op.meta));
  bool sent = false;
  Status st = dev_->control()->TrySend2(op.dpeer, AckTag(context_, op.tag), head.data(), head.size(),
                                        op.desc.data(), op.desc.size(), &sent);
  if (!st.ok()) {
    Complete(op, st.with_context(op.What()));
    return false;
  }
  if (sent) op.state = Op::kAwaitAck;
  return sent;
}

bool Messenger::AwaitMeta(Op& op, PassState* pass) {
  if (op.Unmatched()) return MatchAnySource(op, &pass->recv_blocked);
  if (Landed(op)) {
    Complete(op, Status::Ok());  // straight into the buffer
    return true;
  }
  // Only the oldest receive of a (peer, tag) looks: FIFO matching.
  const auto key = std::make_pair(op.dpeer, op.tag);
  if (pass->recv_blocked.count(key)) return false;
  Arrival in{op.rbuf, op.bytes};
  if (op.post && (op.post->sent() || op.post->armed())) in.post = op.post.get();
  Status st;
  uint64_t seen = 0;
  if (!dev_->control()->TryRecvWith(op.dpeer, MetaTag(context_, op.tag), &TakeMetaPieces<ControlPlane::Piece>,
                                    &in, &st, /*defer_credit=*/true, &AcceptMeta, &seen)) {
    if (!st.ok()) {
      Complete(op, st.with_context(op.What()));
    } else {
      pass->recv_blocked.insert(key);
      PostBuffer(op, seen);
    }
    return false;
  }
  Matched(op, st, &in);
  return true;
}

bool Messenger::Landed(const Op& op) { return op.post && op.post->Landed(); }

void Messenger::PostBuffer(Op& op, uint64_t seen) {
  if (op.unposted) return;
  if (!op.post) {
    op.post = std::make_unique<RecvPost>();
    if (!DirectWanted(dev_, op.dpeer, op.bytes) ||
        !op.post->Make(dev_, op.dpeer, context_, op.tag, op.rbuf, op.bytes)) {
      op.post.reset();
      op.unposted = true;
      return;
    }
  }
  // An offer from the sender may take it (OfferBoard), one waiting now
  // included; each look moves the position on.
  op.post->Arm(seen);
  dev_->ServeOffers(op.dpeer);
  if (op.post->sent() || op.post->Landed()) return;
  // Without a free slot now, the next pass's look posts.
  const std::string msg = op.post->Message(seen);
  bool sent = false;
  Status st = dev_->control()->TrySend2(op.dpeer, PostTag(context_, op.tag), msg.data(), msg.size(), nullptr,
                                        0, &sent);
  if (!st.ok()) Complete(op, st.with_context(op.What()));
  else if (sent) op.post->Sent();
}

// A post that may be on its way is worth a short wait (DirectSend::
// AwaitPost), over a few passes.
bool Messenger::AwaitsPost(Op& op) {
  const Clock::time_point now = Clock::now();
  if (op.post_until == Clock::time_point()) {
    if (!DirectSend::PostLikely(dev_, op.dpeer, context_, op.tag, op.bytes)) return false;
    op.post_until = now + DirectSend::kPostWait;
  }
  return now < op.post_until;
}

bool Messenger::SendDirect(Op& op, PassState* pass, bool* moved) {
  *moved = false;
  Status st;
  if (!op.direct->FindPost(dev_, op.dpeer, context_, op.tag, op.bytes, &st)) {
    if (!st.ok() || !AwaitsPost(op)) return false;
    pass->send_blocked.insert(op.dpeer);  // (posting order)
    return true;
  }
  bool ran = false, fresh = false;
  st = op.direct->TryWrite(dev_, op.dpeer, MetaTag(context_, op.tag), op.sbuf, op.bytes, op.dl, &ran, &fresh);
  if (!fresh) return false;  // a message of the tag went out since the post: the ordinary way
  if (!ran) {
    pass->send_blocked.insert(op.dpeer);  // another thread sends to the peer: next pass
    return true;
  }
  *moved = true;
  Complete(op, st.ok() ? st : st.with_context(op.What()));
  return true;
}

// A receive's meta (or its failure to arrive whole) has been taken.
void Messenger::Matched(Op& op, const Status& st, Arrival* in) {
  if (!st.ok()) {
    Complete(op, st.with_context(op.What()));
    return;
  }
  op.meta = in->meta;
  op.desc = std::move(in->desc);
  HandleMeta(op);
}

bool Messenger::SendAck(Op& op) {
  Ack a{op.ack_code, op.meta.seq, op.bytes};
  bool sent = false;
  Status st = dev_->control()->TrySend2(op.dpeer, AckTag(context_, op.tag), &a, sizeof(a), nullptr, 0, &sent);
  if (!st.ok()) {
    Complete(op, op.final_status.ok() ? st.with_context(op.What()) : op.final_status);
    return false;
  }
  if (!sent) return false;
  if (op.ack_code == kAckNeedStaged) op.state = Op::kAwaitRestage;
  else Complete(op, op.final_status);
  return true;
}

// Ack-class messages go to the request with their sequence number.
bool Messenger::TakeAcks(const std::set<std::pair<int, int>>& keys) {
  bool moved = false;
  for (const auto& key : keys) {
    std::string msg;
    Status st;
    while (dev_->control()->TryRecv(key.first, AckTag(context_, key.second), &msg, &st, /*defer_credit=*/true)) {
      moved = true;
      Dispatch(key.first, key.second, msg);
    }
  }
  return moved;
}

// What a request past its deadline waited for, by state.
const char* Messenger::WaitingFor(const Op& op) {
  switch (op.state) {
    case Op::kPostMeta: return "no free control slot (the peer receives nothing)";
    case Op::kAwaitAck: return "no acknowledgement of the rendezvous (no matching receive)";
    case Op::kRestage: case Op::kSendAck: return "no free control slot";
    case Op::kAwaitMeta: return op.Unmatched() ? "no matching send from any peer" : "no matching send";
    case Op::kWithdrawn: return "no matching send";
    case Op::kAwaitRestage: return "no staged copy";
    case Op::kDone: break;
  }
  return "";
}

// Deadlines and peers' health.
void Messenger::FailIfLostOrLate(Op& op) {
  if (op.state == Op::kDone) return;
  if (op.state == Op::kAwaitMeta && Landed(op)) {
    Complete(op, Status::Ok());  // it came before the failure
    return;
  }
  int lost = -1;
  Status h = op.Unmatched() ? AnyPeerLost(&lost) : dev_->health().Health(op.dpeer);
  if (!h.ok() && lost >= 0) {
    Complete(op, h.with_context(Format("%s: peer %d is lost, and it could have been the sender",
                                       op.What().c_str(), lost)));
  } else if (!h.ok()) {
    Complete(op, h.with_context(op.What()));
  } else if (op.state == Op::kWithdrawn) {
    if (Clock::now() >= op.grace_until)
      Complete(op, Error(ZC_ERR_TIMEOUT, "%s: %s: waited %.1f s (ZC_TIMEOUT=%g s)", op.What().c_str(),
                         WaitingFor(op), op.dl.elapsed_s(), dev_->timeout_s()));
  } else if (op.dl.expired() && op.state == Op::kAwaitMeta && op.post && op.post->Disarm()) {
    Complete(op, Status::Ok());  // an offer landed as the deadline passed
  } else if (op.dl.expired() && op.state == Op::kAwaitMeta && op.post && op.post->sent()) {
    // A payload sent as the deadline passed still counts (RecvPost::Withdraw).
    op.post->Withdraw();
    op.state = Op::kWithdrawn;
    op.grace_until = Clock::now() + RecvPost::kWithdrawGrace;
  } else if (op.dl.expired() && op.state == Op::kSendAck && !op.final_status.ok()) {
    // The read itself failed (often by this same deadline): that is the
    // cause, not the acknowledgement still waiting for a slot.
    Complete(op, op.final_status);
  } else if (op.dl.expired()) {
    Complete(op, Error(ZC_ERR_TIMEOUT, "%s: %s: waited %.1f s (ZC_TIMEOUT=%g s)", op.What().c_str(),
                       WaitingFor(op), op.dl.elapsed_s(), dev_->timeout_s()));
  }
}

bool Messenger::MatchAnySource(Op& op, std::set<std::pair<int, int>>* recv_blocked) {
  ControlPlane* cp = dev_->control();
  const int n = size();
  for (int k = 0; k < n; ++k) {
    const int p = (any_next_ + k) % n;
    if (p == my_rank_) continue;
    const int dp = members_[p];
    // An earlier receive of this pass wanted this stream and found nothing:
    // what arrives now is that receive's (posting order).
    if (recv_blocked->count({dp, op.tag})) continue;
    Arrival in{op.rbuf, op.bytes};
    Status st;
    if (!cp->TryRecvWith(dp, MetaTag(context_, op.tag), &TakeMetaPieces<ControlPlane::Piece>, &in,
                         &st, /*defer_credit=*/true)) {
      if (!st.ok()) {
        Complete(op, st.with_context(Format("%s: reading peer %d's stream", op.What().c_str(), p)));
        return true;
      }
      continue;
    }
    // Matched: from here on the request is a receive from p.
    op.peer = p;
    op.dpeer = dp;
    op.req->source_.store(p, std::memory_order_release);
    any_next_ = (p + 1) % n;
    Matched(op, st, &in);
    return true;
  }
  // Nothing from anyone: later receives of this tag must not take what
  // arrives during the rest of this pass.
  for (int p = 0; p < n; ++p)
    if (p != my_rank_) recv_blocked->insert({members_[p], op.tag});
  return false;
}

Status Messenger::AnyPeerLost(int* lost) const {
  *lost = -1;
  for (int p = 0; p < size(); ++p) {
    if (p == my_rank_) continue;
    Status h = dev_->health().Health(members_[p]);
    if (h.ok()) continue;
    // Health fails for every peer once the Device is aborted or alerted:
    // name a peer only when it is the one lost.
    for (int q = 0; q < size(); ++q)
      if (q != my_rank_ && dev_->health().peer_lost(members_[q])) {
        *lost = q;
        return q == p ? h : dev_->health().Health(members_[q]);
      }
    return h;
  }
  return Status::Ok();
}

void Messenger::HandleMeta(Op& op) {
  // An ordinary message: the post (if any) can no longer be written to.
  if (op.post) op.post->Superseded();
  if (op.meta.bytes != op.bytes) {
    Status st = Error(ZC_ERR_MISMATCH, "%s: the peer sent %llu bytes", op.What().c_str(),
                      static_cast<unsigned long long>(op.meta.bytes));
    if (op.meta.mode == kRendezvous) {
      op.ack_code = kAckMismatch;
      op.final_status = st;
      op.state = Op::kSendAck;
    } else {
      Complete(op, st);
    }
    return;
  }
  if (op.meta.mode == kEager) {
    Complete(op, Status::Ok());  // TakeMeta copied the payload
    return;
  }
  StartRead(op);
}

void Messenger::StartRead(Op& op) {
  // The read may take a while: the peer must not wait for our credits.
  IgnoreError(dev_->control()->FlushCredits(), "a lost peer fails the read too");
  RemoteRegion src;
  Status st = RemoteRegion::Parse(op.desc, &src);
  // One-sided read straight into the user's buffer (blocks for the transfer only).
  if (st.ok()) st = dev_->channel(op.dpeer).Read(op.rbuf, op.bytes, src, op.meta.offset, op.dl);
  op.state = Op::kSendAck;
  if (st.code() == ZC_ERR_UNSUPPORTED && !op.restaged) {
    op.restaged = true;
    op.ack_code = kAckNeedStaged;  // then kAwaitRestage
    op.final_status = Status::Ok();
  } else if (!st.ok()) {
    op.ack_code = kAckFailed;
    op.final_status = st.with_context(op.What());
  } else {
    op.ack_code = kAckOk;
    op.final_status = Status::Ok();
  }
}

void Messenger::Dispatch(int dpeer, int tag, const std::string& msg) {
  Ack a{};
  if (!ParseAck(msg.data(), msg.size(), &a)) {
    ZC_WARN(kP2p, "p2p: short acknowledgement (%zu bytes) from rank %d", msg.size(), dpeer);
    return;
  }
  const bool restage = a.code == kAckRestaged;
  for (auto& ptr : ops_) {
    Op& op = *ptr;
    if (op.dpeer != dpeer || op.tag != tag || op.meta.seq != a.seq) continue;
    if (restage && !op.send && op.state == Op::kAwaitRestage) {
      Ack head{};
      if (!ParseRestaged(msg, &head, &op.meta, &op.desc)) {
        Complete(op, Error(ZC_ERR_INTERNAL, "%s: truncated staged meta data", op.What().c_str()));
        return;
      }
      StartRead(op);
      return;
    }
    if (!restage && op.send && op.state == Op::kAwaitAck) {
      switch (a.code) {
        case kAckOk:
          Complete(op, Status::Ok());
          break;
        case kAckMismatch:
          Complete(op, Error(ZC_ERR_MISMATCH, "%s: the receiver expects %llu bytes",
                             op.What().c_str(), static_cast<unsigned long long>(a.expected)));
          break;
        case kAckNeedStaged:
          if (!op.restaged) {
            // The peer cannot reach user memory (cross-memory attach
            // refused): stage through pool memory, which every local peer maps.
            op.restaged = true;
            Status st = dev_->regions().Allocate(op.bytes, &op.staged);
            if (!st.ok()) {
              Complete(op, st.with_context(op.What()));
              break;
            }
            memcpy(op.staged->data(), op.sbuf, op.bytes);
            op.meta.offset = 0;
            op.desc = op.staged->remote().Serialize();
            op.state = Op::kRestage;
            break;
          }
          [[fallthrough]];
        default:
          Complete(op, Error(ZC_ERR_SYSTEM, "%s: the receiver failed to read it", op.What().c_str()));
      }
      return;
    }
  }
  ZC_INFO(kP2p, "p2p: acknowledgement for no pending request (rank %d, tag %d, seq %u)", dpeer, tag,
              a.seq);
}

}  // namespace zc
