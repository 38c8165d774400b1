#include "ps/placement.h"

#include <strings.h>

#include <algorithm>

namespace zc::ps {
namespace {
// splitmix64: a fixed, well-mixed hash, the same on every rank.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

const char* PolicyName(uint32_t policy) {
  switch (static_cast<PlacementPolicy>(policy)) {
    case PlacementPolicy::kRoundRobin: return "roundrobin";
    case PlacementPolicy::kHash: return "hash";
    case PlacementPolicy::kBalanced: return "balanced";
  }
  return "unknown";
}

bool PolicyFromName(const char* name, PlacementPolicy* out) {
  for (PlacementPolicy p : {PlacementPolicy::kRoundRobin, PlacementPolicy::kHash, PlacementPolicy::kBalanced})
    if (name && strcasecmp(name, PolicyName(static_cast<uint32_t>(p))) == 0) {
      *out = p;
      return true;
    }
  return false;
}

void Declared::Add(const std::vector<ChunkPlace>& chunks, size_t elem_size) {
  chunks_ += chunks.size();
  for (const ChunkPlace& c : chunks) bytes_[static_cast<size_t>(c.server)] += c.elems * elem_size;
}

int Declared::Lightest() const {
  return static_cast<int>(std::min_element(bytes_.begin(), bytes_.end()) - bytes_.begin());
}

uint64_t Placement::ChunkElems(size_t elem_size) const {
  return std::max<uint64_t>(1, partition_ / std::max<size_t>(1, elem_size));
}

std::vector<ChunkPlace> Placement::Bounds(uint64_t count, size_t elem_size) const {
  const uint64_t ce = ChunkElems(elem_size);
  std::vector<ChunkPlace> out;
  if (policy_ != PlacementPolicy::kBalanced) {
    for (uint64_t off = 0; off < count; off += ce) out.push_back({off, std::min(ce, count - off), 0, 0});
    return out;
  }
  // As many chunks as the partition needs, rounded up to a multiple of S
  // so that every server holds the same share, unless that makes them
  // smaller than kMinSplit; equal within one element, none empty.
  const uint64_t s = static_cast<uint64_t>(servers_);
  const uint64_t needed = (count + ce - 1) / ce;
  const uint64_t spread = (needed + s - 1) / s * s;
  const uint64_t n = std::min(count, std::max(needed, std::min(spread, count * elem_size / kMinSplit)));
  const uint64_t base = n ? count / n : 0, extra = n ? count % n : 0;
  for (uint64_t i = 0, off = 0; i < n; ++i) {
    const uint64_t elems = base + (i < extra ? 1 : 0);
    out.push_back({off, elems, 0, 0});
    off += elems;
  }
  return out;
}

int Placement::ServerOf(uint64_t key, uint64_t i, const Declared& before, int first) const {
  const uint64_t s = static_cast<uint64_t>(servers_);
  switch (policy_) {
    case PlacementPolicy::kHash: return static_cast<int>(Mix(key ^ Mix(i)) % s);
    case PlacementPolicy::kBalanced: return static_cast<int>((static_cast<uint64_t>(first) + i) % s);
    case PlacementPolicy::kRoundRobin: break;
  }
  return static_cast<int>((before.chunks() + i) % s);
}

std::vector<ChunkPlace> Placement::Cut(uint64_t key, uint64_t count, size_t elem_size,
                                       const Declared& before) const {
  std::vector<ChunkPlace> out = Bounds(count, elem_size);
  const int first = policy_ == PlacementPolicy::kBalanced ? before.Lightest() : 0;
  std::vector<uint32_t> per_server(static_cast<size_t>(servers_), 0);
  for (uint64_t i = 0; i < out.size(); ++i) {
    ChunkPlace& c = out[i];
    c.server = ServerOf(key, i, before, first);
    c.slot = per_server[static_cast<size_t>(c.server)]++;
  }
  return out;
}

std::vector<ChunkPlace> Placement::Pieces(const std::vector<ChunkPlace>& chunks,
                                          size_t elem_size) const {
  const uint64_t pe = piece_ ? std::max<uint64_t>(1, piece_ / std::max<size_t>(1, elem_size)) : 0;
  std::vector<ChunkPlace> out;
  std::vector<uint32_t> per_server(static_cast<size_t>(servers_), 0);
  for (const ChunkPlace& c : chunks) {
    const uint64_t step = pe ? pe : std::max<uint64_t>(1, c.elems);
    for (uint64_t off = 0; off < c.elems; off += step) {
      ChunkPlace p;
      p.offset = c.offset + off;
      p.elems = std::min(step, c.elems - off);
      p.server = c.server;
      p.slot = per_server[c.server]++;
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace zc::ps
