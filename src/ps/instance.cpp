#include "ps/instance.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/dtype.h"
#include "common/log.h"
#include "p2p/device.h"
#include "ps/leave_barrier.h"

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
  uint32_t piece;   // bytes of a piece (PieceBytes)
  uint32_t shm;     // 1: every peer of this rank is on shared memory
  uint32_t pad;
};

// The unit of transfer and reduction inside a chunk. On shared memory
// (every rank's peers) 512 KiB: small enough that a piece's pushes, its
// reduction and its replies stay in cache (L2 on the development VM is
// 1 MiB a core), large enough that a piece's flags cost little beside its
// bytes (4 MiB chunks: 1.2-1.7x the push+pull time of VGG-16 and
// Inception-v3 with 2 co-located servers). Over sockets whole chunks: each
// piece is a message and a progress-thread wake-up (512 KiB pieces: 1.2-1.4x
// the time of whole 4 MiB chunks on tcp over lo). ZC_PS_PIECE overrides
// both (bytes, with K or M; 4 KiB..1 GiB; 0: whole chunks); it must be the
// same on every rank. kAuto: not set.
constexpr uint32_t kAuto = ~0u;
constexpr uint32_t kShmPiece = 512 * 1024;
uint32_t PieceBytes() {
  const char* e = getenv("ZC_PS_PIECE");
  if (!e || !*e) return kAuto;
  char* end = nullptr;
  unsigned long long x = strtoull(e, &end, 10);
  if (end && (*end == 'K' || *end == 'k')) x <<= 10;
  else if (end && (*end == 'M' || *end == 'm')) x <<= 20;
  if (x == 0) return 0;
  return static_cast<uint32_t>(std::min<unsigned long long>(std::max<unsigned long long>(x, 4096), 1ull << 30));
}

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
  uint32_t shm = 1;
  for (int r = 0; r < n; ++r)
    if (r != group->rank() && group->channel(r).kind() != TransportKind::kShm) shm = 0;
  Hello h{static_cast<int32_t>(role), options.async ? 1u : 0u, options.sgd_lr, partition_bytes,
          static_cast<uint32_t>(policy), PieceBytes(), shm, 0};
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
  bool all_shm = true;
  for (int r = 0; r < n; ++r) {
    Hello o;
    memcpy(&o, &all[rec * r], sizeof(o));
    all_shm = all_shm && o.shm;
    if (o.async != h.async || o.sgd_lr != h.sgd_lr)
      return fail(Error(ZC_ERR_MISMATCH, "ranks disagree on the options: rank %d has async=%u "
                        "sgd_lr=%g, rank %d has async=%u sgd_lr=%g", group->rank(), h.async, h.sgd_lr,
                        r, o.async, o.sgd_lr));
    if (o.piece != h.piece)
      return fail(Error(ZC_ERR_MISMATCH, "ranks disagree on ZC_PS_PIECE: rank %d has %s, rank %d has %s",
                        group->rank(), h.piece == kAuto ? "none" : std::to_string(h.piece).c_str(), r,
                        o.piece == kAuto ? "none" : std::to_string(o.piece).c_str()));
    if (o.partition != h.partition || o.policy != h.policy)
      return fail(Error(ZC_ERR_MISMATCH, "ranks disagree on ZC_PS_PARTITION or ZC_PS_PLACEMENT: "
                        "rank %d has %llu bytes (%s), rank %d has %llu bytes (%s)", group->rank(),
                        static_cast<unsigned long long>(h.partition), PolicyName(h.policy), r,
                        static_cast<unsigned long long>(o.partition), PolicyName(o.policy)));
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
  const uint32_t piece = h.piece != kAuto ? h.piece : all_shm ? kShmPiece : 0;
  sh->all_shm = all_shm;
  sh->placement = Placement(partition_bytes, policy, static_cast<int>(sh->servers.size()), piece);

  std::unique_ptr<Instance> inst(new Instance(std::move(sh)));
  if (role != Role::kWorker) {
    inst->server_ = std::make_unique<Server>(inst->sh_.get());
    inst->server_->Start();
  }
  if (worker) {
    inst->worker_ = std::make_unique<Worker>(inst->sh_.get(), inst->server_.get());
    Instance* self = inst.get();
    inst->op_thread_ = std::thread([self] { self->OpLoop(); });
  }
  ZC_INFO(kPs, "ps: %zu workers, %zu servers, %s, sgd_lr %g, partition %llu bytes, pieces of %u bytes",
          inst->sh_->workers.size(), inst->sh_->servers.size(), options.async ? "async" : "sync",
          options.sgd_lr, static_cast<unsigned long long>(partition_bytes), piece);
  *out = std::move(inst);
  return Status::Ok();
}

Instance::~Instance() {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    stopping_ = true;
  }
  q_cv_.notify_all();
  // (Operations still in flight after a failure end with their deadlines.)
  if (op_thread_.joinable()) op_thread_.join();
  server_.reset();
  worker_.reset();
  if (sh_ && sh_->my_alerts)
    IgnoreError(sh_->group->Free(sh_->my_alerts->data()), "destructor: best effort");
}

void Instance::Drive(const std::atomic<int>* done) {
  Backoff bo = sh_->dev()->health().NewBackoff(worker_->notified());
  for (;;) {
    if (done ? done->load(std::memory_order_acquire) != 0 : worker_->in_flight() == 0) return;
    bool progress = false;
    if (engine_mu_.try_lock()) {
      progress = worker_->Pass();
      engine_mu_.unlock();
    }
    if (progress) bo.Reset();
    else bo.Pause();
  }
}

Status Instance::Quiet(const std::function<Status()>& fn) {
  // This thread now waits for every queued push, whoever else does.
  Worker::Draining draining(worker_.get());
  for (;;) {
    Drive(nullptr);
    std::lock_guard<std::mutex> lock(engine_mu_);
    if (worker_->in_flight() == 0) return fn();
  }
}

void Instance::OpLoop() {
  HealthScope scope = sh_->group->Scope();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(q_mu_);
      q_cv_.wait(lock, [&] { return stopping_ || worker_->in_flight() > 0; });
      if (stopping_ && worker_->in_flight() == 0) return;
    }
    Drive(nullptr);
  }
}

Status Instance::Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  if (sh_->options.sgd_lr > 0 && !IsFloating(dtype))
    return Error(ZC_ERR_INVALID_ARG, "key %llu: sgd_lr > 0 needs a floating dtype, not %s",
                 static_cast<unsigned long long>(key), DtypeName(dtype));
  std::lock_guard<std::mutex> lock(api_mu_);
  // Declarations wait for the queued transfers (they share the slots' state).
  return Quiet([&] { return worker_->Declare(key, count, dtype, init); });
}

Status Instance::KeyBytes(uint64_t key, size_t* bytes) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  std::lock_guard<std::mutex> lock(api_mu_);
  return worker_->KeyBytes(key, bytes);
}

Status Instance::Push(uint64_t key, const void* buf, DoneFn done, std::shared_ptr<WaitWatch> watch) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  Worker::Key* k = nullptr;
  uint64_t round = 0;
  std::lock_guard<std::mutex> lock(api_mu_);
  ZC_RETURN_IF_ERROR(worker_->AdmitPush(key, &k, &round));
  return Start(true, k, const_cast<void*>(buf), round, std::move(done), std::move(watch), &lock);
}

Status Instance::Pull(uint64_t key, void* buf, DoneFn done) {
  if (!worker_) return Error(ZC_ERR_INVALID_ARG, "this rank is not a worker");
  Worker::Key* k = nullptr;
  uint64_t round = 0;
  std::lock_guard<std::mutex> lock(api_mu_);
  ZC_RETURN_IF_ERROR(worker_->AdmitPull(key, &k, &round));
  return Start(false, k, buf, round, std::move(done), nullptr, &lock);
}

Status Instance::Start(bool push, Worker::Key* k, void* buf, uint64_t round, DoneFn done,
                       std::shared_ptr<WaitWatch> watch, std::lock_guard<std::mutex>* api_lock) {
  (void)api_lock;  // held: operations are queued in call order
  if (done) {
    if (push) worker_->EnqueuePush(k, buf, round, std::move(done), std::move(watch));
    else worker_->EnqueuePull(k, buf, round, std::move(done));
    {
      std::lock_guard<std::mutex> lock(q_mu_);
    }
    q_cv_.notify_one();
    return Status::Ok();
  }
  // Blocking: this thread drives the engine until its operation is done.
  auto result = std::make_shared<std::pair<std::atomic<int>, Status>>();
  result->first.store(0);
  DoneFn mine = [result](const Status& st) {
    result->second = st;
    result->first.store(1, std::memory_order_release);
  };
  if (push) worker_->EnqueuePush(k, buf, round, std::move(mine), nullptr);  // its caller waits
  else worker_->EnqueuePull(k, buf, round, std::move(mine));
  Drive(&result->first);
  return result->second;
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
    Status st = Quiet([this] { return worker_->Bye(); });
    if (!st.ok()) first = st;
  }
  if (server_) {
    Status st = server_->Finish(sh_->group->NewDeadline());
    if (!st.ok() && first.ok()) first = st;
  }
  // After a failure nobody comes (as after the communicator's barrier).
  if (left_together() && first.ok() && sh_->group->size() > 1) {
    first = LeaveBarrier(sh_.get(), sh_->group->NewDeadline());
  }
  return first;
}

std::vector<int> Instance::LostWorkers() const {
  std::vector<int> out;
  if (server_) out = server_->DroppedWorkers();
  // Asked from any thread, also once the epoch is aborted: losses only.
  HealthScope scope = HealthScope::FaultTolerant(&sh_->dev()->health());
  for (int r : sh_->workers)
    if (r != sh_->group->rank() && !sh_->group->Health(r).ok() && std::find(out.begin(), out.end(), r) == out.end())
      out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace zc::ps
