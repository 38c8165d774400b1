// C ABI: communicator lifetime. zc_init (from the environment: zcrun, PMIx,
// or a job of one) and zc_comm_init_rank (from a unique id that a framework
// carries) each make a World (bootstrap + Device); zc_comm_split and
// zc_comm_dup make communicators over their parent's World, with a context
// id agreed by every rank so that their control messages never mix.
// docs/frameworks.md explains it for users.
#include <zcomm/zcomm.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/checks.h"
#include "api/comm.h"
#include "api/launcher_death.h"
#include "api/run_collective.h"
#include "bootstrap/store_client.h"
#include "bootstrap/unique_id.h"
#include "collectives/collectives.h"
#include "common/deadline.h"
#include "common/flight_recorder.h"
#include "common/log.h"
#include "common/sha256.h"
#include "p2p/mem_region.h"
#include "p2p/segment.h"
#include "zc_build_config.h"

namespace {

using namespace zc::api;
using zc::Status;

// Bootstrap and Device of a new World (collective over the bootstrap's ranks).
Status MakeWorld(const zc::Config& config, std::unique_ptr<zc::StoreServer> rendezvous,
                 const std::string& key_prefix, std::shared_ptr<zc::World>* out) {
  std::unique_ptr<zc::Bootstrap> bootstrap;
  ZC_RETURN_IF_ERROR(zc::Bootstrap::Create(config, &bootstrap, key_prefix).with_context("bootstrap"));
  ZC_RETURN_IF_ERROR(zc::api::MakeWorldOver(config, std::move(bootstrap), out));
  (*out)->rendezvous = std::move(rendezvous);
  return Status::Ok();
}

}  // namespace

namespace zc::api {

Status MakeWorldOver(const zc::Config& config, std::unique_ptr<zc::Bootstrap> bootstrap,
                     std::shared_ptr<zc::World>* out) {
  auto w = std::make_shared<zc::World>();
  w->config = config;
  w->bootstrap = std::move(bootstrap);
  zc::log::SetRank(w->bootstrap->rank());
  ZC_RETURN_IF_ERROR(zc::Device::Create(w->bootstrap.get(), config, &w->device)
                         .with_context(zc::Format("rank %d", w->bootstrap->rank())));
  ZC_RETURN_IF_ERROR(zc::api::WatchLauncher(w.get(), &w->launcher_watch));
  w->contexts[0] = 0;  // the world communicator's
  *out = std::move(w);
  return Status::Ok();
}

}  // namespace zc::api

namespace {

// The flight recorder of a new communicator (ZC_TRACE_BUFFER_SIZE, ZC_TRACE_DIR, ZC_TRACE_CLOCK).
std::shared_ptr<zc::trace::FlightRecorder> MakeRecorder(const zc::World& world, const zc_comm& comm, uint32_t ctx) {
  zc::trace::Identity id;
  if (!world.config.job_key.empty()) {
    zc::Digest256 d = zc::Sha256::Hash(world.config.job_key);
    id.job = zc::ToHex(d.data(), 4);
  }
  id.context = ctx;
  id.rank = comm.rank;
  id.size = comm.size;
  id.world_rank = world.bootstrap->rank();
  id.transport = comm.coll->transport_summary();
  return std::make_shared<zc::trace::FlightRecorder>(
      world.config.trace_buffer_size, std::move(id), world.config.trace_dir,
      world.config.trace_precise_clock ? zc::trace::Clock::kPrecise : zc::trace::Clock::kCoarse);
}

}  // namespace

namespace zc::api {

// The communicator of `members` (Device ranks in the new rank order) over
// world with context ctx. Collective over the members (collective links).
// parent_gpu: the DevicePath of the communicator it is split or duplicated
// from (its driver, caches and modes carry over), null for a new world.
Status MakeComm(const std::shared_ptr<zc::World>& world, std::vector<int> members, uint32_t ctx,
                const zc::gpu::DevicePath* parent_gpu, std::unique_ptr<zc_comm>* out) {
  auto comm = std::make_unique<zc_comm>();
  comm->config = world->config;
  comm->world = world;
  comm->device = std::shared_ptr<zc::Device>(world, world->device.get());
  comm->group = std::make_unique<zc::Group>(world->device.get(), std::move(members), ctx);
  comm->coll_mu.set_spins(world->device->health().spins());
  comm->rank = comm->group->rank();
  comm->size = comm->group->size();
  comm->local_rank = 0;
  comm->local_size = 0;
  for (int r = 0; r < comm->size; ++r) {
    if (r != comm->rank && !comm->group->is_local(r)) continue;
    if (r < comm->rank) ++comm->local_rank;
    ++comm->local_size;
  }
  ZC_RETURN_IF_ERROR(zc::Collectives::Create(comm->group.get(), &comm->coll).with_context("collectives"));
  comm->trace = MakeRecorder(*world, *comm, ctx);
  std::vector<const char*> peer_transports(comm->size);
  for (int r = 0; r < comm->size; ++r)
    peer_transports[r] = zc::TransportName(comm->group->transport_to(r));
  comm->trace->SetPeerTransports(std::move(peer_transports));
  comm->coll->set_recorder(comm->trace.get());
  zc::gpu::DevicePathOptions gpu;
  if (parent_gpu) {
    gpu = parent_gpu->options();
  } else {
    gpu.enabled = ZC_HAVE_CUDA;
    gpu.ipc_mode = comm->config.gpu_ipc;
    gpu.ipc_min_bytes = comm->config.gpu_ipc_min_bytes;
    gpu.chunk_bytes = comm->config.gpu_chunk_bytes;
  }
  gpu.ipc_reachable = comm->size > 1 && comm->local_size == comm->size;
  gpu.timeout_s = comm->config.timeout_s;
  zc::Device* device = world->device.get();
  gpu.known_host = [device](const void* p, size_t bytes) { return device->regions().IsPoolMemory(p, bytes); };
  comm->gpu = std::make_unique<zc::gpu::DevicePath>(gpu);
  comm->p2p = std::make_unique<zc::Messenger>(world->device.get(), comm->group->members(), comm->rank, ctx);
  comm->queue = std::make_shared<zc::api::CollectiveQueue>();
  *out = std::move(comm);
  return Status::Ok();
}

void ReleaseContext(zc::World* world, uint32_t ctx) {
  std::lock_guard<std::mutex> lock(world->contexts_mu);
  world->contexts.erase(ctx);
}

}  // namespace zc::api

namespace {

// Removes the segments of the lost peers on this host. A killed process
// drops its connections before the kernel has closed the rest of its files
// (the segments' locks among them): retry for up to a second while a lost
// peer's segment is still there (a peer only declared lost, still alive,
// keeps its segments and costs that second).
void SweepSegmentsOfLost(const std::string& job_tag, const std::vector<int>& lost) {
  zc::Deadline deadline(1.0);
  for (;;) {
    zc::Segment::SweepStale();
    bool left = false;
    for (int p : lost) left = left || zc::Segment::HasSegmentOf(job_tag, p);
    if (!left || deadline.expired()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A context id free on every rank of comm (MPI's context-id agreement):
// each rank reserves the lowest id it has free from `candidate` on, the
// largest proposal wins if every rank can take it, else all try again above
// it. Reservations keep concurrent splits of this process apart.
Status AgreeContext(zc_comm* comm, zc::Collectives* c, uint32_t* out) {
  zc::World* w = comm->world.get();
  uint64_t token;
  {
    std::lock_guard<std::mutex> lock(w->contexts_mu);
    token = w->next_token++;
  }
  uint32_t candidate = 1;
  for (;;) {
    uint32_t proposal = candidate;
    {
      std::lock_guard<std::mutex> lock(w->contexts_mu);
      while (proposal <= zc::kMaxContext && (w->contexts.count(proposal) || w->retired_contexts.count(proposal)))
        ++proposal;
      if (proposal > zc::kMaxContext)
        return zc::Error(ZC_ERR_NO_MEMORY, "no free communicator context id (%u communicators "
                         "over this rank's connections)", zc::kMaxContext);
      w->contexts[proposal] = token;
    }
    std::vector<uint32_t> all(static_cast<size_t>(comm->size));
    Status st = c->Allgather(&proposal, all.data(), 1, ZC_UINT32);
    uint32_t ctx = st.ok() ? *std::max_element(all.begin(), all.end()) : 0;
    uint32_t ok = 0;
    {
      std::lock_guard<std::mutex> lock(w->contexts_mu);
      if (proposal != ctx) w->contexts.erase(proposal);
      auto it = w->contexts.find(ctx);
      if (st.ok() && !w->retired_contexts.count(ctx) && (it == w->contexts.end() || it->second == token)) {
        w->contexts[ctx] = token;
        ok = 1;
      }
    }
    std::vector<uint32_t> oks(static_cast<size_t>(comm->size));
    if (st.ok()) st = c->Allgather(&ok, oks.data(), 1, ZC_UINT32);
    bool all_ok = st.ok() && std::all_of(oks.begin(), oks.end(), [](uint32_t v) { return v == 1; });
    {
      std::lock_guard<std::mutex> lock(w->contexts_mu);
      if (all_ok) w->contexts[ctx] = 0;  // in use
      else if (ok) w->contexts.erase(ctx);
    }
    ZC_RETURN_IF_ERROR(st);
    if (all_ok) {
      *out = ctx;
      return Status::Ok();
    }
    candidate = ctx + 1;
  }
}

zc_status InitFailed(const char* op, int rank, const Status& st) {
  return Fail(st.with_context(rank >= 0 ? zc::Format("rank %d: %s", rank, op) : std::string(op)));
}

}  // namespace

extern "C" {

void zc_version(int* major, int* minor, int* patch) {
  if (major) *major = ZCOMM_VERSION_MAJOR;
  if (minor) *minor = ZCOMM_VERSION_MINOR;
  if (patch) *patch = ZCOMM_VERSION_PATCH;
}

zc_status zc_init(zc_comm** out) {
  if (!out) {
    SetLastErrorText("zc_init: invalid argument: comm is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  *out = nullptr;
  zc::Config config;
  Status st = zc::Config::FromEnv(&config);
  if (!st.ok()) return Fail(st.with_context("zc_init"));
  zc::log::Configure(config.debug, config.debug_subsys);
  // Every zc_init of a job is collective and made in the same order on every
  // rank, so the n-th call of each process meets the n-th of the others in
  // keys of their own.
  static std::atomic<int> inits{0};
  int n = ++inits;
  std::string prefix = n == 1 ? "" : zc::Format("zc.init%d/", n);
  std::shared_ptr<zc::World> world;
  st = MakeWorld(config, nullptr, prefix, &world);
  if (!st.ok()) return InitFailed("zc_init", -1, st);
  std::unique_ptr<zc_comm> comm;
  st = MakeComm(world, zc::Group::AllRanks(world->device.get()), 0, nullptr, &comm);
  if (!st.ok()) return InitFailed("zc_init", world->bootstrap->rank(), st);
  ZC_INFO(kCommon, "%s", zc::log::VersionBanner().c_str());
  ZC_INFO(kCommon, "initialised via %s: rank %d of %d (local %d of %d)", world->bootstrap->kind(),
          comm->rank, comm->size, comm->local_rank, comm->local_size);
  *out = comm.release();
  return ZC_OK;
}

zc_status zc_get_unique_id(zc_unique_id* id) {
  if (!id) {
    SetLastErrorText("zc_get_unique_id: invalid argument: id is NULL");
    return ZC_ERR_INVALID_ARG;
  }
  memset(id, 0, sizeof(*id));
  zc::Config config;
  Status st = zc::Config::FromEnv(&config);
  if (!st.ok()) return Fail(st.with_context("zc_get_unique_id"));
  zc::log::Configure(config.debug, config.debug_subsys);
  zc::UniqueId made;
  st = zc::ServeUniqueId(config, &made);
  if (!st.ok()) return Fail(st);
  static_assert(sizeof(id->internal) == zc::kUniqueIdBytes, "zc_unique_id is 128 bytes");
  made.Encode(id->internal);
  return ZC_OK;
}

zc_status zc_comm_init_rank(zc_comm** out, int nranks, const zc_unique_id* id, int rank) {
  const char* op = "zc_comm_init_rank";
  if (!out) return BadArg(nullptr, op, "comm is NULL");
  *out = nullptr;
  if (!id) return BadArg(nullptr, op, "id is NULL");
  if (nranks < 1) return BadArg(nullptr, op, "nranks %d: must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return BadArg(nullptr, op, "rank %d is out of range [0, %d)", rank, nranks);
  zc::Config config;
  Status st = zc::Config::FromEnv(&config);
  if (!st.ok()) return InitFailed(op, rank, st);
  zc::log::Configure(config.debug, config.debug_subsys);
  zc::UniqueId uid;
  st = zc::UniqueId::Decode(id->internal, &uid);
  if (!st.ok()) return InitFailed(op, rank, st);

  // The process that made the id serves its rendezvous and checks the claims.
  std::unique_ptr<zc::StoreServer> served = zc::TakeServed(uid.nonce);
  const bool coordinator = served != nullptr;
  {
    // The id's server exists before the id is handed out: a refused
    // connection means it is gone, so do not wait the whole ZC_TIMEOUT.
    std::unique_ptr<zc::StoreClient> store;
    st = zc::StoreClient::Connect(uid.address(), uid.job_key,
                                  zc::Deadline(std::min(config.timeout_s, 5.0)), &store);
    if (!st.ok()) {
      long age = static_cast<long>(time(nullptr) - uid.created);
      return InitFailed(op, rank, st.with_context(zc::Format(
          "cannot join the rendezvous of the unique id at %s (the id was made %ld s ago): a "
          "stale id whose process has exited, or a network problem", uid.address().c_str(), age)));
    }
    store->set_op_timeout(config.timeout_s + 10);
    st = zc::JoinRendezvous(store.get(), uid, nranks, rank, coordinator, config.timeout_s);
    if (!st.ok()) return InitFailed(op, rank, st);
  }
  config.rank = rank;
  config.size = nranks;
  config.local_rank = config.local_size = -1;  // derived from host ids
  config.store = uid.address();
  config.job_key = uid.job_key;
  config.launcher_pid = -1;  // the rendezvous store is no launcher's
  std::shared_ptr<zc::World> world;
  st = MakeWorld(config, std::move(served), "comm/", &world);
  if (!st.ok()) return InitFailed(op, rank, st);
  std::unique_ptr<zc_comm> comm;
  st = MakeComm(world, zc::Group::AllRanks(world->device.get()), 0, nullptr, &comm);
  if (!st.ok()) return InitFailed(op, rank, st);
  ZC_INFO(kCommon, "%s", zc::log::VersionBanner().c_str());
  ZC_INFO(kCommon, "initialised from a unique id (rendezvous %s): rank %d of %d (local %d of %d)",
          uid.address().c_str(), comm->rank, comm->size, comm->local_rank, comm->local_size);
  *out = comm.release();
  return ZC_OK;
}

zc_status zc_comm_split(zc_comm* comm, int color, int key, zc_comm** newcomm) {
  const char* op = "zc_comm_split";
  ZC_CHECK_COMM(comm, op);
  if (!newcomm) return BadArg(comm, op, "newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != ZC_SPLIT_NONE)
    return BadArg(comm, op, "color %d: must be >= 0 or ZC_SPLIT_NONE", color);
  std::vector<int> members;
  uint32_t ctx = 0;
  zc_status s = RunBlocking(comm, op, [&] { return RunLocked(comm, op, [&](zc::Collectives* c) -> Status {
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * static_cast<size_t>(comm->size));
    ZC_RETURN_IF_ERROR(c->Allgather(mine, all.data(), 2, ZC_INT32));
    ZC_RETURN_IF_ERROR(AgreeContext(comm, c, &ctx));
    if (color == ZC_SPLIT_NONE) return Status::Ok();
    // MPI_Comm_split order: by key, then by rank in comm.
    std::vector<std::pair<int32_t, int>> order;
    for (int r = 0; r < comm->size; ++r)
      if (all[2 * r] == color) order.emplace_back(all[2 * r + 1], r);
    std::sort(order.begin(), order.end());
    for (auto& [k, r] : order) members.push_back(comm->group->device_rank(r));
    return Status::Ok();
  }); });
  if (s != ZC_OK) return s;
  if (color == ZC_SPLIT_NONE) {
    ReleaseContext(comm->world.get(), ctx);
    return ZC_OK;
  }
  std::unique_ptr<zc_comm> made;
  Status st = MakeComm(comm->world, std::move(members), ctx, comm->gpu.get(), &made);
  if (!st.ok()) {
    ReleaseContext(comm->world.get(), ctx);
    return Fail(st.with_context(zc::Format("rank %d: %s(color=%d, key=%d)", comm->rank, op, color, key)));
  }
  ZC_INFO(kCommon, "split: rank %d of %d -> rank %d of %d (color %d, context %u)", comm->rank,
          comm->size, made->rank, made->size, color, ctx);
  *newcomm = made.release();
  return ZC_OK;
}

zc_status zc_comm_dup(zc_comm* comm, zc_comm** newcomm) {
  ZC_CHECK_COMM(comm, "zc_comm_dup");
  if (!newcomm) return BadArg(comm, "zc_comm_dup", "newcomm is NULL");
  return zc_comm_split(comm, 0, comm->rank, newcomm);
}

zc_status zc_comm_get_async_error(zc_comm* comm, zc_status* error) {
  ZC_CHECK_COMM(comm, "zc_comm_get_async_error");
  if (!error) return BadArg(comm, "zc_comm_get_async_error", "error is NULL");
  Status st = comm->group->AsyncError();
  if (st.ok() && comm->gpu) st = comm->gpu->StreamAsyncError();  // a stream-ordered call failed
  *error = st.code();
  if (!st.ok()) Fail(st.with_context(zc::Format("rank %d: communicator broken", comm->rank)));
  return ZC_OK;
}

zc_status zc_finalize(zc_comm* comm) { return zc::api::FinalizeComm(comm, true); }

}  // extern "C"

zc_status zc::api::FinalizeComm(zc_comm* comm, bool barrier) {
  ZC_CHECK_COMM(comm, "zc_finalize");
  comm->queue->Stop();
  zc::api::StopStreamP2p(comm);
  // From here on every entry point refuses the handle (the queued
  // nonblocking calls have run).
  comm->magic = zc_comm::kDead;
  zc_status result = ZC_OK;
  // Nobody may still be reading our memory when it goes away, and no late
  // credit may land in it once it is reused by another communicator. After
  // a failure (an abort here or a peer's alert, which a lost peer causes)
  // there is no barrier: the dead would never come, nor the ranks that
  // learnt of it; a lost peer is reported.
  // In its own epoch: a communicator revoked by a shrink is a failed one.
  Status health;
  {
    zc::HealthScope scope = comm->group->Scope();
    health = comm->device->health().KnownHealth(-1);
  }
  if (!barrier) {
    // The caller's own barrier stood for this one (and reported its errors).
  } else if (!health.ok()) {
    if (health.code() == ZC_ERR_PEER_LOST)
      result = Fail(health.with_context(zc::Format("rank %d: zc_finalize", comm->rank)));
  } else if (comm->coll && comm->size > 1) {
    std::lock_guard<zc::SpinLock> lock(comm->coll_mu);
    Status st = comm->coll->Barrier();
    if (!st.ok()) result = Fail(st.with_context(zc::Format("rank %d: zc_finalize", comm->rank)));
    else if (Status q = comm->coll->Quiesce(); !q.ok())
      ZC_TRACE(kColl, "finalize: %s", q.message().c_str());
  }
  if (comm->gpu) comm->gpu->Close();  // closes the mappings of peers' buffers
  comm->p2p.reset();      // requests still pending fail with ZC_ERR_ABORTED
  comm->coll.reset();
  uint32_t ctx = comm->group ? comm->group->context() : 0;
  comm->group.reset();
  if (ctx != 0) ReleaseContext(comm->world.get(), ctx);
  // The last communicator over the World closes its Device and bootstrap.
  const bool lost_peers = comm->device->health().LostPeer() >= 0;
  std::vector<int> lost;
  for (int p = 0; lost_peers && p < comm->device->size(); ++p)
    if (comm->device->health().peer_lost(p)) lost.push_back(p);
  const std::string job_tag = comm->device->job_tag();
  comm->device.reset();
  const bool last = comm->world.use_count() == 1;
  comm->world.reset();
  // Peers that died cannot remove their shared-memory segments; a shrink
  // swept those it could, but a process may release its segments' locks
  // only after its connections broke: sweep again at the end.
  if (last && lost_peers) SweepSegmentsOfLost(job_tag, lost);
  delete comm;
  return result;
}
