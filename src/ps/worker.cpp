#include "ps/worker.h"

#include <cstring>

#include "collectives/dtype.h"
#include "common/log.h"
#include "p2p/device.h"
#include "p2p/slot_stream.h"

namespace zc::ps {

Worker::Worker(Shared* shared) : sh_(shared) {}

Worker::~Worker() {
  for (auto& [key, k] : keys_) FreeKey(k.get());
}

void Worker::FreeKey(Key* k) {
  for (auto& ps : k->s) {
    if (ps.reply_slots) IgnoreError(sh_->group->Free(ps.reply_slots->data()), "freeing a key: best effort");
    if (ps.push_credits)
      IgnoreError(sh_->group->Free(ps.push_credits->data()), "freeing a key: best effort");
    ps.reply_slots = ps.push_credits = nullptr;
  }
}

size_t Worker::bytes_of(const Key* k) const { return k->count * k->es; }

Status Worker::Alert() const {
  if (!sh_->my_alerts) return Status::Ok();
  for (size_t s = 0; s < sh_->servers.size(); ++s) {
    uint64_t a = FlagAt(sh_->my_alerts, 64 * s)->load(std::memory_order_acquire);
    if (!a) continue;
    auto code = static_cast<zc_status>(a >> 32);
    int culprit = static_cast<int>(a & 0xffffffff) - 1;
    int server = sh_->servers[s];
    if (culprit >= 0 && culprit != server)
      return Status(code, Format("server rank %d failed: rank %d lost or failed (%s)", server, culprit,
                                 zc_status_string(code)));
    return Status(code, Format("server rank %d failed (%s)", server, zc_status_string(code)));
  }
  return Status::Ok();
}

Status Worker::Wait(const std::atomic<uint64_t>* word, uint64_t value, int server, const char* what,
                    const Deadline& dl) {
  if (word->load(std::memory_order_acquire) >= value) return Status::Ok();
  Group* g = sh_->group;
  const int sr = sh_->servers[server];
  Backoff bo = g->device()->health().NewBackoff(sr != g->rank() &&
                                                g->device()->health().FlagsNotified(g->device_rank(sr)));
  for (;;) {
    bo.Pause();
    if (word->load(std::memory_order_acquire) >= value) return Status::Ok();
    ZC_RETURN_IF_ERROR(Alert());
    if (bo.Due()) {
      // The server we wait for, then every other member (a lost worker
      // stalls the round; its server tells us through the alert, but a
      // lost server of another chunk should fail us too).
      for (int i = -1; i < g->size(); ++i) {
        int r = i < 0 ? sr : i;
        if (r == g->rank() || (i >= 0 && r == sr)) continue;
        Status st = g->Health(r);
        if (!st.ok()) {
          if (word->load(std::memory_order_acquire) >= value) return Status::Ok();
          bool is_server = false;
          for (int s : sh_->servers) is_server |= s == r;
          return st.with_context(Format("%s rank %d lost", is_server ? "server" : "rank", r));
        }
      }
      if (dl.expired())
        return Error(ZC_ERR_TIMEOUT, "waited %.1f s for %s from server rank %d (ZC_TIMEOUT=%g s)",
                     dl.elapsed_s(), what, sr, g->config().timeout_s);
    }
  }
}

Status Worker::Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init) {
  ZC_RETURN_IF_ERROR(broken_);
  if (keys_.count(key)) return Error(ZC_ERR_INVALID_ARG, "key %llu is already declared",
                                     static_cast<unsigned long long>(key));
  std::unique_ptr<Key> k = CutKey(key, count, dtype);
  Status st = AllocateReplySlots(k.get());
  if (!st.ok()) {
    FreeKey(k.get());
    return st.with_context(Format("key %llu: reply slots", static_cast<unsigned long long>(key)));
  }
  Deadline dl = sh_->group->NewDeadline();
  const bool has_init = init && sh_->worker_index == 0;
  Status verdict;  // the first server's refusal
  st = Announce(*k, has_init, dl);
  if (st.ok()) st = AwaitAnswers(k.get(), dl, &verdict);
  if (st.ok() && !verdict.ok()) {
    // Every server saw the same declarations, so none kept this key; the
    // chunk count is not advanced anywhere.
    ++declarations_;
    FreeKey(k.get());
    return verdict;
  }
  if (!st.ok()) {
    broken_ = st.with_context("an earlier declaration failed");
    FreeKey(k.get());
    return st;
  }
  ++declarations_;
  chunks_before_ += k->chunks.size();
  if (has_init) {
    if (Status sent = SendInitialValue(*k, init, dl); !sent.ok()) {
      FreeKey(k.get());
      return sent;
    }
  }
  keys_[key] = std::move(k);
  return Status::Ok();
}

std::unique_ptr<Worker::Key> Worker::CutKey(uint64_t key, size_t count, zc_dtype dtype) const {
  auto k = std::make_unique<Key>();
  k->key = key;
  k->count = count;
  k->dtype = dtype;
  k->es = DtypeSize(dtype);
  k->chunks = sh_->placement.Cut(key, count, k->es, chunks_before_);
  k->s.resize(sh_->servers.size());
  for (const auto& c : k->chunks) {
    PerServer& ps = k->s[c.server];
    ps.used = true;
    ps.layout.n = c.slot + 1;
    ps.layout.capacity = std::max<uint64_t>(ps.layout.capacity, c.elems * k->es);
  }
  return k;
}

Status Worker::AllocateReplySlots(Key* k) {
  for (auto& ps : k->s) {
    if (!ps.used) continue;
    ZC_RETURN_IF_ERROR(sh_->group->Allocate(ps.layout.reader_bytes(), &ps.reply_slots));
    ZC_RETURN_IF_ERROR(sh_->group->Allocate(ps.layout.writer_bytes(), &ps.push_credits));
    memset(ps.reply_slots->data(), 0, ps.layout.reader_bytes());
    memset(ps.push_credits->data(), 0, ps.layout.writer_bytes());
  }
  return Status::Ok();
}

Status Worker::Announce(const Key& k, bool has_init, const Deadline& dl) {
  // Every server hears of every declaration (it keeps the chunk count that
  // round-robin placement continues from, and checks that workers agree).
  DeclareHead h{declarations_, k.key, k.count, static_cast<uint32_t>(k.dtype), has_init ? 1u : 0u};
  for (size_t s = 0; s < sh_->servers.size(); ++s) {
    std::string msg = Pack(h);
    if (k.s[s].used) msg += k.s[s].reply_slots->remote().Serialize() + k.s[s].push_credits->remote().Serialize();
    Status st = sh_->mailbox.Send(sh_->servers[s], kDeclareTag, msg, dl);
    if (!st.ok()) return st.with_context(Format("declaration to server rank %d", sh_->servers[s]));
  }
  return Status::Ok();
}

Status Worker::AwaitAnswer(int server, uint64_t key, const Deadline& dl, std::string* msg) {
  Group* g = sh_->group;
  Backoff bo = g->device()->health().NewBackoff();
  for (;;) {
    Status rs;
    if (sh_->mailbox.TryRecv(server, kAckTag, msg, &rs)) return Status::Ok();
    ZC_RETURN_IF_ERROR(rs);
    bo.Pause();
    if (!bo.Due()) continue;
    ZC_RETURN_IF_ERROR(Alert());
    for (int r = 0; r < g->size(); ++r)
      if (r != g->rank() && !g->Health(r).ok()) return g->Health(r).with_context(Format("rank %d lost", r));
    if (dl.expired())
      return Error(ZC_ERR_TIMEOUT, "waited %.1f s for server rank %d to accept key %llu: does every "
                   "worker declare it? (ZC_TIMEOUT=%g s)", dl.elapsed_s(), server,
                   static_cast<unsigned long long>(key), g->config().timeout_s);
  }
}

Status Worker::AwaitAnswers(Key* k, const Deadline& dl, Status* verdict) {
  // Every server answers once every worker has declared this key.
  for (size_t s = 0; s < sh_->servers.size(); ++s) {
    std::string msg;
    ZC_RETURN_IF_ERROR(AwaitAnswer(sh_->servers[s], k->key, dl, &msg));
    Answer a;
    if (!ParseAnswer(msg, &a))
      return Error(ZC_ERR_INTERNAL, "short declaration answer from server rank %d", sh_->servers[s]);
    if (a.head.code != ZC_OK) {
      if (verdict->ok()) *verdict = StatusFromPeer(a.head.code, a.text);
      continue;
    }
    PerServer& ps = k->s[s];
    if (!ps.used) continue;
    RemoteRegion push_slots, reply_credits;
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(a.push_slots, &push_slots));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(a.reply_credits, &reply_credits));
    int peer = sh_->group->device_rank(sh_->servers[s]);
    ps.push.Init(sh_->group->device(), peer, ps.layout, ps.push_credits, push_slots);
    ps.reply.Init(sh_->group->device(), peer, ps.layout, ps.reply_slots, reply_credits);
  }
  return Status::Ok();
}

Status Worker::SendInitialValue(Key& k, const void* init, const Deadline& dl) {
  // The first worker's initial value goes into every chunk's slot ahead of
  // any push; servers serve the chunk only once it is in.
  const char* src = static_cast<const char*>(init);
  for (const auto& c : k.chunks) {
    MsgHeader mh{};
    mh.kind = kInit;
    mh.bytes = c.elems * k.es;
    mh.key = k.key;
    Status st = k.s[c.server].push.Put(c.slot, mh, src + c.offset * k.es, mh.bytes, dl);
    if (!st.ok()) {
      broken_ = st.with_context("initial value");
      return st.with_context(Format("initial value of key %llu to server rank %d",
                                    static_cast<unsigned long long>(k.key), sh_->servers[c.server]));
    }
  }
  return Status::Ok();
}

Status Worker::KeyBytes(uint64_t key, size_t* bytes) const {
  auto it = keys_.find(key);
  if (it == keys_.end())
    return Error(ZC_ERR_INVALID_ARG, "key %llu is not declared", static_cast<unsigned long long>(key));
  *bytes = bytes_of(it->second.get());
  return Status::Ok();
}

Status Worker::AdmitPush(uint64_t key, Key** out, uint64_t* round) {
  auto it = keys_.find(key);
  if (it == keys_.end())
    return Error(ZC_ERR_INVALID_ARG, "key %llu is not declared", static_cast<unsigned long long>(key));
  Key* k = it->second.get();
  if (!sh_->options.async) {
    if (k->pushed)
      return Error(ZC_ERR_INVALID_ARG, "key %llu: pushed twice in round %llu (pull before pushing again)",
                   static_cast<unsigned long long>(key), static_cast<unsigned long long>(k->pulls + 1));
    k->pushed = true;
  }
  *round = ++k->pushes;
  *out = k;
  return Status::Ok();
}

Status Worker::AdmitPull(uint64_t key, Key** out, uint64_t* round) {
  auto it = keys_.find(key);
  if (it == keys_.end())
    return Error(ZC_ERR_INVALID_ARG, "key %llu is not declared", static_cast<unsigned long long>(key));
  Key* k = it->second.get();
  if (!sh_->options.async) {
    if (!k->pushed)
      return Error(ZC_ERR_INVALID_ARG, "key %llu: pull before push in round %llu (synchronous mode: "
                   "each round is push, then pull)", static_cast<unsigned long long>(key),
                   static_cast<unsigned long long>(k->pulls + 1));
    k->pushed = false;
  }
  *round = ++k->pulls;
  *out = k;
  return Status::Ok();
}

Status Worker::DoPush(Key* k, const void* buf, uint64_t round) {
  ZC_RETURN_IF_ERROR(broken_);
  Deadline dl = sh_->group->NewDeadline();
  const char* src = static_cast<const char*>(buf);
  for (const auto& c : k->chunks) {
    PerServer& ps = k->s[c.server];
    ZC_RETURN_IF_ERROR(Wait(ps.push.credit(c.slot), ps.push.sent(c.slot), c.server, "a push slot", dl));
    MsgHeader h{};
    h.kind = kPush;
    h.round = round;
    h.bytes = c.elems * k->es;
    h.key = k->key;
    Status st = ps.push.Put(c.slot, h, src + c.offset * k->es, h.bytes, dl);
    if (!st.ok()) return st.with_context(Format("push to server rank %d", sh_->servers[c.server]));
  }
  return Status::Ok();
}

Status Worker::DoPull(Key* k, void* buf, uint64_t round) {
  ZC_RETURN_IF_ERROR(broken_);
  Deadline dl = sh_->group->NewDeadline();
  if (sh_->options.async) {
    // A request per chunk first, so that every server works at once.
    for (const auto& c : k->chunks) {
      PerServer& ps = k->s[c.server];
      ZC_RETURN_IF_ERROR(Wait(ps.push.credit(c.slot), ps.push.sent(c.slot), c.server, "a push slot", dl));
      MsgHeader h{};
      h.kind = kPull;
      h.round = round;
      h.key = k->key;
      Status st = ps.push.Put(c.slot, h, nullptr, 0, dl);
      if (!st.ok()) return st.with_context(Format("pull request to server rank %d", sh_->servers[c.server]));
    }
  }
  char* dst = static_cast<char*>(buf);
  for (const auto& c : k->chunks) {
    PerServer& ps = k->s[c.server];
    ZC_RETURN_IF_ERROR(Wait(ps.reply.flag(c.slot), ps.reply.consumed(c.slot) + 1, c.server, "a pull reply", dl));
    const MsgHeader* h = ps.reply.header(c.slot);
    const uint64_t bytes = c.elems * k->es;
    if (h->kind != kReply || h->round != round || h->bytes != bytes || h->key != k->key)
      return Error(ZC_ERR_INTERNAL, "key %llu: reply from server rank %d is for key %llu round %llu "
                   "(%llu bytes), expected round %llu (%llu bytes)",
                   static_cast<unsigned long long>(k->key), sh_->servers[c.server],
                   static_cast<unsigned long long>(h->key), static_cast<unsigned long long>(h->round),
                   static_cast<unsigned long long>(h->bytes), static_cast<unsigned long long>(round),
                   static_cast<unsigned long long>(bytes));
    memcpy(dst + c.offset * k->es, ps.reply.payload(c.slot), bytes);
    Status st = ps.reply.Release(c.slot, dl);
    if (!st.ok()) return st.with_context(Format("reply credit to server rank %d", sh_->servers[c.server]));
  }
  return Status::Ok();
}

Status Worker::Bye() {
  Group* g = sh_->group;
  Deadline dl = g->NewDeadline();
  Status first;
  if (broken_.ok()) {
    // Asynchronous pushes are applied on arrival: wait until every one is
    // taken, so none is lost when this worker goes.
    for (auto& [key, k] : keys_)
      for (const auto& c : k->chunks) {
        PerServer& ps = k->s[c.server];
        Status st = Wait(ps.push.credit(c.slot), ps.push.sent(c.slot), c.server, "the last credits", dl);
        if (!st.ok() && first.ok()) first = st;
        if (!st.ok()) break;
      }
  }
  for (size_t s = 0; s < sh_->servers.size(); ++s) {
    int r = sh_->servers[s];
    if (r != g->rank() && !g->KnownHealth(r).ok()) continue;
    Status st = sh_->mailbox.Send(r, kByeTag, std::string(), dl);
    if (!st.ok() && first.ok()) first = st.with_context(Format("goodbye to server rank %d", r));
  }
  return first;
}

}  // namespace zc::ps
