#include "p2p/local_regions.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "p2p/segment.h"
#include "p2p/transport.h"

namespace zc {
namespace {

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

bool AnyShm(const std::vector<Transport*>& transports) {
  for (Transport* t : transports)
    if (t->kind() == TransportKind::kShm) return true;
  return false;
}

}  // namespace

LocalRegions::LocalRegions(int rank, const Config& config, const std::string& job_tag,
                           std::vector<Transport*> transports)
    : rank_(rank), job_tag_(job_tag), transports_(std::move(transports)),
      anonymous_ok_(!AnyShm(transports_)) {
  pool_ = std::make_unique<Pool>(
      config.pool_chunk_bytes, config.pool_max_bytes,
      [this](size_t bytes, std::unique_ptr<MemRegion>* out) { return MakeChunk(bytes, out); },
      [this](MemRegion* slice, bool created) {
        if (created) RememberRegion(slice);
        else ForgetRegion(slice->id());
      },
      [this] { return NewRegionId(); });
}

LocalRegions::~LocalRegions() {
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    for (auto& r : reg_cache_.TakeAll()) DropRegistration(r.get());
  }
  pool_.reset();
}

Status LocalRegions::MakeChunk(size_t bytes, std::unique_ptr<MemRegion>* out) {
  // The chunk number is unique in the process: several Devices of one job
  // may live in it (a second zc_init, communicators from unique ids).
  static std::atomic<int> chunk_no{0};
  std::string name = Format("zc-%s-%d-%d-%d", job_tag_.c_str(), rank_, static_cast<int>(getpid()), chunk_no++);
  std::unique_ptr<Segment> seg;
  Status st = Segment::Create(name, bytes, &seg);
  std::unique_ptr<MemRegion> r;
  if (st.ok()) {
    r = std::make_unique<ChunkRegion>(std::move(seg), NewRegionId());
  } else if (anonymous_ok_) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return SystemError(errno, "pool: cannot map %zu bytes", bytes);
    r = std::make_unique<ChunkRegion>(p, bytes, NewRegionId());
  } else {
    return st;
  }
  for (Transport* t : transports_) ZC_RETURN_IF_ERROR(t->Expose(r.get()));
  r->mutable_remote().owner = rank_;
  r->mutable_remote().owner_pid = static_cast<int32_t>(getpid());
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    regions_by_id_[r->id()] = r.get();
    chunks_by_addr_[reinterpret_cast<uintptr_t>(r->data())] = r.get();
  }
  *out = std::move(r);
  return Status::Ok();
}

void LocalRegions::RememberRegion(MemRegion* r) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_by_id_[r->id()] = r;
}

void LocalRegions::ForgetRegion(uint64_t id) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  regions_by_id_.erase(id);
}

MemRegion* LocalRegions::Find(uint64_t id) {
  std::lock_guard<std::mutex> lock(regions_mu_);
  auto it = regions_by_id_.find(id);
  return it == regions_by_id_.end() ? nullptr : it->second;
}

bool LocalRegions::Retired(uint64_t id) const {
  // Ids are issued in increasing order and never reused: below the next id
  // and no longer in the map means issued, then freed.
  if (id == 0 || id >= next_region_id_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(regions_mu_);
  return regions_by_id_.count(id) == 0;
}

Status LocalRegions::Allocate(size_t bytes, MemRegion** out) {
  if (bytes == 0) return Error(ZC_ERR_INVALID_ARG, "allocation of 0 bytes");
  return pool_->Allocate(bytes, out);
}

Status LocalRegions::Free(void* ptr) {
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  return pool_->Free(ptr);
}

MemRegion* LocalRegions::FindAllocation(const void* ptr) { return pool_->Find(ptr); }

Status LocalRegions::Register(void* ptr, size_t bytes, MemRegion** out) {
  return RegisterCached(ptr, bytes, false, out);
}

Status LocalRegions::RegisterCached(const void* ptr, size_t bytes, bool hold, MemRegion** out) {
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
  for (size_t i = 0; i < transports_.size(); ++i) {
    Status st = transports_[i]->Expose(r.get());
    if (!st.ok()) {
      for (size_t j = 0; j < i; ++j) transports_[j]->Unexpose(r.get());
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

void LocalRegions::DropUnusedRegistrations() {
  // No progress thread may be using a region we drop (lock order: region
  // use, then regions_mu_).
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  std::lock_guard<std::mutex> lock(regions_mu_);
  for (auto& r : reg_cache_.TakeUnused()) DropRegistration(r.get());
}

void LocalRegions::DropRegistration(MemRegion* r) {
  regions_by_id_.erase(r->id());
  for (Transport* t : transports_) t->Unexpose(r);
}

void LocalRegions::Release(uint64_t id) {
  bool drop;
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    drop = reg_cache_.Release(id);
  }
  if (drop) DropUnusedRegistrations();
}

size_t LocalRegions::Deregister(const void* ptr, size_t bytes) {
  std::unique_lock<std::shared_mutex> use(region_use_mu_);
  std::lock_guard<std::mutex> lock(regions_mu_);
  auto dropped = reg_cache_.TakeOverlapping(ptr, bytes);
  for (auto& r : dropped) DropRegistration(r.get());
  return dropped.size();
}

Status LocalRegions::FindOrRegister(const void* ptr, size_t bytes, bool hold, MemRegion** out, bool* held) {
  *held = false;
  {
    std::lock_guard<std::mutex> lock(regions_mu_);
    // A pool chunk covers its slices; cached registrations only the cache
    // may hand out (it knows which are retired).
    if (MemRegion* chunk = ChunkHolding(ptr, bytes)) {
      *out = chunk;
      return Status::Ok();
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

MemRegion* LocalRegions::ChunkHolding(const void* ptr, size_t bytes) const {
  // Chunks are disjoint: only the last one starting at or below ptr can hold it.
  auto it = chunks_by_addr_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == chunks_by_addr_.begin()) return nullptr;
  MemRegion* chunk = std::prev(it)->second;
  return chunk->contains(ptr, bytes) ? chunk : nullptr;
}

Status LocalRegions::RegionFor(const void* ptr, size_t bytes, MemRegion** out) {
  bool held = false;
  return FindOrRegister(ptr, bytes, false, out, &held);
}

Status LocalRegions::Hold(const void* ptr, size_t bytes, RegionHold* out) {
  MemRegion* r = nullptr;
  bool held = false;
  ZC_RETURN_IF_ERROR(FindOrRegister(ptr, bytes, true, &r, &held));
  *out = RegionHold(held ? this : nullptr, r, held ? r->id() : 0);
  return Status::Ok();
}

}  // namespace zc
