// Control-message tags. Communicators that share a Device (zc_comm_split,
// zc_comm_dup) share its control mailboxes, so every tag carries the id of
// the communicator it belongs to; a receiver asking for one communicator's
// tag never takes another's message.
//
//   bits 63..48  context: the communicator's id (0: the world communicator)
//   bits 47..32  class: which protocol the message belongs to (below)
//   bits 31..0   the protocol's own value (a user tag, a step)
#pragma once

#include <cstdint>

namespace zc {

enum class TagClass : uint16_t {
  kSendMeta = 1,       // zc_send/zc_isend: meta data or eager payload
  kSendAck = 2,        // zc_send rendezvous: the receiver's acknowledgement
  kRecvPost = 3,       // zc_recv over tcp: the receiver announces its buffer (p2p/recv_post.h)
  kLinks = 0x10,       // collectives: slot descriptors of a link
  kShmDirect = 0x11,   // collectives: shared-memory workspace descriptors
  kComm = 0x20,        // communicator management (split, dup, context ids)
  kAgree = 0x21,       // fault tolerance: zc_comm_agree and zc_comm_shrink's agreements
  kPs = 0x30,          // parameter server: declarations, acknowledgements, goodbyes
};

constexpr uint32_t kMaxContext = 0xffff;

constexpr uint64_t ControlTag(uint32_t context, TagClass cls, uint32_t low) {
  return (static_cast<uint64_t>(context & kMaxContext) << 48) |
         (static_cast<uint64_t>(cls) << 32) | low;
}

}  // namespace zc
