// PointerCache: which kind of memory a pointer is, without asking the CUDA
// driver every time (Awan et al. §V-B).
//
// What is cached, and what is not:
//  - CUDA allocations (device, managed, pinned host) are cached as intervals
//    [base, base+size) with the driver's buffer id, learnt from one
//    cuPointerGetAttributes call on the first miss.
//  - Host memory the driver does not know (malloc, mmap, stack) is NEVER
//    cached from a driver answer: the driver gives no range for it, and the
//    same address may later belong to a CUDA allocation. A host pointer thus
//    costs one driver call per Classify while CUDA is initialised in the
//    process, and no driver call at all while libcuda is not loaded or not
//    initialised (then no CUDA memory can exist). Owners of host memory
//    (zcomm's pools) Declare() it to make it a cache hit.
//  - Declared ranges are the caller's word; the caller Invalidate()s them.
//
// Staleness: an entry outlives its allocation when memory is freed without
// NotifyFree() (no interposition). Classification stays useful (freed device
// memory is rarely reused as host memory), but anything expensive derived
// from an entry (a registration, an IPC handle) must be re-checked with
// Validate(), which compares the driver's current buffer id.
//
// Concurrency: a sorted map under a reader-writer lock, fronted by a small
// per-thread cache stamped with a generation that every removal bumps, so a
// hit takes no lock and no shared write.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "common/status.h"
#include "gpu/cuda_driver.h"

namespace zc::gpu {

enum class MemType { kHost, kDevice, kManaged, kHostPinned, kUnknown };
const char* MemTypeName(MemType t);

struct PointerInfo {
  MemType type = MemType::kUnknown;
  int device = -1;        // CUDA ordinal; -1 for host memory
  uintptr_t base = 0;     // allocation start (host, uncached: the pointer)
  size_t size = 0;        // allocation size (host, uncached: the bytes asked)
  uint64_t buffer_id = 0; // driver's process-unique allocation id; 0 unknown
};

class PointerCache {
 public:
  // drv == nullptr: the process driver, found lazily (LoadedDriver()).
  // Tests pass a table of fakes; a table with loaded == false is "no driver".
  explicit PointerCache(const DriverTable* drv);
  ~PointerCache() = default;
  PointerCache(const PointerCache&) = delete;
  PointerCache& operator=(const PointerCache&) = delete;

  // The process-wide cache (never destroyed, so frees during exit are safe).
  static PointerCache& Global();

  // Classifies [ptr, ptr+bytes). Errors: ZC_ERR_INVALID_ARG for a null
  // pointer with bytes > 0 or a range that runs past its CUDA allocation;
  // ZC_ERR_SYSTEM when the driver fails. bytes == 0 classifies ptr alone.
  Status Classify(const void* ptr, size_t bytes, PointerInfo* out);

  // Cache-only lookup: true and *out when an entry covers ptr. Never calls
  // the driver.
  bool Lookup(const void* ptr, PointerInfo* out);

  // The caller states what [base, base+size) is. Replaces overlapping
  // entries. buffer_id is 0 (unknown) for declared ranges.
  void Declare(const void* base, size_t size, MemType type, int device);

  // Forgets every entry that contains ptr (pass the allocation base on free).
  void Invalidate(const void* ptr);
  // Forgets every entry overlapping [base, base+size) (munmap, cuMemUnmap).
  void InvalidateRange(const void* base, size_t size);
  void Clear();

  // True when `cached` still describes a live allocation: for entries with a
  // buffer id, the driver's current id at cached.base is the same; for
  // declared entries (id 0), the declaration is still in the cache. On false
  // the stale entry is dropped, so the next Classify asks the driver.
  bool Validate(const PointerInfo& cached);

  struct Stats {
    uint64_t hits = 0, misses = 0, driver_queries = 0, entries = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    uintptr_t end;
    PointerInfo info;
  };
  static constexpr int kStripes = 16;
  struct alignas(64) Stripe {
    std::atomic<uint64_t> hits{0}, misses{0}, queries{0};
  };

  const DriverTable* driver() const;  // nullptr when no driver
  // Classify's steps: a hit of this thread's recent entries or the map; a
  // pointer without a driver (host memory, unless declared); the driver's
  // answer, cached when it is an allocation; an entry the driver says is
  // stale, dropped.
  bool FindCached(uintptr_t p, uintptr_t end, PointerInfo* out);
  Status ClassifyDeclared(const void* ptr, size_t bytes, PointerInfo* out);
  Status ClassifyByDriver(const DriverTable* drv, const void* ptr, size_t bytes, PointerInfo* out);
  void DropStale(const void* ptr);
  bool LookupLocked(uintptr_t p, uintptr_t end, PointerInfo* out) const;
  void InsertLocked(const PointerInfo& info);   // exclusive lock held
  void EraseOverlapLocked(uintptr_t lo, uintptr_t hi);
  Status QueryDriver(const DriverTable* drv, uintptr_t p, size_t bytes,
                     PointerInfo* out, bool* cacheable);
  void Remember(const PointerInfo& info, uint64_t gen) const;
  Stripe& stripe() const;

  const DriverTable* fixed_driver_;   // non-null: a test table
  const uint64_t id_;                 // tells thread-local slots apart
  mutable std::shared_mutex mu_;
  std::map<uintptr_t, Entry> map_;    // key: base
  // map_.size(), stored under the exclusive lock after every change: an
  // empty cache without a driver answers "host" with no lock at all.
  std::atomic<size_t> entries_{0};
  void CountLocked() { entries_.store(map_.size(), std::memory_order_release); }
  // Bumped (under the exclusive lock) whenever an entry is removed or
  // replaced; thread-local slots from an older generation are ignored.
  std::atomic<uint64_t> gen_{1};
  mutable Stripe stripes_[kStripes];
};

// True when ptr is device or managed memory. False for host memory, without
// a driver, and when the driver fails.
bool IsDevicePointer(const void* ptr);

// Tells the global cache that the allocation at ptr was freed. The
// interposition shim (libzcomm_cudahook.so) calls this; frameworks may too.
void NotifyFree(const void* ptr);

// For code paths that handle host memory only (a build without CUDA): OK for
// host-accessible memory (host, pinned, managed); ZC_ERR_UNSUPPORTED naming
// `what` for device memory, e.g. "allreduce: sendbuf 0x7f.. is CUDA device
// memory but zcomm was built without CUDA".
Status RequireHostAccessible(const void* ptr, size_t bytes, const char* what);

}  // namespace zc::gpu
