#include "ps/placement.h"

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

uint64_t Placement::ChunkElems(size_t elem_size) const {
  return std::max<uint64_t>(1, partition_ / std::max<size_t>(1, elem_size));
}

uint64_t Placement::NumChunks(uint64_t count, size_t elem_size) const {
  uint64_t ce = ChunkElems(elem_size);
  return (count + ce - 1) / ce;
}

std::vector<ChunkPlace> Placement::Cut(uint64_t key, uint64_t count, size_t elem_size,
                                       uint64_t chunks_before) const {
  std::vector<ChunkPlace> out;
  const uint64_t ce = ChunkElems(elem_size);
  std::vector<uint32_t> per_server(static_cast<size_t>(servers_), 0);
  for (uint64_t off = 0, i = 0; off < count; off += ce, ++i) {
    ChunkPlace c;
    c.offset = off;
    c.elems = std::min(ce, count - off);
    uint64_t h = policy_ == PlacementPolicy::kHash ? Mix(key ^ Mix(i)) : chunks_before + i;
    c.server = static_cast<int>(h % static_cast<uint64_t>(servers_));
    c.slot = per_server[c.server]++;
    out.push_back(c);
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
