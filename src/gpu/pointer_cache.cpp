#include "gpu/pointer_cache.h"

#include <dlfcn.h>

#include <mutex>

#include "common/log.h"
#include "zc_build_config.h"

namespace zc::gpu {
namespace {

// Per-thread front of the cache. Plain data only, so the thread_local needs
// no constructor guard on the hit path.
struct Slot {
  uint64_t cache_id;  // 0: empty
  uint64_t gen;
  uintptr_t lo, hi;
  uint64_t buffer_id;
  int device;
  MemType type;
};
constexpr int kSlots = 4;
struct ThreadCache {
  Slot slots[kSlots];
  unsigned next;
  unsigned stripe_plus1;  // 0: not assigned yet
};
thread_local ThreadCache t_cache;

std::atomic<uint64_t> g_next_cache_id{1};
std::atomic<unsigned> g_next_stripe{0};

PointerInfo HostInfo(uintptr_t p, size_t bytes) {
  PointerInfo info;
  info.type = MemType::kHost;
  info.device = -1;
  info.base = p;
  info.size = bytes;
  info.buffer_id = 0;
  return info;
}

// Called by libzcomm_cudahook.so after the application frees CUDA memory.
void HookFreeCallback(const void* ptr, size_t size) {
  if (size == 0) {
    PointerCache::Global().Invalidate(ptr);
  } else {
    PointerCache::Global().InvalidateRange(ptr, size);
  }
}

}  // namespace

const char* MemTypeName(MemType t) {
  switch (t) {
    case MemType::kHost: return "host";
    case MemType::kDevice: return "device";
    case MemType::kManaged: return "managed";
    case MemType::kHostPinned: return "host-pinned";
    case MemType::kUnknown: break;
  }
  return "unknown";
}

PointerCache::PointerCache(const DriverTable* drv)
    : fixed_driver_(drv),
      id_(g_next_cache_id.fetch_add(1, std::memory_order_relaxed)) {}

PointerCache& PointerCache::Global() {
  static PointerCache* const cache = [] {
    auto* c = new PointerCache(nullptr);  // leaked: frees may come during exit
    // If the interposition shim is preloaded, have it tell us about frees.
    using SetCallback = void (*)(void (*)(const void*, size_t));
    if (void* sym = dlsym(RTLD_DEFAULT, "zc_cudahook_set_free_callback")) {
      reinterpret_cast<SetCallback>(sym)(&HookFreeCallback);
      ZC_INFO(kGpu, "pointer cache: libzcomm_cudahook interposition active");
    }
    return c;
  }();
  return *cache;
}

const DriverTable* PointerCache::driver() const {
  if (fixed_driver_ != nullptr) {
    return fixed_driver_->loaded ? fixed_driver_ : nullptr;
  }
  return LoadedDriver();
}

PointerCache::Stripe& PointerCache::stripe() const {
  if (t_cache.stripe_plus1 == 0) {
    t_cache.stripe_plus1 =
        g_next_stripe.fetch_add(1, std::memory_order_relaxed) % kStripes + 1;
  }
  return stripes_[t_cache.stripe_plus1 - 1];
}

void PointerCache::Remember(const PointerInfo& info, uint64_t gen) const {
  Slot* s = nullptr;
  for (Slot& cand : t_cache.slots) {
    if (cand.cache_id == id_ && cand.lo == info.base) s = &cand;
  }
  if (s == nullptr) s = &t_cache.slots[t_cache.next++ % kSlots];
  s->cache_id = id_;
  s->gen = gen;
  s->lo = info.base;
  s->hi = info.base + info.size;
  s->buffer_id = info.buffer_id;
  s->device = info.device;
  s->type = info.type;
}

// Finds the entry containing all of [p, end).
bool PointerCache::LookupLocked(uintptr_t p, uintptr_t end,
                                PointerInfo* out) const {
  auto it = map_.upper_bound(p);
  if (it == map_.begin()) return false;
  --it;
  if (p >= it->second.end) return false;
  if (end > it->second.end) return false;
  *out = it->second.info;
  return true;
}

void PointerCache::EraseOverlapLocked(uintptr_t lo, uintptr_t hi) {
  auto it = map_.upper_bound(lo);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > lo) it = prev;
  }
  bool erased = false;
  while (it != map_.end() && it->first < hi) {
    it = map_.erase(it);
    erased = true;
  }
  if (erased) gen_.fetch_add(1, std::memory_order_release);
  CountLocked();
}

void PointerCache::InsertLocked(const PointerInfo& info) {
  EraseOverlapLocked(info.base, info.base + info.size);
  map_.emplace(info.base, Entry{info.base + info.size, info});
  CountLocked();
}

Status PointerCache::QueryDriver(const DriverTable* drv, uintptr_t p,
                                 size_t bytes, PointerInfo* out,
                                 bool* cacheable) {
  *cacheable = false;
  // Each value zero-initialised and 8 bytes wide: the driver writes 1 byte
  // (bool), 4 (enum, int) or 8 depending on the attribute, and on a
  // little-endian machine the value reads right in every case.
  uint64_t v_type = 0, v_id = 0, v_managed = 0, v_start = 0, v_size = 0;
  int v_dev = -1;
  int attrs[] = {cu::kPointerAttrMemoryType,     cu::kPointerAttrBufferId,
                 cu::kPointerAttrIsManaged,      cu::kPointerAttrDeviceOrdinal,
                 cu::kPointerAttrRangeStartAddr, cu::kPointerAttrRangeSize};
  void* data[] = {&v_type, &v_id, &v_managed, &v_dev, &v_start, &v_size};
  stripe().queries.fetch_add(1, std::memory_order_relaxed);
  const CuResult r = drv->PointerGetAttributes(6, attrs, data, p);
  if (r == cu::kErrorNotInitialized || r == cu::kErrorDeinitialized ||
      r == cu::kErrorInvalidContext) {
    // CUDA is not (or no longer) initialised here, or the pointer belongs
    // to no context: it cannot be CUDA memory.
    *out = HostInfo(p, bytes);
    return Status::Ok();
  }
  if (r != cu::kSuccess) {
    return Status(ZC_ERR_SYSTEM,
                  Format("classify pointer %#lx: cuPointerGetAttributes: %s",
                         static_cast<unsigned long>(p),
                         CuErrorText(drv, r).c_str()));
  }
  const unsigned mem = static_cast<unsigned>(v_type);
  if (mem == 0) {  // not allocated, mapped or registered by CUDA
    *out = HostInfo(p, bytes);
    return Status::Ok();
  }
  PointerInfo info;
  if (v_managed != 0 || mem == cu::kMemoryTypeUnified) {
    info.type = MemType::kManaged;
  } else if (mem == cu::kMemoryTypeDevice) {
    info.type = MemType::kDevice;
  } else if (mem == cu::kMemoryTypeHost) {
    info.type = MemType::kHostPinned;
  } else {
    return Error(ZC_ERR_UNSUPPORTED,
                 "classify pointer %#lx: CUDA memory type %u (array) is not "
                 "supported",
                 static_cast<unsigned long>(p), mem);
  }
  info.device = v_dev;
  info.buffer_id = v_id;
  info.base = static_cast<uintptr_t>(v_start);
  info.size = static_cast<size_t>(v_size);
  if (info.size == 0 || p < info.base || p >= info.base + info.size) {
    // No range from the driver: classify, but do not cache a made-up range.
    info.base = p;
    info.size = bytes;
    *out = info;
    return Status::Ok();
  }
  *out = info;
  *cacheable = true;
  return Status::Ok();
}

Status PointerCache::Classify(const void* ptr, size_t bytes, PointerInfo* out) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (ptr == nullptr) {
    if (bytes > 0) {
      return Error(ZC_ERR_INVALID_ARG,
                   "classify pointer: null pointer with %zu bytes", bytes);
    }
    *out = HostInfo(0, 0);
    return Status::Ok();
  }
  const size_t span = bytes != 0 ? bytes : 1;
  const uintptr_t end = p + span;
  if (end < p) {
    return Error(ZC_ERR_INVALID_ARG,
                 "classify pointer %p: %zu bytes wrap the address space", ptr,
                 bytes);
  }

  // No driver and nothing declared (CPU-only processes): host memory.
  if (entries_.load(std::memory_order_acquire) == 0 && driver() == nullptr) {
    stripe().misses.fetch_add(1, std::memory_order_relaxed);
    *out = HostInfo(p, bytes);
    return Status::Ok();
  }
  if (FindCached(p, end, out)) {
    stripe().hits.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  stripe().misses.fetch_add(1, std::memory_order_relaxed);
  const DriverTable* drv = driver();
  return drv ? ClassifyByDriver(drv, ptr, bytes, out) : ClassifyDeclared(ptr, bytes, out);
}

bool PointerCache::FindCached(uintptr_t p, uintptr_t end, PointerInfo* out) {
  // This thread's recent hits, valid while no entry was removed.
  uint64_t gen = gen_.load(std::memory_order_acquire);
  for (const Slot& s : t_cache.slots) {
    if (s.cache_id == id_ && s.gen == gen && p >= s.lo && end <= s.hi) {
      out->type = s.type;
      out->device = s.device;
      out->base = s.lo;
      out->size = s.hi - s.lo;
      out->buffer_id = s.buffer_id;
      return true;
    }
  }
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (!LookupLocked(p, end, out)) return false;
  // Writers bump gen_ under the exclusive lock: it is stable here.
  Remember(*out, gen_.load(std::memory_order_relaxed));
  return true;
}

namespace {
// A request of bytes at ptr that ends beyond the range info describes;
// where names that range ("%s": its memory type).
Status RunsPast(const void* ptr, size_t bytes, const char* where, const PointerInfo& info) {
  const std::string range = Format(where, MemTypeName(info.type));
  return Error(ZC_ERR_INVALID_ARG, "classify pointer %p: %zu bytes run past %s [%#lx, %#lx)", ptr, bytes,
               range.c_str(), static_cast<unsigned long>(info.base),
               static_cast<unsigned long>(info.base + info.size));
}
}  // namespace

Status PointerCache::ClassifyDeclared(const void* ptr, size_t bytes, PointerInfo* out) {
  // No libcuda in the process: no CUDA memory can exist, except what a
  // caller declared (a declared range the request overruns is an error).
  PointerInfo partial;
  if (Lookup(ptr, &partial) && partial.type != MemType::kHost) {
    return RunsPast(ptr, bytes, "the declared %s range", partial);
  }
  *out = HostInfo(reinterpret_cast<uintptr_t>(ptr), bytes);
  return Status::Ok();
}

Status PointerCache::ClassifyByDriver(const DriverTable* drv, const void* ptr, size_t bytes, PointerInfo* out) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  PointerInfo info;
  bool cacheable = false;
  ZC_RETURN_IF_ERROR(QueryDriver(drv, p, bytes, &info, &cacheable));
  if (info.type == MemType::kHost) {
    DropStale(ptr);
    *out = info;
    return Status::Ok();
  }
  const uintptr_t end = p + (bytes != 0 ? bytes : 1);
  if (cacheable && end > info.base + info.size) {
    return RunsPast(ptr, bytes, "the end of its CUDA %s allocation", info);
  }
  if (cacheable) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    InsertLocked(info);
    Remember(info, gen_.load(std::memory_order_relaxed));
  }
  *out = info;
  return Status::Ok();
}

void PointerCache::DropStale(const void* ptr) {
  // The driver is authoritative: a driver-learnt entry (buffer id != 0)
  // that still claims ptr is stale.
  PointerInfo stale;
  if (!Lookup(ptr, &stale) || stale.buffer_id == 0) return;
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = map_.find(stale.base);
  if (it != map_.end() && it->second.info.buffer_id == stale.buffer_id) {
    map_.erase(it);
    gen_.fetch_add(1, std::memory_order_release);
    CountLocked();
  }
}

bool PointerCache::Lookup(const void* ptr, PointerInfo* out) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mu_);
  return LookupLocked(p, p + 1, out);
}

void PointerCache::Declare(const void* base, size_t size, MemType type,
                           int device) {
  if (base == nullptr || size == 0) return;
  PointerInfo info;
  info.type = type;
  info.device = type == MemType::kHost ? -1 : device;
  info.base = reinterpret_cast<uintptr_t>(base);
  info.size = size;
  info.buffer_id = 0;
  std::unique_lock<std::shared_mutex> lock(mu_);
  InsertLocked(info);
}

void PointerCache::Invalidate(const void* ptr) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = map_.upper_bound(p);
  if (it == map_.begin()) return;
  --it;
  if (p < it->second.end) {
    map_.erase(it);
    gen_.fetch_add(1, std::memory_order_release);
    CountLocked();
  }
}

void PointerCache::InvalidateRange(const void* base, size_t size) {
  if (size == 0) {
    Invalidate(base);
    return;
  }
  const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  std::unique_lock<std::shared_mutex> lock(mu_);
  EraseOverlapLocked(lo, lo + size < lo ? UINTPTR_MAX : lo + size);
}

void PointerCache::Clear() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  map_.clear();
  gen_.fetch_add(1, std::memory_order_release);
  CountLocked();
}

bool PointerCache::Validate(const PointerInfo& cached) {
  if (cached.type == MemType::kHost && cached.buffer_id == 0) {
    // Undeclared host memory was never cached; declared host memory is
    // valid while its declaration stands.
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(cached.base);
    if (it == map_.end()) return false;
    return it->second.info.size == cached.size &&
           it->second.info.type == cached.type;
  }
  if (cached.buffer_id == 0) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(cached.base);
    return it != map_.end() && it->second.info.buffer_id == 0 &&
           it->second.info.size == cached.size &&
           it->second.info.type == cached.type;
  }
  const DriverTable* drv = driver();
  bool same = false;
  if (drv != nullptr) {
    uint64_t id = 0;
    stripe().queries.fetch_add(1, std::memory_order_relaxed);
    const CuResult r =
        drv->PointerGetAttribute(&id, cu::kPointerAttrBufferId, cached.base);
    same = r == cu::kSuccess && id == cached.buffer_id;
    if (!same) {
      ZC_TRACE(kGpu, "pointer cache: buffer id of %#lx changed (%llu -> %llu)",
               static_cast<unsigned long>(cached.base),
               static_cast<unsigned long long>(cached.buffer_id),
               static_cast<unsigned long long>(r == cu::kSuccess ? id : 0));
    }
  }
  if (!same) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(cached.base);
    if (it != map_.end() && it->second.info.buffer_id == cached.buffer_id) {
      map_.erase(it);
      gen_.fetch_add(1, std::memory_order_release);
      CountLocked();
    }
  }
  return same;
}

PointerCache::Stats PointerCache::stats() const {
  Stats s;
  for (const Stripe& st : stripes_) {
    s.hits += st.hits.load(std::memory_order_relaxed);
    s.misses += st.misses.load(std::memory_order_relaxed);
    s.driver_queries += st.queries.load(std::memory_order_relaxed);
  }
  std::shared_lock<std::shared_mutex> lock(mu_);
  s.entries = map_.size();
  return s;
}

bool IsDevicePointer(const void* ptr) {
  if (ptr == nullptr) return false;
  PointerInfo info;
  if (!PointerCache::Global().Classify(ptr, 1, &info).ok()) return false;
  return info.type == MemType::kDevice || info.type == MemType::kManaged;
}

void NotifyFree(const void* ptr) { PointerCache::Global().Invalidate(ptr); }

Status RequireHostAccessible(const void* ptr, size_t bytes, const char* what) {
  PointerInfo info;
  Status st = PointerCache::Global().Classify(ptr, bytes, &info);
  if (!st.ok()) return st.with_context(what);
  if (info.type != MemType::kDevice) return Status::Ok();
#if ZC_HAVE_CUDA
  return Error(ZC_ERR_UNSUPPORTED,
               "%s: %p is CUDA device memory (device %d); this operation "
               "accepts host memory only",
               what, ptr, info.device);
#else
  return Error(ZC_ERR_UNSUPPORTED,
               "%s: %p is CUDA device memory (device %d) but zcomm was built "
               "without CUDA",
               what, ptr, info.device);
#endif
}

}  // namespace zc::gpu
