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
    requests_.emplace_back(s, req);
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
    std::pair<Socket*, MsgHeader> req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_.load() || !requests_.empty(); });
      if (stop_.load()) return;
      req = requests_.front();
      requests_.pop_front();
    }
    Socket* s = req.first;
    if (s->dead.load()) continue;  // the reader learns of the loss from its Health check
    Status st = AnswerRead(s, req.second);
    // As when the progress thread answered: a reply that cannot be sent
    // (timeout: the peer reads nothing) drops the connection.
    if (!st.ok() && !s->dead.exchange(true) && !stop_.load())
      host_->OnPeerLost(s->peer, st.with_context("answering a one-sided read"));
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
