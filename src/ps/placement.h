// Placement: how a key's bytes are cut into chunks and which server holds
// each chunk. Chunks are at most ZC_PS_PARTITION bytes (whole elements), as
// BytePS cuts them, so one large tensor uses every server. ZC_PS_PLACEMENT:
//   balanced (default): a key is cut into a multiple of S chunks of equal
//     size (within one element), at most the partition each, so every
//     server holds the same share of it, as MXNet's kvstore spreads a big
//     array over all servers; a key too small for parts of kMinSplit goes
//     whole to the server holding the fewest bytes so far (the lowest index
//     among equals). With whole 4 MiB chunks, LSTM's nine large ones put
//     five on one of two servers, and that server bounded every step;
//   roundrobin (as the paper places variables): chunks of exactly the
//     partition (the last may be shorter); the g-th chunk declared,
//     counting over all keys in declaration order, goes to server g mod S;
//   hash: the same chunks, server = hash(key, chunk number) mod S,
//     independent of the order of declarations.
// Every rank computes the same placement from the same declarations in the
// same order (checked at zc_ps_create: partition and policy must agree).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zc::ps {

enum class PlacementPolicy : uint32_t { kRoundRobin = 0, kHash = 1, kBalanced = 2 };
// "roundrobin", "hash", "balanced" (ZC_PS_PLACEMENT's values).
const char* PolicyName(uint32_t policy);
// The policy of one of those names (any case); false for another name.
bool PolicyFromName(const char* name, PlacementPolicy* out);

struct ChunkPlace {
  uint64_t offset = 0;  // first element
  uint64_t elems = 0;
  int server = 0;       // server index (0..S-1)
  uint32_t slot = 0;    // index among this key's chunks on that server
};

// What the keys declared so far hold: the chunk count (round-robin goes on
// from it) and the bytes on each server (balanced placement fills the
// lightest). Advanced once a declaration has succeeded everywhere.
class Declared {
 public:
  explicit Declared(int servers) : bytes_(static_cast<size_t>(servers > 0 ? servers : 1), 0) {}
  void Add(const std::vector<ChunkPlace>& chunks, size_t elem_size);
  uint64_t chunks() const { return chunks_; }
  uint64_t bytes(int server) const { return bytes_[static_cast<size_t>(server)]; }
  // The server holding the fewest bytes (the lowest index among equals).
  int Lightest() const;

 private:
  uint64_t chunks_ = 0;
  std::vector<uint64_t> bytes_;
};

class Placement {
 public:
  Placement(uint64_t partition_bytes, PlacementPolicy policy, int servers, uint64_t piece_bytes = 0)
      : partition_(partition_bytes), policy_(policy), servers_(servers > 0 ? servers : 1), piece_(piece_bytes) {}
  // The chunks of a key of count elements of elem_size bytes, declared
  // after the keys in `before`. count 0: no chunk.
  std::vector<ChunkPlace> Cut(uint64_t key, uint64_t count, size_t elem_size, const Declared& before) const;
  // The unit of transfer: each chunk cut into pieces of at most
  // piece_bytes (whole elements; 0: the chunk whole), on the chunk's
  // server, slots renumbered per server in order. A server reduces and
  // answers a piece as soon as every worker's piece is in, so pushes, the
  // reduction and the replies overlap piece by piece, in cache-sized steps
  // (the placement, and so the comparison with other PSs, stays by chunk).
  std::vector<ChunkPlace> Pieces(const std::vector<ChunkPlace>& chunks, size_t elem_size) const;
  uint64_t partition_bytes() const { return partition_; }
  uint64_t piece_bytes() const { return piece_; }
  int servers() const { return servers_; }
  // balanced: the smallest part a key is cut into to spread it over the
  // servers (a smaller key goes whole to the lightest server).
  static constexpr uint64_t kMinSplit = 64 * 1024;

 private:
  uint64_t ChunkElems(size_t elem_size) const;
  // The chunk boundaries: whole partitions, or balanced's equal cut.
  std::vector<ChunkPlace> Bounds(uint64_t count, size_t elem_size) const;
  int ServerOf(uint64_t key, uint64_t i, const Declared& before, int first) const;
  uint64_t partition_;
  PlacementPolicy policy_;
  int servers_;
  uint64_t piece_;
};

}  // namespace zc::ps
