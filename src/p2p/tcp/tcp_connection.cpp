// TcpConnection's one-sided writes (kWrite messages) and reads (kReadReq,
// then the wait for the response): see tcp_connection.h.
#include "p2p/tcp/tcp_connection.h"

#include <chrono>
#include <thread>

#include "common/deadline.h"

namespace zc::tcp {
namespace {

using tcp_wire::kMagic;
using tcp_wire::kReadReq;
using tcp_wire::kWrite;
using tcp_wire::MsgHeader;

// A kWrite header for dst_off of region `region`, and the flag if any
// (bytes left for the caller to fill).
MsgHeader WriteHeader(uint64_t region, uint64_t dst_off, const FlagWrite* flag) {
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kWrite;
  h.region_id = region;
  h.offset = dst_off;
  if (flag) {
    h.flag_region_id = flag->region->id;
    h.flag_offset = flag->offset;
    h.flag_value = flag->value;
  }
  return h;
}

}  // namespace

Status TcpConnection::Write(const void* src, size_t bytes, const RemoteRegion& dst,
                            uint64_t dst_off, const FlagWrite* flag, const Deadline& deadline) {
  MsgHeader h = WriteHeader(dst.id, dst_off, flag);
  h.bytes = bytes;
  return s_->SendMsg(h, bytes ? src : nullptr, deadline);
}

Status TcpConnection::WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst,
                                  uint64_t dst_off, const FlagWrite* flag, const Deadline& deadline) {
  if (n > 7) return Connection::WriteGather(src, n, dst, dst_off, flag, deadline);
  MsgHeader h = WriteHeader(dst.id, dst_off, flag);
  for (int i = 0; i < n; ++i) h.bytes += src[i].bytes;
  return s_->SendMsgV(h, src, n, deadline);
}

Status TcpConnection::WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst,
                                 const Deadline& deadline) {
  bool small = n <= Socket::kMaxBatch;
  for (int i = 0; small && i < n; ++i) {
    int used = 0;
    for (int j = 0; j < w[i].n; ++j) used += w[i].src[j].bytes != 0;
    small = used <= 7;
  }
  if (!small) return Connection::WriteBatch(w, n, dst, deadline);
  MsgHeader hs[Socket::kMaxBatch] = {};
  for (int i = 0; i < n; ++i) {
    MsgHeader& h = hs[i];
    h = WriteHeader(dst.id, w[i].dst_off, &w[i].flag);
    for (int j = 0; j < w[i].n; ++j) h.bytes += w[i].src[j].bytes;
  }
  return s_->SendBatch(hs, w, n, deadline);
}

Status TcpConnection::WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) {
  // A flag-only write: no payload, the flag's own region as the target.
  MsgHeader h = WriteHeader(flag.region->id, 0, &flag);
  return s_->SendFlagLazy(h, deadline);
}

Status TcpConnection::WriteOffer(const void* src, size_t bytes, uint64_t key, uint64_t prev,
                                 const FlagWrite& verdict, const Deadline& deadline) {
  MsgHeader h{};
  h.magic = kMagic;
  h.type = tcp_wire::kOffer;
  h.token = key;
  h.offset = prev;
  h.bytes = bytes;
  // The verdict word is in our own region: the peer writes it back by id.
  h.flag_region_id = verdict.region->id;
  h.flag_offset = verdict.offset;
  h.flag_value = verdict.value;
  return s_->SendMsg(h, bytes ? src : nullptr, deadline);
}

Status TcpConnection::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                           const Deadline& deadline) {
  auto pr = std::make_shared<PendingRead>();
  PendingRead& p = *pr;
  p.dst = dst;
  p.bytes = bytes;
  uint64_t token = reads_->Add(pr);
  MsgHeader h{};
  h.magic = kMagic;
  h.type = kReadReq;
  h.region_id = src.id;
  h.offset = src_off;
  h.bytes = bytes;
  h.token = token;
  Backoff backoff(/*notified=*/true, read_driver_);  // the progress thread (or this one, driving) notifies
  Status st = s_->SendMsg(h, nullptr, deadline);
  while (st.ok()) {
    int state = p.state.load(std::memory_order_acquire);
    if (state == 1) break;
    if (state == 2) {
      st = p.status;
      break;
    }
    st = s_->host->Health(s_->peer);
    if (st.ok() && deadline.expired())
      st = Error(ZC_ERR_TIMEOUT, "tcp read of %zu bytes from peer %d: no reply: waited %.1f s",
                 bytes, s_->peer, deadline.elapsed_s());
    backoff.Pause();
  }
  reads_->Remove(token);
  // A read that failed while its data was arriving: wait for the progress
  // thread to finish with dst before returning it to the caller.
  while (p.state.load(std::memory_order_acquire) == 0 && !st.ok() && s_->dead.load() == false &&
         !deadline.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return st;
}

}  // namespace zc::tcp
