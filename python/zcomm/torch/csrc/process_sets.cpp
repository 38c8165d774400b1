#include "process_sets.hpp"

#include <algorithm>
#include <mutex>
#include <numeric>

#include "gil.hpp"

namespace zcomm_torch {
namespace hvd {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

// The same on every rank that passes the same list.
uint64_t Fingerprint(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull ^ ranks.size();
  for (int r : ranks) h = (h ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  return h;
}

}  // namespace

int ProcessSet::SetRank(int global_rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), global_rank);
  return it != ranks.end() && *it == global_rank ? static_cast<int>(it - ranks.begin()) : -1;
}

ProcessSetTable& Sets() {
  static ProcessSetTable table;
  return table;
}

std::string ProcessSetTable::Who() const {
  return "zcomm.torch rank " + std::to_string(job_.rank) + "/" + std::to_string(job_.size);
}

bool ProcessSetTable::Running() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return !sets_.empty() && !stop_seen_.load();
}

namespace {
bool EngineStopped(zc_engine* engine) {
  zc_status err = ZC_OK;
  return zc_engine_error(engine, &err) != ZC_OK || err != ZC_OK;
}
}  // namespace

void ProcessSetTable::StopSeen() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = sets_.find(0);
  if (it != sets_.end() && EngineStopped(it->second->engine)) stop_seen_ = true;
}

bool ProcessSetTable::Init() {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!ReadyForInit()) return false;
  // A process that zcrun --elastic started to join a running job waits
  // for the ranks' grow (Grow() there) instead of a rendezvous of its own.
  int joiner = 0;
  zc_status st = zc_is_joiner(&joiner);
  const char* how = joiner ? "zc_comm_join" : "zc_init";
  zc_comm* comm = nullptr;
  if (st == ZC_OK) st = joiner ? zc_comm_join(&comm) : zc_init(&comm);
  if (st != ZC_OK)
    throw EngineError(std::string("zcomm.torch: init: ") + how + " failed: " + zc_status_string(st) + ": " +
                      zc_last_error(nullptr));
  Start(comm, "init");
  return true;
}

int ProcessSetTable::JoinPending() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped("join_pending");
  int count = 0;
  zc_status st = zc_comm_join_pending(global_comm(), &count);
  if (st != ZC_OK)
    throw EngineError(Who() + ": join_pending: " + zc_status_string(st) + ": " + zc_last_error(global_comm()));
  return count;
}

void ProcessSetTable::Grow() {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped("grow");
  const std::string who = Who() + ": grow: ";
  for (auto& [id, s] : sets_) {
    if (s->engine) zc_engine_destroy(s->engine);
    s->engine = nullptr;
  }
  zc_comm* next = nullptr;
  zc_status st = zc_comm_grow(global_comm(), &next);
  std::string cause = st == ZC_OK ? "" : std::string(zc_status_string(st)) + ": " + zc_last_error(global_comm());
  FreeAll();  // the old communicators (collective over the old ranks, every one of them here)
  stop_seen_ = false;
  if (st != ZC_OK) throw EngineError(who + cause);
  Start(next, "grow");
}

bool ProcessSetTable::InitRank(const std::string& uid, int nranks, int rank) {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!ReadyForInit()) return false;
  const std::string who = "zcomm.torch rank " + std::to_string(rank) + "/" + std::to_string(nranks) +
                          ": init_rank: ";
  if (uid.size() != sizeof(zc_unique_id))
    throw InvalidArgument(who + "the unique id must be " + std::to_string(sizeof(zc_unique_id)) +
                          " bytes (zcomm.get_unique_id()), got " + std::to_string(uid.size()));
  zc_unique_id id;
  std::copy(uid.begin(), uid.end(), id.internal);
  zc_comm* comm = nullptr;
  zc_status st = zc_comm_init_rank(&comm, nranks, &id, rank);
  if (st != ZC_OK)
    throw EngineError(who + zc_status_string(st) + ": " + zc_last_error(nullptr));
  Start(comm, "init_rank");
  return true;
}

bool ProcessSetTable::ReadyForInit() {
  if (sets_.empty()) return true;
  // Only this rank's own calls decide, as for is_initialized(): every
  // rank's init() then meets the others' in the same count, however
  // soon a peer's shutdown() stopped the engine.
  if (!stop_seen_.load()) return false;
  FreeAll();  // a stop this rank was told of (a peer's shutdown, a lost peer): start anew
  return true;
}

void ProcessSetTable::Shrink() {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped("shrink");
  const std::string who = Who() + ": shrink: ";
  // The engines first (their threads wait on the broken communicator; a
  // revoked one ends them at once), then the survivors' communicator, then
  // the old communicators (revoked: finalize returns at once).
  for (auto& [id, s] : sets_) {
    if (s->engine) zc_engine_destroy(s->engine);
    s->engine = nullptr;
  }
  zc_comm* next = nullptr;
  zc_status st = zc_comm_shrink(global_comm(), &next);
  std::string cause = st == ZC_OK ? "" : std::string(zc_status_string(st)) + ": " + zc_last_error(global_comm());
  FreeAll();
  stop_seen_ = false;
  if (st != ZC_OK) throw EngineError(who + cause);
  Start(next, "shrink");
}

void ProcessSetTable::Start(zc_comm* comm, const char* what) {
  auto global = std::make_unique<ProcessSet>();
  global->comm = comm;
  zc_status st = ZC_OK;
  const int rank = zc_rank(global->comm), size = zc_size(global->comm);
  const int local_rank = zc_local_rank(global->comm);
  // Horovod's cross communicator: the ranks with this rank's local rank (one
  // per host); cross_rank is this host's index among them.
  std::vector<int32_t> locals(size);
  int32_t mine = local_rank;
  st = zc_allgather(global->comm, &mine, locals.data(), 1, ZC_INT32);
  if (st == ZC_OK) st = zc_engine_create(global->comm, &global->engine);
  if (st != ZC_OK) {
    std::string msg = "zcomm.torch rank " + std::to_string(rank) + "/" + std::to_string(size) + ": " +
                      what + ": " + zc_status_string(st) + ": " + zc_last_error(global->comm);
    zc_finalize(global->comm);
    throw EngineError(msg);
  }
  JobLayout job;
  job.rank = rank;
  job.size = size;
  job.local_rank = local_rank;
  job.local_size = zc_local_size(global->comm);
  job.cross_rank = 0;
  job.cross_size = 0;
  for (int r = 0; r < size; ++r) {
    if (locals[r] != mine) continue;
    if (r < rank) ++job.cross_rank;
    ++job.cross_size;
  }
  job_ = job;
  global->ranks.resize(size);
  std::iota(global->ranks.begin(), global->ranks.end(), 0);
  global->rank = rank;
  sets_[0] = std::move(global);
  next_id_ = 1;
  stop_seen_ = false;
}

void ProcessSetTable::FreeAll() {
  // Every set's engine first (their communicators are splits of the
  // global one), then the global set.
  for (auto it = sets_.rbegin(); it != sets_.rend(); ++it) {
    ProcessSet& s = *it->second;
    if (s.engine) zc_engine_destroy(s.engine);  // the error that stopped it was raised to its waiters
    if (s.comm) zc_finalize(s.comm);
    s.engine = nullptr;
    s.comm = nullptr;
  }
  sets_.clear();
}

void ProcessSetTable::Shutdown() {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  FreeAll();
  stop_seen_ = false;
}

ProcessSetTable::JobLayout ProcessSetTable::Layout(const char* what) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped(what);
  return job_;
}

void ProcessSetTable::ThrowIfStopped(const char* what) const {
  if (sets_.empty())
    throw InvalidArgument(std::string("zcomm.torch: ") + what +
                          ": not initialized: call zcomm.torch.init() first");
}

int32_t ProcessSetTable::Add(std::vector<int> ranks) {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped("add_process_set");
  const std::string who = Who() + ": add_process_set(" + RankList(ranks) + "): ";
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw InvalidArgument(who + "a rank appears twice");
  if (!ranks.empty() && (ranks.front() < 0 || ranks.back() >= job_.size))
    throw InvalidArgument(who + "ranks must be in [0, " + std::to_string(job_.size) + ")");
  for (const auto& [id, s] : sets_)
    if (s->ranks == ranks)
      throw InvalidArgument(who + "process set " + std::to_string(id) + " has these ranks already");
  // Every rank must add the same set: compare before splitting, so that a
  // disagreement is an error on every rank instead of sets that differ.
  zc_comm* global = global_comm();
  std::vector<uint64_t> prints(job_.size);
  uint64_t mine = Fingerprint(ranks);
  zc_status st = zc_allgather(global, &mine, prints.data(), 1, ZC_UINT64);
  if (st != ZC_OK) throw EngineError(who + zc_status_string(st) + ": " + zc_last_error(global));
  for (int r = 0; r < job_.size; ++r)
    if (prints[r] != mine)
      throw EngineError(who + "rank " + std::to_string(r) +
                        " adds a different process set at the same time (every rank must add the "
                        "same sets in the same order)");
  auto set = std::make_unique<ProcessSet>();
  set->id = next_id_++;
  set->ranks = ranks;
  set->rank = set->SetRank(job_.rank);
  st = zc_comm_split(global, set->rank >= 0 ? 0 : ZC_SPLIT_NONE, job_.rank, &set->comm);
  if (st == ZC_OK && set->comm) {
    st = zc_engine_create(set->comm, &set->engine);
    if (st != ZC_OK) {
      std::string msg = who + zc_status_string(st) + ": " + zc_last_error(set->comm);
      zc_finalize(set->comm);
      throw EngineError(msg);
    }
  }
  if (st != ZC_OK) throw EngineError(who + zc_status_string(st) + ": " + zc_last_error(global));
  int32_t id = set->id;
  sets_[id] = std::move(set);
  return id;
}

bool ProcessSetTable::Remove(int32_t id) {
  GilReleased nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = sets_.find(id);
  if (id == 0 || it == sets_.end()) return false;
  ProcessSet& s = *it->second;
  if (s.engine) zc_engine_destroy(s.engine);  // collective over the set's members
  if (s.comm) zc_finalize(s.comm);
  sets_.erase(it);
  return true;
}

SetRef ProcessSetTable::Get(int32_t id, const std::string& what, bool member_needed) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  ThrowIfStopped(what.c_str());
  auto it = sets_.find(id);
  if (it == sets_.end())
    throw InvalidArgument(Who() + ": " + what + ": process set " + std::to_string(id) +
                          " does not exist (removed, or never added with add_process_set)");
  const ProcessSet* s = it->second.get();
  if (member_needed && !s->member())
    throw InvalidArgument(Who() + ": " + what + ": this rank is not in process set " + std::to_string(id) +
                          " (ranks " + RankList(s->ranks) + ")");
  return SetRef(std::move(lock), s);
}

std::map<int32_t, std::vector<int>> ProcessSetTable::List() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::map<int32_t, std::vector<int>> out;
  for (const auto& [id, s] : sets_) out[id] = s->ranks;
  return out;
}

}  // namespace hvd
}  // namespace zcomm_torch
