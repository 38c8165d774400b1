// RegCache: the registration cache for user memory (NCCL's
// src/register/register.cc is the model). It maps page-aligned address
// ranges to the MemRegion that exposes them. Live regions never overlap or
// touch: a registration that would overlap or touch cached ones covers their
// union instead, and the regions it replaces are retired. A retired region
// stays exposed (peers may hold its descriptor, a NIC may hold its lkey)
// until no hold remains; then the owner drops it (TakeUnused).
//
// Who holds a reference: whatever hands a region to a transfer that outlives
// the lookup (a rendezvous send while the peer reads the source, a verbs
// read or write until its completion) takes a hold through
// TransportHost::HoldLocalRegion (a RegionHold) and releases it when the
// transfer is over. Lookups that only read the descriptor take none.
//
// Not thread-safe: the Device guards it with its regions lock. It neither
// exposes nor unexposes: the Device does that with the regions it gets back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "p2p/mem_region.h"

namespace zc {

class RegCache {
 public:
  struct Range {
    uintptr_t lo = 0, hi = 0;  // [lo, hi)
    size_t size() const { return hi - lo; }
  };

  // page: the rounding unit (a power of two); 0: the system page size.
  explicit RegCache(size_t page = 0);
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  size_t page() const { return page_; }
  // [p, p+bytes) rounded out to page boundaries (bytes 0 counts as 1).
  Range PageRange(const void* p, size_t bytes) const;

  // The live region containing [p, p+bytes), or null. With hold, the region
  // is held (Release(id) gives the hold back).
  MemRegion* Find(const void* p, size_t bytes, bool hold);
  // The range a new registration of [p, p+bytes) must cover: its page range
  // joined with every live region overlapping or touching it.
  Range Cover(const void* p, size_t bytes) const;
  // Installs r, which must cover Cover() of what was asked (the caller has
  // exposed it); the live regions inside r's range are retired. With hold,
  // r is held. Returns how many regions r replaced.
  size_t Insert(std::unique_ptr<MemRegion> r, bool hold);
  // Gives back one hold on region id (a no-op when id was dropped meanwhile,
  // e.g. by Deregister). Returns true when id is now retired and unheld, so
  // TakeUnused() has something to take.
  bool Release(uint64_t id);

  // Removes and returns the retired regions that nobody holds.
  std::vector<std::unique_ptr<MemRegion>> TakeUnused();
  // Removes and returns every region, live or retired, held or not, that
  // overlaps [p, p+bytes) (memory about to be freed).
  std::vector<std::unique_ptr<MemRegion>> TakeOverlapping(const void* p, size_t bytes);
  // Removes and returns every region (shutdown).
  std::vector<std::unique_ptr<MemRegion>> TakeAll();

  // True when id is a region of this cache (live or retired).
  bool Owns(uint64_t id) const { return entries_.count(id) != 0; }
  size_t live_count() const { return live_.size(); }
  size_t retired_count() const { return entries_.size() - live_.size(); }
  // Holds on region id (0 when unknown); for tests and logs.
  int holds(uint64_t id) const;
  // The live ranges in address order; for tests.
  std::vector<Range> LiveRanges() const;

 private:
  struct Entry {
    std::unique_ptr<MemRegion> region;
    int holds = 0;
    bool retired = false;
  };
  static Range RangeOf(const MemRegion& r);

  size_t page_;
  std::map<uint64_t, Entry> entries_;   // every region, by id
  std::map<uintptr_t, uint64_t> live_;  // live regions: base -> id
};

}  // namespace zc
