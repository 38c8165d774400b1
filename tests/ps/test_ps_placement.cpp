// Placement (src/ps/placement.h): how keys are cut into chunks and which
// server holds each, for every policy: chunks cover the key exactly, in
// order, never above the partition; slots count per server; balanced puts
// the same share of every large key on each server and small keys on the
// lightest one; roundrobin and hash keep their documented rules; the same
// declarations give the same placement (every rank computes its own).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ps/placement.h"

namespace {

using zc::ps::ChunkPlace;
using zc::ps::Declared;
using zc::ps::Placement;
using zc::ps::PlacementPolicy;

constexpr uint64_t kMiB = uint64_t{1} << 20;
const PlacementPolicy kPolicies[] = {PlacementPolicy::kBalanced, PlacementPolicy::kRoundRobin,
                                     PlacementPolicy::kHash};

// Chunks in order, back to back from element 0 to count, none empty, none
// above the partition; slots numbered 0, 1, ... per server in order.
void ExpectWellFormed(const std::vector<ChunkPlace>& chunks, uint64_t count, size_t es, uint64_t partition,
                      int servers) {
  uint64_t next = 0;
  std::vector<uint32_t> slots(static_cast<size_t>(servers), 0);
  for (const ChunkPlace& c : chunks) {
    EXPECT_EQ(c.offset, next);
    EXPECT_GT(c.elems, 0u);
    EXPECT_LE(c.elems * es, std::max<uint64_t>(partition, es)) << "chunk at " << c.offset;
    ASSERT_GE(c.server, 0);
    ASSERT_LT(c.server, servers);
    EXPECT_EQ(c.slot, slots[static_cast<size_t>(c.server)]++);
    next += c.elems;
  }
  EXPECT_EQ(next, count);
}

// A model's bytes on each server, its keys declared in order.
std::vector<uint64_t> Loads(const Placement& p, const std::vector<uint64_t>& counts, size_t es, int servers) {
  Declared d(servers);
  for (size_t k = 0; k < counts.size(); ++k) {
    std::vector<ChunkPlace> c = p.Cut(k, counts[k], es, d);
    ExpectWellFormed(c, counts[k], es, p.partition_bytes(), servers);
    d.Add(c, es);
  }
  std::vector<uint64_t> out;
  for (int s = 0; s < servers; ++s) out.push_back(d.bytes(s));
  return out;
}

double Imbalance(const std::vector<uint64_t>& loads) {
  uint64_t total = 0;
  for (uint64_t b : loads) total += b;
  return static_cast<double>(*std::max_element(loads.begin(), loads.end())) * static_cast<double>(loads.size()) /
         static_cast<double>(total);
}

// LSTM of the paper's Table 2 as perf/common/ps_models.h declares it
// (float32): four gates of two 4 MiB weights and a bias, then the output
// layer's 3.9 MiB of weights and its bias.
std::vector<uint64_t> LstmLike() {
  std::vector<uint64_t> c;
  for (int g = 0; g < 4; ++g) c.insert(c.end(), {kMiB, kMiB, 1024});
  c.insert(c.end(), {1024 * 1001, 1001});
  return c;
}

TEST(Placement, EveryPolicyCoversEveryKeyOddSizes) {
  const uint64_t counts[] = {0, 1, 7, 63, 64, 65, 1000, 4099, 65537, 1000003};
  const size_t sizes[] = {1, 2, 4, 8};
  for (PlacementPolicy pol : kPolicies)
    for (int servers = 1; servers <= 5; ++servers)
      for (uint64_t partition : {uint64_t{64}, uint64_t{256}, uint64_t{4096}, 4 * kMiB})
        for (size_t es : sizes) {
          Placement p(partition, pol, servers);
          Declared d(servers);
          for (uint64_t count : counts) {
            std::vector<ChunkPlace> c = p.Cut(count * 31 + es, count, es, d);
            ExpectWellFormed(c, count, es, partition, servers);
            if (count == 0) {
              EXPECT_TRUE(c.empty());
            }
            d.Add(c, es);
          }
        }
}

TEST(Placement, BalancedSpreadsALargeKeyEvenly) {
  for (int servers = 1; servers <= 5; ++servers) {
    Placement p(4 * kMiB, PlacementPolicy::kBalanced, servers);
    Declared d(servers);
    // 4 MiB (one partition exactly), 10 MiB + 3 elements, 64 MiB.
    for (uint64_t count : {kMiB, 10 * kMiB / 4 + 3, 16 * kMiB}) {
      std::vector<ChunkPlace> c = p.Cut(1, count, 4, d);
      ExpectWellFormed(c, count, 4, 4 * kMiB, servers);
      EXPECT_EQ(c.size() % static_cast<size_t>(servers), 0u) << count << " elements, " << servers << " servers";
      std::vector<uint64_t> per(static_cast<size_t>(servers), 0);
      uint64_t lo = UINT64_MAX, hi = 0;
      for (const ChunkPlace& x : c) {
        per[static_cast<size_t>(x.server)] += x.elems;
        lo = std::min(lo, x.elems);
        hi = std::max(hi, x.elems);
      }
      EXPECT_LE(hi - lo, 1u) << "equal chunks";
      const auto [mn, mx] = std::minmax_element(per.begin(), per.end());
      EXPECT_LE(*mx - *mn, c.size() / static_cast<size_t>(servers)) << "the same share on every server";
    }
  }
}

TEST(Placement, BalancedPutsSmallKeysOnTheLightestServer) {
  Placement p(4 * kMiB, PlacementPolicy::kBalanced, 3);
  Declared d(3);
  // Keys below 2 x kMinSplit bytes stay whole; each goes where the fewest
  // bytes are.
  const uint64_t elems[] = {1000, 10, 10, 500, 7, 3000, 1, 1, 1};
  for (uint64_t n : elems) {
    const int lightest = d.Lightest();
    std::vector<ChunkPlace> c = p.Cut(n, n, 4, d);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].server, lightest);
    for (int s = 0; s < 3; ++s) EXPECT_LE(d.bytes(lightest), d.bytes(s));
    d.Add(c, 4);
  }
  EXPECT_EQ(d.chunks(), std::size(elems));
}

TEST(Placement, BalancedEvensOutTheLstmModel) {
  // Whole 4 MiB chunks put five of LSTM's nine large ones on one of two
  // servers (about 55% of the bytes); balanced gives each half.
  const std::vector<uint64_t> lstm = LstmLike();
  EXPECT_GT(Imbalance(Loads(Placement(4 * kMiB, PlacementPolicy::kRoundRobin, 2), lstm, 4, 2)), 1.08);
  for (int servers = 2; servers <= 5; ++servers)
    EXPECT_LT(Imbalance(Loads(Placement(4 * kMiB, PlacementPolicy::kBalanced, servers), lstm, 4, servers)), 1.01)
        << servers << " servers";
}

TEST(Placement, RoundRobinCountsChunksOverKeys) {
  Placement p(256, PlacementPolicy::kRoundRobin, 3);
  Declared d(3);
  uint64_t g = 0;
  for (uint64_t count : {64, 65, 1, 200}) {  // 4-byte elements: 64 per chunk
    std::vector<ChunkPlace> c = p.Cut(9, count, 4, d);
    for (const ChunkPlace& x : c) {
      EXPECT_EQ(x.server, static_cast<int>(g++ % 3));
      EXPECT_EQ(x.elems, std::min<uint64_t>(64, count - x.offset)) << "whole partitions";
    }
    d.Add(c, 4);
  }
  EXPECT_EQ(d.chunks(), g);
}

TEST(Placement, HashIgnoresDeclarationOrder) {
  Placement p(256, PlacementPolicy::kHash, 4);
  Declared fresh(4), busy(4);
  busy.Add(p.Cut(1, 1000, 4, busy), 4);
  std::vector<ChunkPlace> a = p.Cut(77, 5000, 4, fresh), b = p.Cut(77, 5000, 4, busy);
  ASSERT_EQ(a.size(), b.size());
  std::vector<int> used(4, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].server, b[i].server);
    ++used[static_cast<size_t>(a[i].server)];
  }
  for (int u : used) EXPECT_GT(u, 0) << "79 chunks reach every server";
}

TEST(Placement, SameDeclarationsSamePlacement) {
  // Two ranks: the same keys in the same order place every chunk alike.
  for (PlacementPolicy pol : kPolicies) {
    Placement p(64 * 1024, pol, 3);
    Declared r0(3), r1(3);
    for (uint64_t k = 0; k < 40; ++k) {
      const uint64_t count = (k * 7919) % 100000 + 1;
      std::vector<ChunkPlace> a = p.Cut(k, count, 2, r0), b = p.Cut(k, count, 2, r1);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].offset, b[i].offset);
        EXPECT_EQ(a[i].elems, b[i].elems);
        EXPECT_EQ(a[i].server, b[i].server);
        EXPECT_EQ(a[i].slot, b[i].slot);
      }
      r0.Add(a, 2);
      r1.Add(b, 2);
    }
  }
}

TEST(Placement, PolicyNames) {
  EXPECT_STREQ(zc::ps::PolicyName(static_cast<uint32_t>(PlacementPolicy::kBalanced)), "balanced");
  EXPECT_STREQ(zc::ps::PolicyName(static_cast<uint32_t>(PlacementPolicy::kRoundRobin)), "roundrobin");
  EXPECT_STREQ(zc::ps::PolicyName(static_cast<uint32_t>(PlacementPolicy::kHash)), "hash");
  EXPECT_STREQ(zc::ps::PolicyName(7), "unknown");
  for (PlacementPolicy pol : kPolicies) {
    PlacementPolicy back = PlacementPolicy::kRoundRobin;
    EXPECT_TRUE(zc::ps::PolicyFromName(zc::ps::PolicyName(static_cast<uint32_t>(pol)), &back));
    EXPECT_EQ(back, pol);
  }
  PlacementPolicy got = PlacementPolicy::kHash;
  EXPECT_TRUE(zc::ps::PolicyFromName("Balanced", &got));
  EXPECT_EQ(got, PlacementPolicy::kBalanced);
  EXPECT_FALSE(zc::ps::PolicyFromName("even", &got));
  EXPECT_FALSE(zc::ps::PolicyFromName(nullptr, &got));
  EXPECT_EQ(got, PlacementPolicy::kBalanced) << "untouched when the name is refused";
}

}  // namespace
