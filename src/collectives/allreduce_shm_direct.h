// Direct shared-memory allreduce, for when every rank is on this host.
//
// Each rank owns a workspace in its pool (shared segment) that every peer
// maps: per buffer set (two, so round g+1 overlaps the tail of round g) one
// input slot per peer and one result area, plus flags. A round covers up to
// size x shard_bytes of the vector, split into one shard per rank:
//   a. every rank writes its input for shard o straight from the user's
//      buffer into owner o's input slot (header with the signature, then the
//      flag in[set][me] = g in o's workspace);
//   b. owner o waits for all inputs, checks every signature, reduces its own
//      input and the n-1 slots in one pass (ReduceN: each byte read once,
//      result written once) into its result area, then sets res[o] = g in
//      every peer's workspace;
//   c. every rank copies every owner's result straight from the owner's
//      workspace into its own output (one-sided read) and tells the owner
//      with done[me] = g, which frees that result area for round g+2.
// Flags are monotonic round numbers that persist across calls. See
// docs/algorithms.md for bytes moved.
//
// An input slot starts with its flag, then the header (bytes and the
// signature words), so the flag a reader waits on and the header it checks
// share one cache line. A small round's payload follows the header
// directly when it fits in that line (8 bytes: an 8-byte allreduce moves one
// line per peer instead of three); any other payload starts at the next
// line, aligned for the copy and the reduction.
//
// Small vectors (at most kSmallBytes, and (n-1) copies of them at most
// kSmallFanoutBytes) take one step instead of three: every rank writes its
// whole input into its input slot in every peer's workspace, waits for
// every peer's, and reduces all n inputs itself in rank order (the same
// order, so the same bits, on every rank). One flag wait per peer instead
// of two, no result area. Slots stay safe to reuse: a rank writes round g's
// input only after it has seen every peer's input (or result) of round g-1,
// which each peer wrote after it had consumed round g-2. A small round
// still sets its done flags, so that a later sharded round's wait for the
// release of its result area (done >= g - 2) never waits for a round that
// used none.
//
// Larger vectors (at least kZeroCopyMinShardBytes per rank) take a
// zero-copy round instead (allreduce_shm_zero_copy.cpp) when every rank's
// buffers are pool memory: every rank publishes where its input and output
// are (a pool buffer's segment and offset) in its input slot of every peer,
// then each owner reduces its shard straight from every rank's input into
// every rank's output, chunk by chunk in cache, through the peers'
// mappings. Every input byte is read once and every output byte written
// once, as in the machine's ideal allreduce; one flag per peer says an
// owner is done. User memory on any rank (an empty descriptor) sends every
// rank to the sharded rounds for that call; below kZeroCopyAlwaysBytes the
// round is then not tried for a while (ZeroCopyWorthTrying).
#pragma once

#include <zcomm/zcomm.h>

#include <vector>

#include "collectives/op_ctx.h"

namespace zc::coll {

class ShmDirect {
 public:
  static constexpr int kSets = 2;
  static constexpr size_t kSmallBytes = 4096;
  static constexpr size_t kSmallFanoutBytes = 64 * 1024;
  // Shards above this leave a round's working set (inputs, slots, result)
  // outside a core's L2: 2 ranks, 2-16 MiB took 1.1-1.5x the time with 1 MiB
  // shards than with 256 KiB ones (docs/PERFORMANCE.md, issue 14).
  static constexpr size_t kMaxShardBytes = 256 * 1024;
  // The zero-copy round (pool buffers) from this many bytes per owner (16
  // KiB on 2 ranks, 32 KiB on 4): below, its two flag exchanges per call
  // and the descriptor lookups cost more than the copies they save. On the
  // project's VM, out of place, 8 KiB on 2 ranks took 2.9 us against 2.1 us
  // in a sharded round, 16 KiB on 3 and 4 ranks 1.2 times as long, 32 KiB
  // on 4 ranks 0.9 times, 64 KiB-512 KiB on 2-4 ranks half as long
  // (docs/PERFORMANCE.md).
  static constexpr size_t kZeroCopyMinShardBytes = 8 * 1024;
  // User memory cannot take the round, and every rank learns that only once
  // the descriptors are exchanged, which costs a sharded allreduce of 16-64
  // KiB 5-15% (about 1 us on 2 ranks). So below this size a round is tried
  // only while the communicator's last try found pool buffers on every rank,
  // and after a try that found user memory, once every kZeroCopyRetryCalls
  // calls that could have tried (buffers change: a torch tensor, then a
  // zc_mem_alloc buffer).
  static constexpr size_t kZeroCopyAlwaysBytes = 1024 * 1024;
  static constexpr uint32_t kZeroCopyRetryCalls = 64;
  // An owner's chunk, reduced in cache and then written to every output.
  // Measured at 64 MiB on 2 ranks (docs/PERFORMANCE.md): out of place
  // (non-temporal stores) 16 KiB was ahead of 4 and 64 KiB; in place, where
  // the outputs are the input lines just read, 4 KiB (in L1) was ahead.
  static constexpr size_t kZeroCopyChunkBytes = 16 * 1024;
  static constexpr size_t kZeroCopyInPlaceChunkBytes = 4 * 1024;
  // Copies of at least this many bytes into another core's memory (input
  // slots, result areas) or into an output nobody reads soon use
  // non-temporal stores; smaller ones stay in cache, where the reader's
  // next load finds them fastest.
  static constexpr size_t kStreamBytes = 16 * 1024;
  // A sharded round's reduction, chunk by chunk in L1.
  static constexpr size_t kReduceChunkBytes = 16 * 1024;

  // Collective over all ranks: allocates the workspace and exchanges
  // descriptors with every peer.
  static Status Create(Group* group, size_t shard_bytes, const Deadline& dl,
                       std::unique_ptr<ShmDirect>* out);
  ~ShmDirect();

  Status Allreduce(const Signature& sig, const void* send, void* recv, size_t count, zc_dtype dtype,
                   zc_op op);

 private:
  explicit ShmDirect(Group* group, size_t shard_bytes);
  // Offsets inside a workspace: flags (results, releases), input slots
  // ([flag][bytes][signature][payload]), result areas.
  static constexpr uint64_t kInHeaderBytes = 8 + 8 * (1 + kSigWords);  // flag, bytes, signature
  uint64_t res_flag_off(int o) const { return uint64_t(o) * 64; }
  uint64_t done_flag_off(int p) const { return (uint64_t(n_) + p) * 64; }
  uint64_t flags_bytes() const { return 2 * uint64_t(n_) * 64; }
  uint64_t in_stride() const { return 64 + shard_bytes_; }
  uint64_t in_flag_off(int set, int p) const {
    return flags_bytes() + (uint64_t(set) * n_ + p) * in_stride();
  }
  uint64_t in_header_off(int set, int p) const { return in_flag_off(set, p) + 8; }
  // A payload that fits beside the header (8 bytes) shares the flag's line;
  // any other starts at the next line, aligned for the copy and reduction
  // (4 KiB at +56 bytes took 1.2-1.4x as long).
  uint64_t in_payload_off(int set, int p, size_t bytes) const {
    return in_flag_off(set, p) + (kInHeaderBytes + bytes <= 64 ? kInHeaderBytes : 64);
  }
  uint64_t result_off(int set) const {
    return flags_bytes() + uint64_t(kSets) * n_ * in_stride() + uint64_t(set) * shard_bytes_;
  }
  uint64_t workspace_bytes() const { return result_off(kSets); }
  std::atomic<uint64_t>* flag(uint64_t off) const { return FlagAt(ws_, off); }

  Status Round(const Signature& sig, const char* send, char* recv, size_t base, size_t len,
               zc_dtype dtype, zc_op op, const Deadline& dl);
  // My input of round g (payload, header with the signature, then the
  // flag) into my slot `set` in rank p's workspace.
  Status WriteInput(const Signature& sig, uint64_t tag, uint64_t g, int set, int p,
                    const char* src, size_t bytes, const Deadline& dl);
  // Waits for rank p's input of round g in my slot `set`, checks its
  // signature and size, and points *payload at it.
  Status ReadInput(const Signature& sig, uint64_t tag, uint64_t g, int set, int p,
                   size_t expect_bytes, const Deadline& dl, const void** payload);
  // done[me] = g in every peer's workspace. peer_lost_ok: a peer that
  // exited is not an error (it needed nothing more from this round).
  Status SetDoneFlags(uint64_t g, const Deadline& dl, bool peer_lost_ok);
  // The one-step round for small vectors (see above).
  Status SmallRound(const Signature& sig, const char* send, char* recv, size_t count,
                    zc_dtype dtype, zc_op op, const Deadline& dl);

  // Whether a call of `bytes` (at least kZeroCopyMinShardBytes per rank) tries the
  // zero-copy round. Every rank decides alike: the state changes only with
  // what every rank sees (the calls, the descriptors of a try).
  bool ZeroCopyWorthTrying(size_t bytes);
  // The zero-copy round (allreduce_shm_zero_copy.cpp). Returns false in
  // *done when some rank's buffer cannot be reached: the caller then runs
  // the sharded rounds.
  struct PeerBuffers;
  Status ZeroCopyRound(const Signature& sig, const char* send, char* recv, size_t count,
                       zc_dtype dtype, zc_op op, const Deadline& dl, bool* done);
  // My buffers' descriptor into my input slot of every peer.
  Status PublishBuffers(const Signature& sig, uint64_t tag, uint64_t g, int set,
                        const std::string& descriptor, const Deadline& dl);
  // Every peer's descriptor (signature checked), resolved to addresses
  // where its memory is mapped here.
  Status LearnBuffers(const Signature& sig, uint64_t tag, uint64_t g, int set,
                      std::vector<PeerBuffers>* bufs, const Deadline& dl);
  static Status ParseBuffers(const char* p, size_t bytes, int owner, PeerBuffers* out);
  // Elements [begin, begin+len) of every output: the sum of every input.
  Status ReduceShard(const std::vector<PeerBuffers>& bufs, size_t begin, size_t len,
                     zc_dtype dtype, zc_op op);
  std::vector<char> acc_;  // a chunk's result, in cache

  Group* group_;
  int me_, n_;
  size_t shard_bytes_;
  MemRegion* ws_ = nullptr;
  std::vector<RemoteRegion> peer_ws_;
  // Peers' workspaces mapped here (Connection::DirectAddress), or null: then
  // Put/Get go through the channel.
  std::vector<char*> peer_direct_;
  Status Put(int peer, const void* src, size_t bytes, uint64_t off, const FlagWrite* flag,
             const Deadline& dl);
  // stream: non-temporal stores into dst.
  Status Get(int peer, void* dst, size_t bytes, uint64_t off, bool stream, const Deadline& dl);
  // Step b of a sharded round: my shard reduced from srcs (one per rank)
  // into my result area and my own output.
  void ReduceOwnShard(const void** srcs, char* result, char* own_out, size_t count, zc_dtype dtype,
                      zc_op op, bool in_place);
  uint64_t round_ = 0;  // last round started (global across calls)
  // The last zero-copy try found user memory on some rank, and the calls
  // since that try that did not try (ZeroCopyWorthTrying; a try resets it).
  bool last_try_found_user_memory_ = false;
  uint32_t calls_without_try_ = 0;
};

}  // namespace zc::coll
