// Operation signatures for mismatch detection without an extra round trip.
//
// Every slot message a collective sends carries, in the slot header's aux
// words, what the sender believes the operation is: collective kind, element
// count, dtype, op, root, algorithm and the collective's sequence number.
// A reader compares it with its own before it touches the payload; on a
// difference it fails with ZC_ERR_MISMATCH naming both ranks and both calls,
// e.g. "rank 1 called allreduce(count=100, float32, sum) but rank 0 called
// allreduce(count=99, float32, sum)", and aborts the device so that every
// other rank's waits fail too.
//
//   aux[0]  kind | dtype << 8 | op << 16 | algo << 24 | (root + 1) << 32 |
//           mem << 57  (root + 1 in 25 bits: ZC_SIZE is at most 2^24)
//   aux[1]  count (elements, as the collective's count argument)
//   aux[2]  sequence number of the collective on this communicator
//   aux[3]  message tag: step << 32 | chunk (checks the algorithm's lockstep)
//   aux[4]  sender rank
//   aux[5]  (vector collectives) owner rank of the block the message is part of
//   aux[6]  (vector collectives) element count of that whole block
#pragma once

#include <zcomm/zcomm.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "common/status.h"

namespace zc::coll {

enum class Kind : uint8_t {
  kNone = 0,
  kAllreduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllgather = 4,
  kReduceScatter = 5,
  kAlltoall = 6,
  kBarrier = 7,
  kAllgatherv = 8,
  kAlltoallv = 9,
  kGather = 10,
  kScatter = 11,
};
constexpr int kNumKinds = 12;

enum class Algo : uint8_t {
  kNone = 0,
  kRing = 1,      // allreduce, allgather, reduce-scatter
  kHd = 2,        // recursive halving-doubling allreduce
  kShm = 3,       // direct shared-memory allreduce
  kTree = 4,      // binomial tree broadcast / reduce
  kChain = 5,     // pipelined chain broadcast / reduce
  kPairwise = 6,  // alltoall
  kDissemination = 7,  // barrier
  kLocal = 8,     // one rank: a local copy
  kDirect = 9,    // gather / scatter: the root talks to every rank
  kHier = 10,     // hierarchical allreduce: inside hosts, across hosts, inside
};

// Which memory path a call takes. Host collectives (host memory, or device
// memory staged whole through pinned host memory) are kHost; the same-host
// CUDA IPC collectives (gpu/ipc_allreduce.h, gpu/ipc_collectives.h) are
// kCudaIpc; a blocking call on device memory staged in pipelined parts
// (gpu/pipelined_staging.h) is kStagedParts. A rank whose buffers are
// device memory and one whose are host memory may choose differently; the
// path in the signature turns that into ZC_ERR_MISMATCH instead of two
// ranks waiting on different channels.
enum class MemPath : uint8_t {
  kHost = 0,
  kCudaIpc = 1,
  kStagedParts = 2,
};

// Inline: every record of a collective names its kind and algorithm
// (common/flight_recorder.h), and a call costs that 8-byte call more.
inline const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNone: return "none";
    case Kind::kAllreduce: return "allreduce";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kReduce: return "reduce";
    case Kind::kAllgather: return "allgather";
    case Kind::kReduceScatter: return "reduce_scatter";
    case Kind::kAlltoall: return "alltoall";
    case Kind::kBarrier: return "barrier";
    case Kind::kAllgatherv: return "allgatherv";
    case Kind::kAlltoallv: return "alltoallv";
    case Kind::kGather: return "gather";
    case Kind::kScatter: return "scatter";
  }
  return "unknown";
}

inline const char* AlgoName(Algo a) {
  switch (a) {
    case Algo::kNone: return "";
    case Algo::kRing: return "ring";
    case Algo::kHd: return "hd";
    case Algo::kShm: return "shm";
    case Algo::kTree: return "tree";
    case Algo::kChain: return "chain";
    case Algo::kPairwise: return "pairwise";
    case Algo::kDissemination: return "dissemination";
    case Algo::kLocal: return "local";
    case Algo::kDirect: return "direct";
    case Algo::kHier: return "hier";
  }
  return "unknown";
}

const char* MemPathName(MemPath m);

constexpr int kSigWords = 5;

struct Signature {
  Kind kind = Kind::kNone;
  zc_dtype dtype = ZC_UINT8;
  zc_op op = ZC_SUM;
  int root = -1;  // -1: the collective has no root
  Algo algo = Algo::kNone;
  uint64_t count = 0;
  uint64_t seq = 0;
  MemPath mem = MemPath::kHost;

  // Fills aux[0..4] (tag and sender included).
  void Pack(uint64_t* aux, uint64_t tag, int sender) const {
    aux[0] = static_cast<uint64_t>(kind) | (static_cast<uint64_t>(dtype) & 0xff) << 8 |
             (static_cast<uint64_t>(op) & 0xff) << 16 | static_cast<uint64_t>(algo) << 24 |
             // root + 1 in unsigned: no signed overflow whatever root holds
             (static_cast<uint64_t>(static_cast<uint32_t>(root) + 1u) & 0x1ffffff) << 32 |
             static_cast<uint64_t>(mem) << 57;
    aux[1] = count;
    aux[2] = seq;
    aux[3] = tag;
    aux[4] = static_cast<uint64_t>(sender);
  }
  // false when aux names a dtype or op that does not exist (a corrupt or
  // foreign message): *out is then left alone, as no zc_dtype/zc_op can
  // hold the value.
  static bool Unpack(const uint64_t* aux, Signature* out);
  // "allreduce(count=100, float32, sum)", "broadcast(count=7, int32, root=2)";
  // allgatherv's count is the total of recvcounts; alltoallv has none.
  // with_algo/with_seq add ", algo=ring" / " as collective #5"; with_mem
  // the memory path (", host memory" / ", device memory over CUDA IPC").
  std::string Describe(bool with_algo = false, bool with_seq = false, bool with_mem = false) const;
  // Same collective call (everything but tag and sender).
  bool SameCall(const Signature& o) const;
};

inline uint64_t MessageTag(uint32_t step, uint64_t chunk) {
  return (static_cast<uint64_t>(step) << 32) | (chunk & 0xffffffffu);
}

// OK when aux (a peer's message) matches `mine` and `expect_tag`; otherwise
// ZC_ERR_MISMATCH naming both ranks and both calls (or ZC_ERR_INTERNAL when
// the calls agree but the messages are out of step).
// The usual case inline: the peer's words are those this rank would send
// (one Pack, five compares); only a difference is unpacked and named.
Status SignatureDiffers(const Signature& mine, int my_rank, uint64_t expect_tag, const uint64_t* aux,
                        int peer);
inline Status CheckSignature(const Signature& mine, int my_rank, uint64_t expect_tag,
                             const uint64_t* aux, int peer) {
  uint64_t want[kSigWords];
  mine.Pack(want, expect_tag, peer);
  if (memcmp(want, aux, sizeof(want)) == 0) return Status::Ok();
  return SignatureDiffers(mine, my_rank, expect_tag, aux, peer);
}

// Vector collectives: which block a message is part of (aux[5], aux[6]).
struct MessageBlock {
  int owner;
  uint64_t elems;
};

// Everything a reader checks on a peer's slot message before it touches the
// payload: the signature and tag (CheckSignature), the block when `block` is
// given, then the size. aux: the slot header's 7 words; bytes: its size.
Status CheckSlotMessage(const Signature& mine, int my_rank, uint64_t expect_tag,
                        uint64_t expect_bytes, const MessageBlock* block, const uint64_t* aux,
                        uint64_t bytes, int peer);

}  // namespace zc::coll
