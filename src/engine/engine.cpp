#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "common/flight_recorder.h"
#include "common/log.h"
#include "p2p/group.h"

namespace zc::engine {

namespace {
// Status bits of the negotiation's first word, each set by a rank that does
// NOT have the condition, so that a BAND over ranks is 0 when any rank has it.
constexpr uint64_t kNoUncached = 1u << 0;
constexpr uint64_t kNoStop = 1u << 1;
constexpr uint64_t kNoStallShutdown = 1u << 2;

bool Bit(const std::vector<uint64_t>& w, size_t base, size_t i) { return (w[base + i / 64] >> (i % 64)) & 1; }
void SetBit(std::vector<uint64_t>& w, size_t base, size_t i, bool on) {
  if (on) w[base + i / 64] |= uint64_t{1} << (i % 64);
  else w[base + i / 64] &= ~(uint64_t{1} << (i % 64));
}
size_t Bytes(const Request& r) { return static_cast<size_t>(r.elements()) * DtypeSize(r.dtype); }

// Where rank r's tensor of an agreed response is (Request::device; a joined
// rank's zeros are host memory): the same answer on every rank, so every
// rank splits fused sets alike.
int DeviceOfRank(const Response& resp, int r) { return resp.present[r] ? resp.per_rank[r].device : -1; }
bool SamePlacement(const Response& a, const Response& b) {
  for (size_t r = 0; r < a.present.size(); ++r)
    if (DeviceOfRank(a, static_cast<int>(r)) != DeviceOfRank(b, static_cast<int>(r))) return false;
  return true;
}
}  // namespace

Engine::Engine(Collectives* coll, Group* group, gpu::DevicePath* gpu, const Config& config)
    : coll_(coll),
      group_(group),
      config_(config),
      rank_(group->rank()),
      size_(group->size()),
      cache_(config.cache_capacity),
      table_(group->size()),
      joined_(group->size(), 0),
      fusion_(group),
      device_(gpu, config.timeout_s),
      plans_(coll),
      stalls_(config.stall_warning_s, config.stall_shutdown_s, group->rank()) {}

Status Engine::Create(Collectives* coll, Group* group, gpu::DevicePath* gpu, const Config& config,
                      std::unique_ptr<Engine>* out) {
  std::unique_ptr<Engine> e(new Engine(coll, group, gpu, config));
  if (!config.timeline.empty() && e->rank_ == 0) ZC_RETURN_IF_ERROR(e->timeline_.Open(config.timeline));
  Engine* p = e.get();
  e->thread_ = std::thread([p] { p->Loop(); });
  ZC_INFO(kEngine, "engine started: %d ranks, cycle %.3g ms, fusion threshold %zu bytes, cache %d entries",
          e->size_, config.cycle_time_ms, config.fusion_threshold, config.cache_capacity);
  *out = std::move(e);
  return Status::Ok();
}

// A destructor cannot report: callers that care call Shutdown() first.
Engine::~Engine() { IgnoreError(Shutdown(), "engine destructor"); }

Status Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  timeline_.Close();
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status Engine::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status Engine::Submit(const std::shared_ptr<Op>& op) {
  Request& r = op->req;
  const char* name = r.name.c_str();
  const char* type = OpTypeName(r.type);
  auto bad = [&](const std::string& why) {
    return Error(ZC_ERR_INVALID_ARG, "engine %s '%s': %s", type, name, why.c_str());
  };
  if (r.type != OpType::kBarrier && r.type != OpType::kJoin) {
    if (Status st = CheckDtypeOp(r.dtype, r.type == OpType::kAllreduce || r.type == OpType::kReducescatter
                                               ? r.op : ZC_SUM);
        !st.ok())
      return bad(st.message());
    if (!std::isfinite(r.prescale) || !std::isfinite(r.postscale))
      return bad(Format("scale factors must be finite (prescale %g, postscale %g)", r.prescale, r.postscale));
    if (r.dtype == ZC_BOOL && (r.prescale != 1.0 || r.postscale != 1.0))
      return bad(Format("scale factors on bool (prescale %g, postscale %g): bool cannot be scaled",
                        r.prescale, r.postscale));
    if (r.type == OpType::kBroadcast && (r.root < 0 || r.root >= size_))
      return bad(Format("root %d is out of range [0, %d)", r.root, size_));
    if (r.type == OpType::kAlltoall) {
      if (r.splits.empty()) {
        if (r.shape[0] % size_ != 0)
          return bad(Format("no splits and the first dimension %lld does not divide by %d ranks",
                            static_cast<long long>(r.shape[0]), size_));
        r.splits.assign(size_, r.shape[0] / size_);
      }
      int64_t sum = 0;
      for (int64_t s : r.splits) {
        if (s < 0) return bad("a negative split");
        sum += s;
      }
      if (sum != r.shape[0])
        return bad(Format("splits add up to %lld rows, the first dimension is %lld", static_cast<long long>(sum),
                          static_cast<long long>(r.shape[0])));
    }
  }
  if (r.device >= 0) {
    if (r.type != OpType::kAllreduce) return bad("only allreduce takes device tensors as they are");
    if (Status st = device_.RecordReady(r.device, &op->ready); !st.ok())
      return st.with_context(Format("rank %d: engine %s '%s' on GPU %d", rank_, type, name, r.device));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  if (stop_) return Error(ZC_ERR_ABORTED, "rank %d: engine %s '%s': the engine is shut down", rank_, type, name);
  if (r.type == OpType::kBarrier) r.name = Format("barrier.%llu", static_cast<unsigned long long>(++barriers_));
  if (r.type == OpType::kJoin) r.name = "join";
  if (names_.count(r.name))
    return bad(r.type == OpType::kJoin ? "this rank has already joined" : "the name is already pending on this rank");
  names_[r.name] = op;
  op->submitted = Clock::now();
  queue_.push_back(op);
  return Status::Ok();
}

void Engine::Complete(const std::shared_ptr<Op>& op, const Status& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    names_.erase(op->req.name);
  }
  stats_.operations_done++;
  Status result = st;
  if (result.ok() && op->copy_out) result = op->copy_out().with_context(Format("'%s': copy to the device", op->req.name.c_str()));
  op->copy_out = nullptr;  // the pinned copies go back now
  op->Finish(result);
}

void Engine::FailAll(const Status& st) {
  std::vector<std::shared_ptr<Op>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = st;
    finished_ = true;
    for (auto& [name, op] : names_) all.push_back(op);
    stats_.operations_done += all.size();
    published_ = stats_;
    names_.clear();
    queue_.clear();
  }
  pending_.clear();
  join_op_.reset();
  for (auto& op : all) {
    op->copy_out = nullptr;  // nothing to copy back; the pinned copies go back
    op->Finish(st);
  }
}

void Engine::Loop() {
  // Its communicator's epoch: revoked by a shrink, the engine ends.
  HealthScope scope = group_->Scope();
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycle_time_ms));
  for (;;) {
    auto start = Clock::now();
    agreed_error_ = false;
    Status st = Cycle();
    const bool agreed = agreed_error_;
    if (!st.ok()) {
      Status ctx = st.with_context(Format("rank %d: engine", rank_));
      if (!agreed && !group_->aborted()) group_->Abort(ctx);  // the others must not wait for us
      if (st.code() == ZC_ERR_ABORTED && agreed) ZC_INFO(kEngine, "%s", ctx.message().c_str());
      else ZC_WARN(kEngine, "%s", ctx.message().c_str());
      FailAll(ctx);
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    published_ = stats_;
    cv_.wait_until(lock, start + cycle, [&] { return stop_; });
  }
}

Status Engine::Cycle() {
  const auto now = Clock::now();
  stats_.cycles++;
  const bool stopping = DrainSubmissions(now);
  Proposal p = Propose(now, stopping);
  trace::SetThreadLabel("engine negotiation");
  ZC_RETURN_IF_ERROR(coll_->Allreduce(p.bits.data(), p.bits.data(), p.bits.size(), ZC_UINT64, ZC_BAND)
                         .with_context(Format("negotiation (cycle %llu)", static_cast<unsigned long long>(stats_.cycles))));
  stats_.negotiation_collectives++;
  if (!(p.bits[0] & kNoStop)) return Agreed(Error(ZC_ERR_ABORTED, "shut down by zc_engine_destroy on a rank"));
  if (!(p.bits[0] & kNoStallShutdown)) return Agreed(stalls_.ShutdownError(table_, joined_, now));

  std::vector<Response> responses;
  const bool any_invalid = TakeAgreedCached(&p, &responses);
  std::vector<int> joined_now;
  if (!(p.bits[0] & kNoUncached) || any_invalid)
    ZC_RETURN_IF_ERROR(ExchangeRequests(p.to_send, now, &responses, &joined_now));
  ZC_RETURN_IF_ERROR(Execute(responses));
  CompleteJoin(joined_now);
  if (stalls_.Inspect(table_, joined_, Clock::now())) stats_.stall_warnings++;
  return Status::Ok();
}

bool Engine::DrainSubmissions(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!queue_.empty()) {
    auto op = std::move(queue_.front());
    queue_.pop_front();
    op->drained = now;
    if (op->req.type == OpType::kJoin) join_op_ = op;
    else pending_.push_back(op);
  }
  return stop_;
}

Engine::Proposal Engine::Propose(Clock::time_point now, bool stopping) {
  Proposal p;
  p.npos = cache_.positions();
  const size_t nw = (p.npos + 63) / 64;
  p.hits = 1;
  p.valid = 1 + nw;
  p.bits.assign(1 + 2 * nw, 0);
  for (size_t i = 0; i < p.npos; ++i) SetBit(p.bits, p.valid, i, true);
  p.hit_pos.assign(pending_.size(), -1);
  const double route_after = stalls_.route_after_s();
  for (size_t k = 0; k < pending_.size(); ++k) {
    auto& op = pending_[k];
    int pos = cache_.Find(op->req.name);
    if (pos >= 0) {
      const Response* c = cache_.At(pos);
      if (c->present[rank_] && SameRequest(c->per_rank[rank_], op->req)) {
        SetBit(p.bits, p.hits, pos, true);
        p.hit_pos[k] = pos;
        double waited = std::chrono::duration<double>(now - op->submitted).count();
        if (!op->sent && route_after >= 0 && waited > route_after) p.to_send.push_back(op);
        continue;
      }
      SetBit(p.bits, p.valid, pos, false);  // this rank's request differs: everyone renegotiates it
    }
    if (!op->sent) p.to_send.push_back(op);
  }
  if (join_op_ && !join_sent_) p.to_send.push_back(join_op_);
  if (joined_[rank_]) {
    // Joined: ready for every cached allreduce (with zeros); anything else
    // cached goes back to the exchange, where it fails naming this rank.
    for (size_t i = 0; i < p.npos; ++i) {
      const Response* c = cache_.At(static_cast<int>(i));
      if (!c) continue;
      if (c->lead().type == OpType::kAllreduce) SetBit(p.bits, p.hits, i, true);
      else SetBit(p.bits, p.valid, i, false);
    }
  }
  p.bits[0] = (p.to_send.empty() ? kNoUncached : 0) | (stopping ? 0 : kNoStop) |
              (stalls_.shutdown_requested() ? 0 : kNoStallShutdown);
  return p;
}

bool Engine::TakeAgreedCached(Proposal* p, std::vector<Response>* responses) {
  bool any_invalid = false;
  for (size_t i = 0; i < p->npos; ++i)
    if (!Bit(p->bits, p->valid, i) && cache_.At(static_cast<int>(i))) {
      cache_.Erase(static_cast<int>(i));
      any_invalid = true;
    }
  // A hit whose position some rank invalidated is negotiated afresh.
  for (size_t k = 0; k < pending_.size(); ++k)
    if (p->hit_pos[k] >= 0 && !Bit(p->bits, p->valid, p->hit_pos[k])) {
      p->hit_pos[k] = -1;
      if (!pending_[k]->sent && std::find(p->to_send.begin(), p->to_send.end(), pending_[k]) == p->to_send.end())
        p->to_send.push_back(pending_[k]);
    }
  for (size_t i = 0; i < p->npos; ++i)
    if (Bit(p->bits, p->hits, i) && Bit(p->bits, p->valid, i) && cache_.At(static_cast<int>(i))) {
      responses->push_back(*cache_.At(static_cast<int>(i)));
      table_.Drop(responses->back().lead().name);
    }
  stats_.cache_hits += responses->size();
  return any_invalid;
}

Status Engine::ExchangeRequests(const std::vector<std::shared_ptr<Op>>& to_send, Clock::time_point now,
                                std::vector<Response>* responses, std::vector<int>* joined_now) {
  std::set<std::string> from_cache;
  for (const auto& r : *responses) from_cache.insert(r.lead().name);
  std::string mine;
  for (auto& op : to_send) {
    op->req.waited_ms = static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - op->submitted).count(), UINT32_MAX));
    AppendRequest(op->req, &mine);
    op->sent = true;
    if (op == join_op_) join_sent_ = true;
  }
  std::vector<uint64_t> lens(size_);
  uint64_t my_len = mine.size();
  ZC_RETURN_IF_ERROR(coll_->Allgather(&my_len, lens.data(), 1, ZC_UINT64).with_context("negotiation: request sizes"));
  std::vector<size_t> counts(size_), displs(size_);
  size_t total = 0;
  for (int r = 0; r < size_; ++r) {
    counts[r] = lens[r];
    displs[r] = total;
    total += lens[r];
  }
  std::string all(total, '\0');
  ZC_RETURN_IF_ERROR(coll_->Allgatherv(mine.data(), mine.size(), all.data(), counts.data(), displs.data(), ZC_UINT8)
                         .with_context("negotiation: requests"));
  stats_.negotiation_collectives += 2;
  for (int r = 0; r < size_; ++r) {
    std::string part = all.substr(displs[r], counts[r]);
    size_t pos = 0;
    while (pos < part.size()) {
      Request req;
      ZC_RETURN_IF_ERROR(ParseRequest(part, &pos, &req).with_context(Format("from rank %d", r)));
      if (req.type == OpType::kJoin) {
        joined_[r] = 1;
        joined_now->push_back(r);
      } else if (!from_cache.count(req.name)) {
        table_.Add(r, req, now);
      }
    }
  }
  // While a rank has joined, nothing but allreduces can run: the others
  // fail at once on the ranks that submitted them, as in Horovod (they
  // need not even match by name across ranks).
  auto first_joined = std::find(joined_.begin(), joined_.end(), 1);
  if (first_joined != joined_.end())
    for (auto& resp : table_.TakeAllButAllreduces())
      FailAgreed(resp, JoinedConflict(resp, static_cast<int>(first_joined - joined_.begin())));
  for (auto& resp : table_.TakeReady(joined_)) {
    stats_.cache_misses++;
    if (Status st = CheckConsistent(resp, size_); !st.ok()) {
      FailAgreed(resp, st);
      continue;
    }
    cache_.Put(resp);
    responses->push_back(std::move(resp));
  }
  stats_.cache_entries = cache_.entries();
  return Status::Ok();
}

void Engine::CompleteJoin(const std::vector<int>& joined_now) {
  if (!std::all_of(joined_.begin(), joined_.end(), [](uint8_t j) { return j != 0; })) return;
  int last = joined_now.empty() ? size_ - 1 : *std::max_element(joined_now.begin(), joined_now.end());
  std::fill(joined_.begin(), joined_.end(), 0);
  if (!join_op_) return;
  join_op_->last_joined = last;
  auto op = std::move(join_op_);
  join_sent_ = false;
  if (timeline_.active()) timeline_.Phase("join", "JOIN", op->drained, Clock::now());
  Complete(op, Status::Ok());
}

void Engine::FailAgreed(const Response& resp, const Status& st) {
  Status ctx = st.with_context(Format("rank %d: engine", rank_));
  ZC_INFO(kEngine, "%s (the operation fails on every rank; the engine goes on)", ctx.message().c_str());
  if (auto op = TakeOp(resp.lead().name)) Complete(op, ctx);
}

std::shared_ptr<Op> Engine::TakeOp(const std::string& name) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it)
    if ((*it)->req.name == name) {
      auto op = *it;
      pending_.erase(it);
      return op;
    }
  return nullptr;
}

Status Engine::Execute(std::vector<Response>& responses) {
  std::vector<bool> used(responses.size(), false);
  for (size_t i = 0; i < responses.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    const Request& a = responses[i].lead();
    // The flight recorder labels the collective with the tensor's name (a
    // fused allreduce: its first tensor's, with a "+" after it).
    trace::SetThreadLabel(a.name.c_str());
    if (a.type != OpType::kAllreduce) {
      ZC_RETURN_IF_ERROR(RunOther(responses[i]));
      continue;
    }
    std::vector<const Response*> set{&responses[i]};
    size_t total = Bytes(a);
    if (config_.fusion_threshold > 0 && total <= config_.fusion_threshold) {
      for (size_t j = i + 1; j < responses.size(); ++j) {
        if (used[j]) continue;
        const Request& b = responses[j].lead();
        if (b.type == OpType::kAllreduce && b.dtype == a.dtype && b.op == a.op && b.prescale == a.prescale &&
            b.postscale == a.postscale && SamePlacement(responses[i], responses[j]) &&
            total + Bytes(b) <= config_.fusion_threshold) {
          set.push_back(&responses[j]);
          total += Bytes(b);
          used[j] = true;
        }
      }
    }
    if (set.size() > 1) trace::SetThreadLabel((a.name.substr(0, 46) + "+").c_str());
    if (DeviceOfRank(responses[i], rank_) >= 0) ZC_RETURN_IF_ERROR(RunOnDevice(set));
    else ZC_RETURN_IF_ERROR(set.size() > 1 ? RunFused(set) : RunAllreduce(responses[i]));
  }
  return Status::Ok();
}

Status Engine::RunAllreduce(const Response& resp) {
  const Request& r = resp.lead();
  auto op = TakeOp(r.name);
  const size_t count = static_cast<size_t>(r.elements());
  auto t0 = Clock::now();
  Status st;
  if (op) {
    const void* in = op->input;
    if (r.prescale != 1.0) {
      ScaledCopy(r.dtype, op->input, op->output, count, r.prescale);
      in = op->output;
    }
    st = coll_->Allreduce(in, op->output, count, r.dtype, r.op);
    if (st.ok()) ScaledCopy(r.dtype, op->output, op->output, count, r.postscale);
  } else {
    zeros_.assign(count * DtypeSize(r.dtype), 0);
    st = coll_->Allreduce(zeros_.data(), zeros_.data(), count, r.dtype, r.op);
  }
  stats_.data_collectives++;
  ZC_RETURN_IF_ERROR(st.with_context(Format("allreduce of '%s'", r.name.c_str())));
  if (op) {
    if (timeline_.active()) {
      timeline_.Phase(r.name, "QUEUE", op->submitted, op->drained);
      timeline_.Phase(r.name, "NEGOTIATE", op->drained, t0);
      timeline_.Phase(r.name, "ALLREDUCE", t0, Clock::now(), r.Describe());
    }
    Complete(op, Status::Ok());
  }
  return Status::Ok();
}

Status Engine::RunFused(const std::vector<const Response*>& set) {
  const Request& a = set.front()->lead();
  const size_t esize = DtypeSize(a.dtype);
  size_t total = 0;
  for (auto* r : set) total += static_cast<size_t>(r->lead().elements());
  char* buf;
  ZC_RETURN_IF_ERROR(fusion_.Reserve(total * esize, &buf));
  std::vector<std::shared_ptr<Op>> ops;
  auto t0 = Clock::now();
  size_t off = 0;
  for (auto* r : set) {
    auto op = TakeOp(r->lead().name);
    size_t n = static_cast<size_t>(r->lead().elements());
    if (op) ScaledCopy(a.dtype, op->input, buf + off * esize, n, a.prescale);
    else memset(buf + off * esize, 0, n * esize);
    ops.push_back(std::move(op));
    off += n;
  }
  auto t1 = Clock::now();
  bool reused = false;
  ZC_RETURN_IF_ERROR(plans_.Allreduce(buf, total, a.dtype, a.op, &reused)
                         .with_context(Format("fused allreduce of %zu tensors ('%s', ...)", set.size(), a.name.c_str())));
  stats_.data_collectives++;
  stats_.fused_sets++;
  stats_.fused_tensors += set.size();
  if (reused) stats_.plan_reuses++;
  auto t2 = Clock::now();
  off = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    size_t n = static_cast<size_t>(set[k]->lead().elements());
    if (ops[k]) ScaledCopy(a.dtype, buf + off * esize, ops[k]->output, n, a.postscale);
    off += n;
  }
  auto t3 = Clock::now();
  for (size_t k = 0; k < set.size(); ++k) {
    if (!ops[k]) continue;
    const std::string& name = set[k]->lead().name;
    if (timeline_.active()) {
      timeline_.Phase(name, "QUEUE", ops[k]->submitted, ops[k]->drained);
      timeline_.Phase(name, "NEGOTIATE", ops[k]->drained, t0);
      timeline_.Phase(name, "MEMCPY_IN_FUSION_BUFFER", t0, t1);
      timeline_.Phase(name, "ALLREDUCE", t1, t2,
                      Format("%s, fused with %zu others%s", set[k]->lead().Describe().c_str(), set.size() - 1,
                             reused ? ", persistent plan" : ""));
      timeline_.Phase(name, "MEMCPY_OUT_FUSION_BUFFER", t2, t3);
    }
    Complete(ops[k], Status::Ok());
  }
  return Status::Ok();
}

Status Engine::RunOnDevice(const std::vector<const Response*>& set) {
  const Request& a = set.front()->lead();
  const int device = DeviceOfRank(*set.front(), rank_);
  bool all_device = true;
  for (int r = 0; r < size_; ++r) all_device = all_device && DeviceOfRank(*set.front(), r) >= 0;
  const size_t esize = DtypeSize(a.dtype);
  const bool fused = set.size() > 1;
  std::vector<std::shared_ptr<Op>> ops;
  size_t total = 0;
  for (auto* r : set) {
    auto op = TakeOp(r->lead().name);
    // Present on this rank (its device is known): its op exists.
    if (!op) return Error(ZC_ERR_INTERNAL, "'%s' was agreed without this rank's request", r->lead().name.c_str());
    ops.push_back(std::move(op));
    total += static_cast<size_t>(r->lead().elements());
  }
  const std::string what = fused ? Format("fused allreduce of %zu tensors on GPU %d", set.size(), device)
                                 : Format("allreduce of '%s' on GPU %d", a.name.c_str(), device);
  auto t0 = Clock::now();
  ZC_RETURN_IF_ERROR(device_.Begin(device).with_context(what));
  char* buf = nullptr;
  if (fused) ZC_RETURN_IF_ERROR(device_.Reserve(total * esize, &buf).with_context(what));
  // Pack (or, alone, input to output), prescaled, on the engine's stream.
  size_t off = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    const size_t n = static_cast<size_t>(set[k]->lead().elements());
    void* dst = fused ? buf + off * esize : ops[k]->output;
    Status st = device_.WaitReady(ops[k]->ready);
    if (st.ok()) st = device_.ScaledCopy(dst, ops[k]->input, n, a.dtype, a.prescale);
    ZC_RETURN_IF_ERROR(st.with_context(Format("allreduce of '%s' on GPU %d: copy into the %s",
                                              set[k]->lead().name.c_str(), device,
                                              fused ? "device fusion buffer" : "output")));
    ops[k]->ready.reset();
    off += n;
  }
  ZC_RETURN_IF_ERROR(device_.Synchronize("packing").with_context(what));
  auto t1 = Clock::now();
  void* work = fused ? static_cast<void*>(buf) : ops[0]->output;
  const char* how = "";
  ZC_RETURN_IF_ERROR(device_.Allreduce(coll_, work, total, a.dtype, a.op, all_device, &how).with_context(what));
  stats_.data_collectives++;
  if (fused) {
    stats_.fused_sets++;
    stats_.fused_tensors += set.size();
  }
  auto t2 = Clock::now();
  off = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    const size_t n = static_cast<size_t>(set[k]->lead().elements());
    void* src = fused ? buf + off * esize : ops[k]->output;
    ZC_RETURN_IF_ERROR(device_.ScaledCopy(ops[k]->output, src, n, a.dtype, a.postscale)
                           .with_context(Format("allreduce of '%s' on GPU %d: copy out of the %s",
                                                set[k]->lead().name.c_str(), device,
                                                fused ? "device fusion buffer" : "output")));
    off += n;
  }
  ZC_RETURN_IF_ERROR(device_.Synchronize("unpacking").with_context(what));
  auto t3 = Clock::now();
  for (size_t k = 0; k < set.size(); ++k) {
    const std::string& name = set[k]->lead().name;
    if (timeline_.active()) {
      timeline_.Phase(name, "QUEUE", ops[k]->submitted, ops[k]->drained);
      timeline_.Phase(name, "NEGOTIATE", ops[k]->drained, t0);
      timeline_.Phase(name, "MEMCPY_IN_FUSION_BUFFER", t0, t1);
      timeline_.Phase(name, "ALLREDUCE", t1, t2,
                      Format("%s, fused with %zu others, on GPU %d (%s)", set[k]->per_rank[rank_].Describe().c_str(),
                             set.size() - 1, device, how));
      timeline_.Phase(name, "MEMCPY_OUT_FUSION_BUFFER", t2, t3);
    }
    Complete(ops[k], Status::Ok());
  }
  return Status::Ok();
}

Status Engine::RunOther(const Response& resp) {
  const Request& r = resp.lead();
  auto op = TakeOp(r.name);
  if (!op) return Error(ZC_ERR_INTERNAL, "'%s' was agreed without this rank's request", r.name.c_str());
  auto t0 = Clock::now();
  Status st;
  const char* phase = "";
  switch (r.type) {
    case OpType::kBroadcast:
      phase = "BROADCAST";
      st = coll_->Broadcast(op->output, static_cast<size_t>(r.elements()), r.dtype, r.root);
      op->out_shape = r.shape;
      break;
    case OpType::kAllgather:
      phase = "ALLGATHER";
      st = RunAllgather(resp, op.get());
      break;
    case OpType::kAlltoall:
      phase = "ALLTOALL";
      st = RunAlltoall(resp, op.get());
      break;
    case OpType::kReducescatter:
      phase = "REDUCESCATTER";
      st = RunReducescatter(r, op.get());
      break;
    case OpType::kBarrier:
      phase = "BARRIER";
      st = coll_->Barrier();
      break;
    default:
      return Error(ZC_ERR_INTERNAL, "'%s': unexpected %s response", r.name.c_str(), OpTypeName(r.type));
  }
  stats_.data_collectives++;
  ZC_RETURN_IF_ERROR(st.with_context(Format("%s of '%s'", OpTypeName(r.type), r.name.c_str())));
  if (timeline_.active()) {
    timeline_.Phase(r.name, "QUEUE", op->submitted, op->drained);
    timeline_.Phase(r.name, "NEGOTIATE", op->drained, t0);
    timeline_.Phase(r.name, phase, t0, Clock::now(), r.Describe());
  }
  Complete(op, Status::Ok());
  return Status::Ok();
}

// Every rank's first dimension may differ: the response carries each rank's
// shape, from which the counts and displacements follow.
Status Engine::RunAllgather(const Response& resp, Op* op) {
  const Request& r = resp.lead();
  const size_t row = static_cast<size_t>(r.row_elements());
  std::vector<size_t> counts(size_), displs(size_);
  size_t total = 0;
  int64_t rows = 0;
  for (int q = 0; q < size_; ++q) {
    counts[q] = static_cast<size_t>(resp.per_rank[q].shape[0]) * row;
    displs[q] = total;
    total += counts[q];
    rows += resp.per_rank[q].shape[0];
  }
  op->result.resize(total * DtypeSize(r.dtype));
  Status st = coll_->Allgatherv(op->input, counts[rank_], op->result.data(), counts.data(), displs.data(), r.dtype);
  op->out_shape = op->req.shape;
  op->out_shape[0] = rows;
  return st;
}

// Rows sent follow this rank's splits, rows received every other rank's
// split for this rank (from the response).
Status Engine::RunAlltoall(const Response& resp, Op* op) {
  const Request& r = resp.lead();
  const size_t row = static_cast<size_t>(r.row_elements());
  std::vector<size_t> sc(size_), sd(size_), rc(size_), rd(size_);
  size_t soff = 0, roff = 0;
  int64_t rows = 0;
  op->received_splits.resize(size_);
  for (int q = 0; q < size_; ++q) {
    sc[q] = static_cast<size_t>(op->req.splits[q]) * row;
    sd[q] = soff;
    soff += sc[q];
    op->received_splits[q] = resp.per_rank[q].splits[rank_];
    rc[q] = static_cast<size_t>(op->received_splits[q]) * row;
    rd[q] = roff;
    roff += rc[q];
    rows += op->received_splits[q];
  }
  op->result.resize(roff * DtypeSize(r.dtype));
  Status st = coll_->Alltoallv(op->input, sc.data(), sd.data(), op->result.data(), rc.data(), rd.data(), r.dtype);
  op->out_shape = op->req.shape;
  op->out_shape[0] = rows;
  return st;
}

// Rank q keeps rows [first, first + my_rows) of the first dimension, the
// first dim0 % size ranks one row more (Horovod's split).
Status Engine::RunReducescatter(const Request& r, Op* op) {
  const size_t esize = DtypeSize(r.dtype);
  const size_t row = static_cast<size_t>(r.row_elements());
  const int64_t dim0 = r.shape[0];
  const int64_t my_rows = dim0 / size_ + (rank_ < dim0 % size_ ? 1 : 0);
  const int64_t first = rank_ * (dim0 / size_) + std::min<int64_t>(rank_, dim0 % size_);
  const size_t total = static_cast<size_t>(r.elements());
  op->result.resize(static_cast<size_t>(my_rows) * row * esize);
  op->out_shape = r.shape;
  op->out_shape[0] = my_rows;
  std::vector<char> scaled;
  const void* in = op->input;
  if (r.prescale != 1.0) {
    scaled.resize(total * esize);
    ScaledCopy(r.dtype, op->input, scaled.data(), total, r.prescale);
    in = scaled.data();
  }
  Status st;
  if (dim0 % size_ == 0) {
    st = coll_->ReduceScatter(in, op->result.data(), static_cast<size_t>(my_rows) * row, r.dtype, r.op);
  } else {
    // Uneven parts: reduce everything, keep this rank's rows.
    std::vector<char> full(total * esize);
    st = coll_->Allreduce(in, full.data(), total, r.dtype, r.op);
    if (st.ok() && my_rows > 0)
      memcpy(op->result.data(), full.data() + static_cast<size_t>(first) * row * esize, op->result.size());
  }
  if (st.ok()) ScaledCopy(r.dtype, op->result.data(), op->result.data(), op->result.size() / esize, r.postscale);
  return st;
}

}  // namespace zc::engine
