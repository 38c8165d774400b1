#include "p2p/send_recv.h"

#include <cstring>
#include <optional>
#include <string>

#include "common/log.h"
#include "p2p/control_plane.h"
#include "p2p/device.h"
#include "p2p/p2p_protocol.h"
#include "p2p/recv_post.h"

static_assert(zc::kEagerLimit + 64 <= zc::ControlPlane::kMaxMessage, "eager fits a control slot");
static_assert(zc::kNetworkEagerLimit + 64 <= zc::ControlPlane::kMaxNetworkMessage,
              "network eager fits a control slot");
static_assert(zc::kTcpEagerLimit + sizeof(zc::p2p_wire::Meta) <= zc::ControlPlane::kMaxSpanMessage,
              "tcp eager fits the control slots");

namespace zc {
namespace {

using namespace p2p_wire;

// Eager: [Meta][payload]; rendezvous: [Meta][descriptor of the source].
// The blocking path speaks sequence number 0 (p2p_protocol.h).
Status SendMeta(Device* dev, int peer, int tag, uint32_t context, const Meta& m, const void* rest,
                size_t rest_bytes, const Deadline& dl) {
  return dev->control()->Send2(peer, MetaTag(context, tag), &m, sizeof(m), rest, rest_bytes, dl);
}

// Rendezvous: expose the source where it lies (pool memory: zero copy),
// held until the peer has read it (this call's end).
Status SendRendezvous(Device* dev, const void* buf, size_t bytes, int peer, int tag,
                      uint32_t context) {
  Deadline dl = dev->NewDeadline();
  Meta m{bytes, kEager, 0, 0};
  RegionHold region;
  MemRegion* staged = nullptr;
  ZC_RETURN_IF_ERROR(dev->regions().Hold(buf, bytes, &region));
  m.mode = kRendezvous;
  m.offset = region->offset_of(buf);
  std::string desc = region->remote().Serialize();
  Status st = SendMeta(dev, peer, tag, context, m, desc.data(), desc.size(), dl);
  for (int round = 0; st.ok(); ++round) {
    std::string reply;
    st = dev->RecvControl(peer, AckTag(context, tag), &reply, dl);
    if (!st.ok()) break;
    Ack ack{};
    if (!ParseAck(reply.data(), reply.size(), &ack)) {
      st = Error(ZC_ERR_INTERNAL, "send of %zu bytes to peer %d (tag %d): truncated acknowledgement "
                 "(%zu bytes)", bytes, peer, tag, reply.size());
      break;
    }
    if (ack.code == kAckOk) break;
    if (ack.code == kAckMismatch) {
      st = Error(ZC_ERR_MISMATCH, "send of %zu bytes to peer %d (tag %d): the receiver expects %llu bytes",
                 bytes, peer, tag, static_cast<unsigned long long>(ack.expected));
      break;
    }
    if (ack.code == kAckNeedStaged && round == 0) {
      // The peer cannot reach user memory (cross-memory attach refused):
      // stage through pool memory, which every local peer maps.
      st = dev->regions().Allocate(bytes, &staged);
      if (!st.ok()) break;
      memcpy(staged->data(), buf, bytes);
      m.offset = 0;
      desc = staged->remote().Serialize();
      // The pool copy's meta data rides in the ack class, after an Ack
      // header naming the message (a meta-class message could be taken by
      // an older receive of the same tag).
      Ack head{kAckRestaged, m.seq, bytes};
      std::string msg(reinterpret_cast<const char*>(&head), sizeof(head));
      msg.append(reinterpret_cast<const char*>(&m), sizeof(m));
      st = dev->control()->Send2(peer, AckTag(context, tag), msg.data(), msg.size(), desc.data(),
                                 desc.size(), dl);
      continue;
    }
    st = Error(ZC_ERR_SYSTEM, "send of %zu bytes to peer %d (tag %d): the receiver failed to read it",
               bytes, peer, tag);
    break;
  }
  if (staged) {
    Status freed = dev->regions().Free(staged->data());
    if (st.ok()) st = freed;
  }
  return st;
}

// Receiver-posted (recv_post.h): when the receive has posted its buffer
// and the post is still fresh, the message goes straight into it; *done =
// false: it goes the ordinary way.
Status SendDirect(Device* dev, const void* buf, size_t bytes, int peer, int tag, uint32_t context,
                  bool* done) {
  *done = false;
  DirectSend d;
  Status st;
  bool posted = d.FindPost(dev, peer, context, tag, bytes, &st);
  if (!st.ok()) return st;
  // No post yet: the message goes at once, for the receiver to match
  // (offer_board.h); refused, it goes the ways below (a post may have come
  // meanwhile).
  if (!posted && DirectSend::OfferWanted(dev, peer, context, tag)) {
    st = d.Offer(dev, peer, context, tag, buf, bytes, done);
    if (!st.ok() || *done)
      return st.ok() ? st : st.with_context(Format("send of %zu bytes to peer %d (tag %d), offered", bytes, peer, tag));
  }
  if (!posted) posted = d.AwaitPost(dev, peer, context, tag, bytes, &st);
  if (!posted) return st;
  bool fresh = false;
  st = d.Write(dev, peer, MetaTag(context, tag), buf, bytes, dev->NewDeadline(), &fresh);
  *done = fresh;
  return st.ok() ? st : st.with_context(Format("send of %zu bytes to peer %d (tag %d), into the posted "
                                               "receive", bytes, peer, tag));
}

// A look at the stream from peer; when the message has not come, the
// receive posts its buffer (recv_post.h). *took: the look took the meta.
Status LookThenPost(Device* dev, int peer, int tag, uint32_t context, Arrival* in, RecvPost* post,
                    bool* took) {
  uint64_t seen = 0;
  Status st;
  *took = dev->control()->TryRecvWith(peer, MetaTag(context, tag), &TakeMetaPieces<ControlPlane::Piece>, in,
                                      &st, /*defer_credit=*/false, nullptr, &seen);
  if (*took || !st.ok()) return st;
  if (!post->Make(dev, peer, context, tag, in->buf, in->bytes)) return Status::Ok();
  // Armed before the post goes: a sender that offers the message finds
  // the receive at once (an offer waiting for it is taken now, here).
  post->Arm(seen);
  in->post = post;
  dev->ServeOffers(peer);
  // A sender whose last message came as an offer offers again: no post.
  if (post->Landed() || dev->offers().OfferedLast(peer, MetaTag(context, tag))) return Status::Ok();
  const std::string msg = post->Message(seen);
  bool sent = false;
  // Never waits: without a free slot the receive goes unposted.
  ZC_RETURN_IF_ERROR(dev->control()->TrySend2(peer, PostTag(context, tag), msg.data(), msg.size(), nullptr, 0,
                                              &sent));
  if (sent) post->Sent();
  return Status::Ok();
}

Status RecvOnce(Device* dev, void* buf, size_t bytes, int peer, int tag, uint32_t context) {
  Deadline dl = dev->NewDeadline();
  Arrival in{buf, bytes};
  // Only a receive that may post (tcp, large) has a post's state to make
  // and end: a small receive's path after its message is short.
  std::optional<RecvPost> post;
  bool took = false;
  Status got;
  if (DirectWanted(dev, peer, bytes)) {
    post.emplace();
    got = LookThenPost(dev, peer, tag, context, &in, &*post, &took);
  }
  // A posted receive waits for its meta or its payload, whichever comes.
  if (got.ok() && !took)
    got = dev->control()->RecvWith(peer, MetaTag(context, tag), &TakeMetaPieces<ControlPlane::Piece>, &in, dl,
                                   post ? &AcceptMeta : nullptr, post ? &PostLanded : nullptr);
  // A payload sent as the deadline passed still counts (RecvPost::Withdraw).
  if (got.code() == ZC_ERR_TIMEOUT && post && post->WithdrawAndWait()) return Status::Ok();
  if (!got.ok()) return got.with_context(Format("recv from peer %d (tag %d)", peer, tag));
  if (post && post->Landed()) return Status::Ok();  // straight into buf (no meta taken)
  // An ordinary message: the post (if any) can no longer be written to.
  if (post) post->Superseded();
  Meta m = in.meta;
  // Acks echo the sender's sequence number (p2p_protocol.h).
  auto ack = [&](uint32_t code) {
    Ack a{code, m.seq, bytes};
    return dev->SendControl(peer, AckTag(context, tag), std::string(reinterpret_cast<char*>(&a), sizeof(a)), dl);
  };
  if (m.bytes != bytes) {
    // Best effort: the mismatch is our result; without the ack the sender
    // fails at its deadline instead.
    if (m.mode == kRendezvous) IgnoreError(ack(kAckMismatch), "telling the sender of a size mismatch");
    return Error(ZC_ERR_MISMATCH, "recv of %zu bytes from peer %d (tag %d): the peer sent %llu bytes",
                 bytes, peer, tag, static_cast<unsigned long long>(m.bytes));
  }
  if (m.mode == kEager) return Status::Ok();  // TakeMeta copied the payload
  std::string desc = std::move(in.desc);
  for (int round = 0;; ++round) {
    RemoteRegion src;
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(desc, &src));
    // One-sided read straight into the user's buffer.
    Status st = dev->channel(peer).Read(buf, bytes, src, m.offset, dl);
    if (st.code() == ZC_ERR_UNSUPPORTED && round == 0) {
      ZC_RETURN_IF_ERROR(ack(kAckNeedStaged));
      // The sender answers with the meta data of a pool copy, in the ack class.
      std::string msg;
      Status r = dev->RecvControl(peer, AckTag(context, tag), &msg, dl);
      if (!r.ok()) return r.with_context(Format("recv of %zu bytes from peer %d (tag %d)", bytes, peer, tag));
      Ack head{};
      if (!ParseRestaged(msg, &head, &m, &desc))
        return Error(ZC_ERR_INTERNAL, "recv of %zu bytes from peer %d (tag %d): bad staged meta data",
                     bytes, peer, tag);
      continue;
    }
    if (!st.ok()) {
      IgnoreError(ack(kAckFailed), "telling the sender our read failed (it times out otherwise)");
      return st.with_context(Format("recv of %zu bytes from peer %d (tag %d)", bytes, peer, tag));
    }
    return ack(kAckOk);
  }
}

}  // namespace

// A lost peer fails the whole job (PeerHealth::OperationFailed).
Status Send(Device* dev, const void* buf, size_t bytes, int peer, int tag, uint32_t context) {
  const Meta m{bytes, kEager, 0, 0};
  bool done = false;
  Status st;
  if (DirectWanted(dev, peer, bytes)) st = SendDirect(dev, buf, bytes, peer, tag, context, &done);
  if (st.ok() && !done)
    st = bytes <= EagerLimit(dev->transport_to(peer))
             ? SendMeta(dev, peer, tag, context, m, buf, bytes, dev->NewDeadline())
             : SendRendezvous(dev, buf, bytes, peer, tag, context);
  dev->health().NoteFailure(st);
  return st;
}

bool TrySendNow(Device* dev, const void* buf, size_t bytes, int peer, int tag, uint32_t context) {
  if (bytes > EagerLimit(dev->transport_to(peer)) || DirectWanted(dev, peer, bytes)) return false;
  const Meta m{bytes, kEager, 0, 0};
  return dev->control()->TrySendNow(peer, MetaTag(context, tag), &m, sizeof(m), buf, bytes);
}

Status Recv(Device* dev, void* buf, size_t bytes, int peer, int tag, uint32_t context) {
  Status st = RecvOnce(dev, buf, bytes, peer, tag, context);
  dev->health().NoteFailure(st);
  return st;
}

}  // namespace zc
