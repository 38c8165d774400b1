#include "ps/instance.h"

#include <cstring>

#include "collectives/dtype.h"
#include "common/log.h"
#include "p2p/device.h"

namespace zc::ps {
namespace {

// What every rank tells the others at creation; all but the role and the
// alert descriptor must agree.
struct Hello {
  int32_t role;
  uint32_t async;
  double sgd_lr;
  uint64_t partition;
  uint32_t policy;
  uint32_t pad;
};

}  // namespace

Status Instance::Create(Group* group, Role role, const Options& options, uint64_t partition_bytes,
                        PlacementPolicy policy, const AllgatherFn& allgather,
                        std::unique_ptr<Instance>* out) {
  const int n = group->size();
  const size_t desc_bytes = RemoteRegion().Serialize().size();
  const size_t rec = sizeof(Hello) + desc_bytes;
  // Workers' alert words (one per server; written by a failing server).
  MemRegion* alerts = nullptr;
  const bool worker = role != Role::kServer;
  if (worker) {
    ZC_RETURN_IF_ERROR(group->Allocate(64 * static_cast<size_t>(n), &alerts));
    memset(alerts->data(), 0, 64 * static_cast<size_t>(n));
  }
  std::string mine(rec, '\0');
  Hello h{static_cast<int32_t>(role), options.async ? 1u : 0u, options.sgd_lr, partition_bytes,
          static_cast<uint32_t>(policy), 0};
  memcpy(&mine[0], &h, sizeof(h));
  if (alerts) {
    std::string d = alerts->remote().Serialize();
    memcpy(&mine[sizeof(h)], d.data(), std::min(d.size(), desc_bytes));
  }
  std::string all(rec * static_cast<size_t>(n), '\0');
  Status st = allgather(mine.data(), &all[0], rec);
  auto fail = [&](const Status& s) {
    // Cleanup: s (the first failure) is what the caller needs to see.
    if (alerts) IgnoreError(group->Free(alerts->data()), "cleanup after a failed setup");
    return s;
  };
  if (!st.ok()) return fail(st);

  auto sh = std::make_unique<Shared>(group, options, Placement(partition_bytes, policy, 1));
  std::vector<RemoteRegion> alert_of(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Hello o;
    memcpy(&o, &all[rec * r], sizeof(o));
    if (o.async != h.async || o.sgd_lr != h.sgd_lr)
      return fail(Error(ZC_ERR_MISMATCH, "ranks disagree on the options: rank %d has async=%u "
                        "sgd_lr=%g, rank %d has async=%u sgd_lr=%g", group->rank(), h.async, h.sgd_lr,
                        r, o.async, o.sgd_lr));
    if (o.partition != h.partition || o.policy != h.policy)
      return fail(Error(ZC_ERR_MISMATCH, "ranks disagree on ZC_PS_PARTITION or ZC_PS_PLACEMENT: "
                        "rank %d has %llu bytes (%s), rank %d has %llu bytes (%s)", group->rank(),
                        static_cast<unsigned long long>(h.partition), h.policy ? "hash" : "roundrobin", r,
                        static_cast<unsigned long long>(o.partition), o.policy ? "hash" : "roundrobin"));
    if (o.role < 0 || o.role > 2)
      return fail(Error(ZC_ERR_INVALID_ARG, "rank %d: unknown role %d", r, o.role));
    auto rr = static_cast<Role>(o.role);
    if (rr != Role::kServer) {
      if (r == group->rank()) sh->worker_index = static_cast<int>(sh->workers.size());
      sh->workers.push_back(r);
      ZC_RETURN_IF_ERROR(RemoteRegion::Parse(all.substr(rec * r + sizeof(Hello), desc_bytes),
                                             &alert_of[sh->workers.size() - 1]));
    }
    if (rr != Role::kWorker) {
      if (r == group->rank()) sh->server_index = static_cast<int>(sh->servers.size());
      sh->servers.push_back(r);
    }
  }
  if (sh->workers.empty() || sh->servers.empty())
    return fail(Error(ZC_ERR_INVALID_ARG, "%zu workers and %zu servers: a parameter server needs at "
                      "least one of each", sh->workers.size(), sh->servers.size()));
  alert_of.resize(sh->workers.size());
  sh->alerts = std::move(alert_of);
  sh->my_alerts = alerts;
  sh->placement = Placement(partition_bytes, policy, static_cast<int>(sh->servers.size()));

  std::unique_ptr<Instance> inst(new Instance(std::move(sh)));
  if (role != Role::kWorker) {
    inst->server_ = std::make_unique<Server>(inst->sh_.get());
    inst->server_->Start();
  }
  if (worker) {
    inst->worker_ = std::make_unique<Worker>(inst->sh_.get());
    Instance* self = inst.get();
    inst->op_thread_ = std::thread([self] { self->OpLoop(); });
  }
  ZC_INFO(kPs, "ps: %zu workers, %zu servers, %s, sgd_lr %g, partition %llu bytes",
          inst->sh_->workers.size(), inst->sh_->servers.size(), options.async ? "async" : "sync",
          options.sgd_lr, static_cast<unsigned long long>(partition_bytes));
  *out = std::move(inst);
  return Status::Ok();
}

Instance::~Instance() {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    stopping_ = true;
  }
  q_cv_.notify_all();
  if (op_thread_.joinable()) op_thread_.join();
  server_.reset();
  worker_.reset();
  if (sh_ && sh_->my_alerts)
    IgnoreError(sh_->group->Free(sh_->my_alerts->data()), "destructor: best effort");
}

void Instance::OpLoop() {
  HealthScope scope = sh_->group->Scope();
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(q_mu_);
      q_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

Status Instance::Run(std::function<Status()> op, DoneFn done) {
  std::unique_lock<std::mutex> lock(q_mu_);
  if (!done && busy_ == 0) {
    // Nothing queued: run in the caller's thread (no hand-over).
    ++busy_;
    lock.unlock();
    Status st;
    {
      std::lock_guard<std::mutex> ex(exec_mu_);
      st = op();
    }
    lock.lock();
    --busy_;
    return st;
  }
  // Behind queued operations: keep call order.
  auto result = std::make_shared<std::pair<std::atomic<int>, Status>>();
  result->first.store(0);
  ++busy_;
  queue_.push_back([this, op = std::move(op), done, result] {
    Status st;
    {
      std::lock_guard<std::mutex> ex(exec_mu_);
      st = op();
    }
    {
      std::lock_guard<std::mutex> l(q_mu_);
      --busy_;
    }
    if (done) {
      done(st);
    } else {
      result->second = st;
      result->first.store(1, std::memory_order_release);
    }
  });
  lock.unlock();
  q_cv_.notify_one();
  if (done) return Status::Ok();
  // The operation has its own deadlines; this only waits for it to end.
  Backoff bo = sh_->group->device()->health().NewBackoff();
  while (!result->first.load(std::memory_order_acquire)) bo.Pause();
  return result->second;
}

Status Instance::Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  if (sh_->options.sgd_lr > 0 && !IsFloating(dtype))
    return Error(ZC_ERR_INVALID_ARG, "key %llu: sgd_lr > 0 needs a floating dtype, not %s",
                 static_cast<unsigned long long>(key), DtypeName(dtype));
  std::lock_guard<std::mutex> lock(api_mu_);
  // Declarations wait for the queued transfers (they share the slots' state).
  return Run([&] { return worker_->Declare(key, count, dtype, init); }, nullptr);
}

Status Instance::KeyBytes(uint64_t key, size_t* bytes) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  std::lock_guard<std::mutex> lock(api_mu_);
  return worker_->KeyBytes(key, bytes);
}

Status Instance::Push(uint64_t key, const void* buf, DoneFn done) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  Worker::Key* k = nullptr;
  uint64_t round = 0;
  std::lock_guard<std::mutex> lock(api_mu_);
  ZC_RETURN_IF_ERROR(worker_->AdmitPush(key, &k, &round));
  Worker* w = worker_.get();
  return Run([w, k, buf, round] { return w->DoPush(k, buf, round); }, std::move(done));
}

Status Instance::Pull(uint64_t key, void* buf, DoneFn done) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  Worker::Key* k = nullptr;
  uint64_t round = 0;
  std::lock_guard<std::mutex> lock(api_mu_);
  ZC_RETURN_IF_ERROR(worker_->AdmitPull(key, &k, &round));
  Worker* w = worker_.get();
  return Run([w, k, buf, round] { return w->DoPull(k, buf, round); }, std::move(done));
}

Status Instance::Serve() {
  if (!server_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a server");
  if (worker_) return Error(ZC_ERR_INVALID_ARG, "zc_ps_serve is for server-only ranks (ZC_PS_BOTH "
                            "ranks serve on their own threads until zc_ps_free)");
  return server_->WaitDone();
}

Status Instance::Shutdown() {
  Status first;
  if (worker_) {
    // Queued operations finish first.
    Status st = Run([this] { return worker_->Bye(); }, nullptr);
    if (!st.ok()) first = st;
  }
  if (server_) {
    Status st = server_->Finish(sh_->group->NewDeadline());
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace zc::ps
