// LocalRegions: this process's memory that peers may reach one-sidedly. It
// owns the registered pool (pool.h: zc_mem_alloc and the library's own
// workspace), the registration cache for user memory (reg_cache.h), the
// holds that keep a cached registration alive under a transfer
// (region_hold.h), the map from region id to region that the transports'
// progress threads look regions up in, and the allocation-site hook
// (alloc_sites.h). Every region it makes is exposed to every transport the
// Device created.
//
// Threading: any thread. regions_mu_ guards the id map and the cache; the
// region-use lock (region_use()) is held shared by a progress thread while it
// reads or writes a region it looked up and exclusively here to free or
// replace one. Lock order: region use, then regions_mu_.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "p2p/alloc_sites.h"
#include "p2p/mem_region.h"
#include "p2p/pool.h"
#include "p2p/reg_cache.h"
#include "p2p/region_hold.h"

namespace zc {

class Transport;

class LocalRegions : public RegionOwner {
 public:
  // Regions of `rank` (their descriptors name it), exposed to each of
  // `transports` (in this order; they must outlive this object). Pool chunks
  // of config.pool_chunk_bytes (at most config.pool_max_bytes in all) are
  // shared segments named after job_tag; anonymous memory when no segment
  // can be made and no transport is shm.
  LocalRegions(int rank, const Config& config, const std::string& job_tag,
               std::vector<Transport*> transports);
  // Unexposes every cached registration and frees the pool.
  ~LocalRegions();
  LocalRegions(const LocalRegions&) = delete;
  LocalRegions& operator=(const LocalRegions&) = delete;

  // ---- the pool ----
  // Zero-copy memory from the registered pool. Peers reach it through
  // region->remote(). Freed with Free(region->data()).
  Status Allocate(size_t bytes, MemRegion** out);
  Status Free(void* ptr);
  // The pool region that starts at ptr (what zc_mem_alloc returned), or null.
  MemRegion* FindAllocation(const void* ptr);
  // The pool allocation that holds [ptr, ptr+bytes), or null: a region of
  // its own, whose id retires when it is freed (a peer's late write into it
  // is then dropped, where one into the chunk would land in whatever the
  // memory serves next).
  MemRegion* AllocationHolding(const void* ptr, size_t bytes) { return pool_->FindHolding(ptr, bytes); }
  // [ptr, ptr + bytes) is pool memory (zc_mem_alloc): host memory. Lock-free.
  bool IsPoolMemory(const void* ptr, size_t bytes) const { return pool_ && pool_->Contains(ptr, bytes); }

  // ---- user memory ----
  // Exposes user memory through the registration cache (reg_cache.h): the
  // page-aligned region returned contains [ptr, ptr+bytes) and stays
  // exposed until Deregister or shutdown, or until a wider registration
  // replaces it and no hold remains.
  Status Register(void* ptr, size_t bytes, MemRegion** out);
  // How many regions the cache has exposed so far (tests, logs).
  size_t registrations() const { return registrations_.load(std::memory_order_relaxed); }
  // Drops every cached registration overlapping [ptr, ptr+bytes) (memory
  // about to be freed: a verbs registration would otherwise keep pointing at
  // the old pages). Returns how many were dropped.
  size_t Deregister(const void* ptr, size_t bytes);
  // The allocation-site hook (§3.4): see alloc_sites.h.
  AllocSites& alloc_sites() { return alloc_sites_; }

  // ---- any local region (what the transports ask, TransportHost) ----
  // The region with this id, or nullptr (tcp places incoming data with it).
  MemRegion* Find(uint64_t id);
  // True when id was issued for a region that has since been freed.
  bool Retired(uint64_t id) const;
  // Held shared by a progress thread while it uses a region it found.
  std::shared_mutex& region_use() { return region_use_mu_; }
  // The region that holds [ptr, ptr+bytes) for a transfer that uses it
  // after this call: a pool region, or user memory registered now through
  // the registration cache, held exposed until *out is released.
  Status Hold(const void* ptr, size_t bytes, RegionHold* out);
  // Gives back a hold taken by Hold (RegionHold calls it).
  void Release(uint64_t id) override;
  // The region that holds [ptr, ptr+bytes) (Hold without a hold).
  Status RegionFor(const void* ptr, size_t bytes, MemRegion** out);

 private:
  uint64_t NewRegionId() { return next_region_id_.fetch_add(1); }
  // A new pool chunk of `bytes`, exposed and remembered (Pool::ChunkFactory).
  Status MakeChunk(size_t bytes, std::unique_ptr<MemRegion>* out);
  void RememberRegion(MemRegion* r);
  void ForgetRegion(uint64_t id);
  // A pool region or a cached registration holding [ptr, ptr+bytes);
  // *held: a hold was taken (Release gives it back).
  Status FindOrRegister(const void* ptr, size_t bytes, bool hold, MemRegion** out, bool* held);
  // The pool chunk that holds [ptr, ptr+bytes), or null; regions_mu_ held.
  MemRegion* ChunkHolding(const void* ptr, size_t bytes) const;
  Status RegisterCached(const void* ptr, size_t bytes, bool hold, MemRegion** out);
  // Drops the retired registrations nobody holds (takes region use
  // exclusively: call without regions_mu_).
  void DropUnusedRegistrations();
  // Unexposes r and forgets its id; regions_mu_ held.
  void DropRegistration(MemRegion* r);

  const int rank_;
  const std::string job_tag_;  // segment names
  const std::vector<Transport*> transports_;
  const bool anonymous_ok_;  // no shm transport: chunks may be private memory
  std::atomic<uint64_t> next_region_id_{1};

  std::shared_mutex region_use_mu_;  // see region_use
  mutable std::mutex regions_mu_;
  std::map<uint64_t, MemRegion*> regions_by_id_;  // every local region
  // The pool's chunks by start address (disjoint), so that finding the
  // chunk under a buffer costs a lookup, not a walk over every region: the
  // PS registers each pulled tensor, and its servers hold thousands of slices.
  std::map<uintptr_t, MemRegion*> chunks_by_addr_;
  RegCache reg_cache_;  // user memory; guarded by regions_mu_
  std::atomic<size_t> registrations_{0};
  AllocSites alloc_sites_{this};
  // Last: its slices leave regions_by_id_ when it goes (the destructor
  // frees it first anyway).
  std::unique_ptr<Pool> pool_;
};

}  // namespace zc
