// Hierarchical allreduce for ranks on several hosts (docs/algorithms.md,
// "Hierarchical allreduce"). With L ranks on each of H hosts:
//   1. inside each host, a ring reduce-scatter over the host's ranks (shared
//      memory): local rank i ends up with segment (i+1) mod L of the vector,
//      reduced over its host;
//   2. across hosts, local rank i of every host ring-allreduces that segment
//      (tcp or verbs): L rings of H ranks run at once, one per local rank,
//      so every rank's connection carries 1/L of the host's traffic;
//   3. inside each host, a ring allgather of the L segments.
// Each host sends 2(H-1)/H of the vector over the network, where the flat
// ring over host-ordered ranks sends 2(n-1)/n through the one rank whose
// right neighbour is on the next host. ZC_AVG divides once, by the rank
// count, on the part each rank owns after the cross-host reduce-scatter.
#include <algorithm>
#include <map>

#include "collectives/collectives.h"
#include "collectives/links.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {
namespace {
// Step numbers of the phases: the local and cross-host rings talk to
// different peers, but distinct ranges keep every message's tag unique.
constexpr uint32_t kLocalReduceStep = 0, kCrossReduceStep = 1000, kCrossGatherStep = 2000,
                   kLocalGatherStep = 3000;
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
  char* out = static_cast<char*>(recv);
  // 1. My host's sum of segment `own` (for ZC_AVG a sum too: divided below).
  ZC_RETURN_IF_ERROR(
      RingReduceScatter(c, h.local_ring, h.local, send, recv, count, dtype, op, kLocalReduceStep));
  const int own = (h.local + 1) % L;
  char* seg = out + SegBegin(count, L, own) * es;
  const size_t seg_len = SegLen(count, L, own);
  // 2. Across hosts, with the ranks that own the same segment there.
  ZC_RETURN_IF_ERROR(
      RingReduceScatter(c, h.cross_ring, h.host, seg, seg, seg_len, dtype, op, kCrossReduceStep));
  if (op == ZC_AVG) {
    const int part = (h.host + 1) % H;
    ScaleDiv(dtype, seg + SegBegin(seg_len, H, part) * es, SegLen(seg_len, H, part), c.size());
  }
  ZC_RETURN_IF_ERROR(RingAllgatherSegments(c, h.cross_ring, h.host, seg, seg_len, kCrossGatherStep));
  // 3. Every segment to every rank of the host.
  return RingAllgatherSegments(c, h.local_ring, h.local, recv, count, kLocalGatherStep);
}

}  // namespace zc::coll
