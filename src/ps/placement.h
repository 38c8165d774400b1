// Placement: how a key's bytes are cut into chunks and which server holds
// each chunk. Chunks are ZC_PS_PARTITION bytes (whole elements; the last
// may be shorter), as BytePS does, so one large tensor uses every server.
// Servers are chosen by ZC_PS_PLACEMENT:
//   roundrobin (default, as the paper places variables): the g-th chunk
//     declared, counting over all keys in declaration order, goes to server
//     g mod S, so both small keys and the chunks of a large one spread;
//   hash: server = hash(key, chunk number) mod S, independent of the order
//     of declarations.
// Every rank computes the same placement from the same inputs (checked at
// zc_ps_create: partition and policy must agree).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zc::ps {

enum class PlacementPolicy : uint32_t { kRoundRobin = 0, kHash = 1 };

struct ChunkPlace {
  uint64_t offset = 0;  // first element
  uint64_t elems = 0;
  int server = 0;       // server index (0..S-1)
  uint32_t slot = 0;    // index among this key's chunks on that server
};

class Placement {
 public:
  Placement(uint64_t partition_bytes, PlacementPolicy policy, int servers, uint64_t piece_bytes = 0)
      : partition_(partition_bytes), policy_(policy), servers_(servers), piece_(piece_bytes) {}
  // The chunks of a key of count elements of elem_size bytes, declared
  // after `chunks_before` chunks of earlier keys. count 0: no chunk.
  std::vector<ChunkPlace> Cut(uint64_t key, uint64_t count, size_t elem_size,
                              uint64_t chunks_before) const;
  // Chunks of a key (for the running total of chunks_before).
  uint64_t NumChunks(uint64_t count, size_t elem_size) const;
  // The unit of transfer: each chunk cut into pieces of at most
  // piece_bytes (whole elements; 0: the chunk whole), on the chunk's
  // server, slots renumbered per server in order. A server reduces and
  // answers a piece as soon as every worker's piece is in, so pushes, the
  // reduction and the replies overlap piece by piece, in cache-sized steps
  // (the placement, and so the comparison with other PSs, stays by chunk).
  std::vector<ChunkPlace> Pieces(const std::vector<ChunkPlace>& chunks, size_t elem_size) const;
  uint64_t partition_bytes() const { return partition_; }
  uint64_t piece_bytes() const { return piece_; }

 private:
  uint64_t ChunkElems(size_t elem_size) const;
  uint64_t partition_;
  PlacementPolicy policy_;
  int servers_;
  uint64_t piece_;
};

}  // namespace zc::ps
