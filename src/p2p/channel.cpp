#include "p2p/channel.h"

#include "p2p/peer_health.h"

namespace zc {

namespace {
Status CheckRange(const RemoteRegion& r, uint64_t off, uint64_t bytes, int peer, const char* op) {
  if (!r.Contains(off, bytes))
    return Error(ZC_ERR_INVALID_ARG, "%s to peer %d: [%llu, +%llu) lies outside %s", op, peer,
                 static_cast<unsigned long long>(off), static_cast<unsigned long long>(bytes),
                 r.ToString().c_str());
  return Status::Ok();
}

Status CheckFlag(const FlagWrite* flag, int peer) {
  if (!flag) return Status::Ok();
  if (!flag->region || (flag->offset & 7) != 0)
    return Error(ZC_ERR_INTERNAL, "write to peer %d: flag is not an aligned word", peer);
  return CheckRange(*flag->region, flag->offset, 8, peer, "flag write");
}
}  // namespace

Status Channel::Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
                      const FlagWrite* flag, const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  if (bytes > 0) ZC_RETURN_IF_ERROR(CheckRange(dst, dst_off, bytes, peer_, "write"));
  ZC_RETURN_IF_ERROR(CheckFlag(flag, peer_));
  if (bytes == 0 && !flag) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Write(src, bytes, dst, dst_off, flag, deadline);
}

Status Channel::WriteOffer(const void* src, size_t bytes, uint64_t key, uint64_t prev, const FlagWrite& verdict,
                           const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  if (!verdict.region || (verdict.offset & 7) != 0 || !verdict.region->Contains(verdict.offset, 16))
    return Error(ZC_ERR_INTERNAL, "offer to peer %d: the verdict is not two aligned words", peer_);
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->WriteOffer(src, bytes, key, prev, verdict, deadline);
}

Status Channel::WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst, uint64_t dst_off,
                            const FlagWrite* flag, const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  uint64_t bytes = 0;
  for (int i = 0; i < n; ++i) bytes += src[i].bytes;
  if (n < 1) return Error(ZC_ERR_INTERNAL, "gathered write to peer %d without pieces", peer_);
  if (bytes > 0) ZC_RETURN_IF_ERROR(CheckRange(dst, dst_off, bytes, peer_, "write"));
  ZC_RETURN_IF_ERROR(CheckFlag(flag, peer_));
  if (bytes == 0 && !flag) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->WriteGather(src, n, dst, dst_off, flag, deadline);
}

Status Channel::WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst,
                           const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  for (int i = 0; i < n; ++i) {
    uint64_t bytes = 0;
    for (int j = 0; j < w[i].n; ++j) bytes += w[i].src[j].bytes;
    if (bytes > 0) ZC_RETURN_IF_ERROR(CheckRange(dst, w[i].dst_off, bytes, peer_, "write"));
    ZC_RETURN_IF_ERROR(CheckFlag(&w[i].flag, peer_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->WriteBatch(w, n, dst, deadline);
}

Status Channel::WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  ZC_RETURN_IF_ERROR(CheckFlag(&flag, peer_));
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->WriteFlagLazy(flag, deadline);
}

Status Channel::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                     const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(health_->Health(peer_));
  if (bytes == 0) return Status::Ok();
  ZC_RETURN_IF_ERROR(CheckRange(src, src_off, bytes, peer_, "read"));
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Read(dst, bytes, src, src_off, deadline);
}

}  // namespace zc
