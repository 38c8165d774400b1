#include "p2p/reg_cache.h"

#include <unistd.h>

#include <algorithm>

namespace zc {

RegCache::RegCache(size_t page) : page_(page) {
  if (page_ == 0) {
    long p = sysconf(_SC_PAGESIZE);
    page_ = p > 0 ? static_cast<size_t>(p) : 4096;
  }
}

RegCache::~RegCache() = default;

RegCache::Range RegCache::PageRange(const void* p, size_t bytes) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), mask = page_ - 1;
  Range r;
  r.lo = a & ~mask;
  r.hi = (a + std::max<size_t>(bytes, 1) + mask) & ~mask;
  return r;
}

RegCache::Range RegCache::RangeOf(const MemRegion& r) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(r.data());
  return Range{lo, lo + r.size()};
}

MemRegion* RegCache::Find(const void* p, size_t bytes, bool hold) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  // Live regions are disjoint: only the last one starting at or below lo
  // can contain the range.
  auto it = live_.upper_bound(lo);
  if (it == live_.begin()) return nullptr;
  Entry& e = entries_.at(std::prev(it)->second);
  if (!e.region->contains(p, bytes)) return nullptr;
  if (hold) ++e.holds;
  return e.region.get();
}

RegCache::Range RegCache::Cover(const void* p, size_t bytes) const {
  Range want = PageRange(p, bytes);
  // The first live region that could overlap or touch: the one before lo
  // (if it reaches lo), then every one starting at or before hi.
  auto it = live_.upper_bound(want.lo);
  if (it != live_.begin()) {
    auto prev = std::prev(it);
    if (RangeOf(*entries_.at(prev->second).region).hi >= want.lo) it = prev;
  }
  for (; it != live_.end() && it->first <= want.hi; ++it) {
    Range r = RangeOf(*entries_.at(it->second).region);
    want.lo = std::min(want.lo, r.lo);
    want.hi = std::max(want.hi, r.hi);
  }
  return want;
}

size_t RegCache::Insert(std::unique_ptr<MemRegion> r, bool hold) {
  const Range span = RangeOf(*r);
  size_t replaced = 0;
  for (auto it = live_.lower_bound(span.lo); it != live_.end() && it->first < span.hi;) {
    Entry& e = entries_.at(it->second);
    e.retired = true;
    it = live_.erase(it);
    ++replaced;
  }
  const uint64_t id = r->id();
  Entry& e = entries_[id];
  e.region = std::move(r);
  e.holds = hold ? 1 : 0;
  live_[span.lo] = id;
  return replaced;
}

bool RegCache::Release(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.holds == 0) return false;
  return --it->second.holds == 0 && it->second.retired;
}

std::vector<std::unique_ptr<MemRegion>> RegCache::TakeUnused() {
  std::vector<std::unique_ptr<MemRegion>> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.retired && it->second.holds == 0) {
      out.push_back(std::move(it->second.region));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<std::unique_ptr<MemRegion>> RegCache::TakeOverlapping(const void* p, size_t bytes) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + std::max<size_t>(bytes, 1);
  std::vector<std::unique_ptr<MemRegion>> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Range r = RangeOf(*it->second.region);
    if (r.lo < hi && lo < r.hi) {
      if (!it->second.retired) live_.erase(r.lo);
      out.push_back(std::move(it->second.region));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<std::unique_ptr<MemRegion>> RegCache::TakeAll() {
  std::vector<std::unique_ptr<MemRegion>> out;
  for (auto& [id, e] : entries_) out.push_back(std::move(e.region));
  entries_.clear();
  live_.clear();
  return out;
}

int RegCache::holds(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.holds;
}

std::vector<RegCache::Range> RegCache::LiveRanges() const {
  std::vector<Range> out;
  for (auto& [lo, id] : live_) out.push_back(RangeOf(*entries_.at(id).region));
  return out;
}

}  // namespace zc
