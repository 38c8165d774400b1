// RegionHold: a local region in use by one transfer. While it is held, a
// registered region is not dropped when a wider registration replaces it in
// the registration cache (reg_cache.h); Deregister (the memory is being
// freed) still drops it. Move-only; gives the hold back when destroyed.
#pragma once

#include <cstdint>

namespace zc {

class MemRegion;
class TransportHost;

class RegionHold {
 public:
  RegionHold() = default;
  // host == null or id == 0: nothing to give back (pool memory).
  RegionHold(TransportHost* host, MemRegion* region, uint64_t id)
      : host_(host), region_(region), id_(id) {}
  ~RegionHold() { reset(); }
  RegionHold(RegionHold&& o) noexcept : host_(o.host_), region_(o.region_), id_(o.id_) {
    o.host_ = nullptr;
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
  TransportHost* host_ = nullptr;
  MemRegion* region_ = nullptr;
  uint64_t id_ = 0;
};

}  // namespace zc
