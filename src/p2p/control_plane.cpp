#include "p2p/control_plane.h"

#include <cstring>

#include "p2p/channel_table.h"
#include "p2p/local_regions.h"
#include "p2p/peer_health.h"

namespace zc {
namespace {
SlotLayout ControlLayout(uint64_t max_message, uint32_t slots) {
  SlotLayout l;
  l.slots = slots;
  l.slot_bytes = max_message;
  l.spread = false;  // small messages: one connection, one progress thread per hop
  l.lazy_credit = true;
  l.compact = true;  // a small message is one cache line (flag, header, payload)
  return l;
}
}  // namespace

std::atomic<uint64_t>* ControlPlane::alert_word() const { return FlagAt(alert_, 0); }
std::atomic<uint64_t>* ControlPlane::cpu_word() const { return FlagAt(alert_, kCpuWordOffset); }

Status ControlPlane::Create(ChannelTable* channels, PeerHealth* health, LocalRegions* regions,
                           const Exchange& exchange, std::unique_ptr<ControlPlane>* out) {
  auto cp = std::unique_ptr<ControlPlane>(new ControlPlane());
  cp->health_ = health;
  int n = health->size(), me = health->rank();
  // Both ends of a pair agree on its transport, so on its slot size.
  auto max_message = [channels](int q) {
    return channels->kind(q) == TransportKind::kShm ? kMaxMessage : kMaxNetworkMessage;
  };
  auto layout_for = [&](int q) {
    return ControlLayout(max_message(q), channels->kind(q) == TransportKind::kTcp ? kTcpSlots : kSlots);
  };
  // Line 0: the alert word, which peers write; line 1: the CPU word, which
  // this rank writes and local peers read (cpu_word).
  ZC_RETURN_IF_ERROR(regions->Allocate(2 * 64, &cp->alert_));
  memset(cp->alert_->data(), 0, 2 * 64);
  std::vector<MemRegion*> inbound(n, nullptr), credit(n, nullptr);
  std::string blob = cp->alert_->remote().Serialize();
  for (int q = 0; q < n; ++q) {
    if (q != me) {
      ZC_RETURN_IF_ERROR(regions->Allocate(layout_for(q).reader_bytes(), &inbound[q]));
      ZC_RETURN_IF_ERROR(regions->Allocate(SlotLayout::kWriterBytes, &credit[q]));
      memset(inbound[q]->data(), 0, inbound[q]->size());
      memset(credit[q]->data(), 0, credit[q]->size());
      blob += inbound[q]->remote().Serialize() + credit[q]->remote().Serialize();
    } else {
      blob += RemoteRegion().Serialize() + RemoteRegion().Serialize();
    }
  }
  std::vector<std::string> all;
  ZC_RETURN_IF_ERROR(exchange("zc.control", blob, &all));
  const size_t d = RemoteRegion().Serialize().size();
  cp->peer_alert_.resize(n);
  cp->peers_.resize(n);
  for (int q = 0; q < n; ++q) {
    if (all[q].size() != d * (1 + 2 * static_cast<size_t>(n)))
      return Error(ZC_ERR_INTERNAL, "control plane: rank %d sent a descriptor blob of %zu bytes", q,
                   all[q].size());
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(all[q].substr(0, d), &cp->peer_alert_[q]));
    if (q == me) continue;
    RemoteRegion their_inbound_from_me, their_credit_for_me;
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(all[q].substr(d * (1 + 2 * me), d), &their_inbound_from_me));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(all[q].substr(d * (2 + 2 * me), d), &their_credit_for_me));
    auto p = std::make_unique<Peer>();
    p->send_mu.set_spins(health->spins());
    p->recv_mu.set_spins(health->spins());
    p->max_message = max_message(q);
    p->max_span = channels->kind(q) == TransportKind::kTcp ? kSpanSlots : 1;
    const SlotLayout layout = layout_for(q);
    // I write into q's inbound-from-me slots; q returns credits into my credit[q].
    p->writer.Init(channels, health, q, layout, credit[q], their_inbound_from_me);
    // q writes into my inbound[q]; I return credits into q's credit-for-me word.
    p->reader.Init(channels, health, q, layout, inbound[q], their_credit_for_me);
    cp->peers_[q] = std::move(p);
  }
  *out = std::move(cp);
  return Status::Ok();
}

Status ControlPlane::Send(int peer, uint64_t tag, const void* data, size_t bytes, const Deadline& dl) {
  return Send2(peer, tag, data, bytes, nullptr, 0, dl);
}

Status ControlPlane::SpanOf(const Peer& p, int peer, size_t bytes, uint32_t* n) const {
  *n = bytes <= p.max_message ? 1 : static_cast<uint32_t>((bytes + p.max_message - 1) / p.max_message);
  if (*n > p.max_span)
    return Error(ZC_ERR_INTERNAL, "control message of %zu bytes to peer %d exceeds %llu", bytes, peer,
                 static_cast<unsigned long long>(p.max_message * p.max_span));
  return Status::Ok();
}

Status ControlPlane::Send2(int peer, uint64_t tag, const void* a, size_t abytes, const void* b,
                           size_t bbytes, const Deadline& dl) {
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "control message to invalid peer %d", peer);
  Peer& p = *found;
  uint32_t n = 1;
  ZC_RETURN_IF_ERROR(SpanOf(p, peer, abytes + bbytes, &n));
  std::lock_guard<SpinLock> lock(p.send_mu);
  if (n == 1 && PutNow(p, peer, tag, a, abytes, b, bbytes)) return Status::Ok();
  return Write(p, tag, a, abytes, b, bbytes, n, dl);
}

bool ControlPlane::TrySendNow(int peer, uint64_t tag, const void* a, size_t abytes, const void* b,
                              size_t bbytes) {
  Peer* const found = PeerAt(peer);
  if (!found) return false;
  Peer& p = *found;
  if (abytes + bbytes > p.max_message) return false;
  std::lock_guard<SpinLock> lock(p.send_mu);
  return PutNow(p, peer, tag, a, abytes, b, bbytes);
}

// Shared memory, slot free: the message is a few stores (small zc_send).
// The caller holds p.send_mu; the message fits one slot.
bool ControlPlane::PutNow(Peer& p, int peer, uint64_t tag, const void* a, size_t abytes, const void* b,
                          size_t bbytes) {
  if (!health_->KnownHealthy(peer) || !p.writer.TryPutMapped(a, abytes, b, bbytes, tag, 1)) return false;
  p.last_at[Bucket(tag)] = p.writer.sent();
  p.answered[Bucket(tag)] = false;
  return true;
}

Status ControlPlane::Write(Peer& p, uint64_t tag, const void* a, size_t abytes, const void* b,
                           size_t bbytes, uint32_t n, const Deadline& dl) {
  uint64_t aux[2] = {tag, 1};
  Status st;
  if (n == 1) {
    st = p.writer.Put2(a, abytes, b, bbytes, aux, 2, dl);
  } else {
    const SrcPiece pieces[2] = {{a, abytes}, {b, bbytes}};
    st = p.writer.PutSpan(pieces, 2, abytes + bbytes, n, aux, 2, dl);
  }
  if (st.ok()) {
    p.last_at[Bucket(tag)] = p.writer.sent();
    p.answered[Bucket(tag)] = false;
  }
  return st;
}

bool ControlPlane::AnsweredLast(int peer, uint64_t tag) {
  Peer* const found = PeerAt(peer);
  if (!found) return false;
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.send_mu);
  return p.answered[Bucket(tag)];
}

Status ControlPlane::RunAnswer(Peer& p, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* fresh) {
  *fresh = p.last_at[Bucket(tag)] <= seen;
  if (!*fresh) return Status::Ok();
  Status st = write();
  // It counts as the tag's latest message, at the stream's current place:
  // the peer has taken every message up to here once it has its flag.
  p.last_at[Bucket(tag)] = p.writer.sent();
  p.answered[Bucket(tag)] = true;
  p.offer_refused[Bucket(tag)] = false;
  return st;
}

Status ControlPlane::Offer(int peer, uint64_t tag, const OfferWrite& write) {
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "offer to invalid peer %d", peer);
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.send_mu);
  Status st = write(p.last_at[Bucket(tag)]);
  p.last_at[Bucket(tag)] = p.writer.sent();
  return st;
}

void ControlPlane::NoteOffer(int peer, uint64_t tag, bool taken) {
  Peer* const found = PeerAt(peer);
  if (!found) return;
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.send_mu);
  p.offer_refused[Bucket(tag)] = !taken;
  if (taken) p.answered[Bucket(tag)] = true;
}

bool ControlPlane::OfferWanted(int peer, uint64_t tag) {
  Peer* const found = PeerAt(peer);
  if (!found) return false;
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.send_mu);
  return !p.offer_refused[Bucket(tag)];
}

Status ControlPlane::Answer(int peer, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* fresh) {
  *fresh = false;
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "answer to invalid peer %d", peer);
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.send_mu);
  return RunAnswer(p, tag, seen, write, fresh);
}

Status ControlPlane::TryAnswer(int peer, uint64_t tag, uint64_t seen, const AnswerWrite& write, bool* ran,
                               bool* fresh) {
  *ran = false;
  *fresh = true;  // until known otherwise: a caller that could not look tries again
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "answer to invalid peer %d", peer);
  Peer& p = *found;
  std::unique_lock<SpinLock> lock(p.send_mu, std::try_to_lock);
  if (!lock.owns_lock()) return Status::Ok();
  Status st = RunAnswer(p, tag, seen, write, fresh);
  *ran = *fresh;
  return st;
}

Status ControlPlane::TryTake(Peer& p, uint64_t tag, Consumer consume, void* ctx, bool* done,
                             const Deadline& dl, bool defer_credit, const Look& look) {
  Status st = TakeOne(p, tag, consume, ctx, done, dl, look);
  if (defer_credit) {
    p.credit_pending.store(p.reader.credit_pending(), std::memory_order_relaxed);
    return st;
  }
  // Lazily: usually the receiver answers next, and the credit travels with it.
  Status credit = p.reader.Credit(dl, /*lazy=*/true);
  p.credit_pending.store(false, std::memory_order_relaxed);
  if (!st.ok()) return st;
  return credit;
}

Status ControlPlane::FlushCredits() {
  Status first;
  for (auto& pp : peers_) {
    if (!pp || !pp->credit_pending.load(std::memory_order_relaxed)) continue;
    std::lock_guard<SpinLock> lock(pp->recv_mu);
    Status st = pp->reader.Credit(health_->NewDeadline());
    pp->credit_pending.store(false, std::memory_order_relaxed);
    if (first.ok()) first = st;
  }
  return first;
}

Status ControlPlane::TakeOne(Peer& p, uint64_t tag, Consumer consume, void* ctx, bool* done,
                             const Deadline& dl, const Look& look) {
  *done = false;
  auto accepts = [&](const Piece& first) { return !look.accept || look.accept(ctx, first); };
  for (;;) {
    for (auto it = p.queued.begin(); it != p.queued.end(); ++it)
      if (it->first == tag && accepts(Piece{it->second.data(), it->second.size()})) {
        std::string msg = std::move(it->second);
        p.queued.erase(it);
        p.queued_n.store(p.queued.size(), std::memory_order_relaxed);
        *done = true;
        const Piece whole{msg.data(), msg.size()};
        return consume(ctx, &whole, 1);
      }
    const void* payload;
    const SlotHeader* h = p.reader.TryNext(&payload);
    if (!h) return Status::Ok();
    // Left in its slot (held until a Release that a later look makes).
    if (look.next_only && h->aux[0] != tag) return Status::Ok();
    const Piece whole{static_cast<const char*>(payload), h->bytes > p.max_message ? p.max_message : h->bytes};
    if (h->aux[1] <= 1 && h->aux[0] == tag && accepts(whole)) {
      // The usual case: the next message is the one asked for, in one slot;
      // consumed in place (the slot stays ours until Release).
      Status st = consume(ctx, &whole, 1);
      *done = true;
      if (!st.ok()) {
        IgnoreError(p.reader.Release(dl, 1, /*credit=*/false), "a failed consumer's slot");
        return st;
      }
      return p.reader.Release(dl, 1, /*credit=*/false);
    }
    // A message spanning n slots: its later parts are in flight (the writer
    // had all n slots free before it wrote the first).
    const uint64_t n = h->aux[1] <= 1 ? 1 : h->aux[1];
    if (n > p.max_span) return Error(ZC_ERR_INTERNAL, "control message from peer %d spans %llu slots",
                                     p.reader.peer(), static_cast<unsigned long long>(n));
    const uint64_t msg_tag = h->aux[0];
    const SlotHeader* const first = h;
    const void* const first_payload = payload;
    Piece parts[kSlots];
    // The last part first: one wait (one wake-up) for the whole message
    // rather than one per part; the others have then arrived too (the
    // parts travel in order on one connection).
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t i = j == 0 ? static_cast<uint32_t>(n - 1) : j - 1;
      if (i) {
        Status st = p.reader.Peek(i, &h, &payload, health_->NewDeadline());
        if (!st.ok()) return st.with_context("the rest of a control message spanning slots");
      } else {
        h = first;
        payload = first_payload;
      }
      parts[i] = {static_cast<const char*>(payload), h->bytes > p.max_message ? p.max_message : h->bytes};
    }
    if (msg_tag == tag && accepts(parts[0])) {
      // In place: the slots stay ours until Release.
      Status st = consume(ctx, parts, static_cast<int>(n));
      Status rel = p.reader.Release(dl, static_cast<uint32_t>(n), /*credit=*/false);
      *done = true;
      if (!st.ok()) return st;
      return rel;
    }
    std::string copy;
    ZC_RETURN_IF_ERROR(CopyOut(&copy, parts, static_cast<int>(n)));
    p.queued.emplace_back(msg_tag, std::move(copy));
    p.queued_n.store(p.queued.size(), std::memory_order_relaxed);
    ZC_RETURN_IF_ERROR(p.reader.Release(dl, static_cast<uint32_t>(n), /*credit=*/false));
  }
}

Status ControlPlane::TrySend2(int peer, uint64_t tag, const void* a, size_t abytes, const void* b,
                              size_t bbytes, bool* sent) {
  *sent = false;
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "control message to invalid peer %d", peer);
  Peer& p = *found;
  uint32_t n = 1;
  ZC_RETURN_IF_ERROR(SpanOf(p, peer, abytes + bbytes, &n));
  std::unique_lock<SpinLock> lock(p.send_mu, std::try_to_lock);
  if (!lock.owns_lock() || !p.writer.HasCredits(n)) return Status::Ok();
  ZC_RETURN_IF_ERROR(Write(p, tag, a, abytes, b, bbytes, n, health_->NewDeadline()));
  *sent = true;
  return Status::Ok();
}

bool ControlPlane::TryRecv(int peer, uint64_t tag, std::string* msg, Status* st, bool defer_credit) {
  return TryRecvWith(peer, tag, &ControlPlane::CopyOut, msg, st, defer_credit) && st->ok();
}

bool ControlPlane::TryRecvWith(int peer, uint64_t tag, Consumer consume, void* ctx, Status* st,
                               bool defer_credit, Acceptor accept, uint64_t* seen) {
  *st = Status::Ok();
  Peer* const found = PeerAt(peer);
  if (!found) {
    *st = Error(ZC_ERR_INVALID_ARG, "control message from invalid peer %d", peer);
    return false;
  }
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.recv_mu);
  bool done = false;
  Look look;
  look.accept = accept;
  *st = TryTake(p, tag, consume, ctx, &done, Deadline(1.0), defer_credit, look);
  // Every arrival up to here was looked at (under the lock): what comes
  // later lies past `seen` in the stream.
  if (seen && !done) *seen = p.reader.received();
  return done;
}

bool ControlPlane::TryRecvNext(int peer, uint64_t tag, std::string* msg, Status* st) {
  *st = Status::Ok();
  Peer* const found = PeerAt(peer);
  if (!found) {
    *st = Error(ZC_ERR_INVALID_ARG, "control message from invalid peer %d", peer);
    return false;
  }
  Peer& p = *found;
  std::lock_guard<SpinLock> lock(p.recv_mu);
  bool done = false;
  Look look;
  look.next_only = true;
  *st = TryTake(p, tag, &ControlPlane::CopyOut, msg, &done, Deadline(1.0), /*defer_credit=*/false, look);
  return done && st->ok();
}

Status ControlPlane::CopyOut(void* ctx, const Piece* pieces, int n) {
  auto* out = static_cast<std::string*>(ctx);
  out->clear();
  for (int i = 0; i < n; ++i) out->append(pieces[i].data, pieces[i].bytes);
  return Status::Ok();
}

Status ControlPlane::Recv(int peer, uint64_t tag, std::string* msg, const Deadline& dl) {
  return RecvWith(peer, tag, &ControlPlane::CopyOut, msg, dl);
}

Status ControlPlane::RecvWith(int peer, uint64_t tag, Consumer consume, void* ctx,
                              const Deadline& dl, Acceptor accept, Stop stop) {
  Peer* const found = PeerAt(peer);
  if (!found)
    return Error(ZC_ERR_INVALID_ARG, "control message from invalid peer %d", peer);
  Peer& p = *found;
  Backoff backoff = health_->BackoffFor(peer);
  bool done = false;
  auto take = [&] {
    std::lock_guard<SpinLock> lock(p.recv_mu);
    Look look;
    look.accept = accept;
    return TryTake(p, tag, consume, ctx, &done, dl, /*defer_credit=*/false, look);
  };
  for (;;) {
    if (stop && stop(ctx)) return Status::Ok();
    const bool look = p.reader.Ready() || p.queued_n.load(std::memory_order_relaxed);
    // Take the lock only when there is something to look at: spinning on an
    // empty stream costs two loads per turn.
    if (look) {
      Status st = take();
      if (done || !st.ok()) return st;
    }
    // Nothing yet: wait outside the lock so other tags' receivers progress;
    // spin, then yield, then sleep. Health and deadline after the pause: a
    // message that comes within the first spins costs no clock read.
    backoff.Pause();
    if (backoff.Due()) {
      Status health = health_->Health(peer);
      if (!health.ok()) {
        // The message may have come (during the pause) before the peer went
        // away or the job was aborted: it is still ours to take.
        Status st = take();
        return done ? st : stop && stop(ctx) ? Status::Ok() : health;
      }
      if (dl.expired())
        return Error(ZC_ERR_TIMEOUT, "waited %.1f s for a message from peer %d (ZC_TIMEOUT=%g s)",
                     dl.elapsed_s(), peer, health_->timeout_s());
    }
  }
}

}  // namespace zc
