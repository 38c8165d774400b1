#include "p2p/device.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/auth.h"
#include "common/log.h"
#include "common/wakeup.h"
#include "p2p/control_plane.h"
#include "p2p/peer_info.h"
#include "p2p/segment.h"
#include "p2p/transport_registry.h"

namespace zc {
namespace {
// True when pid has exited: it no longer exists, or it is a zombie that its
// parent has not reaped yet (kill(pid, 0) still succeeds on a zombie).
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "re");
  if (!f) return false;  // no /proc: only kill() can tell
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* close_paren = strrchr(buf, ')');  // the name may contain spaces
  return close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

// A pool chunk: a shared segment (or anonymous memory when no local peer
// needs sharing and /dev/shm is unusable).
class ChunkRegion : public MemRegion {
 public:
  ChunkRegion(std::unique_ptr<Segment> seg, uint64_t id)
      : MemRegion(seg->data(), seg->size(), id), seg_(std::move(seg)) {
    snprintf(mutable_remote().seg_name, RemoteRegion::kNameLen, "%s", seg_->name().c_str());
    mutable_remote().seg_offset = 0;
  }
  ChunkRegion(void* anon, size_t bytes, uint64_t id) : MemRegion(anon, bytes, id), anon_(true) {}
  ~ChunkRegion() override {
    if (anon_) munmap(data(), size());
  }

 private:
  std::unique_ptr<Segment> seg_;
  bool anon_ = false;
};

// A job key from the kernel's CSPRNG; there is no weaker fallback: a
// predictable key would let anyone who can reach the ports join the job.
Status HexKey(size_t bytes, std::string* out) {
  std::string raw(bytes, '\0');
  ZC_RETURN_IF_ERROR(net::RandomBytes(raw.data(), bytes).with_context("making the job key"));
  static const char* hex = "0123456789abcdef";
  out->clear();
  for (unsigned char c : raw) {
    *out += hex[c >> 4];
    *out += hex[c & 15];
  }
  return Status::Ok();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

Status Device::Create(Bootstrap* bootstrap, const Config& config, std::unique_ptr<Device>* out) {
  auto dev = std::unique_ptr<Device>(new Device());
  ZC_RETURN_IF_ERROR(dev->Init(bootstrap, config));
  *out = std::move(dev);
  return Status::Ok();
}

Status Device::AllGather(const std::string& key, const std::string& mine,
                         std::vector<std::string>* all) {
  std::lock_guard<std::mutex> lock(allgather_mu_);
  // Keys are made unique per call so repeated exchanges never read stale values.
  std::string k = Format("%s.%d", key.c_str(), allgather_seq_++);
  return bootstrap_->AllGather(k, mine, all, config_.timeout_s);
}

// Setup, in order; each step is collective where it exchanges records.
Status Device::Init(Bootstrap* bootstrap, const Config& config) {
  InitPeerState(bootstrap, config);
  std::vector<PeerInfo> all;
  ZC_RETURN_IF_ERROR(ExchangePeerInfo(bootstrap->host_id(), &all));
  TransportPlan plan;
  ZC_RETURN_IF_ERROR(ChooseTransports(all, &plan));
  ZC_RETURN_IF_ERROR(CreateTransports(plan));
  CreatePool();
  ZC_RETURN_IF_ERROR(ConnectTransports(plan, all));
  CreateChannels();
  ZC_RETURN_IF_ERROR(ControlPlane::Create(this, &control_));
  alert_word_ = control_->alert_word();
  ZC_INFO(kP2p, "device ready: %d ranks, %s", size_, [&] {
    std::string s;
    for (auto& [k, t] : transports_) s += std::string(s.empty() ? "" : "+") + TransportName(k);
    return s.empty() ? std::string("no peers") : s;
  }().c_str());
  return Status::Ok();
}

void Device::InitPeerState(Bootstrap* bootstrap, const Config& config) {
  config_ = config;
  bootstrap_ = bootstrap;
  rank_ = bootstrap->rank();
  size_ = bootstrap->size();
  lost_.assign(size_, Status::Ok());
  lost_flag_.reset(new std::atomic<bool>[size_]);
  last_pid_check_ns_.reset(new std::atomic<int64_t>[size_]);
  for (int i = 0; i < size_; ++i) {
    lost_flag_[i] = false;
    last_pid_check_ns_[i] = 0;
  }
}

Status Device::ExchangePeerInfo(const std::string& host_id, std::vector<PeerInfo>* all) {
  // Each rank publishes, for every transport, whether it is viable here and
  // why not, so that every rank's error names the cause: zcrun may kill the
  // rank that found it before it prints.
  PeerInfo me;
  me.host = host_id;
  me.pid = static_cast<int>(getpid());
  DomainContext ctx;
  ctx.config = &config_;
  ctx.host_id = host_id;
  me.reach = ProbeTransports(config_, ctx);
  // The job key authenticates data connections; zcrun provides one, under
  // PMIx rank 0 makes one.
  if (rank_ == 0 && config_.job_key.empty())
    ZC_RETURN_IF_ERROR(HexKey(32, &me.key).with_context(Format("rank %d", rank_)));
  std::vector<std::string> records;
  ZC_RETURN_IF_ERROR(AllGather("zc.peers", me.Serialize(), &records));
  all->assign(size_, PeerInfo());
  peer_pid_.assign(size_, 0);
  for (int r = 0; r < size_; ++r) {
    Status st = PeerInfo::Parse(records[r], &(*all)[r]);
    if (!st.ok())
      return Error(ZC_ERR_INTERNAL, "rank %d: bootstrap: malformed peer record from rank %d: %s", rank_, r,
                   st.message().c_str());
    peer_pid_[r] = (*all)[r].pid;
  }
  job_key_ = config_.job_key.empty() ? (*all)[0].key : config_.job_key;
  job_tag_ = job_key_.substr(0, 16);
  for (char& ch : job_tag_)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = 'x';
  return Status::Ok();
}

Status Device::ChooseTransports(const std::vector<PeerInfo>& all, TransportPlan* plan) {
  ZC_RETURN_IF_ERROR(PlanTransports(config_.transport, rank_, all, plan));
  local_ = plan->same_host;
  // Which host each rank is on, as the index of its host id's first
  // appearance in rank order (the same on every rank).
  host_index_.assign(size_, 0);
  {
    std::vector<std::string> seen;
    for (int r = 0; r < size_; ++r) {
      auto it = std::find(seen.begin(), seen.end(), all[r].host);
      host_index_[r] = static_cast<int>(it - seen.begin());
      if (it == seen.end()) seen.push_back(all[r].host);
    }
  }
  peer_kind_.assign(size_, TransportKind::kNone);
  for (int p = 0; p < size_; ++p)
    if (plan->per_peer[p]) peer_kind_[p] = plan->per_peer[p]->kind;
  NoteOversubscription();
  // Under auto, say once why a better transport was passed over.
  if (config_.transport != "auto") return Status::Ok();
  const PeerInfo& mine = all[rank_];
  for (const TransportEntry* e : TransportTable()) {
    const PeerInfo::Reach* r = mine.Find(e->name);
    if (!r || r->viable) continue;
    for (int p = 0; p < size_; ++p) {
      if (plan->per_peer[p] && plan->per_peer[p]->priority > e->priority) {
        ZC_INFO(kP2p, "%s not viable (%s): using %s to other hosts", e->label, r->why.c_str(),
                plan->per_peer[p]->name);
        break;
      }
    }
  }
  return Status::Ok();
}

void Device::NoteOversubscription() {
  // More ranks on this host than cores we may run on: spinning only keeps
  // the rank that would set our flag off the core, so waits yield at once.
  int local = 1;
  for (int p = 0; p < size_; ++p) local += (p != rank_ && local_[p]) ? 1 : 0;
  // The host's online CPUs, not this process's affinity: a launcher that
  // binds each rank to one core must not make every rank look crowded.
  int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (local > cores) {
    Backoff::SetOversubscribed(true);
    ZC_INFO(kP2p, "%d ranks on this host share %d cores: waits yield without spinning", local, cores);
  }
}

Status Device::CreateTransports(const TransportPlan& plan) {
  bool any_remote = false;
  for (int p = 0; p < size_; ++p) any_remote |= p != rank_ && !local_[p];
  if (rank_ == 0 || !any_remote) Segment::SweepStale();
  TransportSetup setup;
  setup.rank = rank_;
  setup.size = size_;
  setup.config = config_;
  setup.job_key = job_key_;
  // Every rank creates every transport some pair of the job uses.
  for (const TransportEntry* e : plan.used) {
    std::unique_ptr<Transport> t;
    ZC_RETURN_IF_ERROR(e->create(this, setup, &t));
    transports_[e->kind] = std::move(t);
  }
  return Status::Ok();
}

void Device::CreatePool() {
  // The pool: chunks are shared segments, exposed to every transport. The
  // chunk number is unique in the process: several Devices of one job may
  // live in it (a second zc_init, communicators from unique ids).
  static std::atomic<int> chunk_no{0};
  pool_ = std::make_unique<Pool>(
      config_.pool_chunk_bytes, config_.pool_max_bytes,
      [this](size_t bytes, std::unique_ptr<MemRegion>* out) -> Status {
        std::string name = Format("zc-%s-%d-%d-%d", job_tag_.c_str(), rank_,
                                  static_cast<int>(getpid()), chunk_no++);
        std::unique_ptr<Segment> seg;
        Status st = Segment::Create(name, bytes, &seg);
        std::unique_ptr<MemRegion> r;
        if (st.ok()) {
          r = std::make_unique<ChunkRegion>(std::move(seg), NewRegionId());
        } else if (!transports_.count(TransportKind::kShm)) {
          void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (p == MAP_FAILED) return SystemError(errno, "pool: cannot map %zu bytes", bytes);
          r = std::make_unique<ChunkRegion>(p, bytes, NewRegionId());
        } else {
          return st;
        }
        for (auto& [k, t] : transports_) ZC_RETURN_IF_ERROR(t->Expose(r.get()));
        r->mutable_remote().owner = rank_;
        r->mutable_remote().owner_pid = static_cast<int32_t>(getpid());
        RememberRegion(r.get());
        *out = std::move(r);
        return Status::Ok();
      },
      [this](MemRegion* slice, bool created) {
        if (created) RememberRegion(slice);
        else ForgetRegion(slice->id());
      },
      [this] { return NewRegionId(); });
}

Status Device::ConnectTransports(const TransportPlan& plan, const std::vector<PeerInfo>& all) {
  // Every transport listens, then one exchange of every rank's addresses
  // (collective even when a listen failed, so peers do not wait for us
  // until the deadline), then each connects in kind order.
  std::map<TransportKind, LinkPlan> links;
  PeerAddresses mine;
  Status listen_st;
  for (auto& [k, t] : transports_) {
    const TransportEntry* e = FindTransport(k);
    LinkPlan& link = links[k];
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && plan.per_peer[p] == e) link.peers.push_back(p);
    link.domains.resize(size_);
    for (int r = 0; r < size_; ++r) {
      const PeerInfo::Reach* reach = all[r].Find(e->name);
      if (reach && reach->viable) link.domains[r] = reach->domain;
    }
    link.my_domain = link.domains[rank_];
    std::string address;
    Status st = t->Listen(link, &address);
    if (!st.ok() && listen_st.ok())
      listen_st = st.with_context(Format("rank %d: connecting %s", rank_, e->name));
    mine.entries.push_back({e->name, st.ok() ? address : std::string()});
  }
  std::vector<std::string> records;
  Status ag = AllGather("zc.connect", mine.Serialize(), &records);
  ZC_RETURN_IF_ERROR(listen_st);
  ZC_RETURN_IF_ERROR(ag);
  std::vector<PeerAddresses> addrs(size_);
  for (int r = 0; r < size_; ++r) {
    Status st = PeerAddresses::Parse(records[r], &addrs[r]);
    if (!st.ok())
      return Error(ZC_ERR_INTERNAL, "rank %d: bootstrap: malformed address record from rank %d: %s", rank_,
                   r, st.message().c_str());
  }
  for (auto& [k, t] : transports_) {
    std::vector<std::string> theirs(size_);
    for (int r = 0; r < size_; ++r) theirs[r] = addrs[r].Find(TransportName(k));
    ZC_RETURN_IF_ERROR(t->Connect(theirs).with_context(Format("rank %d: connecting %s", rank_, TransportName(k))));
  }
  return Status::Ok();
}

void Device::CreateChannels() {
  channels_.resize(size_);
  peer_driver_.assign(size_, nullptr);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Transport* t = transports_[peer_kind_[p]].get();
    peer_driver_[p] = t->wait_driver();
    for (int i = 0; i < t->connections_per_peer(); ++i)
      channels_[p].push_back(std::make_unique<Channel>(this, t->connection(p, i), p, peer_kind_[p]));
  }
}

Device::~Device() {
  Farewell();
  for (auto& [k, t] : transports_) t->Shutdown();
  alert_word_ = nullptr;
  control_.reset();
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    for (auto& r : reg_cache_.TakeAll()) DropRegistration(r.get());
  }
  pool_.reset();
  channels_.clear();
  transports_.clear();
}

void Device::RememberRegion(MemRegion* r) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_by_id_[r->id()] = r;
}

void Device::ForgetRegion(uint64_t id) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_by_id_.erase(id);
}

MemRegion* Device::FindLocalRegion(uint64_t id) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  auto it = regions_by_id_.find(id);
  return it == regions_by_id_.end() ? nullptr : it->second;
}

bool Device::RegionRetired(uint64_t id) const {
  // Ids are issued in increasing order and never reused: below the next id
  // and no longer in the map means issued, then freed.
  if (id == 0 || id >= next_region_id_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(regions_mu_);
  return regions_by_id_.count(id) == 0;
}

Status Device::Allocate(size_t bytes, MemRegion** out) {
  if (bytes == 0) return Error(ZC_ERR_INVALID_ARG, "allocation of 0 bytes");
  return pool_->Allocate(bytes, out);
}

Status Device::Free(void* ptr) {
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  return pool_->Free(ptr);
}

MemRegion* Device::FindAllocation(const void* ptr) { return pool_->Find(ptr); }

bool Device::IsPoolMemory(const void* ptr, size_t bytes) const {
  return pool_ && pool_->Contains(ptr, bytes);
}

Status Device::Register(void* ptr, size_t bytes, MemRegion** out) {
  return RegisterCached(ptr, bytes, false, out);
}

Status Device::RegisterCached(const void* ptr, size_t bytes, bool hold, MemRegion** out) {
  if (!ptr || bytes == 0) return Error(ZC_ERR_INVALID_ARG, "registration of an empty range");
  std::unique_lock<std::mutex> lock(regions_mu_);
  if (MemRegion* r = reg_cache_.Find(ptr, bytes, hold)) {
    *out = r;
    return Status::Ok();
  }
  // One region over the page range joined with every cached region it
  // overlaps or touches; those are retired (dropped once unheld).
  const RegCache::Range span = reg_cache_.Cover(ptr, bytes);
  auto r = std::make_unique<MemRegion>(reinterpret_cast<void*>(span.lo), span.size(), NewRegionId());
  r->mutable_remote().owner = rank_;
  r->mutable_remote().owner_pid = static_cast<int32_t>(getpid());
  r->cached = true;
  for (auto& [k, t] : transports_) {
    Status st = t->Expose(r.get());
    if (!st.ok()) {
      for (auto& [k2, t2] : transports_) {
        if (k2 == k) break;
        t2->Unexpose(r.get());
      }
      return st.with_context(Format("rank %d: registering %zu bytes at %p (as %zu bytes at %p)", rank_,
                                    bytes, ptr, span.size(), reinterpret_cast<void*>(span.lo)));
    }
  }
  *out = r.get();
  regions_by_id_[r->id()] = r.get();
  const size_t replaced = reg_cache_.Insert(std::move(r), hold);
  registrations_.fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  if (replaced) DropUnusedRegistrations();
  return Status::Ok();
}

void Device::DropUnusedRegistrations() {
  // No progress thread may be using a region we drop (lock order: region
  // use, then regions_mu_).
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  std::lock_guard<std::mutex> lock(regions_mu_);
  for (auto& r : reg_cache_.TakeUnused()) DropRegistration(r.get());
}

void Device::DropRegistration(MemRegion* r) {
  regions_by_id_.erase(r->id());
  for (auto& [k, t] : transports_) t->Unexpose(r);
}

void Device::ReleaseRegion(uint64_t id) {
  bool drop;
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    drop = reg_cache_.Release(id);
  }
  if (drop) DropUnusedRegistrations();
}

size_t Device::Deregister(const void* ptr, size_t bytes) {
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  std::lock_guard<std::mutex> lock(regions_mu_);
  auto dropped = reg_cache_.TakeOverlapping(ptr, bytes);
  for (auto& r : dropped) DropRegistration(r.get());
  return dropped.size();
}

Status Device::FindOrRegister(const void* ptr, size_t bytes, bool hold, MemRegion** out, bool* held) {
  *held = false;
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    // Pool chunks are in regions_by_id_ (and cover their slices); so are
    // cached registrations, which only the cache may hand out (it knows
    // which are retired).
    for (auto& [id, r] : regions_by_id_) {
      if (!r->parent && !r->cached && r->contains(ptr, bytes)) {
        *out = r;
        return Status::Ok();
      }
    }
    if (MemRegion* r = reg_cache_.Find(ptr, bytes, hold)) {
      *out = r;
      *held = hold;
      return Status::Ok();
    }
  }
  // User memory going to a peer: if a traced allocation site made it, that
  // site's later allocations come from the pool.
  alloc_sites_.NoteExposed(ptr, bytes);
  ZC_RETURN_IF_ERROR(RegisterCached(ptr, bytes, hold, out));
  *held = hold;
  return Status::Ok();
}

Status Device::LocalRegionFor(const void* ptr, size_t bytes, MemRegion** out) {
  bool held = false;
  return FindOrRegister(ptr, bytes, false, out, &held);
}

Status Device::HoldLocalRegion(const void* ptr, size_t bytes, RegionHold* out) {
  MemRegion* r = nullptr;
  bool held = false;
  ZC_RETURN_IF_ERROR(FindOrRegister(ptr, bytes, true, &r, &held));
  *out = RegionHold(held ? this : nullptr, r, held ? r->id() : 0);
  return Status::Ok();
}

Transport* Device::transport(TransportKind k) {
  auto it = transports_.find(k);
  return it == transports_.end() ? nullptr : it->second.get();
}

Channel& Device::channel(int peer, int index) {
  auto& v = channels_[peer];
  return *v[static_cast<size_t>(index) % v.size()];
}

bool Device::peer_lost(int peer) const {
  return peer >= 0 && peer < size_ && lost_flag_[peer].load(std::memory_order_acquire);
}

void Device::OnPeerLost(int peer, const Status& why) {
  if (peer < 0 || peer >= size_) return;
  std::lock_guard<std::mutex> lock(health_mu_);
  if (lost_flag_[peer].load()) return;
  lost_[peer] = Status(ZC_ERR_PEER_LOST, Format("peer %d lost: %s", peer, why.message().c_str()));
  lost_flag_[peer].store(true, std::memory_order_release);
  Wakeup::Notify();  // sleeping waiters look at the peer's health now
  ZC_INFO(kP2p, "%s", lost_[peer].message().c_str());
}

namespace {
// The alert word a failing rank writes into every peer: the cause's code,
// who reports it and whose failure it is (the lost peer, or the reporter).
constexpr int kAlertRankBits = 24;
uint64_t AlertValue(zc_status code, int reporter, int subject) {
  return (static_cast<uint64_t>(code) << (2 * kAlertRankBits)) |
         (static_cast<uint64_t>(reporter + 1) << kAlertRankBits) | static_cast<uint64_t>(subject + 1);
}
}  // namespace

Status Device::Health(int peer) const {
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(health_mu_);
    return abort_status_;
  }
  if (control_) {
    uint64_t alert = control_->alert_word()->load(std::memory_order_acquire);
    if (alert) {
      const uint64_t mask = (uint64_t{1} << kAlertRankBits) - 1;
      int subject = static_cast<int>(alert & mask) - 1;
      int reporter = static_cast<int>((alert >> kAlertRankBits) & mask) - 1;
      zc_status code = static_cast<zc_status>(alert >> (2 * kAlertRankBits));
      if (code == ZC_ERR_PEER_LOST && subject != reporter)
        return Status(code, Format("peer %d lost (rank %d saw it go and alerted the job)", subject, reporter));
      return Status(code == ZC_OK ? ZC_ERR_ABORTED : code,
                    Format("rank %d failed or aborted the job (%s)", reporter, zc_status_string(code)));
    }
  }
  if (peer < 0 || peer >= size_) return Status::Ok();
  bool lost = lost_flag_[peer].load(std::memory_order_acquire);
  if (!lost && local_[peer] && peer_pid_[peer] > 0) {
    // Same host: a dead process has no connection to break, so look at it
    // (at most every 20 ms per peer; kill(pid, 0) costs a syscall).
    int64_t now = NowNs();
    int64_t last = last_pid_check_ns_[peer].load(std::memory_order_relaxed);
    if (now - last > 20'000'000) {
      last_pid_check_ns_[peer].store(now, std::memory_order_relaxed);
      if (ProcessGone(peer_pid_[peer])) {
        const_cast<Device*>(this)->OnPeerLost(
            peer, Error(ZC_ERR_PEER_LOST, "process %d exited", peer_pid_[peer]));
        lost = true;
      }
    }
  }
  if (!lost) return Status::Ok();
  std::lock_guard<std::mutex> lock(health_mu_);
  return lost_[peer];
}

int Device::LostPeer() const {
  for (int p = 0; p < size_; ++p)
    if (lost_flag_[p].load(std::memory_order_acquire)) return p;
  return -1;
}

void Device::AbortForLostPeer() {
  if (aborted()) return;
  // Lost peers are known locally; a loss that came as a peer's alert is
  // already known to every rank.
  int lost = LostPeer();
  if (lost < 0) return;
  Status why;
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    why = lost_[lost];
  }
  Abort(why, lost);
}

Status Device::WaitFlag(const std::atomic<uint64_t>* flag, uint64_t value, int peer,
                        const Deadline& deadline, const char* what) const {
  if (flag->load(std::memory_order_acquire) >= value) return Status::Ok();
  Backoff backoff(FlagsNotified(peer), DriverFor(peer));
  for (;;) {
    backoff.Pause();
    if (flag->load(std::memory_order_acquire) >= value) return Status::Ok();
    if (backoff.Due()) {
      Status st = Health(peer);
      // The peer may have set the flag just before it went away.
      if (!st.ok()) return flag->load(std::memory_order_acquire) >= value ? Status::Ok() : st;
      if (deadline.expired())
        return Error(ZC_ERR_TIMEOUT, "waited %.1f s for %s from peer %d (ZC_TIMEOUT=%g s)",
                     deadline.elapsed_s(), what, peer, config_.timeout_s);
    }
  }
}

Status Device::SendControl(int peer, uint64_t tag, const std::string& msg, const Deadline& dl) {
  return control_->Send(peer, tag, msg.data(), msg.size(), dl);
}

Status Device::RecvControl(int peer, uint64_t tag, std::string* msg, const Deadline& dl) {
  return control_->Recv(peer, tag, msg, dl);
}

void Device::Abort(const Status& why, int lost) {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    if (aborted_.load()) return;
    abort_status_ = Status(why.ok() ? ZC_ERR_ABORTED : why.code(),
                           why.ok() ? Format("rank %d called zc_abort", rank_) : why.message());
    aborted_.store(true, std::memory_order_release);
  }
  Wakeup::Notify();
  if (!control_) return;
  // A peer's alert is already known to every rank: no need to echo it now
  // (Farewell repeats it for those who might have missed it).
  if (control_->alert_word()->load(std::memory_order_acquire)) return;
  uint64_t value = AlertValue(why.ok() ? ZC_ERR_ABORTED : why.code(), rank_, lost >= 0 ? lost : rank_);
  own_alert_.store(value, std::memory_order_release);
  AlertPeers(value);
}

void Device::AlertPeers(uint64_t value) {
  // Every live peer (best effort, short deadline): their waits see the alert.
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || lost_flag_[p].load()) continue;
    Transport* t = transports_.count(peer_kind_[p]) ? transports_.at(peer_kind_[p]).get() : nullptr;
    if (!t) continue;
    FlagWrite f{&control_->peer_alert(p), 0, value};
    IgnoreError(t->connection(p, 0)->Write(nullptr, 0, control_->peer_alert(p), 0, &f, Deadline(1.0)),
                "alert: best effort (a dead peer cannot be told)");
  }
}

void Device::Farewell() {
  // Leaving a failed job: a peer waiting on this rank must learn the cause
  // before it sees us go (a tcp goodbye or our exit would otherwise read as
  // a loss of this rank). On tcp and verbs the alert precedes the goodbye on
  // the same connection; on shm the store precedes our exit.
  uint64_t value = own_alert_.load(std::memory_order_acquire);
  if (!value && control_) value = control_->alert_word()->load(std::memory_order_acquire);
  if (value) AlertPeers(value);
}

}  // namespace zc
