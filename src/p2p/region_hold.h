// RegionHold: a local region in use by one transfer. While it is held, a
// registered region is not dropped when a wider registration replaces it in
// the registration cache (reg_cache.h); Deregister (the memory is being
// freed) still drops it. Move-only; gives the hold back when destroyed.
#pragma once

#include <cstdint>

namespace zc {

class MemRegion;

// Who takes a hold back: the owner of the registration cache (LocalRegions).
class RegionOwner {
 public:
  virtual void Release(uint64_t id) = 0;

 protected:
  ~RegionOwner() = default;
};

class RegionHold {
 public:
  RegionHold() = default;
  // owner == null or id == 0: nothing to give back (pool memory).
  RegionHold(RegionOwner* owner, MemRegion* region, uint64_t id)
      : owner_(owner), region_(region), id_(id) {}
  ~RegionHold() { reset(); }
  RegionHold(RegionHold&& o) noexcept : owner_(o.owner_), region_(o.region_), id_(o.id_) {
    o.owner_ = nullptr;
    o.region_ = nullptr;
    o.id_ = 0;
  }
  RegionHold& operator=(RegionHold&& o) noexcept;
  RegionHold(const RegionHold&) = delete;
  RegionHold& operator=(const RegionHold&) = delete;

  MemRegion* get() const { return region_; }
  MemRegion* operator->() const { return region_; }
  // Gives the hold back now.
  void reset();

 private:
  RegionOwner* owner_ = nullptr;
  MemRegion* region_ = nullptr;
  uint64_t id_ = 0;
};

}  // namespace zc
