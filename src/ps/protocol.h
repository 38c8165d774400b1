// What parameter-server ranks say to each other. Tensor data only ever
// travels as one-sided writes into chunk slots (chunk_slots.h); control
// messages (the Group's control plane, scoped by the PS's own context) carry
// declarations and slot descriptors once per key, and the goodbye.
//
//   worker -> every server   kDeclare  {DeclareHead}[reply slots][push credits]
//   server -> every worker   kAck      {AckHead}[error text][push slots][reply credits][results]
//   worker -> every server   kBye      (empty): this worker freed its zc_ps
//   every rank -> every rank kLeave    (empty): asynchronous mode, LeaveBarrier
//
// The descriptors are present only when the server holds chunks of the key.
// Slot messages (MsgHeader::kind):
//   worker -> server: kInit (first worker's initial value), kPush, kPull
//   (asynchronous mode: "reply with the current value"), kPushRef
//   (synchronous mode, a worker to the server of its own process: header
//   only, MsgHeader::pad[0] the piece's address in the worker's tensor,
//   which the server reduces from in place; the worker's push completes
//   once the server has handed the slot back, or once the worker took the
//   piece back, Server::Reclaim)
//   A kPush over tcp (synchronous mode) may name where the worker's pull
//   of the same round takes the piece (PullTarget, in MsgHeader::pad[1..3]):
//   the server then writes the reply's payload straight into the worker's
//   tensor and the header alone into the reply slot (kReplyInto), so the
//   worker copies nothing.
//   server -> worker: kReplyDirect (a co-located worker whose pull was
//   queued before the piece was reduced: the sum was reduced straight into
//   its tensor; header only), kReply (the round's sum or the updated value), or
//   kReplyRef (synchronous mode, a worker that maps the server's memory:
//   this rank or a shared-memory peer): header only, the value is in the
//   server's results region at the piece's offset (ResultOffset), and stays
//   there until the worker hands the reply slot back.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <zcomm/zcomm.h>

#include "collectives/dtype.h"
#include "p2p/control_tag.h"
#include "ps/chunk_slots.h"

namespace zc::ps {

// Pushes into another process's slot and pulls into the caller's tensor are
// written around the cache from this size on (common/stream_copy.h).
constexpr size_t kPsStreamFrom = 64 * 1024;
constexpr uint64_t kDeclareTag = ControlTag(0, TagClass::kPs, 1);
constexpr uint64_t kAckTag = ControlTag(0, TagClass::kPs, 2);
constexpr uint64_t kByeTag = ControlTag(0, TagClass::kPs, 3);
constexpr uint64_t kLeaveTag = ControlTag(0, TagClass::kPs, 4);  // LeaveBarrier

enum MsgKind : uint64_t { kInit = 1, kPush = 2, kPull = 3, kReply = 4, kReplyRef = 5, kPushRef = 6,
                        kReplyDirect = 7, kReplyInto = 8 };

struct DeclareHead {
  uint64_t index;  // declaration number (every worker declares in the same order)
  uint64_t key;
  uint64_t count;
  uint32_t dtype;
  uint32_t has_init;  // this worker has an initial value (sent where the answer's init_from names it)
};

struct AckHead {
  int32_t code;       // zc_status of the declaration
  uint32_t text_len;  // bytes of error text that follow
  // The group rank of the worker whose initial value this server waits
  // for (the first worker's; a later live worker's when the first was
  // dropped, asynchronous failover), or -1.
  int32_t init_from;
  uint32_t reserved;
};

template <typename T>
std::string Pack(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
bool Unpack(const std::string& s, size_t* pos, T* v) {
  if (s.size() < *pos + sizeof(T)) return false;
  memcpy(v, s.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

// A worker's declaration as a server reads it: the head, then (when the
// server holds chunks of the key) two descriptors of equal length, the
// worker's reply slots and push credits. false when shorter than the head
// or naming a dtype that does not exist (the server would size chunks by it).
struct Declaration {
  DeclareHead head{};
  std::string reply_slots, push_credits;  // serialized RemoteRegions, or ""
};
inline bool ParseDeclaration(const std::string& msg, Declaration* out) {
  size_t pos = 0;
  if (!Unpack(msg, &pos, &out->head) || out->head.dtype > static_cast<uint32_t>(kLastDtype)) return false;
  size_t half = (msg.size() - pos) / 2;
  out->reply_slots = msg.substr(pos, half);
  out->push_credits = msg.substr(pos + half);
  return true;
}

// A server's answer as a worker reads it: the head, code's error text, and
// (when the server holds chunks of the key) three descriptors of equal
// length: the worker's push slots, the server's reply credits and the
// server's results region (kReplyRef). false when truncated.
struct Answer {
  AckHead head{};
  std::string text;
  std::string push_slots, reply_credits, results;
};
inline bool ParseAnswer(const std::string& msg, Answer* out) {
  size_t pos = 0;
  if (!Unpack(msg, &pos, &out->head) || msg.size() < pos + out->head.text_len) return false;
  out->text = msg.substr(pos, out->head.text_len);
  pos += out->head.text_len;
  size_t third = (msg.size() - pos) / 3;
  out->push_slots = msg.substr(pos, third);
  out->reply_credits = msg.substr(pos + third, third);
  out->results = msg.substr(pos + 2 * third);
  return true;
}

// Where piece slot k's value lies in a server's results region: the
// pieces' payloads one after the other, 64-byte aligned (the stride of the
// key's slot layout without the header).
inline uint64_t ResultStride(uint64_t capacity) { return (capacity + 63) & ~uint64_t{63}; }
inline uint64_t ResultOffset(uint32_t k, uint64_t capacity) { return uint64_t{k} * ResultStride(capacity); }

// Where a worker's pull of a push's round takes one piece: a region of the
// worker's (its tensor, held for the pull's lifetime; tcp addresses it by
// id) and the piece's offset in it. Carried in a kPush header's pad[1..3];
// id 0: none (the reply goes into the reply slot).
struct PullTarget {
  uint64_t region_id = 0;
  uint64_t region_size = 0;
  uint64_t offset = 0;
  bool present() const { return region_id != 0; }
};
inline void SetPullTarget(const PullTarget& t, MsgHeader* h) {
  h->pad[1] = t.region_id;
  h->pad[2] = t.region_size;
  h->pad[3] = t.offset;
}
inline PullTarget GetPullTarget(const MsgHeader& h) { return PullTarget{h.pad[1], h.pad[2], h.pad[3]}; }

// Alert words (one per server in each worker's memory): a server that
// fails writes (code << 32) | (group rank of the culprit + 1) so that every
// worker's pending and later operations fail with that cause.
inline uint64_t AlertValue(int code, int culprit) {
  return (static_cast<uint64_t>(code) << 32) | static_cast<uint32_t>(culprit + 1);
}

}  // namespace zc::ps
