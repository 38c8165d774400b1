// Wire format of the tcp transport, and the checks on what a peer sends:
// pure functions that the transport's socket code and the fuzz target
// (tests/fuzz/fuzz_tcp_wire.cpp) both call.
//
// Connection handshake (after the job-key authentication, common/auth.h):
//   client -> server  hello: u32 rank, u32 socket index (host byte order)
// Then every message is a MsgHeader, followed by `bytes` of payload for
// kWrite, kOffer and an ok kReadResp. A kOffer names no region: token is
// the key of the receive it is for, offset the sender's control-stream
// position before it, and the flag fields the sender's verdict word
// (MessageHandler::HandleOffer).
#pragma once

#include <cstdint>
#include <cstring>

#include "common/status.h"

namespace zc::tcp_wire {

constexpr uint32_t kMagic = 0x5a435450;  // "ZCTP"
enum MsgType : uint16_t { kWrite = 1, kReadReq = 2, kReadResp = 3, kBye = 4, kOffer = 5 };

struct MsgHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t status;  // kReadResp: 0 ok, else zc_status of a refused read
  uint64_t region_id;
  uint64_t offset;
  uint64_t bytes;
  uint64_t flag_region_id;  // 0: no flag
  uint64_t flag_offset;
  uint64_t flag_value;
  uint64_t token;
};

constexpr size_t kHelloBytes = 8;

// Server side: the client's hello names a rank of the job and one of the
// per_peer sockets to it.
inline Status ParseHello(const uint8_t* bytes, int nranks, int per_peer, int* peer, int* idx) {
  uint32_t hello[2];
  memcpy(hello, bytes, sizeof(hello));
  // Unsigned comparisons: an index of 2^31 or more must not become negative.
  if (hello[0] >= static_cast<uint32_t>(nranks) || hello[1] >= static_cast<uint32_t>(per_peer))
    return Error(ZC_ERR_SYSTEM, "tcp: bad hello (rank %u, socket %u)", hello[0], hello[1]);
  *peer = static_cast<int>(hello[0]);
  *idx = static_cast<int>(hello[1]);
  return Status::Ok();
}

// Magic and type; a failure drops the connection.
inline Status CheckHeader(const MsgHeader& h, int peer) {
  if (h.magic != kMagic)
    return Error(ZC_ERR_PEER_LOST, "tcp: corrupt message from peer %d (magic %#x)", peer, h.magic);
  if (h.type < kWrite || h.type > kOffer)
    return Error(ZC_ERR_PEER_LOST, "tcp: unknown message type %u from peer %d", h.type, peer);
  return Status::Ok();
}

// [offset, offset + bytes) inside a region of `size` bytes (kWrite, kReadReq).
inline bool RangeInside(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

// An aligned 8-byte flag word at `offset` inside a region of `size` bytes.
// (offset + 8 would wrap for an offset near 2^64: compare against size - 8.)
inline bool FlagInside(uint64_t offset, uint64_t size) {
  return (offset & 7) == 0 && size >= 8 && offset <= size - 8;
}

// kReadResp: whether the payload is what the pending read of `want` bytes
// expects (none when the peer refused the read); else it is drained.
inline bool ReadRespFits(const MsgHeader& h, uint64_t want) {
  return h.bytes == (h.status ? 0 : want);
}

// kReadResp with a non-zero status: the peer refused the range.
inline Status RefusedRead(const MsgHeader& h, int peer) {
  return StatusFromPeer(h.status,
                        Format("tcp read from peer %d: range outside the peer's region", peer));
}

}  // namespace zc::tcp_wire
