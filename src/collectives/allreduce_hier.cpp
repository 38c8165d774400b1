// Hierarchical allreduce for ranks on several hosts (docs/algorithms.md,
// "Hierarchical allreduce"). With L ranks on each of H hosts:
//   1. inside each host, a ring reduce-scatter over the host's ranks (shared
//      memory): local rank i ends up with segment (i+1) mod L of the vector,
//      reduced over its host;
//   2. across hosts, local rank i of every host ring-allreduces that segment
//      (tcp or verbs): L rings of H ranks run at once, one per local rank,
//      so every rank's connection carries 1/L of the host's traffic;
//   3. inside each host, a ring allgather of the L segments.
// The vector goes through in blocks, pipelined: while a block's cross-host
// messages travel, the next block is reduced and an earlier one gathered
// inside the host, so the shared-memory phases hide behind the network.
// Each host sends 2(H-1)/H of the vector over the network, where the flat
// ring over host-ordered ranks sends 2(n-1)/n through the one rank whose
// right neighbour is on the next host. ZC_AVG divides once, by the rank
// count, on the part each rank owns after the cross-host reduce-scatter.
#include <algorithm>
#include <map>

#include "collectives/collectives.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {
namespace {
// Message tags: cross-host messages carry (kCrossStep + ring step, block);
// the shared-memory rings number their steps from kLocalStep, 2L per block.
constexpr uint32_t kLocalStep = 0, kCrossStep = 0x80000000u;
// Blocks: about kTargetBlocks per call so that the pipeline fills, parts of
// at least kMinPartBytes (per-message costs), at most one chunk.
constexpr size_t kTargetBlocks = 8, kMinPartBytes = 256 * 1024;
}  // namespace

HierShape MakeHierShape(const std::vector<int>& host_of, int rank) {
  HierShape h;
  // Hosts in order of their first rank; each host's ranks ascending.
  std::map<int, int> slot;  // host id -> position
  std::vector<std::vector<int>> hosts;
  for (int r = 0; r < static_cast<int>(host_of.size()); ++r) {
    auto [it, fresh] = slot.emplace(host_of[r], static_cast<int>(hosts.size()));
    if (fresh) hosts.emplace_back();
    hosts[it->second].push_back(r);
  }
  h.hosts = static_cast<int>(hosts.size());
  h.host = slot.at(host_of[rank]);
  h.local_ring = hosts[h.host];
  h.local = static_cast<int>(std::find(h.local_ring.begin(), h.local_ring.end(), rank) -
                             h.local_ring.begin());
  h.per_host = static_cast<int>(hosts[0].size());
  std::string sizes;
  for (const auto& members : hosts) {
    if (members.size() != hosts[0].size()) h.per_host = 0;
    sizes += Format("%s%zu", sizes.empty() ? "" : ", ", members.size());
  }
  h.layout = h.per_host ? Format("%d host(s) x %d rank(s)", h.hosts, h.per_host)
                        : Format("%d hosts with %s ranks", h.hosts, sizes.c_str());
  if (h.per_host)
    for (const auto& members : hosts) h.cross_ring.push_back(members[h.local]);
  return h;
}

std::vector<int> HierPeers(const HierShape& h) {
  std::vector<int> peers;
  if (!h.uniform()) return peers;
  for (const std::vector<int>* ring : {&h.local_ring, &h.cross_ring}) {
    int n = static_cast<int>(ring->size()), me = ring == &h.local_ring ? h.local : h.host;
    if (n < 2) continue;
    peers.push_back((*ring)[(me + 1) % n]);
    peers.push_back((*ring)[(me + n - 1) % n]);
  }
  return peers;
}

Status AllreduceHier(OpCtx& c, const HierShape& h, const void* send, void* recv, size_t count,
                     zc_dtype dtype, zc_op op) {
  const size_t es = c.es();
  const int L = static_cast<int>(h.local_ring.size()), H = static_cast<int>(h.cross_ring.size());
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  // Blocks of L x H parts of m elements: a part is one cross-host message.
  const size_t lh = static_cast<size_t>(L) * H;
  size_t m = (count + lh * kTargetBlocks - 1) / (lh * kTargetBlocks);
  m = std::min(std::max(m, std::max<size_t>(1, kMinPartBytes / es)), c.chunk_elems());
  const size_t block = lh * m;
  const size_t nblocks = std::max<size_t>(1, (count + block - 1) / block);
  const int own = (h.local + 1) % L;  // my segment of every block after phase 1
  const int steps = 2 * (H - 1);      // cross-host ring steps of a block
  const int right = h.cross_ring[(h.host + 1) % H], left = h.cross_ring[(h.host + H - 1) % H];
  auto mod = [](int k, int n) { return ((k % n) + n) % n; };
  auto block_begin = [&](size_t b) { return b * block; };
  auto block_len = [&](size_t b) { return count > b * block ? std::min(block, count - b * block) : 0; };
  auto seg_ptr = [&](size_t b) {
    return out + (block_begin(b) + SegBegin(block_len(b), L, own)) * es;
  };
  auto seg_len = [&](size_t b) { return SegLen(block_len(b), L, own); };
  auto divide = [&](size_t b, int part) {  // ZC_AVG: once, by the rank count
    size_t n = seg_len(b);
    ScaleDiv(dtype, seg_ptr(b) + SegBegin(n, H, part) * es, SegLen(n, H, part), c.size());
  };

  // Phases 1 and 3 of block b (inside the host, blocking exchanges).
  auto local_reduce = [&](size_t b) -> Status {
    size_t at = block_begin(b) * es;
    ZC_RETURN_IF_ERROR(RingReduceScatter(c, h.local_ring, h.local, in + at, out + at, block_len(b),
                                         dtype, op, kLocalStep + static_cast<uint32_t>(b) * 2 * L));
    if (H == 1 && op == ZC_AVG) divide(b, 0);
    return Status::Ok();
  };
  auto local_gather = [&](size_t b) -> Status {
    return RingAllgatherSegments(c, h.local_ring, h.local, out + block_begin(b) * es, block_len(b),
                                 kLocalStep + static_cast<uint32_t>(b) * 2 * L + L);
  };
  // Step j of block b's cross-host ring: j < H-1 reduce-scatter (send part
  // host-j, add part host-j-1), then allgather (send part host+1-s, take
  // part host-s, s = j-(H-1)).
  auto cross_send = [&](size_t b, int j) -> Status {
    int k = mod(j < H - 1 ? h.host - j : h.host + 1 - (j - (H - 1)), H);
    size_t n = seg_len(b);
    return c.Send(right, seg_ptr(b) + SegBegin(n, H, k) * es, SegLen(n, H, k) * es,
                  MessageTag(kCrossStep + j, b));
  };
  auto cross_recv = [&](size_t b, int j) -> Status {
    int k = mod(j < H - 1 ? h.host - j - 1 : h.host - (j - (H - 1)), H);
    size_t n = seg_len(b), len = SegLen(n, H, k);
    char* dst = seg_ptr(b) + SegBegin(n, H, k) * es;
    const void* payload = nullptr;
    ZC_RETURN_IF_ERROR(c.Recv(left, len * es, MessageTag(kCrossStep + j, b), &payload));
    if (len) {
      if (j < H - 1) ReduceInto(dtype, op, dst, payload, len);
      else memcpy(dst, payload, len * es);
    }
    ZC_RETURN_IF_ERROR(c.Release(left));
    if (j == H - 2 && op == ZC_AVG) divide(b, mod(h.host + 1, H));  // my part is complete
    return Status::Ok();
  };

  // Software pipeline in ticks: block b is reduced inside the host at tick
  // b, takes cross-host step j at tick b+1+j, and is gathered inside the
  // host at tick b+steps+1. In a tick the cross-host messages go out first,
  // then the shared-memory work runs while they travel, then the messages
  // from the left are taken. Every rank runs the same ticks, so each link
  // carries its messages in one agreed order; at most Links::kSlots go out
  // per link before the matching receives, so a send never waits for a
  // credit that only a later receive of the same tick would return.
  std::vector<std::pair<size_t, int>> active;
  for (size_t t = 0; t < nblocks + steps + 1; ++t) {
    active.clear();
    for (size_t b = t > static_cast<size_t>(steps) ? t - steps : 0; b < t && b < nblocks; ++b)
      active.push_back({b, static_cast<int>(t - 1 - b)});
    bool local_done = false;
    size_t i = 0;
    do {
      size_t group = std::min<size_t>(active.size() - i, Links::kSlots);
      for (size_t g = i; g < i + group; ++g)
        ZC_RETURN_IF_ERROR(cross_send(active[g].first, active[g].second));
      if (!local_done) {
        if (t < nblocks) ZC_RETURN_IF_ERROR(local_reduce(t));
        if (t >= static_cast<size_t>(steps) + 1) ZC_RETURN_IF_ERROR(local_gather(t - steps - 1));
        local_done = true;
      }
      for (size_t g = i; g < i + group; ++g)
        ZC_RETURN_IF_ERROR(cross_recv(active[g].first, active[g].second));
      i += group;
    } while (i < active.size());
  }
  return Status::Ok();
}

}  // namespace zc::coll
