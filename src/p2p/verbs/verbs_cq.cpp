// Completion queues: one polling thread per CQ (the paper's Fig. 4). Each
// thread spins briefly on ibv_poll_cq, then arms the CQ and blocks on its
// completion channel, so an idle transport burns no core.
#include <arpa/inet.h>
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "p2p/verbs/verbs_internal.h"

namespace zc::verbs {

namespace {

// Is the completion error a transport failure (the peer or the path is
// gone) rather than a protection / programming error?
bool TransportError(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_FATAL_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
    case IBV_WC_GENERAL_ERR:
    case IBV_WC_WR_FLUSH_ERR:
      return true;
    default:
      return false;
  }
}

const char* Hint(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer did not acknowledge: it died, or the path is down (check the link, "
             "ibv_devinfo, and that the peer process is alive)";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer posted no receive in time (peer stalled or dead)";
    case IBV_WC_REM_ACCESS_ERR:
      return "the remote range or rkey does not match memory the peer registered (stale or "
             "wrong descriptor, or the peer unregistered it)";
    case IBV_WC_LOC_PROT_ERR:
      return "the local buffer is not covered by a registration with this lkey";
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
      return "invalid request (length or opcode); a bug in zcomm";
    case IBV_WC_WR_FLUSH_ERR:
      return "the queue pair is in the error state (an earlier failure or a disconnect)";
    default:
      return "see ibv_wc_status_str";
  }
}

}  // namespace

Status VerbsTransport::CreateCqs(int qps) {
  int n = num_cqs_ < qps ? num_cqs_ : qps;
  if (n < 1) n = 1;
  for (int i = 0; i < n; ++i) {
    auto q = std::make_unique<CompletionQueue>();
    q->index = i;
    q->channel = api_->create_comp_channel(ctx_);
    if (!q->channel) return SystemError(errno, "verbs: ibv_create_comp_channel");
    // QPs are spread round-robin: CQ i serves ceil((qps - i) / n) of them.
    int mine = (qps - i + n - 1) / n;
    int per_qp = 0;
    for (auto& c : conns_)
      if (c->cq_ == i) per_qp = static_cast<int>(c->sq_depth + c->rq_depth);
    q->depth = mine * per_qp + 16;
    q->cq = api_->create_cq(ctx_, q->depth, q.get(), q->channel, i % (ctx_->num_comp_vectors > 0 ? ctx_->num_comp_vectors : 1));
    if (!q->cq) return SystemError(errno, "verbs: ibv_create_cq(%d entries) on %s", q->depth, dev_.name.c_str());
    if (api_->req_notify_cq(q->cq, 0) != 0) return SystemError(errno, "verbs: ibv_req_notify_cq");
    cqs_.push_back(std::move(q));
  }
  for (auto& q : cqs_) {
    CompletionQueue* raw = q.get();
    raw->thread = std::thread([this, raw] { CqLoop(raw); });
  }
  return Status::Ok();
}

void VerbsTransport::CqLoop(CompletionQueue* q) {
  log::SetRank(setup_.rank);
  constexpr int kBatch = 32;
  ibv_wc wc[kBatch];
  int idle = 0;
  while (!cq_stop_.load(std::memory_order_acquire)) {
    int n = api_->poll_cq(q->cq, kBatch, wc);
    if (n < 0) {
      Status st = Error(ZC_ERR_SYSTEM,
                        "verbs: %s: completion queue %d failed (ibv_poll_cq returned %d: overrun or "
                        "device error); its connections are closed",
                        Where().c_str(), q->index, n);
      ZC_WARN(kVerbs, "%s", st.message().c_str());
      for (auto& c : conns_)
        if (c->cq_ == q->index) ConnectionLost(c.get(), st.with_context(c->Describe()), true);
      return;
    }
    if (n > 0) {
      for (int i = 0; i < n; ++i) HandleCompletion(q, wc[i]);
      idle = 0;
      continue;
    }
    if (++idle < 200) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    if (idle < 220) {
      std::this_thread::yield();
      continue;
    }
    // Block on the completion channel: arm, re-poll (a completion may have
    // arrived before the arming), then sleep on the channel's fd.
    if (api_->req_notify_cq(q->cq, 0) != 0) {
      ZC_WARN(kVerbs, "%s: ibv_req_notify_cq: %s", Where().c_str(), strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    n = api_->poll_cq(q->cq, kBatch, wc);
    if (n != 0) {
      if (n > 0)
        for (int i = 0; i < n; ++i) HandleCompletion(q, wc[i]);
      idle = n > 0 ? 0 : idle;
      if (n > 0) continue;
    }
    pollfd pfd{q->channel->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 100);
    if (pr > 0 && (pfd.revents & POLLIN)) {
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (api_->get_cq_event(q->channel, &ev_cq, &ev_ctx) == 0) {
        if (++q->unacked_events >= 64) {
          api_->ack_cq_events(q->cq, q->unacked_events);
          q->unacked_events = 0;
        }
      }
      idle = 0;
    }
  }
}

void VerbsTransport::HandleCompletion(CompletionQueue* q, const ibv_wc& wc) {
  (void)q;
  uint32_t ci = WrConn(wc.wr_id);
  if (ci >= conns_.size() || !conns_[ci]) {
    ZC_WARN(kVerbs, "%s: completion for unknown connection %u (wr_id 0x%llx)", Where().c_str(), ci,
            static_cast<unsigned long long>(wc.wr_id));
    return;
  }
  VerbsConnection* c = conns_[ci].get();
  WrKind kind = WrKindOf(wc.wr_id);
  if (wc.status != IBV_WC_SUCCESS) {
    bool flush = wc.status == IBV_WC_WR_FLUSH_ERR;
    if (flush && (c->failed() || stopping() || c->bye.load())) {
      if (c->bye.load() && !c->failed())
        c->Fail(Error(ZC_ERR_PEER_LOST, "verbs: %s: the peer closed the connection (it shut down)",
                      c->Describe().c_str()));
      return;  // the consequence of an earlier failure or of a goodbye
    }
    bool transport = TransportError(wc.status);
    Status st(transport ? ZC_ERR_PEER_LOST : ZC_ERR_SYSTEM,
              Format("verbs: %s: %s failed: %s (status %d, vendor error 0x%x): %s", c->Describe().c_str(),
                     WrKindName(kind), api_->wc_status_str(wc.status), static_cast<int>(wc.status),
                     wc.vendor_err, Hint(wc.status)),
              ErrorOrigin::kVerbs, static_cast<int>(wc.status));
    ZC_WARN(kVerbs, "%s: %s", Where().c_str(), st.message().c_str());
    ConnectionLost(c, st, transport);
    return;
  }
  switch (kind) {
    case kWrWrite:
    case kWrFlag:
    case kWrRead:
    case kWrBye:
      c->OnSendCompletion(WrSeq(wc.wr_id));
      return;
    case kWrRecv: {
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM)) {
        ConnectionLost(c, Error(ZC_ERR_SYSTEM, "verbs: %s: unexpected receive (opcode %d)",
                                c->Describe().c_str(), static_cast<int>(wc.opcode)), true);
        return;
      }
      uint32_t slot = ntohl(wc.imm_data);
      if (slot == kImmBye) {
        c->bye.store(true, std::memory_order_release);
        ZC_TRACE(kVerbs, "%s: %s says goodbye", Where().c_str(), c->Describe().c_str());
        return;  // no repost: nothing follows a goodbye
      }
      if (slot >= c->slots) {
        ConnectionLost(c, Error(ZC_ERR_SYSTEM, "verbs: %s: flag slot %u out of range (%u slots)",
                                c->Describe().c_str(), slot, c->slots), true);
        return;
      }
      LandingEntry e = c->landing[slot];
      if (e.magic != kLandingMagic || !StoreFlag(e)) {
        ConnectionLost(c, Error(ZC_ERR_SYSTEM,
                                "verbs: %s: flag for address 0x%llx (rkey 0x%x) is not inside a "
                                "registered region of this rank",
                                c->Describe().c_str(), static_cast<unsigned long long>(e.addr), e.rkey),
                       true);
        return;
      }
      Status st = PostRecv(c, 1);
      if (!st.ok()) ConnectionLost(c, st, true);
      return;
    }
  }
  ZC_WARN(kVerbs, "%s: completion of unknown kind %d", Where().c_str(), static_cast<int>(kind));
}

Status VerbsTransport::PostRecv(VerbsConnection* c, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = MakeWrId(c->global_, kWrRecv, 0);
    wr.num_sge = 0;  // WRITE_WITH_IMM places its data by address
    ibv_recv_wr* bad = nullptr;
    int rc = api_->post_recv(c->qp, &wr, &bad);
    if (rc)
      return SystemError(rc > 0 ? rc : errno, "verbs: %s: ibv_post_recv failed", c->Describe().c_str());
  }
  return Status::Ok();
}

}  // namespace zc::verbs
