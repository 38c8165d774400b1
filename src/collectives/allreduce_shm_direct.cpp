#include "collectives/allreduce_shm_direct.h"

#include "collectives/reduce_kernels.h"
#include "common/log.h"
#include "common/page_prefetch.h"
#include "common/stream_copy.h"

namespace zc::coll {
namespace {
constexpr uint64_t kShmTag = ControlTag(0, TagClass::kShmDirect, 0);  // workspace descriptors
}

ShmDirect::ShmDirect(Group* group, size_t shard_bytes)
    : group_(group), me_(group->rank()), n_(group->size()),
      shard_bytes_((std::max<size_t>(shard_bytes, 64) + 63) & ~size_t{63}) {}

ShmDirect::~ShmDirect() {
  if (ws_) IgnoreError(group_->Free(ws_->data()), "destructor: best effort");
}

Status ShmDirect::Create(Group* group, size_t shard_bytes, const Deadline& dl,
                         std::unique_ptr<ShmDirect>* out) {
  auto s = std::unique_ptr<ShmDirect>(new ShmDirect(group, shard_bytes));
  ZC_RETURN_IF_ERROR(group->Allocate(s->workspace_bytes(), &s->ws_));
  // Only the flags: slots and results are read after their flags are set.
  memset(s->ws_->data(), 0, s->flags_bytes());
  for (int set = 0; set < kSets; ++set)
    for (int p = 0; p < s->n_; ++p) s->flag(s->in_flag_off(set, p))->store(0);
  s->peer_ws_.resize(s->n_);
  std::string mine = s->ws_->remote().Serialize();
  for (int p = 0; p < s->n_; ++p)
    if (p != s->me_) ZC_RETURN_IF_ERROR(group->SendControl(p, kShmTag, mine, dl));
  for (int p = 0; p < s->n_; ++p) {
    if (p == s->me_) continue;
    std::string msg;
    ZC_RETURN_IF_ERROR(group->RecvControl(p, kShmTag, &msg, dl));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(msg, &s->peer_ws_[p]));
    if (s->peer_ws_[p].size < s->workspace_bytes())
      return Error(ZC_ERR_MISMATCH,
                   "rank %d's shared-memory workspace holds %llu bytes, this rank needs %llu "
                   "(ZC_CHUNK differs between ranks?)",
                   p, static_cast<unsigned long long>(s->peer_ws_[p].size),
                   static_cast<unsigned long long>(s->workspace_bytes()));
  }
  s->peer_direct_.assign(s->n_, nullptr);
  for (int p = 0; p < s->n_; ++p)
    if (p != s->me_) s->peer_direct_[p] = group->channel(p).DirectAddress(s->peer_ws_[p]);
  ZC_TRACE(kColl, "shm workspace ready: %llu bytes, shard %zu bytes",
           static_cast<unsigned long long>(s->workspace_bytes()), s->shard_bytes_);
  *out = std::move(s);
  return Status::Ok();
}

Status ShmDirect::Put(int peer, const void* src, size_t bytes, uint64_t off, const FlagWrite* flag,
                      const Deadline& dl) {
  char* d = peer_direct_[peer];
  if (!d) return group_->channel(peer).Write(src, bytes, peer_ws_[peer], off, flag, dl);
  // Mapped: the offsets lie inside the workspace (checked in Create).
  ZC_RETURN_IF_ERROR(group_->KnownHealth(peer));
  const SrcPiece piece{src, bytes};
  WriteMapped(d, off, &piece, 1, flag);
  return Status::Ok();
}

Status ShmDirect::Get(int peer, void* dst, size_t bytes, uint64_t off, bool stream,
                      const Deadline& dl) {
  if (!peer_direct_[peer]) return group_->channel(peer).Read(dst, bytes, peer_ws_[peer], off, dl);
  if (!bytes) return Status::Ok();
  // After WaitFlag's acquire.
  if (stream) StreamCopy(dst, peer_direct_[peer] + off, bytes);
  else memcpy(dst, peer_direct_[peer] + off, bytes);
  return Status::Ok();
}

Status ShmDirect::SetDoneFlags(uint64_t g, const Deadline& dl, bool peer_lost_ok) {
  for (int i = 1; i < n_; ++i) {
    const int p = (me_ + i) % n_;
    if (char* d = peer_direct_[p]) {
      reinterpret_cast<std::atomic<uint64_t>*>(d + done_flag_off(me_))
          ->store(g, std::memory_order_release);
      continue;
    }
    FlagWrite f{&peer_ws_[p], done_flag_off(me_), g};
    Status st = Put(p, nullptr, 0, 0, &f, dl);
    ZC_RETURN_IF_ERROR(peer_lost_ok ? IgnorePeerLost(st) : st);
  }
  return Status::Ok();
}

Status ShmDirect::Allreduce(const Signature& sig, const void* send, void* recv, size_t count,
                            zc_dtype dtype, zc_op op) {
  const size_t es = DtypeSize(dtype);
  const size_t per_round = static_cast<size_t>(n_) * (shard_bytes_ / es);
  Deadline dl = group_->NewDeadline();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const size_t bytes = count * es;
  if (bytes <= kSmallBytes && bytes <= shard_bytes_ &&
      bytes * static_cast<size_t>(n_ - 1) <= kSmallFanoutBytes)
    return SmallRound(sig, in, out, count, dtype, op, dl);
  if (bytes >= kZeroCopyMinShardBytes * static_cast<size_t>(n_) && ZeroCopyWorthTrying(bytes)) {
    bool done = false;
    ZC_RETURN_IF_ERROR(ZeroCopyRound(sig, in, out, count, dtype, op, dl, &done));
    if (done) return Status::Ok();
  }
  for (size_t base = 0; base < count; base += per_round)
    ZC_RETURN_IF_ERROR(Round(sig, in, out, base, std::min(per_round, count - base), dtype, op, dl));
  StreamFence();  // the output's non-temporal stores before the caller's next store
  return Status::Ok();
}

bool ShmDirect::ZeroCopyWorthTrying(size_t bytes) {
  if (bytes >= kZeroCopyAlwaysBytes || !last_try_found_user_memory_) return true;
  return ++calls_without_try_ >= kZeroCopyRetryCalls;  // ZeroCopyRound restarts the count
}

Status ShmDirect::WriteInput(const Signature& sig, uint64_t tag, uint64_t g, int set, int p,
                             const char* src, size_t bytes, const Deadline& dl) {
  if (char* d = peer_direct_[p]; d && group_->KnownHealthy(p)) {
    // Mapped: payload, then header with plain stores, then the flag (a
    // small allreduce's input is one cache line). A large payload goes
    // around the caches: the slot's lines sit in the owner's cache (it read
    // them two rounds ago), and plain stores into another core's lines ran
    // at 2.2 GB/s on the project's VM against 17.5 GB/s non-temporal.
    if (bytes >= kStreamBytes) {
      StreamCopy(d + in_payload_off(set, me_, bytes), src, bytes);
      StreamFence();
    } else if (bytes) {
      memcpy(d + in_payload_off(set, me_, bytes), src, bytes);
    }
    uint64_t* h = reinterpret_cast<uint64_t*>(d + in_header_off(set, me_));
    h[0] = bytes;
    sig.Pack(h + 1, tag, me_);
    reinterpret_cast<std::atomic<uint64_t>*>(d + in_flag_off(set, me_))
        ->store(g, std::memory_order_release);
    return Status::Ok();
  }
  if (bytes) ZC_RETURN_IF_ERROR(Put(p, src, bytes, in_payload_off(set, me_, bytes), nullptr, dl));
  uint64_t h[1 + kSigWords];  // bytes, signature: the slot header's first words
  h[0] = bytes;
  sig.Pack(h + 1, tag, me_);
  FlagWrite f{&peer_ws_[p], in_flag_off(set, me_), g};
  return Put(p, h, sizeof(h), in_header_off(set, me_), &f, dl);
}

Status ShmDirect::ReadInput(const Signature& sig, uint64_t tag, uint64_t g, int set, int p,
                            size_t expect_bytes, const Deadline& dl, const void** payload) {
  if (flag(in_flag_off(set, p))->load(std::memory_order_acquire) < g)
    ZC_RETURN_IF_ERROR(group_->WaitFlag(flag(in_flag_off(set, p)), g, p, dl, "a shared-memory input"));
  const char* base = static_cast<const char*>(ws_->data());
  const uint64_t* h = reinterpret_cast<const uint64_t*>(base + in_header_off(set, p));
  ZC_RETURN_IF_ERROR(CheckSignature(sig, me_, tag, h + 1, p));
  if (h[0] != expect_bytes)
    return Error(ZC_ERR_INTERNAL, "%s: shared-memory input of %llu bytes from rank %d, expected %zu",
                 sig.Describe().c_str(), static_cast<unsigned long long>(h[0]), p, expect_bytes);
  *payload = base + in_payload_off(set, p, expect_bytes);
  return Status::Ok();
}

Status ShmDirect::SmallRound(const Signature& sig, const char* in, char* out, size_t count,
                             zc_dtype dtype, zc_op op, const Deadline& dl) {
  const size_t bytes = count * DtypeSize(dtype);
  const uint64_t g = ++round_;
  const int set = static_cast<int>(g % kSets);
  const uint64_t tag = MessageTag(static_cast<uint32_t>(g >> 32), g);

  // My whole input into my slot in every peer's workspace: header and
  // payload, then the flag.
  for (int i = 1; i < n_; ++i)
    ZC_RETURN_IF_ERROR(WriteInput(sig, tag, g, set, (me_ + i) % n_, in, bytes, dl));

  // Every peer's input, then all n reduced in rank order.
  const void* srcs[64];
  std::vector<const void*> many;
  const void** s = n_ <= 64 ? srcs : (many.resize(n_), many.data());
  s[me_] = in;
  for (int i = 1; i < n_; ++i) {
    const int p = (me_ + i) % n_;
    ZC_RETURN_IF_ERROR(ReadInput(sig, tag, g, set, p, bytes, dl, &s[p]));
  }
  if (count) {
    ReduceN(dtype, op, out, s, n_, count);
    if (op == ZC_AVG) ScaleDiv(dtype, out, count, n_);
  }
  // No result area was used: release it for the sharded rounds' accounting.
  return SetDoneFlags(g, dl, /*peer_lost_ok=*/true);
}

void ShmDirect::ReduceOwnShard(const void** srcs, char* result, char* own_out, size_t count,
                               zc_dtype dtype, zc_op op, bool in_place) {
  // In L1-sized chunks: reduced into a private buffer, then written to the
  // result area around the caches (the peers' cores read it next, and its
  // lines sit in their caches from the last use of this set) and into my
  // own output.
  const size_t es = DtypeSize(dtype);
  const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / es);
  if (acc_.size() < kZeroCopyChunkBytes) acc_.resize(kZeroCopyChunkBytes);
  char* acc = acc_.data();
  // A small shard stays in cache: the peers' next loads find it fastest.
  const bool stream = count * es >= kStreamBytes;
  auto put = [stream](char* dst, const char* src, size_t bytes, bool nt) {
    if (stream && nt) StreamCopy(dst, src, bytes);
    else memcpy(dst, src, bytes);
  };
  const void* at[64];
  std::vector<const void*> many;
  const void** a = n_ <= 64 ? at : (many.resize(n_), many.data());
  for (size_t done = 0; done < count; done += chunk) {
    const size_t m = std::min(chunk, count - done), off = done * es, bytes = m * es;
    for (int p = 0; p < n_; ++p) a[p] = static_cast<const char*>(srcs[p]) + off;
    // The next chunk's pages (common/page_prefetch.h): the inputs, and my
    // output (the result area's pages are the same every round).
    if (const size_t next = std::min(chunk, count - done - m) * es) {
      for (int p = 0; p < n_; ++p) PrefetchPages(static_cast<const char*>(a[p]) + bytes, next);
      if (!in_place) PrefetchPagesForWrite(own_out + off + bytes, next);
    }
    ReduceN(dtype, op, acc, a, n_, m);
    if (op == ZC_AVG) ScaleDiv(dtype, acc, m, n_);
    put(result + off, acc, bytes, true);
    put(own_out + off, acc, bytes, !in_place);
  }
  if (stream) StreamFence();  // before the result flags
}

Status ShmDirect::Round(const Signature& sig, const char* in, char* out, size_t base, size_t len,
                        zc_dtype dtype, zc_op op, const Deadline& dl) {
  const size_t es = DtypeSize(dtype);
  const uint64_t g = ++round_;
  const int set = static_cast<int>(g % kSets);
  auto shard_at = [&](int o) { return (base + SegBegin(len, n_, o)) * es; };
  auto shard_bytes = [&](int o) { return SegLen(len, n_, o) * es; };
  const uint64_t tag = MessageTag(static_cast<uint32_t>(g >> 32), g);

  // a. My input for every owner's shard, straight into the owner's slot.
  //    The slot is free: I saw the owner's result of round g-2, which it
  //    published only after reducing that round's inputs.
  for (int i = 1; i < n_; ++i) {
    const int o = (me_ + i) % n_;
    ZC_RETURN_IF_ERROR(WriteInput(sig, tag, g, set, o, in + shard_at(o), shard_bytes(o), dl));
  }

  // b. Reduce my shard from every rank's input in one pass.
  char* base_ptr = static_cast<char*>(ws_->data());
  char* result = base_ptr + result_off(set);
  const void* srcs[64];
  std::vector<const void*> many;
  const void** s = n_ <= 64 ? srcs : (many.resize(n_), many.data());
  for (int p = 0; p < n_; ++p) {
    if (p == me_) {
      s[p] = in + shard_at(me_);
      continue;
    }
    if (g > kSets)
      ZC_RETURN_IF_ERROR(group_->WaitFlag(flag(done_flag_off(p)), g - kSets, p, dl,
                                        "the release of a shared-memory result"));
    ZC_RETURN_IF_ERROR(ReadInput(sig, tag, g, set, p, shard_bytes(me_), dl, &s[p]));
  }
  const bool in_place = in == out;
  ReduceOwnShard(s, result, out + shard_at(me_), shard_bytes(me_) / es, dtype, op, in_place);
  for (int i = 1; i < n_; ++i) {
    int p = (me_ + i) % n_;
    FlagWrite f{&peer_ws_[p], res_flag_off(me_), g};
    ZC_RETURN_IF_ERROR(Put(p, nullptr, 0, 0, &f, dl));
  }

  // c. Every owner's result, straight from its workspace into my output.
  //    Out of place around the caches (nothing reads the output soon); in
  //    place the output lines are my input, in cache since step a.
  for (int i = 1; i < n_; ++i) {
    int o = (me_ + i) % n_;
    ZC_RETURN_IF_ERROR(group_->WaitFlag(flag(res_flag_off(o)), g, o, dl, "a shared-memory result"));
    size_t bytes = shard_bytes(o);
    if (bytes)
      ZC_RETURN_IF_ERROR(
          Get(o, out + shard_at(o), bytes, result_off(set), !in_place && bytes >= kStreamBytes, dl));
    FlagWrite f{&peer_ws_[o], done_flag_off(me_), g};
    ZC_RETURN_IF_ERROR(IgnorePeerLost(Put(o, nullptr, 0, 0, &f, dl)));
  }
  return Status::Ok();
}

}  // namespace zc::coll
