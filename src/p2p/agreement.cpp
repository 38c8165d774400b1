#include "p2p/agreement.h"

#include <cstring>

#include "common/log.h"
#include "p2p/control_tag.h"
#include "p2p/group.h"

namespace zc {
namespace {

enum Kind : uint32_t { kRound = 1, kDecided = 2 };

struct Header {
  uint32_t kind;
  uint32_t round;
  uint64_t flags;
  uint64_t max;
  uint32_t words;
  uint32_t reserved;
};

std::string Encode(Kind kind, uint32_t round, const AgreedValue& v) {
  const size_t words = v.failed.size();
  Header h{kind, round, v.flags, v.max, static_cast<uint32_t>(words), 0};
  std::string out(sizeof(h) + 2 * words * sizeof(uint64_t), '\0');
  memcpy(&out[0], &h, sizeof(h));
  if (words) {
    memcpy(&out[sizeof(h)], v.failed.data(), words * sizeof(uint64_t));
    memcpy(&out[sizeof(h) + words * sizeof(uint64_t)], v.contributed.data(), words * sizeof(uint64_t));
  }
  return out;
}

Status Decode(const std::string& msg, size_t words, int peer, Header* h, AgreedValue* v) {
  if (msg.size() != sizeof(Header) + 2 * words * sizeof(uint64_t))
    return Error(ZC_ERR_INTERNAL, "agreement message of %zu bytes from peer %d", msg.size(), peer);
  memcpy(h, msg.data(), sizeof(*h));
  if ((h->kind != kRound && h->kind != kDecided) || h->words != words)
    return Error(ZC_ERR_INTERNAL, "malformed agreement message from peer %d", peer);
  v->flags = h->flags;
  v->max = h->max;
  v->failed.assign(words, 0);
  v->contributed.assign(words, 0);
  if (words) {
    memcpy(v->failed.data(), msg.data() + sizeof(Header), words * sizeof(uint64_t));
    memcpy(v->contributed.data(), msg.data() + sizeof(Header) + words * sizeof(uint64_t), words * sizeof(uint64_t));
  }
  return Status::Ok();
}

// One member's run of the agreement (see agreement.h).
class Round {
 public:
  Round(Group* g, uint32_t instance, AgreedValue* value, const Deadline& dl)
      : g_(g),
        n_(g->size()),
        me_(g->rank()),
        tag_(ControlTag(0, TagClass::kAgree, instance)),
        value_(value),
        dl_(dl),
        alive_(static_cast<size_t>(n_), true),
        heard_(static_cast<size_t>(n_), false),
        decided_from_(static_cast<size_t>(n_), false) {
    for (int r = 0; r < n_; ++r)
      if (r != me_ && !g_->Health(r).ok()) alive_[r] = false;
  }

  Status Run() {
    // received_prev starts as every member: a round that hears from fewer
    // (someone died, before or during) is never the deciding one.
    std::vector<bool> prev(static_cast<size_t>(n_), true);
    for (uint32_t round = 1;; ++round) {
      SendAll(Encode(kRound, round, *value_));
      std::vector<bool> got(static_cast<size_t>(n_), false);
      got[me_] = true;
      for (int p = 0; p < n_; ++p) {
        if (p == me_ || !alive_[p]) continue;
        Header h;
        AgreedValue v;
        bool have = false;
        ZC_RETURN_IF_ERROR(Next(p, &h, &v, &have));
        if (!have) continue;  // lost
        if (h.kind == kDecided) {
          *value_ = v;
          decided_from_[p] = true;
          return Finish();
        }
        if (h.round != round)
          return Error(ZC_ERR_INTERNAL, "agreement: round %u message from peer %d in round %u", h.round, p, round);
        value_->Merge(v);
        got[p] = true;
      }
      if (got == prev) return Finish();
      prev = got;
    }
  }

 private:
  // The next agreement message from p; *have = false when p is lost first.
  Status Next(int p, Header* h, AgreedValue* v, bool* have) {
    std::string msg;
    Status st = g_->RecvControl(p, tag_, &msg, dl_);
    if (st.code() == ZC_ERR_PEER_LOST) {
      alive_[p] = false;
      *have = false;
      return Status::Ok();
    }
    if (!st.ok()) return st.with_context(Format("agreement: waiting for rank %d", p));
    ZC_RETURN_IF_ERROR(Decode(msg, value_->failed.size(), p, h, v));
    heard_[p] = true;
    *have = true;
    return Status::Ok();
  }

  void SendAll(const std::string& msg) {
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || !alive_[p] || decided_from_[p]) continue;
      Status st = g_->SendControl(p, tag_, msg, dl_);
      if (st.code() == ZC_ERR_PEER_LOST) alive_[p] = false;
      else IgnoreError(st, "agreement: a peer that cannot be told is waited for (and found lost) later");
    }
  }

  // Decided: tell the others (they may not have heard the decider), then
  // take one message from every live member not heard yet: everything it
  // sent before the agreement (its alerts of the old epoch) has then landed.
  Status Finish() {
    SendAll(Encode(kDecided, 0, *value_));
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || !alive_[p] || heard_[p]) continue;
      Header h;
      AgreedValue v;
      bool have = false;
      ZC_RETURN_IF_ERROR(Next(p, &h, &v, &have));
    }
    return Status::Ok();
  }

  Group* g_;
  const int n_, me_;
  const uint64_t tag_;  // scoped by the group's context in Send/RecvControl
  AgreedValue* value_;
  const Deadline& dl_;
  std::vector<bool> alive_, heard_, decided_from_;
};

}  // namespace

void AgreedValue::Merge(const AgreedValue& o) {
  flags &= o.flags;
  if (o.max > max) max = o.max;
  for (size_t i = 0; i < failed.size() && i < o.failed.size(); ++i) failed[i] |= o.failed[i];
  for (size_t i = 0; i < contributed.size() && i < o.contributed.size(); ++i) contributed[i] |= o.contributed[i];
}

int AgreedValue::CountFailed() const {
  int n = 0;
  for (uint64_t w : failed) n += __builtin_popcountll(w);
  return n;
}

AgreedValue ProposalOf(const Group* g) {
  HealthScope scope = HealthScope::FaultTolerant(&g->device()->health());
  AgreedValue v;
  v.failed.assign((static_cast<size_t>(g->size()) + 63) / 64, 0);
  v.contributed.assign(v.failed.size(), 0);
  v.contributed[static_cast<size_t>(g->rank()) / 64] |= uint64_t{1} << (g->rank() % 64);
  for (int r = 0; r < g->size(); ++r)
    if (r != g->rank() && !g->Health(r).ok()) v.SetFailed(r);
  return v;
}

Status Agree(Group* g, uint32_t instance, AgreedValue* value, const Deadline& dl) {
  if (value->failed.size() != (static_cast<size_t>(g->size()) + 63) / 64 ||
      value->contributed.size() != value->failed.size())
    return Error(ZC_ERR_INTERNAL, "agreement: a value for %zu words, the group needs %d ranks",
                 value->failed.size(), g->size());
  if (g->size() == 1) return Status::Ok();
  HealthScope scope = HealthScope::FaultTolerant(&g->device()->health());
  // What this thread's Abort is still telling the peers goes out first.
  g->device()->health().FlushAlerts();
  Status st = Round(g, instance, value, dl).Run();
  // Who contributed nothing died before anyone heard it (a live member's
  // proposal is in every decision).
  if (st.ok())
    for (int r = 0; r < g->size(); ++r)
      if (!AgreedValue::Bit(value->contributed, r)) value->SetFailed(r);
  if (st.ok())
    ZC_INFO(kCommon, "agreement #%u of %d ranks: flags %#llx, max %llu, %d failed", instance, g->size(),
            static_cast<unsigned long long>(value->flags), static_cast<unsigned long long>(value->max),
            value->CountFailed());
  return st;
}

}  // namespace zc
