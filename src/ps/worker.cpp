#include "ps/worker.h"

#include <cstring>

#include "collectives/dtype.h"
#include "common/log.h"
#include "common/stream_copy.h"
#include "p2p/device.h"
#include "p2p/slot_stream.h"
#include "ps/server.h"

namespace zc::ps {

Worker::Worker(Shared* shared, Server* colocated)
    : sh_(shared), colocated_(colocated), declared_(shared->placement.servers()) {
  // The engine sleeps on notifications only when every flag it waits for is
  // stored by a thread of this process (tcp's progress threads, verbs', or
  // this rank's server) and wakes it.
  Group* g = sh_->group;
  notified_ = true;
  for (int r : sh_->servers)
    notified_ = notified_ && (r == g->rank() || g->device()->health().FlagsNotified(g->device_rank(r)));
  // The co-located server's pieces are pushed by the other workers too.
  if (colocated_)
    for (int r : sh_->workers)
      notified_ = notified_ && (r == g->rank() || g->device()->health().FlagsNotified(g->device_rank(r)));
}

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
        if (r == g->rank() || (i >= 0 && r == sr) || sh_->Tolerated(r)) continue;
        Status st = g->HealthNaming(r, sh_->IsServer(r) ? "server" : "rank");
        if (!st.ok()) {
          if (word->load(std::memory_order_acquire) >= value) return Status::Ok();
          return st;
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
  const bool has_init = init != nullptr;  // sent where a server's answer names this worker
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
  declared_.Add(k->placed, k->es);
  if (k->sends_init) {
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
  k->placed = sh_->placement.Cut(key, count, k->es, declared_);
  k->chunks = sh_->placement.Pieces(k->placed, k->es);
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
    for (int r = 0; r < g->size(); ++r) {
      if (r == g->rank() || sh_->Tolerated(r)) continue;
      Status st = g->HealthNaming(r, "rank");
      if (!st.ok()) return st;
    }
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
    ps.send_init = a.head.init_from == sh_->group->rank();
    k->sends_init |= ps.send_init;
    RemoteRegion push_slots, reply_credits, results;
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(a.push_slots, &push_slots));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(a.reply_credits, &reply_credits));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(a.results, &results));
    Device* dev = sh_->group->device();
    int peer = sh_->group->device_rank(sh_->servers[s]);
    ps.push.Init(dev, peer, ps.layout, ps.push_credits, push_slots);
    ps.reply.Init(dev, peer, ps.layout, ps.reply_slots, reply_credits);
    ps.pull_into = !sh_->options.async && ps.push.transport() == TransportKind::kTcp;
    k->pull_into |= ps.pull_into;
    // The server's results, where kReplyRef answers point: this process's
    // memory, or a shared-memory peer's mapped here.
    if (results.size >= ps.layout.n * ResultStride(ps.layout.capacity))
      ps.results = peer == dev->rank() ? reinterpret_cast<const char*>(results.addr)
                                       : dev->channel(peer, 0).DirectAddress(results);
  }
  return Status::Ok();
}

Status Worker::SendInitialValue(Key& k, const void* init, const Deadline& dl) {
  // The first worker's initial value goes into every chunk's slot ahead of
  // any push; servers serve the chunk only once it is in. Each server names
  // the worker it takes it from (AckHead::init_from).
  const char* src = static_cast<const char*>(init);
  for (const auto& c : k.chunks) {
    if (!k.s[c.server].send_init) continue;
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

void Worker::Enqueue(std::unique_ptr<Op> op) {
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(q_mu_);
  incoming_.push_back(std::move(op));
}

void Worker::EnqueuePush(Key* k, const void* buf, uint64_t round, DoneFn done, std::shared_ptr<WaitWatch> watch) {
  auto op = std::make_unique<Op>(sh_->group->NewDeadline());
  op->push = true;
  op->k = k;
  op->src = static_cast<const char*>(buf);
  op->round = round;
  op->done = std::move(done);
  op->watch = std::move(watch);
  Enqueue(std::move(op));
}

void Worker::EnqueuePull(Key* k, void* buf, uint64_t round, DoneFn done) {
  // This rank's server may reduce the round straight into buf.
  if (colocated_ && !sh_->options.async) colocated_->OfferPull(k->key, round, static_cast<char*>(buf));
  auto op = std::make_unique<Op>(sh_->group->NewDeadline());
  // Servers over tcp write their replies straight into buf (kReplyInto):
  // it is exposed to them until the pull ends. Without it (the
  // registration failed) the replies come through the reply slots.
  if (k->pull_into && bytes_of(k) > 0) {
    RegionHold hold;
    if (sh_->group->Hold(buf, bytes_of(k), &hold).ok()) op->hold = std::move(hold);
  }
  op->k = k;
  op->dst = static_cast<char*>(buf);
  op->round = round;
  op->done = std::move(done);
  Enqueue(std::move(op));
}

Status Worker::StepPush(Op* op, int* budget, bool* progress) {
  Key* k = op->k;
  while (op->next < k->chunks.size() && *budget > 0) {
    const ChunkPlace& c = k->chunks[op->next];
    PerServer& ps = k->s[c.server];
    if (!ps.push.HasCredit(c.slot)) {
      op->wait_server = c.server;
      op->what = "a push slot";
      return Status::Ok();
    }
    MsgHeader h{};
    h.kind = kPush;
    h.round = op->round;
    h.bytes = c.elems * k->es;
    h.key = k->key;
    const char* src = op->src + c.offset * k->es;
    uint64_t payload = h.bytes;
    if (ps.pull_into) SetPullTarget(TargetFor(op, c), &h);
    if (colocated_ && c.server == sh_->server_index && !sh_->options.async) {
      // This process's server reduces straight from the tensor: no copy.
      h.kind = kPushRef;
      h.pad[0] = reinterpret_cast<uintptr_t>(src);
      payload = 0;
      if (op->refs.empty()) op->refs_since = Clock::now();
      op->refs.push_back(op->next);
    }
    Status st = ps.push.Put(c.slot, h, src, payload, op->dl);
    if (!st.ok()) return st.with_context(Format("push to server rank %d", sh_->servers[c.server]));
    ++op->next;
    --*budget;
    *progress = true;
    op->dl = sh_->group->NewDeadline();
  }
  return Status::Ok();
}

PullTarget Worker::TargetFor(const Op* op, const ChunkPlace& c) const {
  const Key* k = op->k;
  // The pull of this push's round, found at the head of the key's pulls
  // in this pass (Pass), into memory the servers can write.
  if (k->head_pull != pass_ || k->pull_round != op->round || !k->pull_region) return PullTarget{};
  // A push from the memory its own pull writes: a reply must not land
  // where later pieces are still being read from.
  const size_t bytes = bytes_of(k);
  if (op->src < k->pull_dst + bytes && k->pull_dst < op->src + bytes) return PullTarget{};
  const MemRegion* r = k->pull_region;
  return PullTarget{r->id(), r->size(), r->offset_of(k->pull_dst + c.offset * k->es)};
}

void Worker::Unexpose(Op* op, const Status& why) {
  if (!op->hold.get() || op->next == op->k->chunks.size()) return;
  op->hold.reset();
  if (sh_->dev()->regions().Deregister(op->dst, bytes_of(op->k)) == 0) return;
  for (auto& other : active_) {
    if (other.get() == op || other->push || !other->hold.get() || !other->doomed.ok() ||
        other->next == other->k->chunks.size())
      continue;
    other->doomed = Status(why.code(), Format("pull of key %llu stopped: the failed pull of key %llu dropped the "
                                              "registration of its memory (%s)",
                                              static_cast<unsigned long long>(other->k->key),
                                              static_cast<unsigned long long>(op->k->key), why.message().c_str()));
  }
}

bool Worker::SettleRefs(Op* op, bool* progress) {
  // How long a caller waits for its push's references to be consumed
  // before they are copied into their slots: the other workers' pieces
  // normally come within a pass or two; a worker that pushes its keys in
  // another order must not keep this push's caller waiting.
  constexpr auto kReclaim = std::chrono::microseconds(500);
  // While nobody waits, the references stay lent for up to
  // ZC_PS_LEND_MS: a caller that pushes every key and then waits for each
  // key's push and pull in turn finds most pushes consumed by then, and the
  // copy is spared (over tcp the other worker's pieces of later keys come
  // milliseconds after this rank's). The bound keeps an unwatched push
  // from lingering.
  const auto lend_max = std::chrono::milliseconds(sh_->options.lend_ms);
  Key* k = op->k;
  size_t kept = 0;
  for (size_t r : op->refs) {
    const ChunkPlace& c = k->chunks[r];
    if (!k->s[c.server].push.HasCredit(c.slot)) op->refs[kept++] = r;
  }
  if (kept != op->refs.size()) {
    *progress = true;
    op->refs.resize(kept);
    op->refs_since = Clock::now();
  }
  if (op->refs.empty()) return true;
  const Clock::time_point now = Clock::now();
  const auto lent = now - op->refs_since;
  if (lent < kReclaim) return false;
  const bool waited = !op->watch || draining_.load(std::memory_order_acquire) > 0 ||
                      op->watch->WaitedFor(kReclaim, now);
  if (!waited && lent < lend_max) return false;
  for (size_t r : op->refs) {
    const ChunkPlace& c = k->chunks[r];
    colocated_->Reclaim(k->key, c.slot, sh_->worker_index, op->src + c.offset * k->es, c.elems * k->es);
  }
  op->refs.clear();
  *progress = true;
  return true;
}

Status Worker::StepPull(Op* op, bool* progress) {
  Key* k = op->k;
  const size_t n = k->chunks.size();
  if (sh_->options.async) {
    // A request per piece first, so that every server works at once.
    while (op->requests < n) {
      const ChunkPlace& c = k->chunks[op->requests];
      PerServer& ps = k->s[c.server];
      if (!ps.push.HasCredit(c.slot)) {
        op->wait_server = c.server;
        op->what = "a push slot";
        return Status::Ok();
      }
      MsgHeader h{};
      h.kind = kPull;
      h.round = op->round;
      h.key = k->key;
      Status st = ps.push.Put(c.slot, h, nullptr, 0, op->dl);
      if (!st.ok()) return st.with_context(Format("pull request to server rank %d", sh_->servers[c.server]));
      ++op->requests;
      *progress = true;
      op->dl = sh_->group->NewDeadline();
    }
  }
  while (op->next < n) {
    const ChunkPlace& c = k->chunks[op->next];
    PerServer& ps = k->s[c.server];
    if (!ps.reply.Ready(c.slot)) {
      op->wait_server = c.server;
      op->what = "a pull reply";
      return Status::Ok();
    }
    const MsgHeader* h = ps.reply.header(c.slot);
    const uint64_t bytes = c.elems * k->es;
    const bool by_ref = h->kind == kReplyRef && ps.results;
    const bool direct = h->kind == kReplyDirect && colocated_ && c.server == sh_->server_index;
    // Written into the tensor already (the flag follows the payload).
    const bool into = h->kind == kReplyInto && ps.pull_into && op->hold.get();
    if ((h->kind != kReply && !by_ref && !direct && !into) || h->round != op->round || h->bytes != bytes ||
        h->key != k->key)
      return Error(ZC_ERR_INTERNAL, "key %llu: reply from server rank %d is for key %llu round %llu "
                   "(kind %llu, %llu bytes), expected round %llu (%llu bytes)",
                   static_cast<unsigned long long>(k->key), sh_->servers[c.server],
                   static_cast<unsigned long long>(h->key), static_cast<unsigned long long>(h->round),
                   static_cast<unsigned long long>(h->kind), static_cast<unsigned long long>(h->bytes),
                   static_cast<unsigned long long>(op->round), static_cast<unsigned long long>(bytes));
    const void* from = by_ref ? ps.results + ResultOffset(c.slot, ps.layout.capacity) : ps.reply.payload(c.slot);
    if (!direct && !into) CopyForReader(op->dst + c.offset * k->es, from, bytes, kPsStreamFrom);
    Status st = ps.reply.Release(c.slot, op->dl);
    if (!st.ok()) return st.with_context(Format("reply credit to server rank %d", sh_->servers[c.server]));
    ++op->next;
    *progress = true;
    op->dl = sh_->group->NewDeadline();
  }
  return Status::Ok();
}

void Worker::CheckStalls(std::vector<std::pair<Op*, Status>>* failed) {
  Group* g = sh_->group;
  Status cause = Alert();
  if (cause.ok()) {
    for (int r = 0; r < g->size(); ++r) {
      if (r == g->rank() || sh_->Tolerated(r)) continue;
      Status st = g->HealthNaming(r, sh_->IsServer(r) ? "server" : "rank");
      if (!st.ok()) {
        cause = st;
        break;
      }
    }
  }
  for (auto& op : active_) {
    // Only operations that wait for a server (the first of their key).
    if (op->what == nullptr) continue;
    bool listed = false;
    for (auto& f : *failed) listed |= f.first == op.get();
    if (listed) continue;
    const int sr = op->wait_server >= 0 ? sh_->servers[op->wait_server] : -1;
    if (!cause.ok()) {
      failed->push_back({op.get(), cause});
      continue;
    }
    if (op->dl.expired())
      failed->push_back({op.get(), Error(ZC_ERR_TIMEOUT, "waited %.1f s for %s from server rank %d (ZC_TIMEOUT=%g s)",
                                         op->dl.elapsed_s(), op->what, sr, g->config().timeout_s)});
  }
}

bool Worker::Pass() {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    while (!incoming_.empty()) {
      active_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  ++pass_;
  bool progress = false;
  std::vector<std::pair<Op*, Status>> finished;
  // The first push and the first pull of each key move (asynchronous
  // mode: the first operation); the others wait their turn.
  std::vector<Op*> heads;
  heads.reserve(active_.size());
  const bool async = sh_->options.async;
  for (auto& op : active_) {
    op->what = nullptr;
    if (!op->doomed.ok()) {
      finished.push_back({op.get(), op->doomed});
      continue;
    }
    Key* k = op->k;
    uint64_t& head = op->push || async ? k->head_push : k->head_pull;
    if (!op->push && k->head_pull != pass_) {
      k->pull_dst = op->dst;
      k->pull_round = op->round;
      k->pull_region = op->hold.get();
    }
    if (head == pass_) continue;
    head = pass_;
    if (op->push && k->head_pull == pass_) {
      // An earlier pull of the key is pending: a push from the same memory
      // waits for it (it pushes what that pull writes).
      const size_t bytes = bytes_of(k);
      if (op->src < k->pull_dst + bytes && k->pull_dst < op->src + bytes) continue;
    }
    heads.push_back(op.get());
  }
  if (!broken_.ok()) {
    for (Op* op : heads) finished.push_back({op, broken_});
  } else {
    // Pulls first: take every piece that is in (its value is still in cache).
    for (Op* op : heads) {
      if (op->push) continue;
      Status st = StepPull(op, &progress);
      if (!st.ok() || op->next == op->k->chunks.size()) finished.push_back({op, st});
    }
    // The co-located server's pieces, between this worker's transfers.
    if (colocated_ && sh_->all_shm) {
      ++assist_calls_;
      progress |= colocated_->Assist();
    }
    // Then one piece of the first pushes, so that pushes, reductions and
    // replies alternate in small steps.
    int budget = 1;
    for (Op* op : heads) {
      if (!op->push) continue;
      if (budget <= 0) {
        op->dl = sh_->group->NewDeadline();  // waits for its turn, not for a server
        continue;
      }
      Status st = StepPush(op, &budget, &progress);
      if (!st.ok() || (op->next == op->k->chunks.size() && SettleRefs(op, &progress)))
        finished.push_back({op, st});
    }
  }
  {
    auto now = Clock::now();
    if (now - last_check_ > std::chrono::milliseconds(1)) {
      last_check_ = now;
      CheckStalls(&finished);
    }
  }
  if (finished.empty()) return progress;
  for (auto& [op, st] : finished) {
    for (auto it = active_.begin(); it != active_.end(); ++it) {
      if (it->get() != op) continue;
      std::unique_ptr<Op> mine = std::move(*it);
      active_.erase(it);
      // A failed push: its pieces lent to this rank's server come back
      // before the caller may free the tensor.
      for (size_t r : mine->refs) {
        const ChunkPlace& c = mine->k->chunks[r];
        colocated_->Reclaim(mine->k->key, c.slot, sh_->worker_index, mine->src + c.offset * mine->k->es,
                            c.elems * mine->k->es);
      }
      mine->refs.clear();
      if (!st.ok()) Unexpose(mine.get(), st);
      mine->hold.reset();
      if (mine->done) mine->done(st);
      in_flight_.fetch_sub(1, std::memory_order_acq_rel);
      break;
    }
  }
  return true;
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
