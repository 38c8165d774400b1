#include "ps/server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/dtype.h"
#include "collectives/reduce_kernels.h"
#include "common/log.h"
#include "common/page_prefetch.h"
#include "common/stream_copy.h"
#include "p2p/device.h"
#include "ps/sgd.h"

namespace zc::ps {

Server::Server(Shared* shared)
    : sh_(shared), W_(static_cast<int>(shared->workers.size())), declared_(shared->placement.servers()) {
  bye_.assign(static_cast<size_t>(W_), 0);
  dropped_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(W_));
  for (int wi = 0; wi < W_; ++wi) dropped_[wi].store(false);
}

Server::~Server() {
  stop_.store(true);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  for (auto& k : keys_) FreeKey(k.get());
}

void Server::Start() {
  threads_.emplace_back([this] { ControlLoop(); });
  for (int t = 0; t < sh_->options.server_threads; ++t) threads_.emplace_back([this, t] { DataLoop(t); });
}

Status Server::WaitDone() {
  Backoff bo = sh_->dev()->health().NewBackoff();
  while (!done_.load(std::memory_order_acquire) && !failed_flag_.load(std::memory_order_acquire))
    bo.Pause();
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

Status Server::Finish(const Deadline& dl) {
  Backoff bo = sh_->dev()->health().NewBackoff();
  while (!done_.load(std::memory_order_acquire) && !failed_flag_.load(std::memory_order_acquire) &&
         !dl.expired())
    bo.Pause();
  stop_.store(true);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  if (!done_.load())
    return Error(ZC_ERR_TIMEOUT, "waited %.1f s for every worker to free its zc_ps (ZC_TIMEOUT=%g s)",
                 dl.elapsed_s(), sh_->group->config().timeout_s);
  return Status::Ok();
}

void Server::Fail(const Status& st, int culprit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return;
    failed_ = st;
    failed_flag_.store(true, std::memory_order_release);
  }
  ZC_INFO(kPs, "ps server failed: %s", st.message().c_str());
  // Tell every live worker: their pending and later operations fail.
  Group* g = sh_->group;
  uint64_t v = AlertValue(st.code(), culprit);
  for (int wi = 0; wi < W_; ++wi) {
    int r = sh_->workers[wi];
    if (r == culprit || dropped(wi) || (r != g->rank() && !g->KnownHealth(r).ok())) continue;
    Status ws = WriteRemoteWord(sh_->dev(), g->device_rank(r), sh_->alerts[wi],
                                uint64_t{64} * sh_->server_index, v, 0, Deadline(1.0));
    if (!ws.ok()) ZC_TRACE(kPs, "alert to rank %d: %s", r, ws.message().c_str());
  }
}

void Server::FailOrDrop(const Status& st, int culprit) {
  if (culprit >= 0 && sh_->Tolerated(culprit) &&
      (st.code() == ZC_ERR_PEER_LOST || !sh_->group->Health(culprit).ok())) {
    for (int wi = 0; wi < W_; ++wi)
      if (sh_->workers[wi] == culprit) DropWorker(wi, st);
    return;
  }
  Fail(st, culprit);
}

void Server::DropWorker(int wi, const Status& why) {
  if (dropped_[wi].exchange(true, std::memory_order_acq_rel)) return;
  Group* g = sh_->group;
  const int r = sh_->workers[wi];
  ZC_WARN(kPs, "ps server rank %d: worker rank %d lost (%s): dropped; its pushes that arrived whole are "
          "applied, the other workers go on", g->rank(), r, why.message().c_str());
  // A worker dropped for a broken write may live on: it must not wait for us.
  if (!g->KnownHealth(r).ok()) return;
  Status ws = WriteRemoteWord(sh_->dev(), g->device_rank(r), sh_->alerts[wi], uint64_t{64} * sh_->server_index,
                              AlertValue(why.code() == ZC_OK ? ZC_ERR_PEER_LOST : why.code(), r), 0,
                              Deadline(1.0));
  if (!ws.ok()) ZC_TRACE(kPs, "alert to rank %d: %s", r, ws.message().c_str());
}

bool Server::AllGone() const {
  for (int wi = 0; wi < W_; ++wi)
    if (!bye_[wi] && !dropped(wi)) return false;
  return true;
}

std::vector<int> Server::DroppedWorkers() const {
  std::vector<int> out;
  for (int wi = 0; wi < W_; ++wi)
    if (dropped(wi)) out.push_back(sh_->workers[wi]);
  return out;
}

void Server::ControlLoop() {
  Group* g = sh_->group;
  HealthScope scope = g->Scope();
  Backoff bo = sh_->dev()->health().NewBackoff();
  auto last_health = Clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    bool progress = false;
    if (!failed_flag_.load(std::memory_order_acquire)) {
      for (int wi = 0; wi < W_; ++wi) {
        if (dropped(wi)) continue;
        std::string msg;
        Status st;
        while (sh_->mailbox.TryRecv(sh_->workers[wi], kDeclareTag, &msg, &st)) {
          Declaration d;
          if (!ParseDeclaration(msg, &d)) {
            Fail(Error(ZC_ERR_INTERNAL, "malformed declaration from rank %d (%zu bytes)",
                       sh_->workers[wi], msg.size()),
                 sh_->workers[wi]);
            break;
          }
          auto& v = pending_[d.head.index];
          v.resize(static_cast<size_t>(W_));
          v[wi] = std::move(msg);
          progress = true;
        }
        if (st.ok() && sh_->mailbox.TryRecv(sh_->workers[wi], kByeTag, &msg, &st)) {
          bye_[wi] = 1;
          progress = true;
        }
        if (!st.ok())
          FailOrDrop(st.with_context(Format("control messages from rank %d", sh_->workers[wi])), sh_->workers[wi]);
      }
      Status st = CompleteDeclarations();
      if (!st.ok()) Fail(st, -1);
      if (AllGone()) done_.store(true, std::memory_order_release);
      // Every member's health, a few times a second: a lost worker or server
      // fails the PS on every rank (workers learn it from the alert words).
      if (!done_.load() && Clock::now() - last_health > std::chrono::milliseconds(50)) {
        last_health = Clock::now();
        for (int r = 0; r < g->size(); ++r) {
          if (r == g->rank()) continue;
          Status h = g->Health(r);
          if (!h.ok()) {
            bool is_worker = false;
            for (int wi = 0; wi < W_; ++wi) is_worker |= sh_->workers[wi] == r && !bye_[wi] && !dropped(wi);
            const bool is_server = sh_->IsServer(r);
            // A worker that said goodbye (or was dropped) and a pure bystander may exit.
            if (!is_worker && !is_server) continue;
            if (is_server && !is_worker && AllGone()) continue;
            if (is_worker && sh_->Tolerated(r)) {
              for (int wi = 0; wi < W_; ++wi)
                if (sh_->workers[wi] == r) DropWorker(wi, h);
              continue;
            }
            // r is named (and reported to the workers as the culprit) only
            // for its own loss: an alert or abort names its own cause.
            Fail(g->NameLoss(h, r, is_worker ? "worker" : "server"), g->Lost(r) ? r : -1);
            break;
          }
        }
      }
    }
    if (progress) bo.Reset();
    else bo.Pause();
  }
}

Status Server::CompleteDeclarations() {
  for (;;) {
    auto it = pending_.find(next_index_);
    if (it == pending_.end()) return Status::Ok();
    // Every worker's declaration, but a dropped worker's (asynchronous failover).
    for (int wi = 0; wi < W_; ++wi)
      if (it->second[wi].empty() && !dropped(wi)) return Status::Ok();
    std::string text;
    zc_status code = ZC_OK;
    std::unique_ptr<Key> key;
    std::vector<std::unique_ptr<Chunk>> chunks;
    ZC_RETURN_IF_ERROR(Declare(next_index_, it->second, &text, &code, &key, &chunks));
    // The acknowledgement: the verdict, then (when we hold chunks) the
    // descriptors of this worker's push slots and our reply credits.
    Deadline dl = sh_->group->NewDeadline();
    const int init_from = InitSource(it->second);
    for (int wi = 0; wi < W_; ++wi) {
      if (it->second[wi].empty()) continue;  // dropped before it declared
      AckHead a{static_cast<int32_t>(code), static_cast<uint32_t>(text.size()),
                init_from < 0 ? -1 : sh_->workers[init_from], 0};
      std::string msg = Pack(a) + text;
      if (code == ZC_OK && key)
        msg += key->w[wi].push_slots->remote().Serialize() + key->w[wi].reply_credits->remote().Serialize() +
               key->results->remote().Serialize();
      Status st = sh_->mailbox.Send(sh_->workers[wi], kAckTag, msg, dl);
      st = st.ok() ? st : st.with_context(Format("declaration answer to rank %d", sh_->workers[wi]));
      if (!st.ok() && !(sh_->Tolerated(sh_->workers[wi]) && !sh_->group->Health(sh_->workers[wi]).ok())) return st;
      if (!st.ok()) DropWorker(wi, st);
    }
    if (key || !chunks.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (key) {
        key->by_slot.assign(key->layout.n, nullptr);
        for (auto& c : chunks) key->by_slot[c->slot] = c.get();
        key_by_id_[key->decl.key] = key.get();
        keys_.push_back(std::move(key));
      }
      for (auto& c : chunks) chunks_.push_back(std::move(c));
      generation_.fetch_add(1, std::memory_order_release);
    }
    pending_.erase(it);
    ++next_index_;
  }
}

int Server::InitSource(const std::vector<std::string>& msgs) const {
  // The first worker's value; when it was dropped before declaring, the
  // first live worker's that has one.
  for (int wi = 0; wi < W_; ++wi) {
    if (msgs[wi].empty()) continue;
    Declaration d;
    ParseDeclaration(msgs[wi], &d);
    if (d.head.has_init) return wi;
    if (wi == 0) return -1;
  }
  return -1;
}

Status Server::Declare(uint64_t index, const std::vector<std::string>& msgs, std::string* text,
                       zc_status* code, std::unique_ptr<Key>* out,
                       std::vector<std::unique_ptr<Chunk>>* chunks) {
  // Every message was parsed once already (ControlLoop): it is whole.
  // A worker dropped before it declared has no message (asynchronous failover).
  std::vector<Declaration> decls(static_cast<size_t>(W_));
  int first = -1;
  for (int wi = 0; wi < W_; ++wi) {
    if (msgs[wi].empty()) continue;
    ParseDeclaration(msgs[wi], &decls[wi]);
    if (first < 0) first = wi;
  }
  if (first < 0) return Status::Ok();  // every worker is gone
  const DeclareHead& h0 = decls[first].head;
  for (int wi = first + 1; wi < W_; ++wi) {
    if (msgs[wi].empty()) continue;
    const DeclareHead& h = decls[wi].head;
    if (h.key != h0.key || h.count != h0.count || h.dtype != h0.dtype) {
      *code = ZC_ERR_MISMATCH;
      *text = Format("workers disagree on declaration #%llu: worker rank %d declares key %llu "
                     "(%llu x %s), worker rank %d declares key %llu (%llu x %s)",
                     static_cast<unsigned long long>(index), sh_->workers[first],
                     static_cast<unsigned long long>(h0.key), static_cast<unsigned long long>(h0.count),
                     DtypeName(static_cast<zc_dtype>(h0.dtype)), sh_->workers[wi],
                     static_cast<unsigned long long>(h.key), static_cast<unsigned long long>(h.count),
                     DtypeName(static_cast<zc_dtype>(h.dtype)));
      return Status::Ok();
    }
  }
  auto dtype = static_cast<zc_dtype>(h0.dtype);
  size_t es = DtypeSize(dtype);
  std::vector<ChunkPlace> chunk_places = sh_->placement.Cut(h0.key, h0.count, es, declared_);
  declared_.Add(chunk_places, es);
  std::vector<ChunkPlace> places = sh_->placement.Pieces(chunk_places, es);
  std::vector<ChunkPlace> mine;
  for (const auto& p : places)
    if (p.server == sh_->server_index) mine.push_back(p);
  if (mine.empty()) return Status::Ok();

  auto key = std::make_unique<Key>();
  key->decl = h0;
  key->es = es;
  key->layout.n = static_cast<uint32_t>(mine.size());
  for (const auto& p : mine) key->layout.capacity = std::max<uint64_t>(key->layout.capacity, p.elems * es);
  key->w.resize(static_cast<size_t>(W_));
  key->init_from = InitSource(msgs);
  Device* dev = sh_->dev();
  Group* g = sh_->group;
  Status st;
  for (int wi = 0; wi < W_ && st.ok(); ++wi) {
    if (msgs[wi].empty()) continue;  // dropped: never served
    PerWorker& pw = key->w[wi];
    st = g->Allocate(key->layout.reader_bytes(), &pw.push_slots);
    if (st.ok()) st = g->Allocate(key->layout.writer_bytes(), &pw.reply_credits);
    if (!st.ok()) break;
    memset(pw.push_slots->data(), 0, key->layout.reader_bytes());
    memset(pw.reply_credits->data(), 0, key->layout.writer_bytes());
    // The worker's reply slots and push credits, from its declaration.
    RemoteRegion reply_slots, push_credits;
    st = RemoteRegion::Parse(decls[wi].reply_slots, &reply_slots);
    if (st.ok()) st = RemoteRegion::Parse(decls[wi].push_credits, &push_credits);
    if (!st.ok()) break;
    int peer = g->device_rank(sh_->workers[wi]);
    pw.push.Init(dev, peer, key->layout, pw.push_slots, push_credits);
    pw.reply.Init(dev, peer, key->layout, pw.reply_credits, reply_slots);
    // A worker that maps our memory copies a synchronous round's value
    // from the results region itself: one copy less, and it runs on the
    // worker's core. (Asynchronous values change under a reader.)
    pw.by_ref = !sh_->options.async && pw.reply.mapped();
  }
  const bool need_value = sh_->options.async || sh_->options.sgd_lr > 0;
  key->local = -1;
  for (int wi = 0; wi < W_; ++wi)
    if (sh_->workers[wi] == g->rank()) key->local = wi;
  key->offer_ok = st.ok() && key->local >= 0 && !need_value;
  for (int wi = 0; st.ok() && wi < W_; ++wi)
    if (wi != key->local && key->w[wi].by_ref) key->mapped_readers = true;
  const uint64_t results_bytes = key->layout.n * ResultStride(key->layout.capacity);
  if (st.ok()) st = g->Allocate(results_bytes, &key->results);
  if (st.ok()) memset(key->results->data(), 0, results_bytes);  // no init: zeros
  for (size_t i = 0; st.ok() && i < mine.size(); ++i) {
    auto c = std::make_unique<Chunk>();
    c->key = key.get();
    c->slot = mine[i].slot;
    c->offset = mine[i].offset;
    c->elems = mine[i].elems;
    c->bytes = mine[i].elems * es;
    c->arrived.assign(static_cast<size_t>(W_), 0);
    c->srcs.assign(static_cast<size_t>(W_), nullptr);
    c->targets.assign(static_cast<size_t>(W_), PullTarget{});
    c->init_pending = key->init_from >= 0;
    char* r = static_cast<char*>(key->results->data()) + ResultOffset(c->slot, key->layout.capacity);
    if (need_value) c->value = r;
    else c->accum = r;
    chunks->push_back(std::move(c));
  }
  if (!st.ok()) {
    chunks->clear();
    FreeKey(key.get());
    *code = st.code();
    *text = Format("server rank %d: %s", g->rank(), st.message().c_str());
    return Status::Ok();
  }
  ZC_TRACE(kPs, "key %llu: %zu chunks here", static_cast<unsigned long long>(h0.key), mine.size());
  *out = std::move(key);
  return Status::Ok();
}

void Server::FreeKey(Key* k) {
  for (auto& pw : k->w) {
    if (pw.push_slots) IgnoreError(sh_->group->Free(pw.push_slots->data()), "freeing a key: best effort");
    if (pw.reply_credits)
      IgnoreError(sh_->group->Free(pw.reply_credits->data()), "freeing a key: best effort");
    pw.push_slots = pw.reply_credits = nullptr;
  }
  if (k->results) IgnoreError(sh_->group->Free(k->results->data()), "freeing a key: best effort");
  k->results = nullptr;
}

namespace {
// A data thread stands back while a worker has assisted this recently.
constexpr int64_t kAssistHoldNs = 2'000'000;
}  // namespace

void Server::TryStep(Chunk* c, bool* progress, bool* pending) {
  bool expected = false;
  *pending = true;
  if (!c->busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
  int culprit = -1;
  bool moved = false;
  Status st = Step(c, &moved, &culprit);
  if (st.ok()) {
    bool p = moved || c->narrived > 0 || c->init_pending;
    for (int wi = 0; !p && wi < W_; ++wi) p = !dropped(wi) && c->key->w[wi].push.Ready(c->slot);
    *pending = p;
  }
  *progress = *progress || moved;
  c->busy.store(false, std::memory_order_release);
  if (!st.ok()) FailOrDrop(st, culprit);
}

bool Server::Scan(const std::vector<Chunk*>& list, ScanState* s, size_t max_skip) {
  constexpr size_t kWindow = 16;
  constexpr uint64_t kFullScan = 32;
  const size_t n = list.size();
  bool progress = false, pending = false;
  if (n == 0) return false;
  if (++s->scans % kFullScan == 0 || n <= kWindow) {
    for (Chunk* c : list) {
      if (failed_flag_.load(std::memory_order_acquire)) break;
      TryStep(c, &progress, &pending);
    }
    return progress;
  }
  // Past at most max_skip pieces with nothing pending, then a window from
  // the first that has something.
  size_t lead = 0, stepped = 0;
  for (size_t i = 0; i < n && stepped < kWindow && lead < max_skip; ++i) {
    if (failed_flag_.load(std::memory_order_acquire)) break;
    TryStep(list[(s->cursor + i) % n], &progress, &pending);
    if (stepped == 0 && !pending) ++lead;
    else ++stepped;
  }
  s->cursor = (s->cursor + lead) % n;
  return progress;
}

void Server::OfferPull(uint64_t key, uint64_t round, char* dst) {
  Key* k = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = key_by_id_.find(key);
    if (it != key_by_id_.end()) k = it->second;
  }
  if (!k || !k->offer_ok) return;
  k->offer_round.store(0, std::memory_order_release);
  k->offer_dst.store(dst, std::memory_order_release);
  k->offer_round.store(round, std::memory_order_release);
}

void Server::Reclaim(uint64_t key, uint32_t slot, int wi, const void* src, uint64_t bytes) {
  Chunk* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = key_by_id_.find(key);
    if (it != key_by_id_.end() && slot < it->second->by_slot.size()) c = it->second->by_slot[slot];
  }
  if (!c) return;
  bool expected = false;
  while (!c->busy.compare_exchange_weak(expected, true, std::memory_order_acquire)) {
    expected = false;
    std::this_thread::yield();
  }
  ChunkSlotReader& r = c->key->w[wi].push;
  // Consumed already: no longer arrived and its message handed back.
  if (c->arrived[wi] || r.Ready(slot)) {
    auto* h = const_cast<MsgHeader*>(r.header(slot));
    char* payload = static_cast<char*>(const_cast<void*>(r.payload(slot)));
    if (bytes) memcpy(payload, src, bytes);
    h->kind = kPush;
    h->pad[0] = 0;
    if (c->arrived[wi]) c->srcs[wi] = payload;
  }
  c->busy.store(false, std::memory_order_release);
}

bool Server::Assist() {
  if (failed_flag_.load(std::memory_order_acquire)) return false;
  std::unique_lock<std::mutex> guard(assist_mu_, std::try_to_lock);
  if (!guard.owns_lock()) return false;
  assisted_ns_.store(NowNs(), std::memory_order_relaxed);
  if (generation_.load(std::memory_order_acquire) != assist_seen_) {
    std::lock_guard<std::mutex> lock(mu_);
    assist_seen_ = generation_.load();
    assist_chunks_.clear();
    for (auto& c : chunks_) assist_chunks_.push_back(c.get());
  }
  // Called between every two pieces the worker moves: a bounded skip (the
  // full scans and the next calls cover the rest).
  return Scan(assist_chunks_, &assist_scan_, 64);
}

void Server::DataLoop(int tid) {
  HealthScope scope = sh_->group->Scope();
  const int T = sh_->options.server_threads;
  std::vector<Chunk*> mine;
  ScanState scan;
  uint64_t seen = ~uint64_t{0};
  // Sleep on notifications only when every worker's writes are stored by a
  // thread of this process (tcp, verbs, or this very rank).
  bool notified = true;
  for (int r : sh_->workers)
    notified = notified && (r == sh_->group->rank() || sh_->dev()->health().FlagsNotified(sh_->group->device_rank(r)));
  Backoff bo = sh_->dev()->health().NewBackoff(notified);
  while (!stop_.load(std::memory_order_acquire)) {
    if (sh_->worker_index >= 0 &&
        NowNs() - assisted_ns_.load(std::memory_order_relaxed) < kAssistHoldNs) {
      // The co-located worker steps the pieces between its transfers.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      bo.Reset();
      continue;
    }
    if (generation_.load(std::memory_order_acquire) != seen) {
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_.load();
      mine.clear();
      for (size_t i = 0; i < chunks_.size(); ++i)
        if (static_cast<int>(i % static_cast<size_t>(T)) == tid) mine.push_back(chunks_[i].get());
    }
    // A pass that finds nothing has looked at every piece (else it would
    // sleep between windows and see work late).
    bool progress = Scan(mine, &scan, mine.size());
    if (progress) bo.Reset();
    else bo.Pause();
  }
}

// A synchronous round's sum of n inputs into one or two outputs. Streamed
// (outputs that other processes read next), from kPsStreamFrom bytes on, it
// goes block by block through a buffer in the L1 cache and out with
// non-temporal stores: memory sees every input read once and every output
// written once, where a reduction's plain stores read each output line
// first, and a second output copied afterwards reads the first back. (An
// output may be one of the inputs: a block is read before it is written.)
void Server::SumInto(zc_dtype dtype, char* const* outs, int nouts, const void* const* srcs, int n, size_t elems,
                     bool stream) {
  const size_t es = DtypeSize(dtype);
  if (!stream || elems * es < kPsStreamFrom) {
    ReduceN(dtype, ZC_SUM, outs[0], srcs, n, elems);
    for (int o = 1; o < nouts; ++o) memcpy(outs[o], outs[0], elems * es);
    return;
  }
  constexpr size_t kBlockBytes = 16 * 1024;
  alignas(64) char block[kBlockBytes];
  const size_t per = kBlockBytes / es;
  std::vector<const void*> at(srcs, srcs + n);
  for (size_t off = 0; off < elems; off += per) {
    const size_t m = std::min(per, elems - off);
    for (int i = 0; i < n; ++i) at[i] = static_cast<const char*>(srcs[i]) + off * es;
    // The next block's pages (common/page_prefetch.h).
    if (const size_t next = std::min(per, elems - off - m) * es) {
      for (int i = 0; i < n; ++i) PrefetchPages(static_cast<const char*>(at[i]) + m * es, next);
      for (int o = 0; o < nouts; ++o) PrefetchPagesForWrite(outs[o] + (off + m) * es, next);
    }
    ReduceN(dtype, ZC_SUM, block, at.data(), n, m);
    for (int o = 0; o < nouts; ++o) StreamCopy(outs[o] + off * es, block, m * es);
  }
  StreamFence();  // before the flags that announce the sum
}

Status Server::Reply(Chunk* c, int wi, const void* data, uint64_t round, int* culprit, bool direct) {
  PerWorker& pw = c->key->w[wi];
  int r = sh_->workers[wi];
  Deadline dl = sh_->group->NewDeadline();
  MsgHeader h{};
  h.kind = kReply;
  h.round = round;
  h.bytes = c->bytes;
  h.key = c->key->decl.key;
  uint64_t payload = c->bytes;
  const PullTarget target = c->targets[wi];
  c->targets[wi] = PullTarget{};
  Status st;
  if (direct) {
    h.kind = kReplyDirect;
    payload = 0;
  } else if (pw.by_ref && !sh_->options.async) {
    h.kind = kReplyRef;
    payload = 0;
  } else if (target.present() && !sh_->options.async && pw.reply.transport() == TransportKind::kTcp) {
    h.kind = kReplyInto;
    RemoteRegion into;
    into.transport = TransportKind::kTcp;
    into.owner = pw.reply.peer();
    into.id = target.region_id;
    into.size = target.region_size;
    st = pw.reply.PutInto(c->slot, h, data, payload, into, target.offset, dl);
  }
  if (h.kind != kReplyInto) st = pw.reply.Put(c->slot, h, data, payload, dl);
  if (!st.ok()) {
    *culprit = r;
    return st.with_context(Format("reply to worker rank %d (key %llu)", r,
                                  static_cast<unsigned long long>(h.key)));
  }
  return Status::Ok();
}

Status Server::Step(Chunk* c, bool* progress, int* culprit) {
  Key& k = *c->key;
  const auto dtype = static_cast<zc_dtype>(k.decl.dtype);
  Deadline dl = sh_->group->NewDeadline();
  auto bad = [&](int wi, const MsgHeader* h, const char* why) {
    *culprit = sh_->workers[wi];
    return Error(ZC_ERR_INTERNAL, "key %llu: message kind %llu round %llu from worker rank %d: %s",
                 static_cast<unsigned long long>(k.decl.key), static_cast<unsigned long long>(h->kind),
                 static_cast<unsigned long long>(h->round), sh_->workers[wi], why);
  };
  // A credit that cannot be written: that worker is gone.
  auto credit = [&](int wi, const Status& st) {
    if (!st.ok()) *culprit = sh_->workers[wi];
    return st;
  };
  if (c->init_pending && dropped(k.init_from)) {
    // Its sender was dropped before the piece's initial value came: zeros.
    c->init_pending = false;
    *progress = true;
  }
  if (c->init_pending) {
    // The first worker's initial value comes before anything else is served.
    const int from = k.init_from;
    ChunkSlotReader& r = k.w[from].push;
    if (!r.Ready(c->slot)) return Status::Ok();
    const MsgHeader* h = r.header(c->slot);
    if (h->kind != kInit || h->bytes != c->bytes) return bad(from, h, "expected the initial value");
    if (c->value) memcpy(c->value, r.payload(c->slot), c->bytes);
    c->init_pending = false;
    *progress = true;
    ZC_RETURN_IF_ERROR(credit(from, r.Release(c->slot, dl)));
  }
  for (int wi = 0; wi < W_; ++wi) {
    if (c->arrived[wi] || dropped(wi)) continue;
    ChunkSlotReader& r = k.w[wi].push;
    if (!r.Ready(c->slot)) continue;
    const MsgHeader* h = r.header(c->slot);
    const void* p = r.payload(c->slot);
    *progress = true;
    if (!sh_->options.async) {
      const bool ref = h->kind == kPushRef && sh_->workers[wi] == sh_->group->rank();
      if ((h->kind != kPush && !ref) || h->bytes != c->bytes) return bad(wi, h, "expected a push");
      if (h->round != c->round + 1) return bad(wi, h, "push of another round");
      c->arrived[wi] = 1;
      c->srcs[wi] = ref ? reinterpret_cast<const void*>(static_cast<uintptr_t>(h->pad[0])) : p;
      c->targets[wi] = ref ? PullTarget{} : GetPullTarget(*h);
      ++c->narrived;
      continue;
    }
    if (h->kind == kPush) {
      if (h->bytes != c->bytes) return bad(wi, h, "push of another size");
      if (sh_->options.sgd_lr > 0) SgdUpdate(dtype, c->value, p, c->elems, sh_->options.sgd_lr);
      else ReduceInto(dtype, ZC_SUM, c->value, p, c->elems);
      ZC_RETURN_IF_ERROR(credit(wi, r.Release(c->slot, dl)));
    } else if (h->kind == kPull) {
      // The worker took the previous reply before it asked again: the
      // reply slot's credit is normally there; else answer on a later pass.
      if (!k.w[wi].reply.HasCredit(c->slot)) continue;
      uint64_t req = h->round;
      ZC_RETURN_IF_ERROR(credit(wi, r.Release(c->slot, dl)));
      ZC_RETURN_IF_ERROR(Reply(c, wi, c->value, req, culprit));
    } else {
      return bad(wi, h, "unexpected message");
    }
  }
  if (sh_->options.async || c->narrived < W_) return Status::Ok();
  // Every worker's push of the round is here. The previous round's value
  // stays where it is until every worker has taken it (by reference, or
  // out of its reply slot, which it hands back after): else a later pass.
  for (int wi = 0; wi < W_; ++wi)
    if (!k.w[wi].reply.HasCredit(c->slot)) return Status::Ok();
  *progress = true;
  // One pass over all inputs: into the co-located worker's tensor when its
  // pull of this round is queued, and into the results region as well when
  // other workers read it there.
  char* direct = nullptr;
  if (k.offer_ok) {
    const uint64_t r1 = k.offer_round.load(std::memory_order_acquire);
    char* d = k.offer_dst.load(std::memory_order_acquire);
    const uint64_t r2 = k.offer_round.load(std::memory_order_acquire);
    if (r1 == c->round + 1 && r2 == r1 && d) direct = d + c->offset * k.es;
  }
  const void* out = c->accum;
  if (direct && !k.mapped_readers) {
    SumInto(dtype, &direct, 1, c->srcs.data(), W_, c->elems, /*stream=*/false);
    out = direct;
  } else if (direct) {
    char* both[2] = {c->accum, direct};
    SumInto(dtype, both, 2, c->srcs.data(), W_, c->elems, k.mapped_readers);
  } else if (sh_->options.sgd_lr > 0) {
    thread_local std::vector<char> scratch;
    if (scratch.size() < c->bytes) scratch.resize(c->bytes);
    ReduceN(dtype, ZC_SUM, scratch.data(), c->srcs.data(), W_, c->elems);
    SgdUpdate(dtype, c->value, scratch.data(), c->elems, sh_->options.sgd_lr / W_);
    out = c->value;
  } else {
    SumInto(dtype, &c->accum, 1, c->srcs.data(), W_, c->elems, k.mapped_readers);
  }
  for (int wi = 0; wi < W_; ++wi) {
    ZC_RETURN_IF_ERROR(credit(wi, k.w[wi].push.Release(c->slot, dl)));
    c->arrived[wi] = 0;
    c->srcs[wi] = nullptr;
  }
  c->narrived = 0;
  ++c->round;
  // Reduced into the co-located worker's tensor: the others' copies are
  // sent from it first, and its reply last (then the tensor is the caller's).
  for (int wi = 0; wi < W_; ++wi)
    if (!direct || wi != k.local) ZC_RETURN_IF_ERROR(Reply(c, wi, out, c->round, culprit));
  if (direct) ZC_RETURN_IF_ERROR(Reply(c, k.local, out, c->round, culprit, true));
  return Status::Ok();
}

}  // namespace zc::ps
