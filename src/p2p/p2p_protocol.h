// The wire format of two-sided send/recv, shared by the blocking zc::Send /
// zc::Recv (send_recv.cpp) and the Messenger (messenger.cpp), so that either
// side may use either one.
//
//   sender -> receiver, tag ControlTag(context, kSendMeta, user tag):
//     eager:       [Meta{bytes, kEager, seq, 0}][payload]
//     rendezvous:  [Meta{bytes, kRendezvous, seq, offset}][descriptor of the source region]
//   receiver -> sender, tag ControlTag(context, kSendAck, user tag):
//     [Ack{code, seq, receiver's size}]      (rendezvous only)
//   sender -> receiver, tag ControlTag(context, kSendAck, user tag), after kAckNeedStaged:
//     [Ack{kAckRestaged, seq, bytes}][Meta][descriptor of a pool copy]
//
// Receiver-posted (tcp, p2p/recv_post.h): a receive that finds nothing yet
// announces its buffer; a sender that finds the announcement still fresh
// writes its message straight into that buffer instead of sending a meta:
//   receiver -> sender, tag ControlTag(context, kRecvPost, user tag):
//     [Post{seen, bytes, token, data offset, flag offset, flag value}]
//     [descriptor of the buffer's region][descriptor of the flag's region]
//     or, withdrawing a post: [Post{token}] alone
//   sender -> receiver: a one-sided write of the payload into the buffer,
//     with the flag, on connection 0 (ControlPlane::Answer)
// The write takes the place of the first message of its tag after the
// point the post was made at (ControlPlane's offers): the receive that
// posted completes when its flag is set, and leaves later metas of its tag
// to later receives.
//
// seq is the sender's number for the message (0 from the blocking zc::Send);
// the receiver echoes it in its Ack so that a sender with several
// rendezvous messages of one (peer, tag) in flight gives each ack to the
// right one, whatever order the receiver completes them in.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "common/status.h"
#include "p2p/control_tag.h"

namespace zc {
class RecvPost;  // recv_post.h
}  // namespace zc

namespace zc::p2p_wire {

enum Mode : uint32_t { kEager = 0, kRendezvous = 1 };
enum AckCode : uint32_t {
  kAckOk = 0,
  kAckMismatch = 1,
  kAckNeedStaged = 2,  // the receiver cannot read user memory: send a pool copy
  kAckFailed = 3,
  kAckRestaged = 4,    // sender -> receiver: the pool copy's meta data follows
};

struct Meta {
  uint64_t bytes;
  uint32_t mode;
  uint32_t seq;
  uint64_t offset;  // rendezvous: of the data inside the described region
};

// A receive's announcement (kRecvPost), followed by the descriptors of the
// buffer's region and of the flag's region.
struct Post {
  uint64_t seen;         // the sender's stream as the receive last found it (ControlPlane offers)
  uint64_t bytes;        // the receive's size
  uint64_t token;        // names the post (a withdrawal names it)
  uint64_t data_offset;  // of the buffer inside its region
  uint64_t flag_offset;  // of the flag word inside its region
  uint64_t flag_value;   // what the payload's write stores there
};

struct Ack {
  uint32_t code;
  uint32_t seq;
  uint64_t expected;  // receiver's size (mismatch message); kAckRestaged: the bytes
};

inline uint64_t MetaTag(uint32_t context, int tag) {
  return ControlTag(context, TagClass::kSendMeta, static_cast<uint32_t>(tag));
}
inline uint64_t AckTag(uint32_t context, int tag) {
  return ControlTag(context, TagClass::kSendAck, static_cast<uint32_t>(tag));
}
inline uint64_t PostTag(uint32_t context, int tag) {
  return ControlTag(context, TagClass::kRecvPost, static_cast<uint32_t>(tag));
}

// What a receiver learns from a meta message. TakeMeta (a ControlPlane
// consumer) reads the message in place: an eager payload of the expected
// size goes straight into buf, a rendezvous source's descriptor into desc.
struct Arrival {
  void* buf;
  size_t bytes;
  Meta meta{};
  std::string desc;
  const RecvPost* post = nullptr;  // the receive's post, if it sent one (recv_post.h AcceptMeta)
};

// The message is the concatenation of n pieces (a message spanning several
// control slots, ControlPlane::Piece); the Meta lies whole in the first.
template <class Piece>
inline Status TakeMetaPieces(void* ctx, const Piece* pieces, int n) {
  auto* a = static_cast<Arrival*>(ctx);
  if (n < 1 || pieces[0].bytes < sizeof(Meta))
    return Error(ZC_ERR_INTERNAL, "truncated meta data (%zu bytes)", n < 1 ? size_t{0} : size_t{pieces[0].bytes});
  memcpy(&a->meta, pieces[0].data, sizeof(Meta));
  size_t rest_bytes = pieces[0].bytes - sizeof(Meta);
  for (int i = 1; i < n; ++i) rest_bytes += pieces[i].bytes;
  if (a->meta.mode == kRendezvous) {
    a->desc.assign(pieces[0].data + sizeof(Meta), pieces[0].bytes - sizeof(Meta));
    for (int i = 1; i < n; ++i) a->desc.append(pieces[i].data, pieces[i].bytes);
  } else if (a->meta.bytes == a->bytes) {
    if (rest_bytes != a->bytes)
      return Error(ZC_ERR_INTERNAL, "eager payload of %zu bytes, meta data says %zu", rest_bytes,
                   a->bytes);
    char* out = static_cast<char*>(a->buf);
    for (int i = 0; i < n; ++i) {
      const size_t skip = i ? 0 : sizeof(Meta);
      const size_t b = pieces[i].bytes - skip;
      if (b) memcpy(out, pieces[i].data + skip, b);
      out += b;
    }
  }
  return Status::Ok();
}

// A message in one piece.
inline Status TakeMeta(void* ctx, const char* data, size_t n) {
  struct One {
    const char* data;
    size_t bytes;
  } whole{data, n};
  return TakeMetaPieces(ctx, &whole, 1);
}

// An ack-class message's head; false when it is shorter than an Ack.
inline bool ParseAck(const char* data, size_t n, Ack* out) {
  if (n < sizeof(Ack)) return false;
  memcpy(out, data, sizeof(Ack));
  return true;
}

// kAckRestaged: [Ack][Meta][descriptor of the pool copy]. false when the
// message is too short or is not a restaged meta.
inline bool ParseRestaged(const std::string& msg, Ack* head, Meta* meta, std::string* desc) {
  if (!ParseAck(msg.data(), msg.size(), head) || head->code != kAckRestaged ||
      msg.size() < sizeof(Ack) + sizeof(Meta))
    return false;
  memcpy(meta, msg.data() + sizeof(Ack), sizeof(Meta));
  desc->assign(msg, sizeof(Ack) + sizeof(Meta));
  return true;
}

}  // namespace zc::p2p_wire
