// Connection setup through rdma_cm. Every rank listens on its device's IP
// address (port chosen by rdma_cm) from the moment the transport is created;
// Listen() returns "ip:port|token", which the Device exchanges with every
// rank (PeerAddresses); Connect() gets every rank's record, then the lower
// rank of each pair opens ZC_QPS_PER_PEER connections to the higher one:
//   rdma_resolve_addr -> rdma_resolve_route -> rdma_create_qp -> rdma_connect
// and the higher rank accepts them. The private data of the request and of
// the accept (ConnInfo) carry rank, connection index, the landing ring's
// address and rkey, and the other side's token from the exchange: a stranger
// that does not know the token is rejected. After setup a CM thread watches
// for disconnects.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "p2p/verbs/verbs_internal.h"

namespace zc::verbs {

namespace {

constexpr int kResolveTimeoutMs = 5000;
constexpr uint32_t kWantSendDepth = 256;
constexpr uint32_t kWantRecvDepth = 128;
constexpr uint32_t kWantInline = 64;  // >= sizeof(LandingEntry): flags go inline

bool ParseAddr(const std::string& s, sockaddr_in* a) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  memset(a, 0, sizeof(*a));
  a->sin_family = AF_INET;
  if (inet_pton(AF_INET, s.substr(0, colon).c_str(), &a->sin_addr) != 1) return false;
  long port = strtol(s.c_str() + colon + 1, nullptr, 10);
  if (port <= 0 || port > 65535) return false;
  a->sin_port = htons(static_cast<uint16_t>(port));
  return true;
}

ConnInfo MakeInfo(int rank, const VerbsConnection& c, uint64_t landing_addr, uint32_t rkey, uint64_t token) {
  ConnInfo i{};
  i.magic = kConnMagic;
  i.rank = rank;
  i.index = static_cast<uint32_t>(c.index_);
  i.slots = c.slots;
  i.landing_addr = landing_addr;
  i.landing_rkey = rkey;
  i.version = kConnVersion;
  i.token = token;
  return i;
}

// Connection parameters of both sides (rdma_connect and rdma_accept): our
// ConnInfo as private data, RDMA_READ depth capped at 16 by the device.
rdma_conn_param ConnParams(const ibv_device_attr& attr, const ConnInfo* mine) {
  rdma_conn_param p{};
  p.private_data = mine;
  p.private_data_len = sizeof(*mine);
  p.responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom < 16 ? attr.max_qp_rd_atom : 16);
  p.initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom < 16 ? attr.max_qp_init_rd_atom : 16);
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // infinite: a receiver that is slow to repost is not dead
  return p;
}

}  // namespace

Status VerbsTransport::SetUpLanding(size_t conns) {
  size_t per = 0;
  for (auto& c : conns_) per = (c->slots + c->sq_depth) * sizeof(LandingEntry);
  landing_bytes_ = (per * conns + 4095) & ~size_t{4095};
  landing_mem_ = mmap(nullptr, landing_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (landing_mem_ == MAP_FAILED) {
    landing_mem_ = nullptr;
    return SystemError(errno, "verbs: cannot map %zu bytes for landing rings", landing_bytes_);
  }
  landing_mr_ = api_->reg_mr(pd_, landing_mem_, landing_bytes_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!landing_mr_) {
    int err = errno;
    return Status(err == ENOMEM ? ZC_ERR_NO_MEMORY : ZC_ERR_SYSTEM,
                  Format("verbs: registering %zu bytes of landing rings failed: %s%s", landing_bytes_,
                         strerror(err),
                         err == ENOMEM || err == EPERM ? "; raise ulimit -l / memlock" : ""),
                  ErrorOrigin::kErrno, err);
  }
  char* p = static_cast<char*>(landing_mem_);
  for (auto& c : conns_) {
    c->landing = reinterpret_cast<LandingEntry*>(p);
    c->stage = c->landing + c->slots;
    p += per;
  }
  return Status::Ok();
}

Status VerbsTransport::CreateQp(VerbsConnection* c, rdma_cm_id* id) {
  if (id->verbs != ctx_)
    return Error(ZC_ERR_SYSTEM,
                 "verbs: the route to peer %d uses another RDMA device than %s (multi-rail "
                 "routing is not supported; set ZC_IB_DEVICE)",
                 c->peer_, dev_.name.c_str());
  ibv_qp_init_attr a{};
  a.send_cq = cqs_[c->cq_]->cq;
  a.recv_cq = cqs_[c->cq_]->cq;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  a.cap.max_send_wr = c->sq_depth;
  a.cap.max_recv_wr = c->rq_depth;
  a.cap.max_send_sge = dev_.device_attr.max_sge >= 2 ? 2 : 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = kWantInline;
  if (api_->create_qp(id, pd_, &a) != 0) {
    // Some devices support no inline data: retry without.
    a.cap.max_inline_data = 0;
    if (api_->create_qp(id, pd_, &a) != 0)
      return SystemError(errno, "verbs: rdma_create_qp for peer %d (send %u, recv %u WRs)", c->peer_,
                         c->sq_depth, c->rq_depth);
  }
  c->id = id;
  c->qp = id->qp;
  c->qp_num = id->qp->qp_num;
  c->max_inline = a.cap.max_inline_data;
  c->max_send_sge = a.cap.max_send_sge;
  return PostRecv(c, c->rq_depth);
}

Status VerbsTransport::StartActive(VerbsConnection* c, const sockaddr_in& dst) {
  rdma_cm_id* id = nullptr;
  if (api_->create_id(cm_channel_, &id, c, RDMA_PS_TCP) != 0)
    return SystemError(errno, "verbs: rdma_create_id for peer %d", c->peer_);
  c->id = id;
  c->active = true;
  sockaddr_in src = addr_;
  src.sin_port = 0;
  sockaddr_in d = dst;
  if (api_->resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&d),
                         kResolveTimeoutMs) != 0)
    return SystemError(errno, "verbs: rdma_resolve_addr(%s) for peer %d", AddrString(dst).c_str(), c->peer_);
  return Status::Ok();
}

Status VerbsTransport::HandleSetupEvent(rdma_cm_event* ev, const std::vector<int>& peers,
                                        const std::vector<std::string>& addrs, int* done) {
  (void)peers;
  rdma_cm_event_type type = ev->event;
  rdma_cm_id* id = ev->id;
  int status = ev->status;
  ConnInfo info{};
  bool have_info = ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof(ConnInfo);
  if (have_info) memcpy(&info, ev->param.conn.private_data, sizeof(info));
  api_->ack_cm_event(ev);

  auto* c = static_cast<VerbsConnection*>(type == RDMA_CM_EVENT_CONNECT_REQUEST ? nullptr : id->context);
  auto peer_addr = [&](VerbsConnection* x) { return x ? addrs[x->peer_] : std::string("?"); };
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (api_->resolve_route(id, kResolveTimeoutMs) != 0)
        return SystemError(errno, "verbs: rdma_resolve_route to peer %d (%s)", c->peer_, peer_addr(c).c_str());
      return Status::Ok();
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      ZC_RETURN_IF_ERROR(CreateQp(c, id));
      ConnInfo mine = MakeInfo(setup_.rank, *c,
                               reinterpret_cast<uintptr_t>(c->landing), landing_mr_->rkey,
                               peer_tokens_[c->peer_]);
      rdma_conn_param p = ConnParams(dev_.device_attr, &mine);
      if (api_->connect(id, &p) != 0)
        return SystemError(errno, "verbs: rdma_connect to peer %d (%s)", c->peer_, peer_addr(c).c_str());
      return Status::Ok();
    }
    case RDMA_CM_EVENT_CONNECT_REQUEST: {
      std::string why;
      VerbsConnection* target = nullptr;
      if (!have_info || info.magic != kConnMagic || info.version != kConnVersion) why = "not a zcomm request";
      else if (info.token != token_) why = "wrong job token";
      else if (info.rank < 0 || info.rank >= static_cast<int>(peer_pos_.size()) || peer_pos_[info.rank] < 0 ||
               info.rank >= setup_.rank)
        why = Format("unexpected rank %d", info.rank);
      else if (info.index >= static_cast<uint32_t>(qps_per_peer_)) why = Format("bad connection index %u", info.index);
      else {
        target = conns_[static_cast<size_t>(peer_pos_[info.rank]) * qps_per_peer_ + info.index].get();
        if (target->id) why = Format("duplicate connection %u from rank %d", info.index, info.rank);
      }
      if (!why.empty()) {
        ZC_WARN(kVerbs, "%s: refused a connection request: %s", Where().c_str(), why.c_str());
        api_->reject(id, nullptr, 0);
        api_->destroy_id(id);
        return Status::Ok();
      }
      id->context = target;
      target->peer_landing = info.landing_addr;
      target->peer_rkey = info.landing_rkey;
      target->peer_slots = info.slots;
      Status st = CreateQp(target, id);
      if (!st.ok()) {
        api_->reject(id, nullptr, 0);
        if (!target->id) stray_ids_.push_back(id);
        return st;
      }
      ConnInfo mine = MakeInfo(setup_.rank, *target, reinterpret_cast<uintptr_t>(target->landing),
                               landing_mr_->rkey, peer_tokens_[target->peer_]);
      rdma_conn_param p = ConnParams(dev_.device_attr, &mine);
      if (api_->accept(id, &p) != 0)
        return SystemError(errno, "verbs: rdma_accept from peer %d", target->peer_);
      return Status::Ok();
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      if (!c) return Status::Ok();
      if (c->active) {
        if (!have_info || info.magic != kConnMagic || info.token != token_ || info.rank != c->peer_ ||
            info.index != static_cast<uint32_t>(c->index_))
          return Error(ZC_ERR_SYSTEM, "verbs: peer %d (%s) accepted connection %d with invalid private data",
                       c->peer_, peer_addr(c).c_str(), c->index_);
        c->peer_landing = info.landing_addr;
        c->peer_rkey = info.landing_rkey;
        c->peer_slots = info.slots;
      }
      if (!c->established) {
        c->established = true;
        ++*done;
        ZC_TRACE(kVerbs, "%s: connected to %s", Where().c_str(), c->Describe().c_str());
      }
      return Status::Ok();
    case RDMA_CM_EVENT_REJECTED:
      return Error(ZC_ERR_PEER_LOST, "verbs: peer %d (%s) rejected connection %d (status %d)",
                   c ? c->peer_ : -1, peer_addr(c).c_str(), c ? c->index_ : -1, status);
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return Error(ZC_ERR_PEER_LOST, "verbs: cannot reach peer %d at %s: %s (status %d: %s)",
                   c ? c->peer_ : -1, peer_addr(c).c_str(), api_->event_str(type), status,
                   strerror(status < 0 ? -status : status));
    case RDMA_CM_EVENT_DISCONNECTED:
      return Error(ZC_ERR_PEER_LOST, "verbs: peer %d disconnected during connection setup", c ? c->peer_ : -1);
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return Error(ZC_ERR_SYSTEM, "verbs: %s was removed", dev_.name.c_str());
    default:
      return Status::Ok();
  }
}

Status VerbsTransport::Listen(const LinkPlan& plan, std::string* address) {
  // Listening since Init: the address and the token are all peers need.
  peers_ = plan.peers;
  *address = Format("%s|%016llx", AddrString(addr_).c_str(), static_cast<unsigned long long>(token_));
  return Status::Ok();
}

Status VerbsTransport::Connect(const std::vector<std::string>& all) {
  const int me = setup_.rank, n = setup_.size;
  const std::vector<int>& peers = peers_;
  if (static_cast<int>(all.size()) != n)
    return Error(ZC_ERR_INTERNAL, "verbs: address exchange returned %zu records for %d ranks", all.size(), n);
  std::vector<std::string> addrs(n);
  std::vector<sockaddr_in> sa(n);
  peer_tokens_.assign(n, 0);
  peer_pos_.assign(n, -1);
  for (size_t i = 0; i < peers.size(); ++i) {
    int p = peers[i];
    if (p < 0 || p >= n || p == me) return Error(ZC_ERR_INVALID_ARG, "verbs: bad peer %d", p);
    peer_pos_[p] = static_cast<int>(i);
    size_t bar = all[p].find('|');
    if (bar == std::string::npos || !ParseAddr(all[p].substr(0, bar), &sa[p]))
      return Error(ZC_ERR_INTERNAL, "verbs: malformed address record from rank %d: '%s'", p, all[p].c_str());
    addrs[p] = all[p].substr(0, bar);
    peer_tokens_[p] = strtoull(all[p].c_str() + bar + 1, nullptr, 16);
  }
  const int nconn = static_cast<int>(peers.size()) * qps_per_peer_;
  if (nconn == 0) return Status::Ok();

  // Queue depths within the device's limits; CQs sized so they cannot overrun.
  uint32_t max_wr = dev_.device_attr.max_qp_wr > 0 ? static_cast<uint32_t>(dev_.device_attr.max_qp_wr) : 256;
  uint32_t sq = kWantSendDepth < max_wr ? kWantSendDepth : max_wr;
  uint32_t rq = kWantRecvDepth < max_wr ? kWantRecvDepth : max_wr;
  int ncq = num_cqs_ < nconn ? num_cqs_ : nconn;
  int per_cq = (nconn + ncq - 1) / ncq;
  long max_cqe = dev_.device_attr.max_cqe > 0 ? dev_.device_attr.max_cqe : 4096;
  while (static_cast<long>(per_cq) * (sq + rq) + 16 > max_cqe && sq > 8) {
    sq /= 2;
    rq = rq / 2 > 4 ? rq / 2 : 4;
  }
  conns_.clear();
  for (int i = 0; i < nconn; ++i) {
    int p = peers[i / qps_per_peer_];
    auto c = std::make_unique<VerbsConnection>(this, p, i % qps_per_peer_, static_cast<uint32_t>(i), i % ncq);
    c->sq_depth = sq;
    c->rq_depth = rq;
    c->slots = 2 * rq;  // 2x the receives: a slot is rewritten only after it was consumed
    c->signal_every = sq / 4 > 0 ? sq / 4 : 1;
    conns_.push_back(std::move(c));
  }
  ZC_RETURN_IF_ERROR(CreateCqs(nconn));
  ZC_RETURN_IF_ERROR(SetUpLanding(conns_.size()));

  for (auto& c : conns_)
    if (c->peer_ > me) ZC_RETURN_IF_ERROR(StartActive(c.get(), sa[c->peer_]));

  Deadline dl(setup_.config.timeout_s);
  int done = 0;
  while (done < nconn) {
    pollfd pfd{cm_channel_->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 100);
    if (pr < 0 && errno != EINTR) return SystemError(errno, "verbs: poll on the rdma_cm channel");
    if (pr > 0) {
      rdma_cm_event* ev = nullptr;
      if (api_->get_cm_event(cm_channel_, &ev) == 0) {
        ZC_RETURN_IF_ERROR(HandleSetupEvent(ev, peers, addrs, &done)
                               .with_context(Format("rank %d", me)));
        continue;
      }
    }
    for (int p : peers) {
      Status h = host_->Health(p);
      if (!h.ok()) return h;
    }
    if (dl.expired()) {
      std::string missing;
      for (auto& c : conns_)
        if (!c->established) missing += Format("%s%d/%d", missing.empty() ? "" : ", ", c->peer_, c->index_);
      return Error(ZC_ERR_TIMEOUT, "verbs: rank %d: connections not established before the deadline "
                   "(peer/connection: %s)", me, missing.c_str());
    }
  }
  cm_thread_ = std::thread([this] { CmLoop(); });
  ZC_INFO(kVerbs, "%s: %d connections to %zu peers over %zu CQ threads (send %u, recv %u WRs, inline %u)",
          Where().c_str(), nconn, peers.size(), cqs_.size(), sq, rq, conns_[0]->max_inline);
  return Status::Ok();
}

void VerbsTransport::CmLoop() {
  log::SetRank(setup_.rank);
  while (!cm_stop_.load(std::memory_order_acquire)) {
    pollfd pfd{cm_channel_->fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (api_->get_cm_event(cm_channel_, &ev) != 0) continue;
    rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    api_->ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      ZC_WARN(kVerbs, "%s: refused a connection request after setup", Where().c_str());
      api_->reject(id, nullptr, 0);
      api_->destroy_id(id);
      continue;
    }
    if (stopping()) continue;
    auto* c = static_cast<VerbsConnection*>(id ? id->context : nullptr);
    if (type == RDMA_CM_EVENT_DISCONNECTED && c) {
      // A peer that shuts down says goodbye first, but the goodbye's receive
      // completion is handled by a CQ thread: give it a moment to get there.
      for (int i = 0; i < 500 && !c->bye.load() && !c->failed() && !stopping(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (stopping()) continue;
      if (c->bye.load()) {
        c->Fail(Error(ZC_ERR_PEER_LOST, "verbs: %s: the peer closed the connection (it shut down)",
                      c->Describe().c_str()));
      } else {
        ConnectionLost(c, Error(ZC_ERR_PEER_LOST, "verbs: %s: disconnected by the peer or the fabric",
                                c->Describe().c_str()), true);
      }
    } else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      for (auto& x : conns_)
        ConnectionLost(x.get(), Error(ZC_ERR_SYSTEM, "verbs: %s was removed", dev_.name.c_str()), true);
    }
  }
}

}  // namespace zc::verbs
