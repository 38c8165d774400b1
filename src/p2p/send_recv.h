// Two-sided send/recv on top of one-sided operations (zc_send / zc_recv).
//   eager (small):  the payload rides in the control message (one write plus
//                   a flag); the sender returns at once.
//   rendezvous:     dynamic placement (§3.3): the sender writes meta data
//                   {bytes, descriptor of its buffer}; the receiver reads the
//                   payload one-sidedly straight into the user's buffer and
//                   acknowledges, which releases the sender's buffer.
// A size mismatch fails the receiver with ZC_ERR_MISMATCH; in rendezvous
// mode the sender learns it through the acknowledgement and fails too (an
// eager sender has already returned).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "p2p/transport.h"

namespace zc {

class Device;

// Eager up to here on shared memory, where a rendezvous is a cheap
// one-sided copy; up to kNetworkEagerLimit across tcp and verbs, where it
// costs two more network hops than the eager copy out of the slot.
constexpr size_t kEagerLimit = 8192;
constexpr size_t kNetworkEagerLimit = 32768;
// tcp: a message spans up to 8 control slots (ControlPlane::kMaxSpanMessage),
// so the eager copy stays cheaper than a rendezvous's three hops up to here.
constexpr size_t kTcpEagerLimit = 256 * 1024;

inline size_t EagerLimit(TransportKind kind) {
  return kind == TransportKind::kShm ? kEagerLimit
         : kind == TransportKind::kTcp ? kTcpEagerLimit
                                       : kNetworkEagerLimit;
}

// peer is a Device rank; context scopes the tags (p2p/control_tag.h) as the
// communicator's Messenger does, which runs these inline when it has no
// request pending (the latency path of zc_send/zc_recv).
Status Send(Device* dev, const void* buf, size_t bytes, int peer, int tag, uint32_t context = 0);
Status Recv(Device* dev, void* buf, size_t bytes, int peer, int tag, uint32_t context = 0);
// Send's eager message when it goes out now, without waiting for anything
// (ControlPlane::TrySendNow: a free shared-memory slot); false, with
// nothing sent, otherwise: then Send does the whole work.
bool TrySendNow(Device* dev, const void* buf, size_t bytes, int peer, int tag, uint32_t context = 0);

}  // namespace zc
