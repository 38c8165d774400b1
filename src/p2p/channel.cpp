#include "p2p/channel.h"

namespace zc {

namespace {
Status CheckRange(const RemoteRegion& r, uint64_t off, uint64_t bytes, int peer, const char* op) {
  if (!r.Contains(off, bytes))
    return Error(ZC_ERR_INVALID_ARG, "%s to peer %d: [%llu, +%llu) lies outside %s", op, peer,
                 static_cast<unsigned long long>(off), static_cast<unsigned long long>(bytes),
                 r.ToString().c_str());
  return Status::Ok();
}
}  // namespace

Status Channel::Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
                      const FlagWrite* flag, const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(host_->Health(peer_));
  if (bytes > 0) ZC_RETURN_IF_ERROR(CheckRange(dst, dst_off, bytes, peer_, "write"));
  if (flag) {
    if (!flag->region || (flag->offset & 7) != 0)
      return Error(ZC_ERR_INTERNAL, "write to peer %d: flag is not an aligned word", peer_);
    ZC_RETURN_IF_ERROR(CheckRange(*flag->region, flag->offset, 8, peer_, "flag write"));
  }
  if (bytes == 0 && !flag) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Write(src, bytes, dst, dst_off, flag, deadline);
}

Status Channel::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                     const Deadline& deadline) {
  ZC_RETURN_IF_ERROR(host_->Health(peer_));
  if (bytes == 0) return Status::Ok();
  ZC_RETURN_IF_ERROR(CheckRange(src, src_off, bytes, peer_, "read"));
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Read(dst, bytes, src, src_off, deadline);
}

}  // namespace zc
