// MessageHandler: what a peer's messages do here, run by whichever thread
// serves the socket (Progress::Service: its progress thread, or a waiting
// thread that drives). Private to src/p2p/tcp.
//
//   kWrite     the payload goes straight from the socket into the target
//              region (zero copy), then the flag is release-stored;
//   kReadReq   queued for the progress thread's Responder, never answered
//              here (a reply may wait for the peer to read);
//   kReadResp  the bytes go straight into the waiting read's destination
//              (PendingReads, by token);
//   kBye       the socket is marked: the peer finalized;
//   kOffer     a message for one of our receives (TransportHost::
//              MatchOffer): its payload goes straight into the receive's
//              buffer, or it waits, unread, for a receive to come
//              (Socket::offer_pending), or is refused and drained; the
//              sender learns which from its verdict word.
// The checks on what a peer sends are tcp_wire.h's (also fuzzed).
#pragma once

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/tcp/tcp_connection.h"
#include "p2p/tcp/tcp_responder.h"
#include "p2p/tcp/tcp_socket.h"
#include "p2p/tcp/tcp_wire.h"
#include "p2p/transport.h"

namespace zc::tcp {

class Progress;  // tcp_progress.h

class MessageHandler {
 public:
  // progress: notified when a flag or a read's state changes.
  MessageHandler(TransportHost* host, PendingReads* reads, Progress* progress, double timeout_s)
      : host_(host), reads_(reads), progress_(progress), timeout_s_(timeout_s) {}
  // Recv into the socket's buffer and handle every whole message there,
  // until the socket had no more bytes (edge-triggered epoll: nobody is
  // woken again for bytes already there). *took: some message was handled.
  // Non-OK when the socket must be dropped.
  Status Pump(Socket* s, Responder* responder, bool* took);

 private:
  // Handles one message; returns non-OK when the socket must be dropped.
  // Read requests are queued for responder, never answered here.
  Status HandleMessage(Socket* s, Responder* responder);
  Status HandleWrite(Socket* s, const tcp_wire::MsgHeader& h, const Deadline& dl);
  // kWrite's payload: into its region, or drained when there is none.
  Status PlacePayload(Socket* s, const tcp_wire::MsgHeader& h, const Deadline& dl);
  // kWrite's flag: release-stored into its region, or dropped when there is none.
  void SetFlag(Socket* s, const tcp_wire::MsgHeader& h);
  Status HandleReadResp(Socket* s, const tcp_wire::MsgHeader& h, const Deadline& dl);
  // kOffer (above); an offer that waited comes back here (Pump).
  Status HandleOffer(Socket* s, const tcp_wire::MsgHeader& h, Responder* responder);
  // The sender's verdict: the post's token (0: refused), then its flag; at
  // once when the socket is free, else through the responder.
  void SendVerdict(Socket* s, const tcp_wire::MsgHeader& offer, uint64_t token, Responder* responder);

  TransportHost* host_;
  PendingReads* reads_;
  Progress* progress_;
  const double timeout_s_;
};

}  // namespace zc::tcp
