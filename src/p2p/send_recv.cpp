#include "p2p/send_recv.h"

#include <cstring>
#include <string>

#include "p2p/control_plane.h"
#include "p2p/device.h"

namespace zc {
namespace {

enum Kind : uint64_t { kMeta = 1, kAck = 2 };
enum Mode : uint32_t { kEager = 0, kRendezvous = 1 };
enum AckCode : uint32_t { kAckOk = 0, kAckMismatch = 1, kAckNeedStaged = 2, kAckFailed = 3 };

struct Meta {
  uint64_t bytes;
  uint32_t mode;
  uint32_t pad;
  uint64_t offset;  // rendezvous: of the data inside `region`
};

struct Ack {
  uint32_t code;
  uint32_t pad;
  uint64_t expected;  // receiver's size, for the mismatch message
};

uint64_t Tag(Kind k, int tag) { return (static_cast<uint64_t>(k) << 32) | static_cast<uint32_t>(tag); }

Status SendMeta(Device* dev, int peer, int tag, const Meta& m, const std::string& region,
                const void* eager, const Deadline& dl) {
  std::string msg(reinterpret_cast<const char*>(&m), sizeof(m));
  msg += region;
  if (eager && m.bytes) msg.append(static_cast<const char*>(eager), m.bytes);
  return dev->SendControl(peer, Tag(kMeta, tag), msg, dl);
}

}  // namespace

Status Send(Device* dev, const void* buf, size_t bytes, int peer, int tag) {
  Deadline dl = dev->NewDeadline();
  const std::string no_region = RemoteRegion().Serialize();
  Meta m{bytes, kEager, 0, 0};
  if (bytes <= kEagerLimit) return SendMeta(dev, peer, tag, m, no_region, buf, dl);

  // Rendezvous: expose the source where it lies (pool memory: zero copy).
  MemRegion* region = nullptr;
  MemRegion* staged = nullptr;
  ZC_RETURN_IF_ERROR(dev->LocalRegionFor(buf, bytes, &region));
  m.mode = kRendezvous;
  m.offset = region->offset_of(buf);
  Status st = SendMeta(dev, peer, tag, m, region->remote().Serialize(), nullptr, dl);
  for (int round = 0; st.ok(); ++round) {
    std::string reply;
    st = dev->RecvControl(peer, Tag(kAck, tag), &reply, dl);
    if (!st.ok()) break;
    Ack ack{};
    memcpy(&ack, reply.data(), std::min(reply.size(), sizeof(ack)));
    if (ack.code == kAckOk) break;
    if (ack.code == kAckMismatch) {
      st = Error(ZC_ERR_MISMATCH, "send of %zu bytes to peer %d (tag %d): the receiver expects %llu bytes",
                 bytes, peer, tag, static_cast<unsigned long long>(ack.expected));
      break;
    }
    if (ack.code == kAckNeedStaged && round == 0) {
      // The peer cannot reach user memory (cross-memory attach refused):
      // stage through pool memory, which every local peer maps.
      st = dev->Allocate(bytes, &staged);
      if (!st.ok()) break;
      memcpy(staged->data(), buf, bytes);
      m.offset = 0;
      st = SendMeta(dev, peer, tag, m, staged->remote().Serialize(), nullptr, dl);
      continue;
    }
    st = Error(ZC_ERR_SYSTEM, "send of %zu bytes to peer %d (tag %d): the receiver failed to read it",
               bytes, peer, tag);
    break;
  }
  if (staged) dev->Free(staged->data());
  return st;
}

Status Recv(Device* dev, void* buf, size_t bytes, int peer, int tag) {
  Deadline dl = dev->NewDeadline();
  const size_t d = RemoteRegion().Serialize().size();
  for (;;) {
    std::string msg;
    ZC_RETURN_IF_ERROR(dev->RecvControl(peer, Tag(kMeta, tag), &msg, dl));
    if (msg.size() < sizeof(Meta) + d)
      return Error(ZC_ERR_INTERNAL, "recv from peer %d (tag %d): truncated meta data", peer, tag);
    Meta m;
    memcpy(&m, msg.data(), sizeof(m));
    auto ack = [&](uint32_t code) {
      Ack a{code, 0, bytes};
      return dev->SendControl(peer, Tag(kAck, tag), std::string(reinterpret_cast<char*>(&a), sizeof(a)), dl);
    };
    if (m.bytes != bytes) {
      if (m.mode == kRendezvous) ack(kAckMismatch);
      return Error(ZC_ERR_MISMATCH, "recv of %zu bytes from peer %d (tag %d): the peer sent %llu bytes",
                   bytes, peer, tag, static_cast<unsigned long long>(m.bytes));
    }
    if (m.mode == kEager) {
      if (msg.size() != sizeof(Meta) + d + bytes)
        return Error(ZC_ERR_INTERNAL, "recv from peer %d (tag %d): eager payload truncated", peer, tag);
      if (bytes) memcpy(buf, msg.data() + sizeof(Meta) + d, bytes);
      return Status::Ok();
    }
    RemoteRegion src;
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(msg.substr(sizeof(Meta), d), &src));
    // One-sided read straight into the user's buffer.
    Status st = dev->channel(peer).Read(buf, bytes, src, m.offset, dl);
    if (st.code() == ZC_ERR_UNSUPPORTED) {
      ZC_RETURN_IF_ERROR(ack(kAckNeedStaged));
      continue;  // the sender re-sends meta data pointing at pool memory
    }
    if (!st.ok()) {
      ack(kAckFailed);
      return st.with_context(Format("recv of %zu bytes from peer %d (tag %d)", bytes, peer, tag));
    }
    return ack(kAckOk);
  }
}

}  // namespace zc
