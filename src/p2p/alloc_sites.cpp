#include "p2p/alloc_sites.h"

#include <cstdlib>

#include "common/log.h"
#include "p2p/local_regions.h"

namespace zc {

Status AllocSites::Alloc(uint64_t site, size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Error(ZC_ERR_INVALID_ARG, "allocation of 0 bytes for site %llu",
                               static_cast<unsigned long long>(site));
  bool pooled = marked(site);
  void* p = nullptr;
  if (pooled) {
    MemRegion* r = nullptr;
    ZC_RETURN_IF_ERROR(pool_->Allocate(bytes, &r));
    p = r->data();
  } else {
    // 64-byte aligned like pool memory, so the two are interchangeable.
    if (posix_memalign(&p, 64, bytes) != 0)
      return Error(ZC_ERR_NO_MEMORY, "allocation of %zu bytes for site %llu: out of memory", bytes,
                   static_cast<unsigned long long>(site));
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_[reinterpret_cast<uintptr_t>(p)] = Live{site, bytes, pooled};
  *out = p;
  return Status::Ok();
}

Status AllocSites::Free(void* ptr) {
  Live l;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end())
      return Error(ZC_ERR_INVALID_ARG, "%p was not allocated by zc_site_alloc (or was freed)", ptr);
    l = it->second;
    live_.erase(it);
  }
  if (l.pooled) return pool_->Free(ptr);
  free(ptr);
  return Status::Ok();
}

void AllocSites::NoteExposed(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_.empty()) return;
  auto it = live_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.begin()) return;
  --it;
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (it->second.pooled || p + bytes > it->first + it->second.bytes) return;
  if (marked_.insert(it->second.site).second)
    ZC_INFO(kP2p, "allocation site %llu sends its tensors: later allocations come from the pool",
            static_cast<unsigned long long>(it->second.site));
}

bool AllocSites::marked(uint64_t site) const {
  std::lock_guard<std::mutex> lock(mu_);
  return marked_.count(site) != 0;
}

}  // namespace zc
