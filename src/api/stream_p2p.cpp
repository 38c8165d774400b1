#include "api/stream_p2p.h"

#include <iterator>

#include "api/comm.h"
#include "gpu/stream_ordered.h"
#include "p2p/messenger.h"

namespace zc::api {

StreamP2p::StreamP2p(Messenger* p2p, double timeout_s)
    : p2p_(p2p), timeout_s_(timeout_s), thread_([this] { Run(); }) {}

StreamP2p::~StreamP2p() { Stop(); }

void StreamP2p::AddSend(gpu::StreamOrdered* so, std::shared_ptr<gpu::StreamOp> op, const void* host, size_t bytes,
                        int peer, int tag, zc_request* req, std::string context) {
  Entry e;
  e.send = true;
  e.so = so;
  e.op = std::move(op);
  e.host = host;
  e.bytes = bytes;
  e.peer = peer;
  e.tag = tag;
  e.req = req;
  e.context = std::move(context);
  e.ready_deadline = Deadline(timeout_s_);
  std::lock_guard<std::mutex> lock(mu_);
  incoming_.push_back(std::move(e));
  cv_.notify_one();
}

void StreamP2p::AddRecv(gpu::StreamOrdered* so, std::shared_ptr<gpu::StreamOp> op,
                        std::shared_ptr<P2pRequest> posted, zc_request* req, std::string context) {
  Entry e;
  e.so = so;
  e.op = std::move(op);
  e.posted = std::move(posted);
  e.req = req;
  e.context = std::move(context);
  std::lock_guard<std::mutex> lock(mu_);
  incoming_.push_back(std::move(e));
  cv_.notify_one();
}

void StreamP2p::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void StreamP2p::Finish(Entry* e, Status st) {
  if (!st.ok()) st = st.with_context(e->context);
  if (e->op) e->so->CompleteRest(e->op.get(), st);
  if (e->req != nullptr) {
    e->req->status = st;
    e->req->done.store(1, std::memory_order_release);  // the waiter may free it now
    e->req = nullptr;
  }
}

namespace {

// Both operations on one CUDA stream (stream-less ones are on none).
bool SameStream(const StreamP2p::Entry& a, const StreamP2p::Entry& b) {
  return a.op && b.op && a.op->stream == b.op->stream;
}

// A receive that timed out: when a send queued after it on the same stream
// still waits for that stream, the receive holds back its own rank's send.
// Two ranks that both receive first then wait for each other: the timeout
// says so instead of only "no matching send".
Status ExplainStreamOrder(const Status& st, const std::deque<StreamP2p::Entry>& active,
                          std::deque<StreamP2p::Entry>::const_iterator recv) {
  if (st.code() != ZC_ERR_TIMEOUT || !recv->op) return st;
  for (auto it = std::next(recv); it != active.end(); ++it) {
    const StreamP2p::Entry& e = *it;
    if (!e.send || e.posted || !SameStream(e, *recv)) continue;
    // The send's context without its "rank R: " (the message has it already).
    const size_t colon = e.context.rfind("rank ", 0) == 0 ? e.context.find(": ") : std::string::npos;
    const std::string send = colon == std::string::npos ? e.context : e.context.substr(colon + 2);
    return Status(st.code(),
                  Format("%s; this rank's %s is queued after this receive on the same stream and waits for it "
                         "(in stream order a receive holds back the work after it: if the peer also receives "
                         "first, send first on one of the two ranks, or put the send on another stream)",
                         st.message().c_str(), send.c_str()),
                  st.origin(), st.origin_code());
  }
  return st;
}

// Whether a receive still pending before `send` in call order holds the same
// stream (its gate is ahead of the send's input copy).
bool HeldByReceive(const std::deque<StreamP2p::Entry>& active, std::deque<StreamP2p::Entry>::const_iterator send) {
  for (auto it = active.begin(); it != send; ++it)
    if (!it->send && SameStream(*it, *send)) return true;
  return false;
}

}  // namespace

// A receive that ended (done or failed) let its stream go on: the sends
// queued after it on that stream wait for the stream from now on.
void StreamP2p::ReleaseSendsBehind(std::deque<Entry>* active, std::deque<Entry>::iterator recv) {
  for (auto it = std::next(recv); it != active->end(); ++it)
    if (it->send && !it->posted && SameStream(*it, *recv))
      it->ready_deadline = Deadline(timeout_s_);
}

bool StreamP2p::Progress(std::deque<Entry>* active) {
  bool moved = false;
  bool send_blocked = false;  // an earlier send is not posted: later ones wait
  for (auto it = active->begin(); it != active->end();) {
    Entry& e = *it;
    if (!e.posted && !send_blocked) {
      bool ready = !e.op;  // no stream: nothing to wait for
      Status st = e.op ? e.so->PollReady(e.op.get(), 0, &ready) : Status::Ok();
      // Behind a pending receive the send waits for that receive, whose own
      // deadline (and error) covers the wait; its clock restarts after it.
      if (st.ok() && !ready && e.ready_deadline.expired() && !HeldByReceive(*active, it))
        st = Error(ZC_ERR_TIMEOUT, "the stream did not reach the send in %.0f s", e.ready_deadline.elapsed_s());
      if (st.ok() && ready) st = p2p_->Isend(e.host, e.bytes, e.peer, e.tag, &e.posted);
      if (!st.ok()) {
        Finish(&e, st);
        it = active->erase(it);
        moved = true;
        continue;
      }
      if (!ready) (void)e.ready_deadline.remaining_s();  // starts its clock
      moved |= ready;
    }
    if (!e.posted) {
      send_blocked = true;
      ++it;
      continue;
    }
    Status st;
    if (e.posted->Test(&st)) {
      if (!e.send) {
        st = ExplainStreamOrder(st, *active, it);
        ReleaseSendsBehind(active, it);
      }
      Finish(&e, st);
      it = active->erase(it);
      moved = true;
      continue;
    }
    ++it;
  }
  return moved;
}

void StreamP2p::Run() {
  std::deque<Entry> active;
  Backoff backoff;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (active.empty()) cv_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
      if (active.empty() && incoming_.empty() && stop_) return;
      while (!incoming_.empty()) {
        active.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    if (Progress(&active)) backoff = Backoff();
    else backoff.Pause();
  }
}

}  // namespace zc::api
