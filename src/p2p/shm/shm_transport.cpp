#include "p2p/shm/shm_transport.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "common/config.h"
#include "common/log.h"
#include "p2p/segment.h"

namespace zc {
namespace {

class ShmTransport;

class ShmConnection : public Connection {
 public:
  ShmConnection(ShmTransport* t, int peer) : t_(t), peer_(peer) {}
  int peer() const override { return peer_; }
  Status Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
               const FlagWrite* flag, const Deadline& deadline) override;
  Status Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
              const Deadline& deadline) override;
  char* DirectAddress(const RemoteRegion& dst) override;

 private:
  ShmTransport* t_;
  int peer_;
};

class ShmTransport : public Transport {
 public:
  ShmTransport(TransportHost* host, const TransportSetup& setup) : host_(host), setup_(setup) {
    cma_disabled_ = (setup_.config.shm_cma == "off");
  }
  TransportKind kind() const override { return TransportKind::kShm; }
  Status Expose(MemRegion* region) override {
    region->mutable_remote().owner = setup_.rank;
    region->mutable_remote().owner_pid = static_cast<int32_t>(getpid());
    return Status::Ok();
  }
  void Unexpose(MemRegion*) override {}
  // Nothing to exchange: peers' segments are mapped by name on first use.
  Status Listen(const LinkPlan& plan, std::string* address) override {
    peers_ = plan.peers;
    address->clear();
    return Status::Ok();
  }
  Status Connect(const std::vector<std::string>&) override {
    conns_.resize(setup_.size);
    for (int p : peers_) conns_[p] = std::make_unique<ShmConnection>(this, p);
    return Status::Ok();
  }
  int connections_per_peer() const override { return 1; }
  Connection* connection(int peer, int) override {
    return peer >= 0 && peer < static_cast<int>(conns_.size()) ? conns_[peer].get() : nullptr;
  }
  void Shutdown() override {}

  // Address of [off, ...) of a peer's segment region, mapping it on first use.
  Status Map(const RemoteRegion& r, uint64_t off, char** out) {
    std::string name(r.seg_name);
    {
      std::shared_lock<std::shared_mutex> lock(maps_mu_);
      auto it = maps_.find(name);
      if (it != maps_.end()) return Locate(*it->second, r, off, out);
    }
    std::unique_lock<std::shared_mutex> lock(maps_mu_);
    auto it = maps_.find(name);
    if (it == maps_.end()) {
      std::unique_ptr<Segment> seg;
      Status st = Segment::Open(name, &seg);
      if (!st.ok()) {
        // The owner unlinks its segments when it exits: a missing segment
        // usually means the peer is gone.
        Status health = host_->Health(r.owner);
        return health.ok() ? st.with_context(Format("peer %d", r.owner)) : health;
      }
      it = maps_.emplace(name, std::move(seg)).first;
    }
    return Locate(*it->second, r, off, out);
  }

  Status Cma(bool write, void* local, size_t bytes, const RemoteRegion& r, uint64_t off) {
    if (cma_disabled_ || cma_refused_.load(std::memory_order_relaxed))
      return Error(ZC_ERR_UNSUPPORTED, "cross-memory attach to peer %d is %s", r.owner,
                   cma_disabled_ ? "off (ZC_SHM_CMA=off)" : "refused by the kernel");
    size_t done = 0;
    while (done < bytes) {
      struct iovec l{static_cast<char*>(local) + done, bytes - done};
      struct iovec rem{reinterpret_cast<void*>(r.addr + off + done), bytes - done};
      ssize_t n = write ? process_vm_writev(r.owner_pid, &l, 1, &rem, 1, 0)
                        : process_vm_readv(r.owner_pid, &l, 1, &rem, 1, 0);
      if (n < 0) {
        int err = errno;
        if (err == EINTR) continue;
        if (err == EPERM || err == ENOSYS || err == EACCES) {
          if (!cma_refused_.exchange(true))
            ZC_INFO(kShm, "cross-memory attach refused (%s): user buffers go through staged copies",
                    strerror(err));
          if (setup_.config.shm_cma == "on")
            return SystemError(err, "cross-memory attach to peer %d (ZC_SHM_CMA=on)", r.owner);
          return Error(ZC_ERR_UNSUPPORTED, "cross-memory attach to peer %d refused: %s", r.owner,
                       strerror(err));
        }
        if (err == ESRCH) return Error(ZC_ERR_PEER_LOST, "peer %d (pid %d) is gone", r.owner, r.owner_pid);
        return SystemError(err, "%s of %zu bytes with peer %d", write ? "process_vm_writev" : "process_vm_readv",
                           bytes, r.owner);
      }
      if (n == 0) return Error(ZC_ERR_SYSTEM, "cross-memory attach with peer %d made no progress", r.owner);
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  TransportHost* host() { return host_; }

 private:
  static Status Locate(const Segment& seg, const RemoteRegion& r, uint64_t off, char** out) {
    if (r.seg_offset > seg.size() || off > seg.size() - r.seg_offset)
      return Error(ZC_ERR_INTERNAL, "shm: offset beyond segment %s", seg.name().c_str());
    *out = static_cast<char*>(seg.data()) + r.seg_offset + off;
    return Status::Ok();
  }

  TransportHost* host_;
  const TransportSetup setup_;
  std::vector<int> peers_;
  std::vector<std::unique_ptr<ShmConnection>> conns_;
  std::shared_mutex maps_mu_;
  std::map<std::string, std::unique_ptr<Segment>> maps_;
  bool cma_disabled_ = false;
  std::atomic<bool> cma_refused_{false};
};

Status ShmConnection::Write(const void* src, size_t bytes, const RemoteRegion& dst,
                            uint64_t dst_off, const FlagWrite* flag, const Deadline&) {
  if (bytes) {
    if (dst.seg_name[0]) {
      char* p;
      ZC_RETURN_IF_ERROR(t_->Map(dst, dst_off, &p));
      memcpy(p, src, bytes);
    } else {
      ZC_RETURN_IF_ERROR(t_->Cma(true, const_cast<void*>(src), bytes, dst, dst_off));
    }
  }
  if (flag) {
    if (!flag->region->seg_name[0])
      return Error(ZC_ERR_INTERNAL, "shm: flag of peer %d is not in shared memory", peer_);
    char* p;
    ZC_RETURN_IF_ERROR(t_->Map(*flag->region, flag->offset, &p));
    // Release: the payload stores above become visible before the flag.
    reinterpret_cast<std::atomic<uint64_t>*>(p)->store(flag->value, std::memory_order_release);
  }
  return Status::Ok();
}

Status ShmConnection::Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
                           const Deadline&) {
  if (src.seg_name[0]) {
    char* p;
    ZC_RETURN_IF_ERROR(t_->Map(src, src_off, &p));
    std::atomic_thread_fence(std::memory_order_acquire);
    memcpy(dst, p, bytes);
    return Status::Ok();
  }
  return t_->Cma(false, dst, bytes, src, src_off);
}

char* ShmConnection::DirectAddress(const RemoteRegion& dst) {
  // Segment memory only: user memory (CMA) has no address in this process.
  if (!dst.seg_name[0] || dst.size == 0) return nullptr;
  char* p = nullptr;
  if (!t_->Map(dst, 0, &p).ok()) return nullptr;
  char* last = nullptr;
  if (!t_->Map(dst, dst.size - 1, &last).ok()) return nullptr;  // whole region inside
  return p;
}

}  // namespace

Status CreateShmTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<ShmTransport>(host, setup);
  return Status::Ok();
}

}  // namespace zc
