// Responder: answers the read requests (kReadReq) that one progress thread
// receives, and sends the verdicts on offers that could not go at once
// (MessageHandler::HandleOffer), on a thread of its own. Private to
// src/p2p/tcp.
//
// A progress thread is the only reader of its sockets, so it
// must never block in a write: a reply larger than the socket buffers
// waits for the peer to read it, and two ranks reading from each other at
// once (bidirectional rendezvous) would each have their progress thread
// stuck writing a reply that the other's stuck progress thread never reads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "p2p/tcp/tcp_socket.h"
#include "p2p/tcp/tcp_wire.h"
#include "p2p/transport.h"

namespace zc::tcp {

class Responder {
 public:
  // stopping: the transport's stop word (Progress), read by the thread.
  Responder(TransportHost* host, double timeout_s, const std::atomic<bool>& stopping)
      : host_(host), timeout_s_(timeout_s), stop_(stopping) {}
  void Start() { thread_ = std::thread([this] { Loop(); }); }
  // A kReadReq header from s, answered in arrival order (the progress thread).
  void Queue(Socket* s, const tcp_wire::MsgHeader& req);
  // A small kWrite to s's peer (h, then the 8-byte word), in the same order.
  void QueueWrite(Socket* s, const tcp_wire::MsgHeader& h, uint64_t word);
  // Joins the thread, if started, once the stop word is set.
  void Stop();

 private:
  void Loop();
  // Sends the reply to one read request (the bytes, or a refusal).
  Status AnswerRead(Socket* s, const tcp_wire::MsgHeader& req);

  TransportHost* host_;
  const double timeout_s_;
  const std::atomic<bool>& stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Job {
    Socket* s;
    tcp_wire::MsgHeader h;  // a kReadReq to answer, or a kWrite to send
    uint64_t word;          // the kWrite's payload
  };
  std::deque<Job> requests_;  // in arrival order
  std::thread thread_;
};

}  // namespace zc::tcp
