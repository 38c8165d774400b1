// Pool: the registered memory pool (§3.4 of the paper). Chunks are created
// (and exposed to every transport) rarely and in large steps; allocations
// are carved out of them first-fit with coalescing on free, so a training
// loop that allocates and frees tensors never registers memory again.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "p2p/mem_region.h"

namespace zc {

class Pool {
 public:
  // Creates one chunk of at least `bytes` (exposed to all transports).
  using ChunkFactory = std::function<Status(size_t bytes, std::unique_ptr<MemRegion>* out)>;
  // Called for every slice created or destroyed (the device keeps an id map).
  using SliceHook = std::function<void(MemRegion* slice, bool created)>;
  using IdSource = std::function<uint64_t()>;

  Pool(size_t chunk_bytes, size_t max_bytes, ChunkFactory factory, SliceHook hook, IdSource ids);
  ~Pool();

  // 64-byte aligned slice of at least `bytes` (bytes > 0).
  Status Allocate(size_t bytes, MemRegion** out);
  // ptr must be what Allocate returned (slice->data()).
  Status Free(void* ptr);
  MemRegion* Find(const void* ptr);  // slice starting at ptr, or null
  // The live slice that holds [ptr, ptr + bytes), or null.
  MemRegion* FindHolding(const void* ptr, size_t bytes);
  // True when [p, p + bytes) lies inside one chunk. Lock-free (chunks are
  // only added while the pool lives): the C ABI asks it on every call
  // before it asks whether a CUDA driver is loaded, since pool memory is
  // host memory.
  bool Contains(const void* p, size_t bytes) const;
  size_t bytes_reserved() const;     // sum of chunk sizes
  size_t bytes_in_use() const;
  size_t chunks() const;

  static constexpr size_t kAlign = 64;
  // Chunks Contains() knows of (later ones are still usable; Contains()
  // then says false, which only costs the caller a slower check).
  static constexpr int kMaxRanges = 32;

 private:
  struct Chunk {
    std::unique_ptr<MemRegion> region;
    std::map<size_t, size_t> free;  // offset -> length, coalesced
  };
  Status Grow(size_t bytes);
  std::unique_ptr<MemRegion> MakeSlice(Chunk& c, size_t off, size_t len);

  const size_t chunk_bytes_, max_bytes_;
  ChunkFactory factory_;
  SliceHook hook_;
  IdSource ids_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::map<uintptr_t, std::pair<Chunk*, std::unique_ptr<MemRegion>>> live_;
  size_t reserved_ = 0, in_use_ = 0;
  // [lo, hi) of the first kMaxRanges chunks, published by count (release).
  uintptr_t range_lo_[kMaxRanges] = {}, range_hi_[kMaxRanges] = {};
  std::atomic<int> nranges_{0};
};

}  // namespace zc
