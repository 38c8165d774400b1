// Responder's thread and its replies to one-sided reads: see tcp_responder.h.
#include "p2p/tcp/tcp_responder.h"

#include <shared_mutex>

#include "common/deadline.h"

namespace zc::tcp {

using tcp_wire::kMagic;
using tcp_wire::kReadResp;
using tcp_wire::MsgHeader;

void Responder::Queue(Socket* s, const MsgHeader& req) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(Job{s, req, 0});
  }
  cv_.notify_one();
}

void Responder::QueueWrite(Socket* s, const MsgHeader& h, uint64_t word) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(Job{s, h, word});
  }
  cv_.notify_one();
}

void Responder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // no lost wakeup between its check and wait
  }
  cv_.notify_all();
  // Never started when Progress::Start failed after making its group.
  if (thread_.joinable()) thread_.join();
}

void Responder::Loop() {
  for (;;) {
    Job req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_.load() || !requests_.empty(); });
      if (stop_.load()) return;
      req = requests_.front();
      requests_.pop_front();
    }
    Socket* s = req.s;
    if (s->dead.load()) continue;  // the reader learns of the loss from its Health check
    Status st = req.h.type == tcp_wire::kReadReq ? AnswerRead(s, req.h)
                                                 : s->SendMsg(req.h, &req.word, Deadline(timeout_s_));
    // As when the progress thread answered: a reply that cannot be sent
    // (timeout: the peer reads nothing) drops the connection.
    if (!st.ok() && !s->dead.exchange(true) && !stop_.load())
      host_->OnPeerLost(s->peer, st.with_context(req.h.type == tcp_wire::kReadReq ? "answering a one-sided read"
                                                                                  : "answering an offer"));
  }
}

Status Responder::AnswerRead(Socket* s, const MsgHeader& req) {
  // Held shared while the region's bytes go out: it is not freed under us.
  std::shared_lock<std::shared_mutex> use(host_->region_use());
  MemRegion* r = host_->FindLocalRegion(req.region_id);
  MsgHeader resp{};
  resp.magic = kMagic;
  resp.type = kReadResp;
  resp.token = req.token;
  const void* src = nullptr;
  if (!r || !tcp_wire::RangeInside(req.offset, req.bytes, r->size())) {
    resp.status = ZC_ERR_INVALID_ARG;
  } else {
    resp.bytes = req.bytes;
    src = static_cast<char*>(r->data()) + req.offset;
  }
  return s->SendMsg(resp, src, Deadline(timeout_s_));
}

}  // namespace zc::tcp
