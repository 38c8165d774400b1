#include "p2p/pool.h"

#include <cstring>
#include <iterator>

namespace zc {

Pool::Pool(size_t chunk_bytes, size_t max_bytes, ChunkFactory factory, SliceHook hook,
           IdSource ids)
    : chunk_bytes_(chunk_bytes), max_bytes_(max_bytes), factory_(std::move(factory)),
      hook_(std::move(hook)), ids_(std::move(ids)) {}

Pool::~Pool() {
  for (auto& [p, entry] : live_) hook_(entry.second.get(), false);
}

bool Pool::Contains(const void* p, size_t bytes) const {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  const int n = nranges_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (lo >= range_lo_[i] && lo < range_hi_[i] && bytes <= range_hi_[i] - lo) return true;
  return false;
}

Status Pool::Grow(size_t bytes) {
  size_t want = bytes > chunk_bytes_ ? bytes : chunk_bytes_;
  want = (want + 4095) & ~size_t{4095};
  // The last chunk under ZC_POOL_MAX is what is left of the limit, so that
  // all of the limit can be used.
  if (max_bytes_ && reserved_ + want > max_bytes_ && reserved_ < max_bytes_) {
    size_t left = (max_bytes_ - reserved_) & ~size_t{4095};
    if (left >= bytes) want = left;
  }
  if (max_bytes_ && reserved_ + want > max_bytes_)
    return Error(ZC_ERR_NO_MEMORY,
                 "registered pool exhausted: %zu bytes requested, %zu of ZC_POOL_MAX=%zu "
                 "reserved (%zu in use); raise ZC_POOL_MAX or free buffers",
                 bytes, reserved_, max_bytes_, in_use_);
  auto c = std::make_unique<Chunk>();
  ZC_RETURN_IF_ERROR(factory_(want, &c->region));
  c->free[0] = c->region->size();
  reserved_ += c->region->size();
  const int n = nranges_.load(std::memory_order_relaxed);
  if (n < kMaxRanges) {
    range_lo_[n] = reinterpret_cast<uintptr_t>(c->region->data());
    range_hi_[n] = range_lo_[n] + c->region->size();
    nranges_.store(n + 1, std::memory_order_release);
  }
  chunks_.push_back(std::move(c));
  return Status::Ok();
}

std::unique_ptr<MemRegion> Pool::MakeSlice(Chunk& c, size_t off, size_t len) {
  MemRegion* parent = c.region.get();
  auto s = std::make_unique<MemRegion>(static_cast<char*>(parent->data()) + off, len, ids_());
  RemoteRegion r = parent->remote();
  r.id = s->id();
  r.addr += off;
  r.size = len;
  r.seg_offset += off;
  s->mutable_remote() = r;
  s->parent = parent;
  s->ShareBackends(*parent);
  return s;
}

Status Pool::Allocate(size_t bytes, MemRegion** out) {
  if (bytes == 0) return Error(ZC_ERR_INVALID_ARG, "pool allocation of 0 bytes");
  if (bytes > (size_t{1} << 46)) return Error(ZC_ERR_NO_MEMORY, "pool allocation of %zu bytes is too large", bytes);
  size_t len = (bytes + kAlign - 1) & ~(kAlign - 1);
  std::lock_guard<std::mutex> lock(mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& c : chunks_) {
      for (auto it = c->free.begin(); it != c->free.end(); ++it) {
        if (it->second < len) continue;
        size_t off = it->first, avail = it->second;
        c->free.erase(it);
        if (avail > len) c->free[off + len] = avail - len;
        auto slice = MakeSlice(*c, off, len);
        MemRegion* raw = slice.get();
        hook_(raw, true);
        live_[reinterpret_cast<uintptr_t>(raw->data())] = {c.get(), std::move(slice)};
        in_use_ += len;
        *out = raw;
        return Status::Ok();
      }
    }
    if (attempt == 0) ZC_RETURN_IF_ERROR(Grow(len));
  }
  return Error(ZC_ERR_INTERNAL, "pool: no space after growing by %zu bytes", len);
}

Status Pool::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end())
    return Error(ZC_ERR_INVALID_ARG, "free of %p: not memory returned by zc_mem_alloc", ptr);
  Chunk* c = it->second.first;
  MemRegion* s = it->second.second.get();
  size_t off = static_cast<size_t>(static_cast<char*>(s->data()) -
                                   static_cast<char*>(c->region->data()));
  size_t len = s->size();
  hook_(s, false);
  live_.erase(it);
  in_use_ -= len;
  // Insert and coalesce with neighbours.
  auto next = c->free.lower_bound(off);
  if (next != c->free.end() && off + len == next->first) {
    len += next->second;
    next = c->free.erase(next);
  }
  if (next != c->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += len;
      return Status::Ok();
    }
  }
  c->free[off] = len;
  return Status::Ok();
}

MemRegion* Pool::Find(const void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  return it == live_.end() ? nullptr : it->second.second.get();
}

MemRegion* Pool::FindHolding(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.begin()) return nullptr;
  MemRegion* s = std::prev(it)->second.second.get();
  return s->contains(ptr, bytes) ? s : nullptr;
}

size_t Pool::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}
size_t Pool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}
size_t Pool::chunks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_.size();
}

}  // namespace zc
