#include "gpu/pinned_pool.h"

namespace zc::gpu {
namespace {

size_t RoundUp(size_t bytes) {
  size_t cap = PinnedPool::kMinBytes;
  while (cap < bytes && cap <= (SIZE_MAX >> 1)) cap <<= 1;
  return cap < bytes ? bytes : cap;
}

}  // namespace

PinnedPool& PinnedPool::Global() {
  static PinnedPool* pool = new PinnedPool(nullptr);
  return *pool;
}

PinnedPool::~PinnedPool() {
  const DriverTable* drv = driver();
  if (drv == nullptr || drv->MemFreeHost == nullptr) return;
  for (auto& [cap, p] : free_) drv->MemFreeHost(p);
}

const DriverTable* PinnedPool::driver() const {
  return fixed_driver_ != nullptr ? fixed_driver_ : LoadedDriver();
}

Status PinnedPool::Acquire(size_t bytes, void** out, size_t* cap) {
  *out = nullptr;
  *cap = 0;
  const size_t want = RoundUp(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest cached buffer that fits, if it is not wastefully large.
    auto it = free_.lower_bound(want);
    if (it != free_.end() && it->first <= 4 * want) {
      *out = it->second;
      *cap = it->first;
      stats_.cached_bytes -= it->first;
      ++stats_.reuses;
      free_.erase(it);
      return Status::Ok();
    }
  }
  const DriverTable* drv = driver();
  if (drv == nullptr || !drv->loaded || drv->MemHostAlloc == nullptr) {
    return Error(ZC_ERR_UNSUPPORTED, "pinned staging memory: no CUDA driver with cuMemHostAlloc");
  }
  void* p = nullptr;
  CuResult r = drv->MemHostAlloc(&p, want, cu::kMemHostAllocPortable);
  if (r != cu::kSuccess) {
    return Error(ZC_ERR_NO_MEMORY, "cuMemHostAlloc(%zu bytes) for GPU staging: %s", want,
                 CuErrorText(drv, r).c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.allocs;
  *out = p;
  *cap = want;
  return Status::Ok();
}

void PinnedPool::Release(void* p, size_t cap) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.cached_bytes + cap <= kMaxCachedBytes) {
      free_.emplace(cap, p);
      stats_.cached_bytes += cap;
      return;
    }
    ++stats_.frees;
  }
  const DriverTable* drv = driver();
  if (drv != nullptr && drv->MemFreeHost != nullptr) drv->MemFreeHost(p);
}

PinnedPool::Stats PinnedPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace zc::gpu
