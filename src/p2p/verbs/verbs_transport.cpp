#include "p2p/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "p2p/verbs/verbs_internal.h"
#include "common/wakeup.h"

namespace zc {
namespace verbs {

namespace {
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

Status RegistrationError(int err, const char* what, size_t bytes, const void* p,
                         const std::string& dev) {
  const char* hint = "";
  if (err == ENOMEM || err == EPERM || err == EAGAIN)
    hint = "; raise the locked-memory limit (ulimit -l unlimited / memlock in "
           "/etc/security/limits.conf, LimitMEMLOCK= for services, --ulimit memlock=-1 "
           "for containers)";
  return Status(err == ENOMEM ? ZC_ERR_NO_MEMORY : ZC_ERR_SYSTEM,
                Format("verbs: %s of %zu bytes at %p on %s failed: %s%s", what, bytes, p,
                       dev.c_str(), strerror(err), hint),
                ErrorOrigin::kErrno, err);
}
}  // namespace

const char* WrKindName(WrKind k) {
  switch (k) {
    case kWrWrite: return "RDMA_WRITE";
    case kWrFlag: return "RDMA_WRITE (flag)";
    case kWrRead: return "RDMA_READ";
    case kWrRecv: return "RECV";
    case kWrBye: return "RDMA_WRITE_WITH_IMM (goodbye)";
  }
  return "work request";
}

std::string VerbsTransport::Where() const {
  return Format("rank %d verbs %s:%d", setup_.rank, dev_.name.c_str(), dev_.port);
}

Status VerbsTransport::Init() {
  const Config& cfg = setup_.config;
  qps_per_peer_ = cfg.qps_per_peer < 1 ? 1 : cfg.qps_per_peer;
  num_cqs_ = cfg.num_cqs < 1 ? 1 : cfg.num_cqs;
  if (cfg.verbs_flag_mode == "ordered") ordered_flags_ = true;
  else if (cfg.verbs_flag_mode != "imm" && !cfg.verbs_flag_mode.empty())
    return Error(ZC_ERR_INVALID_ARG, "ZC_VERBS_FLAG=%s: expected imm or ordered",
                 cfg.verbs_flag_mode.c_str());
  ZC_RETURN_IF_ERROR(ChooseDevice(api_, cfg, &dev_));
  ZC_RETURN_IF_ERROR(FindDeviceAddress(api_, dev_.name, &addr_));
  if (dev_.port_attr.max_msg_sz > 0 && dev_.port_attr.max_msg_sz < max_msg_)
    max_msg_ = dev_.port_attr.max_msg_sz;

  cm_channel_ = api_->create_event_channel();
  if (!cm_channel_) return SystemError(errno, "verbs: rdma_create_event_channel");
  if (api_->create_id(cm_channel_, &listen_id_, nullptr, RDMA_PS_TCP) != 0)
    return SystemError(errno, "verbs: rdma_create_id");
  sockaddr_in a = addr_;
  a.sin_port = 0;
  if (api_->bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&a)) != 0)
    return SystemError(errno, "verbs: rdma_bind_addr(%s)", AddrString(a).c_str());
  if (api_->listen(listen_id_, 128) != 0) return SystemError(errno, "verbs: rdma_listen");
  addr_.sin_port = api_->get_src_port(listen_id_);
  ctx_ = listen_id_->verbs;
  if (!ctx_) return Error(ZC_ERR_SYSTEM, "verbs: %s is not bound to an RDMA device", AddrString(addr_).c_str());
  pd_ = api_->alloc_pd(ctx_);
  if (!pd_) return SystemError(errno, "verbs: ibv_alloc_pd on %s", dev_.name.c_str());
  std::random_device rd;
  token_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  ZC_INFO(kVerbs, "%s: listening on %s (%s, max_qp_wr %d, max_cqe %d, max_msg %llu)",
          Where().c_str(), AddrString(addr_).c_str(), api_->name, dev_.device_attr.max_qp_wr,
          dev_.device_attr.max_cqe, static_cast<unsigned long long>(max_msg_));
  return Status::Ok();
}

VerbsTransport::~VerbsTransport() {
  Shutdown();
  {
    std::lock_guard<std::mutex> lock(mr_mu_);
    for (auto& [key, mr] : mr_by_rkey_) {
      int rc = api_->dereg_mr(mr);
      if (rc) ZC_WARN(kVerbs, "%s: ibv_dereg_mr: %s", Where().c_str(), strerror(rc > 0 ? rc : errno));
    }
    mr_by_rkey_.clear();
  }
  if (landing_mr_) api_->dereg_mr(landing_mr_);
  landing_mr_ = nullptr;
  if (landing_mem_) munmap(landing_mem_, landing_bytes_);
  landing_mem_ = nullptr;
  if (pd_) {
    int rc = api_->dealloc_pd(pd_);
    if (rc) ZC_WARN(kVerbs, "%s: ibv_dealloc_pd: %s", Where().c_str(), strerror(rc > 0 ? rc : errno));
  }
  pd_ = nullptr;
  if (listen_id_) api_->destroy_id(listen_id_);
  listen_id_ = nullptr;
  if (cm_channel_) api_->destroy_event_channel(cm_channel_);
  cm_channel_ = nullptr;
}

Status VerbsTransport::Expose(MemRegion* region) {
  RemoteRegion& r = region->mutable_remote();
  if (region->parent) {
    // A slice of a pool chunk: the chunk's registration covers it.
    void* chunk_mr = region->parent->backend(TransportKind::kVerbs);
    if (!chunk_mr)
      return Error(ZC_ERR_INTERNAL, "verbs: slice %p of an unregistered chunk", region->data());
    region->set_backend(TransportKind::kVerbs, chunk_mr);
    r.access_key = region->parent->remote().access_key;
    r.addr = reinterpret_cast<uintptr_t>(region->data());
    r.owner = setup_.rank;
    return Status::Ok();
  }
  if (!pd_) return Error(ZC_ERR_INTERNAL, "verbs: Expose before the transport is set up");
  ibv_mr* mr = api_->reg_mr(pd_, region->data(), region->size(), kAccess);
  if (!mr) return RegistrationError(errno, "ibv_reg_mr", region->size(), region->data(), dev_.name);
  {
    std::lock_guard<std::mutex> lock(mr_mu_);
    mr_by_rkey_[mr->rkey] = mr;
  }
  region->set_backend(TransportKind::kVerbs, mr);
  r.access_key = mr->rkey;
  r.addr = reinterpret_cast<uintptr_t>(region->data());
  r.owner = setup_.rank;
  ZC_TRACE(kVerbs, "%s: registered %zu bytes at %p (lkey 0x%x rkey 0x%x)", Where().c_str(),
           region->size(), region->data(), mr->lkey, mr->rkey);
  return Status::Ok();
}

void VerbsTransport::Unexpose(MemRegion* region) {
  ibv_mr* mr = RegionMr(*region);
  region->set_backend(TransportKind::kVerbs, nullptr);
  if (!mr || region->parent) return;
  {
    std::lock_guard<std::mutex> lock(mr_mu_);
    auto it = mr_by_rkey_.find(mr->rkey);
    if (it == mr_by_rkey_.end() || it->second != mr) return;  // already gone (shutdown)
    mr_by_rkey_.erase(it);
  }
  int rc = api_->dereg_mr(mr);
  if (rc) ZC_WARN(kVerbs, "%s: ibv_dereg_mr(%p): %s", Where().c_str(), region->data(),
                  strerror(rc > 0 ? rc : errno));
}

Status VerbsTransport::RegisterDeviceMemory(void* dev_ptr, size_t bytes, int dmabuf_fd,
                                            MemRegion* region) {
  if (!dev_ptr || bytes == 0) return Error(ZC_ERR_INVALID_ARG, "verbs: empty device-memory range");
  if (!pd_) return Error(ZC_ERR_INTERNAL, "verbs: transport is not set up");
  ibv_mr* mr = nullptr;
  if (dmabuf_fd >= 0) {
    if (!api_->reg_dmabuf_mr)
      return Error(ZC_ERR_UNSUPPORTED, "verbs: this libibverbs has no ibv_reg_dmabuf_mr");
    mr = api_->reg_dmabuf_mr(pd_, 0, bytes, reinterpret_cast<uintptr_t>(dev_ptr), dmabuf_fd, kAccess);
    if (!mr) {
      int err = errno;
      Status st = RegistrationError(err, "ibv_reg_dmabuf_mr (GPUDirect)", bytes, dev_ptr, dev_.name);
      if (err == EOPNOTSUPP || err == EINVAL || err == ENOSYS)
        st = Status(ZC_ERR_UNSUPPORTED, st.message() + " (the NIC driver or kernel lacks dma-buf support)");
      return st;
    }
  } else {
    mr = api_->reg_mr(pd_, dev_ptr, bytes, kAccess);
    if (!mr) {
      int err = errno;
      Status st = RegistrationError(err, "ibv_reg_mr of GPU memory (GPUDirect)", bytes, dev_ptr, dev_.name);
      if (err == EFAULT || err == EINVAL)
        st = Status(ZC_ERR_UNSUPPORTED,
                    st.message() + " (load nvidia-peermem, or pass a dma-buf file descriptor)");
      return st;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mr_mu_);
    mr_by_rkey_[mr->rkey] = mr;
  }
  region->set_backend(TransportKind::kVerbs, mr);
  region->mutable_remote().access_key = mr->rkey;
  region->mutable_remote().addr = reinterpret_cast<uintptr_t>(dev_ptr);
  region->mutable_remote().owner = setup_.rank;
  return Status::Ok();
}

bool VerbsTransport::StoreFlag(const LandingEntry& e) {
  if (e.addr % 8 != 0) return false;
  std::lock_guard<std::mutex> lock(mr_mu_);
  auto it = mr_by_rkey_.find(e.rkey);
  if (it == mr_by_rkey_.end()) return false;
  ibv_mr* mr = it->second;
  uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
  if (e.addr < base || e.addr - base > mr->length || mr->length - (e.addr - base) < 8) return false;
  // The MR stays registered while we hold mr_mu_, so the memory is mapped.
  reinterpret_cast<std::atomic<uint64_t>*>(e.addr)->store(e.value, std::memory_order_release);
  Wakeup::Notify();
  return true;
}

Connection* VerbsTransport::connection(int peer, int index) {
  if (peer < 0 || peer >= static_cast<int>(peer_pos_.size()) || peer_pos_[peer] < 0) return nullptr;
  int i = index % qps_per_peer_;
  if (i < 0) i += qps_per_peer_;
  return conns_[static_cast<size_t>(peer_pos_[peer]) * qps_per_peer_ + i].get();
}

void VerbsTransport::ConnectionLost(VerbsConnection* c, const Status& st, bool fatal) {
  // The host first, so that a waiter woken by Fail() already sees the loss.
  if (fatal && !stopping() && !c->bye.load(std::memory_order_acquire) && !c->failed())
    host_->OnPeerLost(c->peer_, st);
  c->Fail(st);
}

void VerbsTransport::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  // Tell peers we go (so they do not report us lost), then disconnect.
  for (auto& c : conns_)
    if (c && c->established && !c->failed()) c->SayBye();
  stopping_.store(true, std::memory_order_release);
  for (auto& c : conns_)
    if (c && c->id && c->established) api_->disconnect(c->id);
  cm_stop_.store(true);
  if (cm_thread_.joinable()) cm_thread_.join();
  cq_stop_.store(true);
  for (auto& q : cqs_)
    if (q->thread.joinable()) q->thread.join();
  for (auto& c : conns_) {
    if (!c) continue;
    c->Fail(Error(ZC_ERR_ABORTED, "verbs: transport shut down"));
    if (c->id) {
      if (c->id->qp) api_->destroy_qp(c->id);
      api_->destroy_id(c->id);
      c->id = nullptr;
      c->qp = nullptr;
    }
  }
  for (rdma_cm_id* id : stray_ids_) {
    if (id->qp) api_->destroy_qp(id);
    api_->destroy_id(id);
  }
  stray_ids_.clear();
  for (auto& q : cqs_) {
    if (q->cq) {
      if (q->unacked_events) api_->ack_cq_events(q->cq, q->unacked_events);
      q->unacked_events = 0;
      int rc = api_->destroy_cq(q->cq);
      if (rc) ZC_WARN(kVerbs, "%s: ibv_destroy_cq: %s", Where().c_str(), strerror(rc > 0 ? rc : errno));
    }
    if (q->channel) api_->destroy_comp_channel(q->channel);
    q->cq = nullptr;
    q->channel = nullptr;
  }
}

}  // namespace verbs

Status CreateVerbsTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  return CreateVerbsTransportWith(host, setup, RealVerbsApi(), out);
}

Status CreateVerbsTransportWith(TransportHost* host, const TransportSetup& setup, const VerbsApi* api,
                                std::unique_ptr<Transport>* out) {
  if (!api) api = RealVerbsApi();
  auto t = std::make_unique<verbs::VerbsTransport>(host, setup, api);
  ZC_RETURN_IF_ERROR(t->Init());
  *out = std::move(t);
  return Status::Ok();
}

Status VerbsRegisterDeviceMemory(Transport* transport, void* dev_ptr, size_t bytes, int dmabuf_fd,
                                 MemRegion* region) {
  auto* t = dynamic_cast<verbs::VerbsTransport*>(transport);
  if (!t) return Error(ZC_ERR_INVALID_ARG, "GPUDirect registration needs the verbs transport");
  return t->RegisterDeviceMemory(dev_ptr, bytes, dmabuf_fd, region);
}

uint32_t VerbsLocalKey(const MemRegion& region) {
  const ibv_mr* mr = verbs::RegionMr(region);
  return mr ? mr->lkey : 0;
}

uint32_t VerbsQpNumber(Connection* conn) {
  auto* c = dynamic_cast<verbs::VerbsConnection*>(conn);
  return c && c->qp ? c->qp_num : 0;
}

}  // namespace zc
