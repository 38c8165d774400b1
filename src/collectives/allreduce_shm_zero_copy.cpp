// The zero-copy round of the direct shared-memory allreduce (see
// allreduce_shm_direct.h): owners reduce straight from every rank's input
// into every rank's output.
#include <algorithm>
#include <cstring>

#include "collectives/allreduce_shm_direct.h"
#include "collectives/reduce_kernels.h"
#include "common/log.h"
#include "common/stream_copy.h"

namespace zc::coll {

// Where one rank's input and output are, as this rank reaches them: load
// and store addresses (pool memory mapped here, or this rank's own buffers).
struct ShmDirect::PeerBuffers {
  const char* send = nullptr;
  char* recv = nullptr;
  RemoteRegion send_region, recv_region;
  uint64_t send_off = 0, recv_off = 0;
  bool user_memory = false;  // some buffer of that rank is outside the pool
};

namespace {

// A published descriptor: [send offset][recv offset][send region][recv
// region], fixed size on every rank.
size_t DescriptorBytes() { return 2 * sizeof(uint64_t) + 2 * RemoteRegion().Serialize().size(); }

std::string Describe(const RegionHold& send, const void* send_ptr, const RegionHold& recv,
                     const void* recv_ptr) {
  uint64_t head[2] = {send->offset_of(send_ptr), recv->offset_of(recv_ptr)};
  std::string d(reinterpret_cast<const char*>(head), sizeof(head));
  d += send->remote().Serialize();
  d += recv->remote().Serialize();
  return d;
}

std::string UserMemoryDescriptor() {
  uint64_t head[2] = {0, 0};
  std::string d(reinterpret_cast<const char*>(head), sizeof(head));
  d += RemoteRegion().Serialize();
  d += RemoteRegion().Serialize();
  return d;
}

}  // namespace

Status ShmDirect::ParseBuffers(const char* p, size_t bytes, int owner, PeerBuffers* out) {
  const size_t w = RemoteRegion().Serialize().size();
  if (bytes != 2 * sizeof(uint64_t) + 2 * w)
    return Error(ZC_ERR_INTERNAL, "rank %d's buffer descriptor has %zu bytes", owner, bytes);
  uint64_t head[2];
  memcpy(head, p, sizeof(head));
  out->send_off = head[0];
  out->recv_off = head[1];
  ZC_RETURN_IF_ERROR(RemoteRegion::Parse(std::string(p + sizeof(head), w), &out->send_region));
  ZC_RETURN_IF_ERROR(RemoteRegion::Parse(std::string(p + sizeof(head) + w, w), &out->recv_region));
  out->user_memory = !out->send_region.seg_name[0] || !out->recv_region.seg_name[0];
  return Status::Ok();
}

Status ShmDirect::PublishBuffers(const Signature& sig, uint64_t tag, uint64_t g, int set,
                                 const std::string& descriptor, const Deadline& dl) {
  for (int i = 1; i < n_; ++i)
    ZC_RETURN_IF_ERROR(
        WriteInput(sig, tag, g, set, (me_ + i) % n_, descriptor.data(), descriptor.size(), dl));
  return Status::Ok();
}

Status ShmDirect::LearnBuffers(const Signature& sig, uint64_t tag, uint64_t g, int set,
                               std::vector<PeerBuffers>* bufs, const Deadline& dl) {
  const size_t want = DescriptorBytes();
  for (int i = 1; i < n_; ++i) {
    const int p = (me_ + i) % n_;
    const void* payload = nullptr;
    ZC_RETURN_IF_ERROR(ReadInput(sig, tag, g, set, p, want, dl, &payload));
    PeerBuffers& b = (*bufs)[p];
    ZC_RETURN_IF_ERROR(ParseBuffers(static_cast<const char*>(payload), want, p, &b));
    if (b.user_memory) continue;  // no zero-copy round for this call
    const size_t bytes = sig.count * DtypeSize(sig.dtype);
    if (!b.send_region.Contains(b.send_off, bytes) || !b.recv_region.Contains(b.recv_off, bytes))
      return Error(ZC_ERR_INTERNAL, "%s: rank %d published buffers smaller than %zu bytes",
                   sig.Describe().c_str(), p, bytes);
    // Pool memory: through this process's mapping of the peer's segment.
    if (b.send_region.seg_name[0]) {
      char* base = group_->channel(p).DirectAddress(b.send_region);
      if (!base) return Error(ZC_ERR_SYSTEM, "cannot map rank %d's input buffer", p);
      b.send = base + b.send_off;
    }
    if (b.recv_region.seg_name[0]) {
      char* base = group_->channel(p).DirectAddress(b.recv_region);
      if (!base) return Error(ZC_ERR_SYSTEM, "cannot map rank %d's output buffer", p);
      b.recv = base + b.recv_off;
    }
  }
  return Status::Ok();
}

Status ShmDirect::ReduceShard(const std::vector<PeerBuffers>& bufs, size_t begin, size_t len,
                              zc_dtype dtype, zc_op op) {
  const size_t es = DtypeSize(dtype);
  bool in_place = true;
  for (const PeerBuffers& b : bufs) in_place = in_place && b.recv == b.send;
  const size_t chunk =
      std::max<size_t>(1, (in_place ? kZeroCopyInPlaceChunkBytes : kZeroCopyChunkBytes) / es);
  const void* srcs[64];
  std::vector<const void*> many;
  const void** s = n_ <= 64 ? srcs : (many.resize(n_), many.data());
  if (acc_.size() < kZeroCopyChunkBytes) acc_.resize(kZeroCopyChunkBytes);
  char* acc = acc_.data();
  for (size_t at = begin; at < begin + len; at += chunk) {
    const size_t m = std::min(chunk, begin + len - at), off = at * es, bytes = m * es;
    for (int p = 0; p < n_; ++p) s[p] = bufs[p].send + off;
    // Reduced in cache, then written around the caches into every output
    // (every rank's output is read next by its own rank, not by this core).
    ReduceN(dtype, op, acc, s, n_, m);
    if (op == ZC_AVG) ScaleDiv(dtype, acc, m, n_);
    for (int i = 0; i < n_; ++i) {
      const PeerBuffers& b = bufs[(me_ + i) % n_];
      // In place the output lines are in cache (just read as input): plain
      // stores only write them back.
      if (b.recv == b.send) memcpy(b.recv + off, acc, bytes);
      else StreamCopy(b.recv + off, acc, bytes);
    }
  }
  StreamFence();  // before the done flags
  return Status::Ok();
}

Status ShmDirect::ZeroCopyRound(const Signature& sig, const char* send, char* recv, size_t count,
                                zc_dtype dtype, zc_op op, const Deadline& dl, bool* done) {
  *done = false;
  const size_t es = DtypeSize(dtype), bytes = count * es;
  if (DescriptorBytes() > shard_bytes_) return Status::Ok();  // same on every rank (Create)
  const uint64_t g = ++round_;
  const int set = static_cast<int>(g % kSets);
  const uint64_t tag = MessageTag(static_cast<uint32_t>(g >> 32), g);

  // Pool buffers are held (so that no registration change drops them)
  // until every owner is done with them. User memory is announced as such
  // (an empty descriptor), without registering it.
  RegionHold send_hold, recv_hold;
  std::vector<PeerBuffers> bufs(n_);
  bufs[me_].send = send;
  bufs[me_].recv = recv;
  bufs[me_].user_memory = !group_->IsPoolMemory(send, bytes) || !group_->IsPoolMemory(recv, bytes);
  std::string descriptor = UserMemoryDescriptor();
  if (!bufs[me_].user_memory) {
    ZC_RETURN_IF_ERROR(group_->Hold(send, bytes, &send_hold));
    ZC_RETURN_IF_ERROR(group_->Hold(recv, bytes, &recv_hold));
    descriptor = Describe(send_hold, send, recv_hold, recv);
    // As the peers will read it: a pool without shared segments (no shm
    // transport made them) is not reachable either.
    bufs[me_].user_memory = !send_hold->remote().seg_name[0] || !recv_hold->remote().seg_name[0];
  }
  ZC_RETURN_IF_ERROR(PublishBuffers(sig, tag, g, set, descriptor, dl));
  ZC_RETURN_IF_ERROR(LearnBuffers(sig, tag, g, set, &bufs, dl));

  // Every rank decides alike from the same descriptors. User memory is
  // reachable only through cross-memory attach, which copies at a third of
  // memcpy's speed (5 against 15 GB/s on the project's VM): the sharded
  // rounds, whose copies are plain loads and stores, are faster for it.
  // (ZeroCopyWorthTrying counts the calls from this try on.)
  last_try_found_user_memory_ =
      std::any_of(bufs.begin(), bufs.end(), [](const PeerBuffers& b) { return b.user_memory; });
  calls_without_try_ = 0;
  if (last_try_found_user_memory_) return Status::Ok();

  ZC_RETURN_IF_ERROR(ReduceShard(bufs, SegBegin(count, n_, me_), SegLen(count, n_, me_), dtype,
                                 op));
  // My shard is in every output: tell every rank, then wait until every
  // owner has written mine (and read my input for the last time).
  ZC_RETURN_IF_ERROR(SetDoneFlags(g, dl, /*peer_lost_ok=*/false));
  for (int i = 1; i < n_; ++i) {
    const int p = (me_ + i) % n_;
    ZC_RETURN_IF_ERROR(group_->WaitFlag(flag(done_flag_off(p)), g, p, dl,
                                        "a peer's shard of a zero-copy allreduce"));
  }
  *done = true;
  return Status::Ok();
}

}  // namespace zc::coll
