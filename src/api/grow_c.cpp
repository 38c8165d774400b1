// C ABI: elastic membership (docs/elastic.md, "Grow"). Newcomers queue in
// the job's store (bootstrap/join_queue.h); zc_comm_grow's rank 0 claims
// the waiting ones and starts a new membership generation, every rank of
// the communicator learns it by a broadcast, and survivors and newcomers
// meet in that generation's fresh rendezvous (bootstrap/grow_bootstrap.h).
// The grown communicator is a new World: its own Device, connections,
// segments (named after the generation) and context ids. The old
// communicator keeps its own and stays usable until finalized.
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/checks.h"
#include "api/comm.h"
#include "api/run_collective.h"
#include "bootstrap/grow_bootstrap.h"
#include "bootstrap/join_queue.h"
#include "collectives/collectives.h"
#include "common/log.h"
#include "p2p/segment.h"

namespace {

using namespace zc::api;
using zc::Status;

bool StartedToJoin() {
  const char* v = getenv("ZC_JOIN");
  return v && strcmp(v, "1") == 0;
}

// The World's connection to the job's store (made on first use); caller
// holds world->grow_mu.
Status GrowStore(zc::World* w, zc::StoreClient** out) {
  if (w->config.store.empty())
    return zc::Error(ZC_ERR_UNSUPPORTED,
                     "the communicator has no store to meet newcomers in (started by PMIx or as a job of one): "
                     "start the job with zcrun or from a unique id");
  if (!w->grow_store) {
    ZC_RETURN_IF_ERROR(zc::StoreClient::Connect(w->config.store, w->config.job_key,
                                                zc::Deadline(w->config.timeout_s), &w->grow_store));
    w->grow_store->set_op_timeout(w->config.timeout_s);
  }
  *out = w->grow_store.get();
  return Status::Ok();
}

// Survivors: a rank of the old communicator lost, or a peer's alert of it,
// fails the grow at once.
zc::GrowBootstrap::Check WatchOldPeers(zc_comm* comm) {
  return [comm]() -> Status {
    zc::HealthScope scope = comm->group->Scope();
    for (int r = 0; r < comm->size; ++r) {
      if (r == comm->rank) continue;
      Status st = comm->device->health().Health(comm->group->device_rank(r));
      if (!st.ok()) return st.with_context(zc::Format("rank %d of the communicator being grown", r));
    }
    return Status::Ok();
  };
}

// Every participant of generation gen (survivor or newcomer): the new
// World and its communicator, confirmed by a barrier of all of them.
Status MeetGeneration(const zc::Config& base, int gen, int rank, int size, zc::GrowBootstrap::Check check,
                      std::unique_ptr<zc_comm>* out) {
  zc::Config config = base;
  config.rank = rank;
  config.size = size;
  config.local_rank = config.local_size = -1;  // from host ids
  config.generation = gen;
  std::unique_ptr<zc::Bootstrap> bootstrap;
  ZC_RETURN_IF_ERROR(zc::GrowBootstrap::Create(config, gen, std::move(check), &bootstrap));
  auto* grow_bootstrap = static_cast<zc::GrowBootstrap*>(bootstrap.get());
  std::shared_ptr<zc::World> world;
  ZC_RETURN_IF_ERROR(MakeWorldOver(config, std::move(bootstrap), &world));
  std::unique_ptr<zc_comm> comm;
  ZC_RETURN_IF_ERROR(MakeComm(world, zc::Group::AllRanks(world->device.get()), 0, nullptr, &comm));
  // Every participant has built it (one that failed or died fails this).
  if (comm->size > 1) {
    std::lock_guard<zc::SpinLock> lock(comm->coll_mu);
    ZC_RETURN_IF_ERROR(comm->coll->Barrier().with_context("confirming the grown communicator"));
  }
  grow_bootstrap->ForgetCheck();
  *out = std::move(comm);
  return Status::Ok();
}

// After a failed grow: removes the segments that a participant who died
// made for generation gen on this host (its files may close a little after
// its connections broke: retry for up to a second while one is left).
void SweepGeneration(const zc::Config& config, int gen) {
  std::string tag = config.job_key.substr(0, 16);
  for (char& ch : tag)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = 'x';
  tag += zc::Format("-g%d", gen);  // as the Device names them
  zc::Deadline deadline(1.0);
  for (;;) {
    zc::Segment::SweepStale();
    if (!zc::Segment::HasSegmentOfDeadProcess(tag) || deadline.expired()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// What rank 0 tells the others: the generation (or, <= 0, why not) and the
// number of newcomers.
struct GrowPlan {
  int64_t generation = 0;
  int64_t newcomers = 0;
};

// Rank 0: claims the waiting newcomers for a new generation.
Status PlanGrow(zc::StoreClient* store, GrowPlan* plan, std::vector<int64_t>* tickets) {
  zc::JoinQueue queue(store);
  int gen = 0;
  ZC_RETURN_IF_ERROR(queue.BeginGeneration(&gen, tickets));
  plan->generation = gen;
  plan->newcomers = static_cast<int64_t>(tickets->size());
  return Status::Ok();
}

zc_status Grow(zc_comm* comm, zc_comm** newcomm) {
  const char* op = "zc_comm_grow";
  zc::World* w = comm->world.get();
  std::lock_guard<std::mutex> grow_lock(w->grow_mu);
  const std::string where = zc::Format("rank %d: %s", comm->rank, op);
  zc::StoreClient* store = nullptr;
  Status st = GrowStore(w, &store);
  if (!st.ok()) return Fail(st.with_context(where));
  GrowPlan plan;
  std::vector<int64_t> tickets;
  Status planned;
  if (comm->rank == 0) {
    planned = PlanGrow(store, &plan, &tickets);
    if (!planned.ok()) plan.generation = -static_cast<int64_t>(planned.code());
  }
  // Everyone learns the plan (or that rank 0 could not make one).
  zc_status s = RunBlocking(comm, op, [&] {
    return RunLocked(comm, op, [&](zc::Collectives* c) { return c->Broadcast(&plan, 2, ZC_INT64, 0); });
  });
  if (s != ZC_OK) {
    if (comm->rank == 0) zc::JoinQueue(store).Refuse(tickets, zc::Format("%s: %s", where.c_str(), zc_last_error(comm)));
    return s;
  }
  if (plan.generation <= 0)
    return Fail(planned.ok() ? zc::Error(static_cast<zc_status>(-plan.generation),
                                         "%s: rank 0 could not read the job's queue of newcomers", where.c_str())
                             : planned.with_context(where));
  const int gen = static_cast<int>(plan.generation);
  const int size = comm->size + static_cast<int>(plan.newcomers);
  if (comm->rank == 0) {
    st = zc::JoinQueue(store).Admit(gen, comm->size, tickets);
    if (!st.ok()) {
      zc::GrowBootstrap::MarkAborted(store, gen, where + ": cannot admit the newcomers: " + st.message());
      zc::JoinQueue(store).Refuse(tickets, st.message());
      return Fail(st.with_context(where));
    }
  }
  std::unique_ptr<zc_comm> made;
  st = MeetGeneration(w->config, gen, comm->rank, size, WatchOldPeers(comm), &made);
  if (!st.ok()) {
    zc::GrowBootstrap::MarkAborted(store, gen, zc::Format("%s: %s", where.c_str(), st.message().c_str()));
    SweepGeneration(w->config, gen);
    return Fail(st.with_context(zc::Format("%s (generation %d, %d ranks + %d newcomers)", where.c_str(), gen,
                                           comm->size, static_cast<int>(plan.newcomers))));
  }
  ZC_INFO(kCommon, "grow: rank %d of %d -> rank %d of %d (generation %d, %d newcomers)", comm->rank, comm->size,
          made->rank, made->size, gen, static_cast<int>(plan.newcomers));
  *newcomm = made.release();
  return ZC_OK;
}

}  // namespace

extern "C" {

zc_status zc_is_joiner(int* joining) {
  if (!joining) {
    SetLastErrorText("zc_is_joiner: invalid argument: joining is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  *joining = StartedToJoin() ? 1 : 0;
  return ZC_OK;
}

zc_status zc_comm_join_pending(zc_comm* comm, int* count) {
  const char* op = "zc_comm_join_pending";
  ZC_CHECK_COMM(comm, op);
  if (!count) return BadArg(comm, op, "count is NULL");
  *count = 0;
  zc::World* w = comm->world.get();
  if (w->config.store.empty()) return ZC_OK;  // nobody can be waiting
  std::lock_guard<std::mutex> lock(w->grow_mu);
  zc::StoreClient* store = nullptr;
  Status st = GrowStore(w, &store);
  if (st.ok()) st = zc::JoinQueue(store).Pending(count);
  if (!st.ok()) return Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
  return ZC_OK;
}

zc_status zc_comm_grow(zc_comm* comm, zc_comm** newcomm) {
  ZC_CHECK_COMM(comm, "zc_comm_grow");
  if (!newcomm) return BadArg(comm, "zc_comm_grow", "newcomm is NULL");
  *newcomm = nullptr;
  return Grow(comm, newcomm);
}

zc_status zc_comm_join(zc_comm** newcomm) {
  const char* op = "zc_comm_join";
  if (!newcomm) return BadArg(nullptr, op, "newcomm is NULL");
  *newcomm = nullptr;
  if (!StartedToJoin())
    return BadArg(nullptr, op, "this process was not started to join a running job (ZC_JOIN=1 is not set)");
  zc::Config config;
  Status st = zc::Config::FromEnv(&config);
  if (!st.ok()) return Fail(st.with_context(op));
  zc::log::Configure(config.debug, config.debug_subsys);
  if (config.store.empty())
    return BadArg(nullptr, op, "ZC_JOIN=1 but ZC_STORE (the running job's store) is not set");
  std::unique_ptr<zc::StoreClient> store;
  zc::Deadline dl(config.timeout_s);
  st = zc::StoreClient::Connect(config.store, config.job_key, dl, &store);
  if (!st.ok()) return Fail(st.with_context(zc::Format("%s: the job's store", op)));
  store->set_op_timeout(config.timeout_s + 60);
  zc::JoinQueue queue(store.get());
  int64_t ticket = 0;
  zc::Admission adm;
  st = queue.Enqueue(zc::Format("%d %s", static_cast<int>(getpid()), zc::LocalHostId().c_str()), &ticket);
  if (st.ok()) st = queue.AwaitAdmission(ticket, dl, &adm);
  if (!st.ok()) return Fail(st.with_context(op));
  std::unique_ptr<zc_comm> made;
  st = MeetGeneration(config, adm.generation, adm.rank, adm.size, nullptr, &made);
  if (!st.ok()) {
    zc::GrowBootstrap::MarkAborted(store.get(), adm.generation,
                                   zc::Format("newcomer rank %d: %s", adm.rank, st.message().c_str()));
    SweepGeneration(config, adm.generation);
    return Fail(st.with_context(zc::Format("newcomer rank %d: %s (generation %d)", adm.rank, op, adm.generation)));
  }
  ZC_INFO(kCommon, "joined: rank %d of %d (generation %d)", made->rank, made->size, adm.generation);
  *newcomm = made.release();
  return ZC_OK;
}

}  // extern "C"
