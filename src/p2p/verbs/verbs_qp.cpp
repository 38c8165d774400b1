// VerbsConnection: posting work requests on one RC queue pair, bounded by the
// send-queue depth, with selective signalling, and waiting for completions.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "p2p/verbs/verbs_internal.h"

namespace zc::verbs {

std::string VerbsConnection::Describe() const {
  return Format("peer %d QP %u (connection %d)", peer_, qp_num, index_);
}

Status VerbsConnection::error() const {
  std::lock_guard<std::mutex> lock(wait_mu_);
  return error_;
}

void VerbsConnection::Fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (failed_.load()) return;
    error_ = st;
    failed_.store(true, std::memory_order_release);
  }
  wait_cv_.notify_all();
}

void VerbsConnection::OnSendCompletion(uint64_t seq) {
  uint64_t cur = completed_.load(std::memory_order_relaxed);
  while (seq > cur && !completed_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
  }
  {
    std::lock_guard<std::mutex> lock(wait_mu_);  // no lost wake-ups
  }
  wait_cv_.notify_all();
}

Status VerbsConnection::CheckUsable() {
  if (failed()) return error();
  if (!established || !qp)
    return Error(ZC_ERR_INTERNAL, "verbs: %s is not connected", Describe().c_str());
  Status h = t_->host()->Health(peer_);
  if (!h.ok()) return h;
  return Status::Ok();
}

// Waits until every WR up to `seq` completed. Spins briefly, then sleeps on
// the condition variable in short slices, checking health and the deadline.
Status VerbsConnection::WaitSeq(uint64_t seq, const Deadline& dl, const char* what) {
  for (int i = 0; i < 2000; ++i) {
    if (completed_.load(std::memory_order_acquire) >= seq) return Status::Ok();
    if (failed()) return error();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::chrono::microseconds slice(50);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(wait_mu_);
      wait_cv_.wait_for(lock, slice, [&] {
        return completed_.load(std::memory_order_acquire) >= seq || failed_.load();
      });
    }
    if (completed_.load(std::memory_order_acquire) >= seq) return Status::Ok();
    if (failed()) return error();
    Status h = t_->host()->Health(peer_);
    if (!h.ok()) return h;
    if (dl.expired())
      return Error(ZC_ERR_TIMEOUT, "verbs: %s: %s did not complete: waited %.1f s (ZC_TIMEOUT)",
                   Describe().c_str(), what, dl.elapsed_s());
    if (slice < std::chrono::milliseconds(5)) slice *= 2;
  }
}

Status VerbsConnection::PostOne(ibv_send_wr* wr, WrKind kind, bool last, const Deadline& dl,
                                uint64_t* seq) {
  uint64_t s = posted_ + 1;
  // Bounded outstanding WRs: never post beyond the send queue.
  if (s - completed_.load(std::memory_order_acquire) > sq_depth)
    ZC_RETURN_IF_ERROR(WaitSeq(s - sq_depth, dl, "a send-queue slot"));
  if (failed()) return error();
  bool signal = last || unsignaled_ + 1 >= signal_every;
  wr->wr_id = MakeWrId(global_, kind, s);
  wr->next = nullptr;
  if (signal) wr->send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  int rc = t_->api()->post_send(qp, wr, &bad);
  if (rc) {
    int err = rc > 0 ? rc : errno;
    return Status(err == ENOMEM ? ZC_ERR_INTERNAL : ZC_ERR_SYSTEM,
                  Format("verbs: %s: ibv_post_send(%s) failed: %s", Describe().c_str(),
                         WrKindName(kind), strerror(err)),
                  ErrorOrigin::kErrno, err);
  }
  posted_ = s;
  unsignaled_ = signal ? 0 : unsignaled_ + 1;
  *seq = s;
  return Status::Ok();
}

Status VerbsConnection::WriteImmFlag(const FlagWrite& f, const Deadline& dl, uint64_t* seq) {
  if (peer_slots == 0) return Error(ZC_ERR_INTERNAL, "verbs: %s has no landing ring", Describe().c_str());
  uint32_t slot = static_cast<uint32_t>(imm_count_ % peer_slots);
  LandingEntry e{};
  e.addr = f.region->addr + f.offset;
  e.value = f.value;
  e.rkey = f.region->access_key;
  e.magic = kLandingMagic;
  ibv_sge sge{};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(slot);
  wr.wr.rdma.remote_addr = peer_landing + uint64_t{slot} * sizeof(LandingEntry);
  wr.wr.rdma.rkey = peer_rkey;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  sge.length = sizeof(LandingEntry);
  if (max_inline >= sizeof(LandingEntry)) {
    sge.addr = reinterpret_cast<uintptr_t>(&e);  // copied at post time
    wr.send_flags = IBV_SEND_INLINE;
  } else {
    // The staging entry of the WR's sequence number: free, because posting
    // seq requires seq - sq_depth (its previous user) to have completed.
    LandingEntry* s = &stage[(posted_ + 1) % sq_depth];
    *s = e;
    sge.addr = reinterpret_cast<uintptr_t>(s);
    sge.lkey = t_->landing_lkey();
  }
  ZC_RETURN_IF_ERROR(PostOne(&wr, kWrFlag, true, dl, seq));
  ++imm_count_;
  return Status::Ok();
}

Status VerbsConnection::Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
                              const FlagWrite* flag, const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(CheckUsable());
  if (bytes > 0) {
    if (!src) return Error(ZC_ERR_INVALID_ARG, "verbs: write to peer %d from a null buffer", peer_);
    if (!dst.Contains(dst_off, bytes))
      return Error(ZC_ERR_INVALID_ARG, "verbs: write of %zu bytes at offset %llu outside %s", bytes,
                   static_cast<unsigned long long>(dst_off), dst.ToString().c_str());
  }
  if (flag) {
    if (!flag->region || !flag->region->Contains(flag->offset, 8) ||
        (flag->region->addr + flag->offset) % 8 != 0)
      return Error(ZC_ERR_INVALID_ARG, "verbs: flag at offset %llu is not an aligned word of %s",
                   static_cast<unsigned long long>(flag->offset),
                   flag->region ? flag->region->ToString().c_str() : "(no region)");
  }
  if (bytes == 0 && !flag) return Status::Ok();

  // Ordered mode: the flag rides in the payload's last RDMA_WRITE when the
  // flag word directly follows the payload in the same region.
  bool trailing = flag && ordered_flags_trailing(flag, dst, dst_off, bytes);
  uint32_t lkey = 0;
  RegionHold region;  // the source, until the write completed (this call's end)
  bool inline_payload = bytes + (trailing ? 8 : 0) <= max_inline;
  if (bytes > 0 && !inline_payload) {
    ZC_RETURN_IF_ERROR(t_->host()->HoldLocalRegion(src, bytes, &region)
                           .with_context(Format("verbs: write to peer %d", peer_)));
    const ibv_mr* mr = RegionMr(*region.get());
    if (!mr)
      return Error(ZC_ERR_INTERNAL, "verbs: source %p (%zu bytes) is not registered with the NIC", src,
                   bytes);
    lkey = mr->lkey;
  }

  std::unique_lock<std::mutex> lock(post_mu_);
  uint64_t last = 0;
  uint64_t flag_value = flag ? flag->value : 0;
  size_t off = 0;
  uint64_t max_msg = t_->max_msg();
  do {
    size_t n = bytes - off < max_msg ? bytes - off : static_cast<size_t>(max_msg);
    bool final_chunk = off + n == bytes;
    if (bytes == 0 && !trailing) break;
    ibv_sge sge[2] = {};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = dst.addr + dst_off + off;
    wr.wr.rdma.rkey = dst.access_key;
    wr.sg_list = sge;
    int k = 0;
    if (n > 0) {
      sge[k].addr = reinterpret_cast<uintptr_t>(src) + off;
      sge[k].length = static_cast<uint32_t>(n);
      sge[k].lkey = lkey;
      ++k;
    }
    if (final_chunk && trailing) {
      if (inline_payload) {
        sge[k].addr = reinterpret_cast<uintptr_t>(&flag_value);
      } else {
        LandingEntry* s = &stage[(posted_ + 1) % sq_depth];
        s->value = flag_value;
        sge[k].addr = reinterpret_cast<uintptr_t>(&s->value);
        sge[k].lkey = t_->landing_lkey();
      }
      sge[k].length = 8;
      ++k;
      if (bytes == 0) wr.wr.rdma.remote_addr = flag->region->addr + flag->offset;
    }
    wr.num_sge = k;
    if (inline_payload) wr.send_flags |= IBV_SEND_INLINE;
    bool last_wr = final_chunk && (!flag || trailing);
    ZC_RETURN_IF_ERROR(PostOne(&wr, kWrWrite, last_wr, deadline, &last)
                           .with_context(Format("write of %zu bytes", bytes)));
    off += n;
  } while (off < bytes);
  if (flag && !trailing) ZC_RETURN_IF_ERROR(WriteImmFlag(*flag, deadline, &last));
  lock.unlock();
  return WaitSeq(last, deadline, flag ? "a flagged RDMA write" : "an RDMA write");
}

bool VerbsConnection::ordered_flags_trailing(const FlagWrite* flag, const RemoteRegion& dst,
                                             uint64_t dst_off, size_t bytes) const {
  if (!t_->ordered_flags()) return false;
  if (bytes == 0) return true;  // a flag alone: one 8-byte write
  return flag->region->access_key == dst.access_key &&
         flag->region->addr + flag->offset == dst.addr + dst_off + bytes &&
         max_send_sge >= 2;
}

Status VerbsConnection::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                             const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(CheckUsable());
  if (bytes == 0) return Status::Ok();
  if (!dst) return Error(ZC_ERR_INVALID_ARG, "verbs: read from peer %d into a null buffer", peer_);
  if (!src.Contains(src_off, bytes))
    return Error(ZC_ERR_INVALID_ARG, "verbs: read of %zu bytes at offset %llu outside %s", bytes,
                 static_cast<unsigned long long>(src_off), src.ToString().c_str());
  RegionHold region;  // the destination, until the read completed (this call's end)
  ZC_RETURN_IF_ERROR(t_->host()->HoldLocalRegion(dst, bytes, &region)
                         .with_context(Format("verbs: read from peer %d", peer_)));
  const ibv_mr* mr = RegionMr(*region.get());
  if (!mr)
    return Error(ZC_ERR_INTERNAL, "verbs: destination %p (%zu bytes) is not registered with the NIC",
                 dst, bytes);
  std::unique_lock<std::mutex> lock(post_mu_);
  uint64_t last = 0, max_msg = t_->max_msg();
  for (size_t off = 0; off < bytes;) {
    size_t n = bytes - off < max_msg ? bytes - off : static_cast<size_t>(max_msg);
    ibv_sge sge{reinterpret_cast<uintptr_t>(dst) + off, static_cast<uint32_t>(n), mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = src.addr + src_off + off;
    wr.wr.rdma.rkey = src.access_key;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ZC_RETURN_IF_ERROR(PostOne(&wr, kWrRead, off + n == bytes, deadline, &last)
                           .with_context(Format("read of %zu bytes", bytes)));
    off += n;
  }
  lock.unlock();
  return WaitSeq(last, deadline, "an RDMA read");
}

void VerbsConnection::SayBye() {
  std::unique_lock<std::mutex> lock(post_mu_);
  if (failed() || peer_slots == 0) return;
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(kImmBye);
  wr.wr.rdma.remote_addr = peer_landing;
  wr.wr.rdma.rkey = peer_rkey;
  wr.num_sge = 0;
  Deadline dl(1.0);
  uint64_t seq = 0;
  Status st = PostOne(&wr, kWrBye, true, dl, &seq);
  lock.unlock();
  if (st.ok()) st = WaitSeq(seq, dl, "the goodbye message");
  if (!st.ok()) ZC_TRACE(kVerbs, "verbs: goodbye to %s: %s", Describe().c_str(), st.message().c_str());
}

}  // namespace zc::verbs
