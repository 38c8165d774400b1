// MessageHandler: the receive loop of a socket and the handling of each
// message type; see tcp_messages.h.
#include "p2p/tcp/tcp_messages.h"

#include <sched.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <shared_mutex>

#include "common/log.h"
#include "common/socket.h"
#include "p2p/tcp/tcp_progress.h"

namespace zc::tcp {

using tcp_wire::kBye;
using tcp_wire::kMagic;
using tcp_wire::kOffer;
using tcp_wire::kReadReq;
using tcp_wire::kReadResp;
using tcp_wire::kWrite;
using tcp_wire::MsgHeader;

Status MessageHandler::Pump(Socket* s, Responder* responder, bool* took) {
  // An offer that waits keeps everything behind it unread.
  if (s->OfferWaiting()) {
    ZC_RETURN_IF_ERROR(HandleOffer(s, MsgHeader(s->offer), responder));
    if (s->OfferWaiting()) return Status::Ok();
    *took = true;
  }
  for (;;) {
    // Room for this recv: what was handled goes, a partial message moves to
    // the front.
    if (s->rpos == s->rend) {
      s->rpos = s->rend = 0;
    } else if (s->rpos > 0) {
      memmove(s->rbuf.get(), s->rbuf.get() + s->rpos, s->rend - s->rpos);
      s->rend -= s->rpos;
      s->rpos = 0;
    }
    const size_t room = Socket::kRecvBuf - s->rend;
    net::NoteReceiving();
    ssize_t n = recv(s->fd, s->rbuf.get() + s->rend, room, MSG_DONTWAIT);
    if (n == 0)
      return Error(ZC_ERR_PEER_LOST, "tcp: recv from peer %d: connection closed by peer", s->peer);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return Error(ZC_ERR_PEER_LOST, "tcp: recv from peer %d: %s", s->peer, strerror(errno));
    }
    s->rend += static_cast<size_t>(n);
    while (s->rend - s->rpos >= sizeof(MsgHeader) && !s->said_bye.load()) {
      *took = true;
      ZC_RETURN_IF_ERROR(HandleMessage(s, responder));
      if (s->OfferWaiting()) return Status::Ok();
    }
    // A short recv found the socket empty: a byte that came after it raised
    // a new edge (a Service request). A full buffer may have left more.
    if (static_cast<size_t>(n) < room || s->said_bye.load()) return Status::Ok();
  }
}

Status MessageHandler::HandleMessage(Socket* s, Responder* responder) {
  MsgHeader h;
  Deadline dl(timeout_s_);
  ZC_RETURN_IF_ERROR(s->TakeBytes(&h, sizeof(h), dl));
  ZC_RETURN_IF_ERROR(tcp_wire::CheckHeader(h, s->peer));
  switch (h.type) {
    case kWrite:
      return HandleWrite(s, h, dl);
    case kReadReq:
      // Answered by the responder, so that this thread goes on reading
      // (a reply may wait for the peer to read, see Responder).
      responder->Queue(s, h);
      return Status::Ok();
    case kReadResp:
      return HandleReadResp(s, h, dl);
    case kOffer:
      return HandleOffer(s, h, responder);
    case kBye:
      // Not an error yet: data the peer sent before finalizing may still be
      // in flight on its other sockets. The caller reports the peer gone once
      // every socket of it has said goodbye.
      s->said_bye.store(true);
      return Status::Ok();
    default:
      return Error(ZC_ERR_PEER_LOST, "tcp: unknown message type %u from peer %d", h.type, s->peer);
  }
}

Status MessageHandler::HandleWrite(Socket* s, const MsgHeader& h, const Deadline& dl) {
  // Held shared over the payload and the flag: no region is freed under them.
  std::shared_lock<std::shared_mutex> use(host_->region_use());
  if (h.bytes) ZC_RETURN_IF_ERROR(PlacePayload(s, h, dl));
  if (h.flag_region_id) SetFlag(s, h);
  return Status::Ok();
}

Status MessageHandler::PlacePayload(Socket* s, const MsgHeader& h, const Deadline& dl) {
  MemRegion* r = host_->FindLocalRegion(h.region_id);
  if (!r || !tcp_wire::RangeInside(h.offset, h.bytes, r->size())) {
    if (!r && host_->RegionRetired(h.region_id))
      ZC_TRACE(kTcp, "peer %d wrote %llu bytes to freed region %llu: dropped", s->peer,
               static_cast<unsigned long long>(h.bytes),
               static_cast<unsigned long long>(h.region_id));
    else
      ZC_WARN(kTcp, "peer %d wrote %llu bytes to unknown or too small region %llu: dropped",
              s->peer, static_cast<unsigned long long>(h.bytes),
              static_cast<unsigned long long>(h.region_id));
    return s->Drain(h.bytes);
  }
  // Zero copy: straight from the socket into the target region.
  return s->TakeBytes(static_cast<char*>(r->data()) + h.offset, h.bytes, dl);
}

void MessageHandler::SetFlag(Socket* s, const MsgHeader& h) {
  MemRegion* f = host_->FindLocalRegion(h.flag_region_id);
  if (!f && host_->RegionRetired(h.flag_region_id)) {
    // A credit or flag that crossed our free of the region (a peer's
    // last credit at shutdown): nobody waits on it any more.
    ZC_TRACE(kTcp, "peer %d set a flag in freed region %llu: dropped", s->peer,
             static_cast<unsigned long long>(h.flag_region_id));
  } else if (!f || !tcp_wire::FlagInside(h.flag_offset, f->size())) {
    ZC_WARN(kTcp, "peer %d set a flag in unknown region %llu: dropped", s->peer,
            static_cast<unsigned long long>(h.flag_region_id));
  } else {
    reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(f->data()) + h.flag_offset)
        ->store(h.flag_value, std::memory_order_release);
    progress_->Notify();
  }
}

Status MessageHandler::HandleOffer(Socket* s, const MsgHeader& h, Responder* responder) {
  OfferTarget t;
  OfferMatch match = host_->MatchOffer(s->peer, h.token, h.offset, h.bytes, &t);
  if (match == OfferMatch::kLater && !s->OfferWaiting()) {
    s->offer = h;
    s->offer_since = Clock::now();
    s->offer_pending.store(true, std::memory_order_seq_cst);  // then OfferWaits reads long_sleep
    // A receive armed after the look above may have looked for the mark
    // before it was set (Transport::ServeOffers): one more look.
    match = host_->MatchOffer(s->peer, h.token, h.offset, h.bytes, &t);
    if (match == OfferMatch::kLater) {
      progress_->OfferWaits(s);
      return Status::Ok();
    }
  }
  if (match == OfferMatch::kLater && Clock::now() - s->offer_since < Socket::kOfferWait) return Status::Ok();
  s->offer_pending.store(false, std::memory_order_release);
  if (match != OfferMatch::kTake) {
    // No receive took it in time (or the sizes differ): the sender sends
    // it the ordinary way once it has the verdict.
    SendVerdict(s, h, 0, responder);
    host_->OfferRefused(s->peer, h.token);
    return s->Drain(h.bytes);
  }
  // The verdict first: the sender's call may return as soon as its bytes
  // are out, while ours are still being read.
  SendVerdict(s, h, t.token, responder);
  Status st = s->TakeBytes(t.dst, h.bytes, Deadline(timeout_s_));
  host_->OfferEnded(t, st.ok());
  progress_->Notify();
  return st;
}

namespace {
constexpr int kVerdictLooks = 32;
}  // namespace

void MessageHandler::SendVerdict(Socket* s, const MsgHeader& offer, uint64_t token, Responder* responder) {
  MsgHeader v{};
  v.magic = kMagic;
  v.type = kWrite;
  v.region_id = offer.flag_region_id;
  v.offset = offer.flag_offset + 8;
  v.bytes = sizeof(token);
  v.flag_region_id = offer.flag_region_id;
  v.flag_offset = offer.flag_offset;
  v.flag_value = offer.flag_value;
  // Another thread's send holds the socket for a moment (a post, a lazy
  // flag): worth a few looks before the responder, whose thread must wake
  // first (tens of microseconds here). A large write holds it until the
  // peer reads: the responder then waits for it, not this reading thread.
  for (int look = 0; look < kVerdictLooks; ++look) {
    if (s->TrySendNow(v, &token, sizeof(token))) return;
    sched_yield();
  }
  responder->QueueWrite(s, v, token);
}

Status MessageHandler::HandleReadResp(Socket* s, const MsgHeader& h, const Deadline& dl) {
  std::shared_ptr<PendingRead> p = reads_->Find(h.token);
  if (!p || !tcp_wire::ReadRespFits(h, p->bytes)) {
    // The reader gave up (deadline): throw the data away.
    return s->Drain(h.bytes);
  }
  if (h.status) {
    p->status = tcp_wire::RefusedRead(h, s->peer);
    p->state.store(2, std::memory_order_release);
    progress_->Notify();
    return Status::Ok();
  }
  Status st = s->TakeBytes(p->dst, h.bytes, dl);
  p->status = st;
  p->state.store(st.ok() ? 1 : 2, std::memory_order_release);
  progress_->Notify();
  return st;
}

}  // namespace zc::tcp
