// The registration cache on its own: page rounding, lookup by containment,
// union on overlap or touch, holds, partial deregistration, and many random
// operations against a brute-force model. Addresses are numbers only: the
// cache never touches the memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "p2p/reg_cache.h"

namespace {

using zc::MemRegion;
using zc::RegCache;

constexpr size_t kPage = 4096;
const void* At(uintptr_t a) { return reinterpret_cast<const void*>(a); }

// What the Device does on a miss: one region over Cover(); counts them.
struct Harness {
  RegCache cache{kPage};
  uint64_t next_id = 1;
  size_t registrations = 0;

  MemRegion* Get(uintptr_t a, size_t n, bool hold = false) {
    if (MemRegion* r = cache.Find(At(a), n, hold)) return r;
    RegCache::Range span = cache.Cover(At(a), n);
    auto r = std::make_unique<MemRegion>(reinterpret_cast<void*>(span.lo), span.size(), next_id++);
    MemRegion* out = r.get();
    cache.Insert(std::move(r), hold);
    ++registrations;
    return out;
  }
  std::vector<std::pair<uintptr_t, uintptr_t>> Live() const {
    std::vector<std::pair<uintptr_t, uintptr_t>> v;
    for (auto& r : cache.LiveRanges()) v.emplace_back(r.lo, r.hi);
    return v;
  }
};

const uintptr_t B = 0x10000000;  // page-aligned base of the fake address space

TEST(RegCache, PageRoundingOfUnalignedRanges) {
  RegCache c(kPage);
  auto r = c.PageRange(At(B + 10), 100);
  EXPECT_EQ(r.lo, B);
  EXPECT_EQ(r.hi, B + kPage);
  r = c.PageRange(At(B + kPage - 1), 2);  // straddles a page boundary
  EXPECT_EQ(r.lo, B);
  EXPECT_EQ(r.hi, B + 2 * kPage);
  r = c.PageRange(At(B), kPage);  // aligned stays as is
  EXPECT_EQ(r.lo, B);
  EXPECT_EQ(r.hi, B + kPage);
}

TEST(RegCache, UnalignedRangesInOnePageShareOneRegistration) {
  Harness h;
  MemRegion* a = h.Get(B + 10, 20);
  MemRegion* b = h.Get(B + 3000, 1000);
  EXPECT_EQ(a, b);
  EXPECT_EQ(h.registrations, 1u);
  EXPECT_EQ(a->data(), At(B));
  EXPECT_EQ(a->size(), kPage);
}

// The case: [0,100 pages) after [10,20): a lookup of [50,60) used to
// find [10,20), which does not contain it, and register again.
TEST(RegCache, NestedRangeIsFoundInTheOuterRegion) {
  Harness h;
  MemRegion* outer = h.Get(B, 100 * kPage);
  EXPECT_EQ(h.registrations, 1u);
  EXPECT_EQ(h.Get(B + 10 * kPage, 10 * kPage), outer);
  EXPECT_EQ(h.Get(B + 50 * kPage, 10 * kPage), outer);
  EXPECT_EQ(h.Get(B + 99 * kPage + 5, 7), outer);
  EXPECT_EQ(h.registrations, 1u);
}

TEST(RegCache, InnerFirstThenOuterCoversTheUnionOnce) {
  Harness h;
  MemRegion* inner = h.Get(B + 10 * kPage, 10 * kPage);
  const uint64_t inner_id = inner->id();
  MemRegion* outer = h.Get(B, 100 * kPage);
  EXPECT_EQ(h.registrations, 2u);
  EXPECT_NE(outer, inner);
  EXPECT_EQ(h.cache.live_count(), 1u);
  EXPECT_EQ(h.cache.retired_count(), 1u);  // the inner one, until taken
  // Every later lookup inside is a hit: no third registration.
  EXPECT_EQ(h.Get(B + 50 * kPage, 10 * kPage), outer);
  EXPECT_EQ(h.Get(B + 12 * kPage, kPage), outer);
  EXPECT_EQ(h.registrations, 2u);
  auto unused = h.cache.TakeUnused();
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0]->id(), inner_id);
  EXPECT_EQ(h.cache.retired_count(), 0u);
}

TEST(RegCache, OverlappingRangesMergeIntoTheirUnion) {
  Harness h;
  h.Get(B, 10 * kPage);
  h.Get(B + 20 * kPage, 10 * kPage);
  // Overlaps both: one region from B to B+30 pages replaces them.
  MemRegion* u = h.Get(B + 5 * kPage, 20 * kPage);
  EXPECT_EQ(u->data(), At(B));
  EXPECT_EQ(u->size(), 30 * kPage);
  EXPECT_EQ(h.Live().size(), 1u);
  EXPECT_EQ(h.cache.TakeUnused().size(), 2u);
  EXPECT_EQ(h.Get(B + 29 * kPage, kPage), u);
  EXPECT_EQ(h.registrations, 3u);
}

TEST(RegCache, AdjacentRangesMerge) {
  Harness h;
  h.Get(B, kPage);
  MemRegion* u = h.Get(B + kPage, kPage);  // touches the first
  EXPECT_EQ(u->data(), At(B));
  EXPECT_EQ(u->size(), 2 * kPage);
  EXPECT_EQ(h.Live().size(), 1u);
  // One page gap: no merge.
  h.Get(B + 3 * kPage, kPage);
  EXPECT_EQ(h.Live().size(), 2u);
  // Unaligned bytes that land in the page right after: merged by rounding.
  MemRegion* v = h.Get(B + 2 * kPage + 100, 10);
  EXPECT_EQ(v->data(), At(B));
  EXPECT_EQ(v->size(), 4 * kPage);
  EXPECT_EQ(h.Live().size(), 1u);
}

TEST(RegCache, HeldRegionIsNotDroppedWhenReplaced) {
  Harness h;
  MemRegion* a = h.Get(B, kPage, /*hold=*/true);
  const uint64_t id = a->id();
  EXPECT_EQ(h.cache.holds(id), 1);
  h.Get(B, 4 * kPage);  // replaces a
  EXPECT_TRUE(h.cache.TakeUnused().empty());  // still held: stays exposed
  EXPECT_TRUE(h.cache.Owns(id));
  EXPECT_TRUE(h.cache.Release(id));  // retired and now unheld
  auto unused = h.cache.TakeUnused();
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0]->id(), id);
  EXPECT_FALSE(h.cache.Release(id));  // gone: a late release is a no-op
}

TEST(RegCache, ReleaseOfALiveRegionDropsNothing) {
  Harness h;
  MemRegion* a = h.Get(B, kPage, true);
  EXPECT_EQ(h.Get(B, 10, true), a);
  EXPECT_EQ(h.cache.holds(a->id()), 2);
  EXPECT_FALSE(h.cache.Release(a->id()));
  EXPECT_FALSE(h.cache.Release(a->id()));
  EXPECT_TRUE(h.cache.TakeUnused().empty());
  EXPECT_EQ(h.cache.live_count(), 1u);
}

TEST(RegCache, DeregisterDropsEveryOverlappingRegion) {
  Harness h;
  h.Get(B, 2 * kPage);
  h.Get(B + 4 * kPage, 2 * kPage);
  h.Get(B + 8 * kPage, 2 * kPage);
  MemRegion* held = h.Get(B + 20 * kPage, kPage, true);
  h.Get(B + 20 * kPage, 2 * kPage);  // retires the held one
  // Partial overlap with the first two (last byte of one, first of next).
  auto gone = h.cache.TakeOverlapping(At(B + 2 * kPage - 1), 2 * kPage + 2);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_EQ(h.Live().size(), 2u);
  EXPECT_EQ(h.cache.Find(At(B), 1, false), nullptr);
  EXPECT_NE(h.cache.Find(At(B + 8 * kPage), 1, false), nullptr);
  // Retired and held regions go too (the memory is being freed).
  gone = h.cache.TakeOverlapping(At(B + 20 * kPage + 5), 1);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_FALSE(h.cache.Owns(held->id()));
  // A range touching but not overlapping drops nothing.
  EXPECT_TRUE(h.cache.TakeOverlapping(At(B + 10 * kPage), kPage).empty());
  EXPECT_EQ(h.cache.TakeAll().size(), 1u);
}

// Brute-force model: a set of page flags per live region, merged the slow
// way. Many random registrations and deregistrations must leave the same
// live ranges, and every lookup must agree on hit or miss.
TEST(RegCache, RandomRangesMatchABruteForceModel) {
  Harness h;
  std::vector<std::pair<uintptr_t, uintptr_t>> model;  // disjoint, non-touching
  std::mt19937_64 rng(12345);
  const uintptr_t span = 256 * kPage;
  size_t model_registrations = 0, hits = 0;
  for (int step = 0; step < 20000; ++step) {
    uintptr_t a = B + rng() % span;
    size_t n = 1 + rng() % (rng() % 4 == 0 ? 16 * kPage : kPage);
    bool in_model = false;
    for (auto& [lo, hi] : model) in_model |= lo <= a && a + n <= hi;
    if (rng() % 8 == 0) {
      size_t want = 0;
      std::vector<std::pair<uintptr_t, uintptr_t>> keep;
      for (auto& iv : model) {
        if (iv.first < a + n && a < iv.second) ++want;
        else keep.push_back(iv);
      }
      auto gone = h.cache.TakeOverlapping(At(a), n);
      ASSERT_EQ(gone.size(), want) << "step " << step;
      model = keep;
    } else {
      ASSERT_EQ(h.cache.Find(At(a), n, false) != nullptr, in_model) << "step " << step;
      MemRegion* r = h.Get(a, n);
      ASSERT_TRUE(r->contains(At(a), n));
      if (in_model) {
        ++hits;
      } else {
        uintptr_t lo = a & ~(kPage - 1), hi = (a + n + kPage - 1) & ~(kPage - 1);
        std::vector<std::pair<uintptr_t, uintptr_t>> keep;
        for (auto& iv : model) {
          if (iv.first <= hi && lo <= iv.second) {
            lo = std::min(lo, iv.first);
            hi = std::max(hi, iv.second);
          } else {
            keep.push_back(iv);
          }
        }
        keep.emplace_back(lo, hi);
        std::sort(keep.begin(), keep.end());
        model = keep;
        ++model_registrations;
      }
      h.cache.TakeUnused();
    }
    ASSERT_EQ(h.Live(), model) << "step " << step;
    ASSERT_EQ(h.cache.retired_count(), 0u);
  }
  EXPECT_EQ(h.registrations, model_registrations);
  EXPECT_GT(hits, 1000u);  // the sequence exercised hits as well as merges
  printf("random: %zu registrations, %zu hits\n", h.registrations, hits);
}

}  // namespace
