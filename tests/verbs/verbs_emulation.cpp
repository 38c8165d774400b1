#include "verbs_emulation.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace zc::emu {
namespace {

struct ECtx;
struct EDev {
  ibv_device dev{};
  DeviceSpec spec;
  ECtx* cm_ctx = nullptr;  // librdmacm's context for this device
};
struct ECtx {
  ibv_context ctx{};
  EDev* dev = nullptr;
  int pds = 0, cqs = 0, channels = 0;
  bool cm = false;
};
struct EPd {
  ibv_pd pd{};
  ECtx* ctx = nullptr;
  int mrs = 0, qps = 0;
};
struct EMr {
  ibv_mr mr{};
  EPd* pd = nullptr;
  int access = 0;
};
struct ECq;
struct ECompCh {
  ibv_comp_channel ch{};
  int rfd = -1, wfd = -1;
  int cqs = 0;
  std::deque<ECq*> ready;
};
struct ECq {
  ibv_cq cq{};
  ECtx* ctx = nullptr;
  int depth = 0;
  std::deque<ibv_wc> q;
  bool armed = false, overrun = false;
  ECompCh* ch = nullptr;
  int qps = 0;
  int unacked = 0;
};
struct SendWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  uint32_t imm = 0;
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  std::vector<ibv_sge> sges;
  bool is_inline = false;
  std::vector<char> data;  // inline payload
  uint64_t len = 0;
};
struct ECmId;
struct EQp {
  ibv_qp qp{};
  EPd* pd = nullptr;
  ECq *scq = nullptr, *rcq = nullptr;
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_cap cap{};
  bool sig_all = false;
  EQp* remote = nullptr;
  std::deque<SendWr> sq;       // posted, not yet executed
  uint64_t occupied = 0;       // send-queue slots in use (posted, not retired)
  uint64_t done_unsignaled = 0;  // executed unsignaled WRs still holding slots
  std::deque<uint64_t> rq;     // posted receives (wr_id)
  bool rnr_blocked = false;
};
struct EEvCh;
struct ECmEvent {
  rdma_cm_event ev{};
  char priv[256] = {};
};
struct EEvCh {
  rdma_event_channel ch{};
  int rfd = -1, wfd = -1;
  std::deque<ECmEvent*> q;
  int ids = 0;
};
enum IdState { kIdle, kBound, kListening, kAddrResolved, kRouteResolved, kConnecting, kConnected, kDisconnected };
struct ECmId {
  rdma_cm_id id{};
  EEvCh* ch = nullptr;
  EDev* dev = nullptr;
  uint32_t ip = 0;
  uint16_t port = 0;
  IdState state = kIdle;
  sockaddr_in dst{};
  ECmId* peer = nullptr;
  ECmId* listener = nullptr;
  int unacked = 0;
  bool disconnect_sent = false;
};

struct Fabric {
  std::mutex mu;
  std::condition_variable nic_cv;
  uint64_t gen = 0;
  bool stop = false;
  std::thread nic;
  std::vector<EDev*> devs;
  std::vector<EDev*> retired;  // devices of earlier tests: kept (contexts may point at them)
  std::set<ECtx*> ctxs;
  std::set<EPd*> pds;
  std::map<uint32_t, EMr*> mrs;  // key -> mr (lkey == rkey)
  std::set<ECq*> cqs;
  std::set<ECompCh*> comp_chs;
  std::set<EQp*> qps;
  std::set<ECmId*> ids;
  std::set<EEvCh*> ev_chs;
  std::map<std::pair<uint32_t, uint16_t>, ECmId*> ports;
  uint16_t next_port = 20000;
  uint32_t next_key = 0x1000, next_qpn = 0x100;
  size_t locked_bytes = 0;
  bool fault_armed = false;
  Fault fault = Fault::kRetryExceeded;
  ECq* overrun_cq = nullptr;  // armed: the next completion pushed to it overruns it
  uint32_t last_fault_qp = 0;
  Stats stats;
};

Fabric& F() {
  static Fabric* f = new Fabric();  // never destroyed: the NIC thread may outlive statics
  return *f;
}

void Violation(const std::string& what) { F().stats.violations.push_back(what); }
void Kick() {
  ++F().gen;
  F().nic_cv.notify_all();
}
int Fail(int err) {
  errno = err;
  return -1;
}

void PushCmEvent(ECmId* to, rdma_cm_event_type type, int status, const void* priv, size_t len,
                 ECmId* listener = nullptr) {
  auto* e = new ECmEvent();
  e->ev.id = &to->id;
  e->ev.listen_id = listener ? &listener->id : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  if (priv && len) {
    memcpy(e->priv, priv, len);
    e->ev.param.conn.private_data = e->priv;
    e->ev.param.conn.private_data_len = static_cast<uint8_t>(len);
  }
  EEvCh* ch = listener ? listener->ch : to->ch;
  ch->q.push_back(e);
  char b = 'e';
  if (write(ch->wfd, &b, 1) != 1) Violation("event pipe full");
}

// Adds a completion to a CQ, signalling its channel when armed.
void PushCqe(ECq* cq, const ibv_wc& wc) {
  Fabric& f = F();
  if (cq->overrun) return;
  if (f.overrun_cq == cq) {
    f.overrun_cq = nullptr;
    f.last_fault_qp = wc.qp_num;
    cq->overrun = true;
  } else if (static_cast<int>(cq->q.size()) >= cq->depth) {
    cq->overrun = true;
  }
  if (cq->overrun) {
    ++f.stats.cq_overruns;
    // The CQ is in error: every QP using it goes to ERR (affiliated async error).
    for (EQp* qp : f.qps)
      if (qp->scq == cq || qp->rcq == cq) qp->state = IBV_QPS_ERR;
  } else {
    cq->q.push_back(wc);
  }
  if (cq->armed && cq->ch) {
    cq->armed = false;
    cq->ch->ready.push_back(cq);
    char b = 'c';
    if (write(cq->ch->wfd, &b, 1) != 1) Violation("completion channel pipe full");
  }
}

ibv_wc MakeWc(EQp* qp, uint64_t wr_id, ibv_wc_status st, ibv_wc_opcode op, uint32_t len) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = qp->qp.qp_num;
  wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x81;
  return wc;
}

// Moves a QP to ERR and flushes everything outstanding (errors always complete).
void QpToErr(EQp* qp) {
  qp->state = IBV_QPS_ERR;
  qp->rnr_blocked = false;
  while (!qp->sq.empty()) {
    PushCqe(qp->scq, MakeWc(qp, qp->sq.front().wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, 0));
    qp->sq.pop_front();
  }
  qp->occupied = 0;
  qp->done_unsignaled = 0;
  while (!qp->rq.empty()) {
    PushCqe(qp->rcq, MakeWc(qp, qp->rq.front(), IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0));
    qp->rq.pop_front();
  }
}

void ErrorCompletion(EQp* qp, ibv_wc_status st) {
  SendWr w = qp->sq.front();
  qp->sq.pop_front();
  PushCqe(qp->scq, MakeWc(qp, w.wr_id, st, IBV_WC_RDMA_WRITE, 0));
  QpToErr(qp);
}

// Finds the MR for `key` covering [addr, addr+len) in `pd` with `access`.
bool CheckMr(uint32_t key, EPd* pd, uint64_t addr, uint64_t len, int access) {
  auto it = F().mrs.find(key);
  if (it == F().mrs.end()) return false;
  EMr* m = it->second;
  if (m->pd != pd) return false;
  uint64_t base = reinterpret_cast<uintptr_t>(m->mr.addr);
  if (addr < base || addr - base > m->mr.length || len > m->mr.length - (addr - base)) return false;
  return (m->access & access) == access;
}

// Executes the head WR of qp. Returns true on progress.
bool Step(EQp* qp) {
  Fabric& f = F();
  if (qp->sq.empty()) return false;
  if (qp->state == IBV_QPS_ERR) {
    QpToErr(qp);
    return true;
  }
  if (qp->state != IBV_QPS_RTS) return false;
  SendWr& w = qp->sq.front();
  if (f.fault_armed) {
    f.fault_armed = false;
    f.last_fault_qp = qp->qp.qp_num;
    switch (f.fault) {
      case Fault::kRetryExceeded: ErrorCompletion(qp, IBV_WC_RETRY_EXC_ERR); return true;
      case Fault::kRemoteAccess:
        ErrorCompletion(qp, IBV_WC_REM_ACCESS_ERR);
        if (qp->remote) QpToErr(qp->remote);
        return true;
      case Fault::kQpError: QpToErr(qp); return true;
      case Fault::kCqOverrun: f.overrun_cq = qp->scq; break;
    }
  }
  // Local buffers.
  if (!w.is_inline) {
    int need = w.op == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
    for (auto& s : w.sges) {
      if (!CheckMr(s.lkey, qp->pd, s.addr, s.length, need)) {
        ErrorCompletion(qp, IBV_WC_LOC_PROT_ERR);
        return true;
      }
    }
  }
  EQp* r = qp->remote;
  if (!r || (r->state != IBV_QPS_RTS && r->state != IBV_QPS_RTR)) {
    ErrorCompletion(qp, IBV_WC_RETRY_EXC_ERR);  // nobody answers
    return true;
  }
  int raccess = w.op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
  if (w.len > 0 && !CheckMr(w.rkey, r->pd, w.raddr, w.len, raccess)) {
    ErrorCompletion(qp, IBV_WC_REM_ACCESS_ERR);
    QpToErr(r);
    return true;
  }
  if (w.op == IBV_WR_RDMA_WRITE_WITH_IMM && r->rq.empty()) {
    if (!qp->rnr_blocked) ++f.stats.rnr_waits;
    qp->rnr_blocked = true;  // RNR NAK: retried when the peer posts a receive
    return false;
  }
  qp->rnr_blocked = false;
  char* remote = reinterpret_cast<char*>(w.raddr);
  ibv_wc_opcode op = IBV_WC_RDMA_WRITE;
  if (w.op == IBV_WR_RDMA_READ) {
    op = IBV_WC_RDMA_READ;
    ++f.stats.reads;
    for (auto& s : w.sges) {
      memcpy(reinterpret_cast<void*>(s.addr), remote, s.length);
      remote += s.length;
    }
  } else {
    ++f.stats.writes;
    if (w.is_inline) {
      if (w.len) memcpy(remote, w.data.data(), w.len);
    } else {
      for (auto& s : w.sges) {
        memcpy(remote, reinterpret_cast<void*>(s.addr), s.length);
        remote += s.length;
      }
    }
    if (w.op == IBV_WR_RDMA_WRITE_WITH_IMM) {
      ++f.stats.imms;
      ibv_wc rw = MakeWc(r, r->rq.front(), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
                         static_cast<uint32_t>(w.len));
      rw.wc_flags = IBV_WC_WITH_IMM;
      rw.imm_data = w.imm;
      r->rq.pop_front();
      PushCqe(r->rcq, rw);
    }
  }
  SendWr done = std::move(qp->sq.front());
  qp->sq.pop_front();
  if (done.signaled || qp->sig_all) {
    // A signaled completion retires its slot and those of earlier unsignaled WRs.
    qp->occupied -= 1 + qp->done_unsignaled;
    qp->done_unsignaled = 0;
    PushCqe(qp->scq, MakeWc(qp, done.wr_id, IBV_WC_SUCCESS, op, static_cast<uint32_t>(done.len)));
  } else {
    ++qp->done_unsignaled;
  }
  return true;
}

void NicLoop() {
  Fabric& f = F();
  std::unique_lock<std::mutex> lock(f.mu);
  while (!f.stop) {
    bool progress = false;
    for (int round = 0; round < 64; ++round) {
      bool any = false;
      for (EQp* qp : f.qps) any |= Step(qp);
      if (!any) break;
      progress = true;
    }
    if (progress) {
      // Let posting threads in between batches.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    uint64_t g = f.gen;
    f.nic_cv.wait(lock, [&] { return f.stop || f.gen != g; });
  }
}

void EnsureNic() {
  Fabric& f = F();
  if (!f.nic.joinable()) {
    f.nic = std::thread(NicLoop);
    f.nic.detach();
    // Detached: the fabric lives for the whole process; joinable() stays false,
    // so remember that it started.
  }
}
bool g_nic_started = false;

void MakePipe(int* r, int* w) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) abort();
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  *r = p[0];
  *w = p[1];
}

// ---------------------------------------------------------------- devices
ibv_device** GetDeviceList(int* n) {
  std::lock_guard<std::mutex> l(F().mu);
  auto& d = F().devs;
  auto** list = new ibv_device*[d.size() + 1];
  for (size_t i = 0; i < d.size(); ++i) list[i] = &d[i]->dev;
  list[d.size()] = nullptr;
  if (n) *n = static_cast<int>(d.size());
  return list;
}
void FreeDeviceList(ibv_device** list) { delete[] list; }
const char* DeviceName(ibv_device* d) { return d->name; }
EDev* DevOf(ibv_device* d) {
  for (EDev* e : F().devs)
    if (&e->dev == d) return e;
  return nullptr;
}
ibv_context* OpenDevice(ibv_device* d) {
  std::lock_guard<std::mutex> l(F().mu);
  EDev* e = DevOf(d);
  if (!e) return errno = ENODEV, nullptr;
  auto* c = new ECtx();
  c->dev = e;
  c->ctx.device = d;
  c->ctx.num_comp_vectors = 4;
  F().ctxs.insert(c);
  ++F().stats.contexts;
  return &c->ctx;
}
ECtx* CtxOf(ibv_context* c) {
  for (ECtx* x : F().ctxs)
    if (&x->ctx == c) return x;
  for (EDev* d : F().devs)
    if (d->cm_ctx && &d->cm_ctx->ctx == c) return d->cm_ctx;
  return nullptr;
}
int CloseDevice(ibv_context* c) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x || x->cm) return Violation("ibv_close_device of an unknown context"), EINVAL;
  if (x->pds || x->cqs || x->channels) return Violation("ibv_close_device with live PDs/CQs"), EBUSY;
  F().ctxs.erase(x);
  --F().stats.contexts;
  delete x;
  return 0;
}
int QueryDevice(ibv_context* c, ibv_device_attr* a) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x) return EINVAL;
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "emulated");
  a->phys_port_cnt = static_cast<uint8_t>(x->dev->spec.ports);
  a->max_qp_wr = x->dev->spec.max_qp_wr;
  a->max_cqe = x->dev->spec.max_cqe;
  a->max_sge = 4;
  a->max_qp = 1024;
  a->max_cq = 1024;
  a->max_mr = 1 << 20;
  a->max_mr_size = ~0ull;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  return 0;
}
int QueryPort(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x || port < 1 || port > x->dev->spec.ports) return EINVAL;
  memset(a, 0, sizeof(*a));
  a->state = x->dev->spec.state;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->max_msg_sz = static_cast<uint32_t>(x->dev->spec.max_msg_sz);
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

// ---------------------------------------------------------------- PD / MR
ibv_pd* AllocPd(ibv_context* c) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x) return errno = EINVAL, nullptr;
  auto* p = new EPd();
  p->ctx = x;
  p->pd.context = c;
  ++x->pds;
  F().pds.insert(p);
  ++F().stats.pds;
  return &p->pd;
}
EPd* PdOf(ibv_pd* pd) {
  for (EPd* p : F().pds)
    if (&p->pd == pd) return p;
  return nullptr;
}
int DeallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> l(F().mu);
  EPd* p = PdOf(pd);
  if (!p) return Violation("ibv_dealloc_pd of an unknown PD"), EINVAL;
  if (p->mrs || p->qps) {
    Violation("ibv_dealloc_pd with " + std::to_string(p->mrs) + " MRs and " + std::to_string(p->qps) + " QPs");
    return EBUSY;
  }
  --p->ctx->pds;
  F().pds.erase(p);
  --F().stats.pds;
  delete p;
  return 0;
}
ibv_mr* RegIova(ibv_pd* pd, void* addr, size_t len, int access) {
  Fabric& f = F();
  EPd* p = PdOf(pd);
  if (!p || len == 0 || !addr) return errno = EINVAL, nullptr;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return errno = EINVAL, nullptr;
  size_t limit = p->ctx->dev->spec.memlock_bytes;
  if (limit && f.locked_bytes + len > limit) return errno = ENOMEM, nullptr;
  auto* m = new EMr();
  m->pd = p;
  m->access = access;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  uint32_t key = (f.next_key++ << 8) | 0x5a;
  m->mr.lkey = m->mr.rkey = key;
  m->mr.handle = key;
  f.mrs[key] = m;
  f.locked_bytes += len;
  ++p->mrs;
  ++f.stats.mrs;
  return &m->mr;
}
ibv_mr* RegMr(ibv_pd* pd, void* addr, size_t len, int access) {
  std::lock_guard<std::mutex> l(F().mu);
  return RegIova(pd, addr, len, access);
}
ibv_mr* RegDmabufMr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  std::lock_guard<std::mutex> l(F().mu);
  if (fd < 0 || offset != 0) return errno = EINVAL, nullptr;
  // The emulation has no GPU: the iova is treated as host memory.
  return RegIova(pd, reinterpret_cast<void*>(iova), len, access);
}
int DeregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> l(F().mu);
  Fabric& f = F();
  auto it = f.mrs.find(mr->lkey);
  if (it == f.mrs.end() || &it->second->mr != mr) return Violation("ibv_dereg_mr of an unknown MR"), EINVAL;
  EMr* m = it->second;
  f.locked_bytes -= m->mr.length;
  --m->pd->mrs;
  f.mrs.erase(it);
  --f.stats.mrs;
  delete m;
  return 0;
}

// ---------------------------------------------------------------- CQs
ibv_comp_channel* CreateCompChannel(ibv_context* c) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x) return errno = EINVAL, nullptr;
  auto* ch = new ECompCh();
  MakePipe(&ch->rfd, &ch->wfd);
  ch->ch.context = c;
  ch->ch.fd = ch->rfd;
  ++x->channels;
  F().comp_chs.insert(ch);
  ++F().stats.comp_channels;
  return &ch->ch;
}
ECompCh* ChOf(ibv_comp_channel* c) {
  for (ECompCh* x : F().comp_chs)
    if (&x->ch == c) return x;
  return nullptr;
}
int DestroyCompChannel(ibv_comp_channel* c) {
  std::lock_guard<std::mutex> l(F().mu);
  ECompCh* x = ChOf(c);
  if (!x) return Violation("destroy of an unknown completion channel"), EINVAL;
  if (x->cqs) return Violation("ibv_destroy_comp_channel with live CQs"), EBUSY;
  --CtxOf(c->context)->channels;
  close(x->rfd);
  close(x->wfd);
  F().comp_chs.erase(x);
  --F().stats.comp_channels;
  delete x;
  return 0;
}
ibv_cq* CreateCq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector) {
  std::lock_guard<std::mutex> l(F().mu);
  ECtx* x = CtxOf(c);
  if (!x || cqe < 1 || cqe > x->dev->spec.max_cqe || vector < 0 || vector >= c->num_comp_vectors)
    return errno = EINVAL, nullptr;
  ECompCh* e = ch ? ChOf(ch) : nullptr;
  if (ch && !e) return errno = EINVAL, nullptr;
  auto* q = new ECq();
  q->ctx = x;
  q->depth = cqe;
  q->ch = e;
  q->cq.context = c;
  q->cq.channel = ch;
  q->cq.cq_context = cq_context;
  q->cq.cqe = cqe;
  if (e) ++e->cqs;
  ++x->cqs;
  F().cqs.insert(q);
  ++F().stats.cqs;
  return &q->cq;
}
ECq* CqOf(ibv_cq* c) {
  for (ECq* x : F().cqs)
    if (&x->cq == c) return x;
  return nullptr;
}
int DestroyCq(ibv_cq* c) {
  std::lock_guard<std::mutex> l(F().mu);
  ECq* q = CqOf(c);
  if (!q) return Violation("ibv_destroy_cq of an unknown CQ"), EINVAL;
  if (q->qps) return Violation("ibv_destroy_cq with live QPs"), EBUSY;
  if (q->unacked) return Violation("ibv_destroy_cq with unacknowledged events (would hang)"), EBUSY;
  if (q->ch) {
    --q->ch->cqs;
    for (auto it = q->ch->ready.begin(); it != q->ch->ready.end();)
      it = *it == q ? q->ch->ready.erase(it) : it + 1;
  }
  --q->ctx->cqs;
  F().cqs.erase(q);
  --F().stats.cqs;
  delete q;
  return 0;
}
int ReqNotifyCq(ibv_cq* c, int) {
  std::lock_guard<std::mutex> l(F().mu);
  ECq* q = CqOf(c);
  if (!q || !q->ch) return EINVAL;
  q->armed = true;  // fires on the next completion only, as real CQs
  return 0;
}
int GetCqEvent(ibv_comp_channel* ch, ibv_cq** cq, void** ctx) {
  char b;
  if (read(ch->fd, &b, 1) != 1) return -1;
  std::lock_guard<std::mutex> l(F().mu);
  ECompCh* x = ChOf(ch);
  if (!x || x->ready.empty()) return Fail(EAGAIN);
  ECq* q = x->ready.front();
  x->ready.pop_front();
  ++q->unacked;
  *cq = &q->cq;
  *ctx = q->cq.cq_context;
  return 0;
}
void AckCqEvents(ibv_cq* c, unsigned n) {
  std::lock_guard<std::mutex> l(F().mu);
  ECq* q = CqOf(c);
  if (!q || static_cast<unsigned>(q->unacked) < n) return Violation("ibv_ack_cq_events: more acks than events");
  q->unacked -= static_cast<int>(n);
}
int PollCq(ibv_cq* c, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> l(F().mu);
  ECq* q = CqOf(c);
  if (!q) return -EINVAL;
  if (q->overrun) return -EOVERFLOW;
  int k = 0;
  while (k < n && !q->q.empty()) {
    wc[k++] = q->q.front();
    q->q.pop_front();
  }
  return k;
}

// ---------------------------------------------------------------- QPs
EQp* QpOf(ibv_qp* qp) {
  for (EQp* x : F().qps)
    if (&x->qp == qp) return x;
  return nullptr;
}
int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> l(F().mu);
  EQp* q = QpOf(qp);
  if (!q) return EINVAL;
  if (!(mask & IBV_QP_STATE)) return 0;
  ibv_qp_state from = q->state, to = attr->qp_state;
  bool ok = to == IBV_QPS_ERR || to == IBV_QPS_RESET || (from == IBV_QPS_RESET && to == IBV_QPS_INIT) ||
            (from == IBV_QPS_INIT && (to == IBV_QPS_INIT || to == IBV_QPS_RTR)) ||
            (from == IBV_QPS_RTR && to == IBV_QPS_RTS) || (from == IBV_QPS_RTS && to == IBV_QPS_RTS);
  if (!ok) return EINVAL;
  if (to == IBV_QPS_ERR) QpToErr(q);
  else q->state = to;
  qp->state = q->state;
  Kick();
  return 0;
}
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> l(F().mu);
  Fabric& f = F();
  EQp* q = QpOf(qp);
  if (!q) return *bad = wr, EINVAL;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) return EINVAL;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_send_sge) return EINVAL;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
        wr->opcode != IBV_WR_RDMA_READ)
      return EINVAL;
    if (q->occupied >= q->cap.max_send_wr) {
      ++f.stats.post_send_enomem;
      return ENOMEM;  // send queue full, exactly like real verbs
    }
    SendWr w;
    w.wr_id = wr->wr_id;
    w.op = wr->opcode;
    w.signaled = wr->send_flags & IBV_SEND_SIGNALED;
    w.imm = wr->imm_data;
    w.raddr = wr->wr.rdma.remote_addr;
    w.rkey = wr->wr.rdma.rkey;
    w.is_inline = wr->send_flags & IBV_SEND_INLINE;
    for (int i = 0; i < wr->num_sge; ++i) {
      w.sges.push_back(wr->sg_list[i]);
      w.len += wr->sg_list[i].length;
    }
    if (w.is_inline) {
      if (w.op == IBV_WR_RDMA_READ || w.len > q->cap.max_inline_data) return EINVAL;
      for (auto& s : w.sges)  // inline data is copied at post time
        w.data.insert(w.data.end(), reinterpret_cast<char*>(s.addr), reinterpret_cast<char*>(s.addr) + s.length);
    }
    q->sq.push_back(std::move(w));
    ++q->occupied;
    if (q->occupied > f.stats.max_sq_occupied) f.stats.max_sq_occupied = q->occupied;
  }
  *bad = nullptr;
  Kick();
  return 0;
}
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> l(F().mu);
  EQp* q = QpOf(qp);
  if (!q) return *bad = wr, EINVAL;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q->state == IBV_QPS_RESET) return EINVAL;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_recv_sge) return EINVAL;
    if (q->rq.size() >= q->cap.max_recv_wr) return ENOMEM;
    if (q->state == IBV_QPS_ERR) {
      PushCqe(q->rcq, MakeWc(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0));
      continue;
    }
    q->rq.push_back(wr->wr_id);
  }
  *bad = nullptr;
  Kick();
  return 0;
}
const char* WcStatusStr(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "other error";
  }
}

// ---------------------------------------------------------------- rdma_cm
rdma_event_channel* CreateEventChannel() {
  std::lock_guard<std::mutex> l(F().mu);
  auto* c = new EEvCh();
  MakePipe(&c->rfd, &c->wfd);
  c->ch.fd = c->rfd;
  F().ev_chs.insert(c);
  ++F().stats.event_channels;
  return &c->ch;
}
EEvCh* EvChOf(rdma_event_channel* c) {
  for (EEvCh* x : F().ev_chs)
    if (&x->ch == c) return x;
  return nullptr;
}
void DestroyEventChannel(rdma_event_channel* c) {
  std::lock_guard<std::mutex> l(F().mu);
  EEvCh* x = EvChOf(c);
  if (!x) return Violation("rdma_destroy_event_channel of an unknown channel");
  if (x->ids) return Violation("rdma_destroy_event_channel with live ids");
  for (ECmEvent* e : x->q) delete e;
  close(x->rfd);
  close(x->wfd);
  F().ev_chs.erase(x);
  --F().stats.event_channels;
  delete x;
}
ECmId* IdOf(rdma_cm_id* id) {
  for (ECmId* x : F().ids)
    if (&x->id == id) return x;
  return nullptr;
}
ECmId* NewId(EEvCh* ch, void* ctx) {
  auto* i = new ECmId();
  i->ch = ch;
  i->id.channel = &ch->ch;
  i->id.context = ctx;
  i->id.ps = RDMA_PS_TCP;
  ++ch->ids;
  F().ids.insert(i);
  ++F().stats.cm_ids;
  return i;
}
int CreateId(rdma_event_channel* ch, rdma_cm_id** id, void* ctx, rdma_port_space ps) {
  std::lock_guard<std::mutex> l(F().mu);
  EEvCh* c = EvChOf(ch);
  if (!c || ps != RDMA_PS_TCP) return Fail(EINVAL);
  *id = &NewId(c, ctx)->id;
  return 0;
}
EDev* DevByIp(uint32_t ip) {
  for (EDev* d : F().devs) {
    in_addr a{};
    inet_pton(AF_INET, d->spec.ip.c_str(), &a);
    if (a.s_addr == ip) return d;
  }
  return nullptr;
}
ECtx* CmCtx(EDev* d) {
  if (!d->cm_ctx) {
    d->cm_ctx = new ECtx();
    d->cm_ctx->dev = d;
    d->cm_ctx->cm = true;
    d->cm_ctx->ctx.device = &d->dev;
    d->cm_ctx->ctx.num_comp_vectors = 4;
  }
  return d->cm_ctx;
}
int BindLocked(ECmId* i, const sockaddr* sa) {
  if (!sa || sa->sa_family != AF_INET) return Fail(EAFNOSUPPORT);
  if (i->state != kIdle) return Fail(EINVAL);
  sockaddr_in a;
  memcpy(&a, sa, sizeof(a));
  EDev* d = nullptr;
  if (a.sin_addr.s_addr != htonl(INADDR_ANY)) {
    d = DevByIp(a.sin_addr.s_addr);
    if (!d) return Fail(EADDRNOTAVAIL);
  }
  uint16_t port = ntohs(a.sin_port);
  if (port == 0) port = F().next_port++;
  auto key = std::make_pair(a.sin_addr.s_addr, port);
  if (F().ports.count(key)) return Fail(EADDRINUSE);
  F().ports[key] = i;
  i->ip = a.sin_addr.s_addr;
  i->port = port;
  i->dev = d;
  i->id.verbs = d ? &CmCtx(d)->ctx : nullptr;
  i->state = kBound;
  return 0;
}
int BindAddr(rdma_cm_id* id, sockaddr* sa) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i) return Fail(EINVAL);
  return BindLocked(i, sa);
}
int Listen(rdma_cm_id* id, int) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i || i->state != kBound) return Fail(EINVAL);
  i->state = kListening;
  return 0;
}
uint16_t GetSrcPort(rdma_cm_id* id) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  return i ? htons(i->port) : 0;
}
int ResolveAddr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i || !dst || dst->sa_family != AF_INET) return Fail(EINVAL);
  if (src && i->state == kIdle && BindLocked(i, src) != 0) return -1;
  if (i->state != kBound && i->state != kIdle) return Fail(EINVAL);
  memcpy(&i->dst, dst, sizeof(i->dst));
  EDev* d = DevByIp(i->dst.sin_addr.s_addr);
  if (!d) {
    PushCmEvent(i, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH, nullptr, 0);
    return 0;
  }
  if (!i->dev) {
    i->dev = d;
    i->id.verbs = &CmCtx(d)->ctx;
  }
  i->state = kAddrResolved;
  PushCmEvent(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0, nullptr, 0);
  return 0;
}
int ResolveRoute(rdma_cm_id* id, int) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i || i->state != kAddrResolved) return Fail(EINVAL);
  i->state = kRouteResolved;
  PushCmEvent(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, nullptr, 0);
  return 0;
}
int CreateQp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* a) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  EPd* p = PdOf(pd);
  if (!i || !p || !id->verbs || id->qp) return Fail(EINVAL);
  if (pd->context != id->verbs) return Fail(EINVAL);  // librdmacm checks this too
  ECq* s = a->send_cq ? CqOf(a->send_cq) : nullptr;
  ECq* r = a->recv_cq ? CqOf(a->recv_cq) : nullptr;
  const DeviceSpec& spec = i->dev->spec;
  if (!s || !r || &s->ctx->ctx != id->verbs || &r->ctx->ctx != id->verbs || a->qp_type != IBV_QPT_RC ||
      a->cap.max_send_wr < 1 || a->cap.max_send_wr > static_cast<uint32_t>(spec.max_qp_wr) ||
      a->cap.max_recv_wr > static_cast<uint32_t>(spec.max_qp_wr) || a->cap.max_send_sge > 4 ||
      a->cap.max_recv_sge > 4 || a->cap.max_inline_data > spec.max_inline)
    return Fail(EINVAL);
  auto* q = new EQp();
  q->pd = p;
  q->scq = s;
  q->rcq = r;
  q->cap = a->cap;
  q->sig_all = a->sq_sig_all;
  q->state = IBV_QPS_INIT;
  q->qp.context = id->verbs;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_num = F().next_qpn++;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_INIT;
  q->qp.qp_context = a->qp_context;
  ++s->qps;
  if (r != s) ++r->qps;
  ++p->qps;
  F().qps.insert(q);
  ++F().stats.qps;
  id->qp = &q->qp;
  return 0;
}
void DestroyQp(rdma_cm_id* id) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  EQp* q = i && id->qp ? QpOf(id->qp) : nullptr;
  if (!q) return Violation("rdma_destroy_qp without a QP");
  if (q->remote) q->remote->remote = nullptr;
  --q->scq->qps;
  if (q->rcq != q->scq) --q->rcq->qps;
  --q->pd->qps;
  F().qps.erase(q);
  --F().stats.qps;
  delete q;
  id->qp = nullptr;
}
int Connect(rdma_cm_id* id, rdma_conn_param* p) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i || i->state != kRouteResolved || !id->qp) return Fail(EINVAL);
  if (p && p->private_data_len > 56) return Fail(EINVAL);
  i->state = kConnecting;
  auto it = F().ports.find({i->dst.sin_addr.s_addr, ntohs(i->dst.sin_port)});
  if (it == F().ports.end() || it->second->state != kListening) {
    PushCmEvent(i, RDMA_CM_EVENT_REJECTED, 28, nullptr, 0);
    return 0;
  }
  ECmId* lis = it->second;
  ECmId* child = NewId(lis->ch, lis->id.context);
  child->dev = lis->dev;
  child->id.verbs = lis->id.verbs;
  child->state = kConnecting;
  child->peer = i;
  child->listener = lis;
  i->peer = child;
  PushCmEvent(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, p ? p->private_data : nullptr,
              p ? p->private_data_len : 0, lis);
  return 0;
}
int Accept(rdma_cm_id* id, rdma_conn_param* p) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* c = IdOf(id);
  if (!c || c->state != kConnecting || !c->listener || !id->qp) return Fail(EINVAL);
  if (p && p->private_data_len > 196) return Fail(EINVAL);
  ECmId* init = c->peer;
  if (!init || !init->id.qp) return Fail(ECONNRESET);
  EQp* a = QpOf(id->qp);
  EQp* b = QpOf(init->id.qp);
  a->remote = b;
  b->remote = a;
  a->state = b->state = IBV_QPS_RTS;  // librdmacm walks INIT -> RTR -> RTS
  a->qp.state = b->qp.state = IBV_QPS_RTS;
  c->state = init->state = kConnected;
  PushCmEvent(init, RDMA_CM_EVENT_ESTABLISHED, 0, p ? p->private_data : nullptr, p ? p->private_data_len : 0);
  PushCmEvent(c, RDMA_CM_EVENT_ESTABLISHED, 0, nullptr, 0);
  Kick();
  return 0;
}
int Reject(rdma_cm_id* id, const void* priv, uint8_t len) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* c = IdOf(id);
  if (!c || c->state != kConnecting || !c->listener) return Fail(EINVAL);
  if (c->peer) {
    PushCmEvent(c->peer, RDMA_CM_EVENT_REJECTED, 28, priv, len);
    c->peer->peer = nullptr;
  }
  c->peer = nullptr;
  c->state = kDisconnected;
  return 0;
}
int Disconnect(rdma_cm_id* id) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i) return Fail(EINVAL);
  if (i->state != kConnected) return Fail(EINVAL);
  ECmId* o = i->peer;
  for (ECmId* x : {i, o}) {
    if (!x) continue;
    if (x->id.qp) QpToErr(QpOf(x->id.qp));  // the kernel moves QPs to ERR on DREQ
    x->state = kDisconnected;
    PushCmEvent(x, RDMA_CM_EVENT_DISCONNECTED, 0, nullptr, 0);
  }
  Kick();
  return 0;
}
int GetCmEvent(rdma_event_channel* ch, rdma_cm_event** ev) {
  char b;
  if (read(ch->fd, &b, 1) != 1) return -1;
  std::lock_guard<std::mutex> l(F().mu);
  EEvCh* c = EvChOf(ch);
  if (!c || c->q.empty()) return Fail(EAGAIN);
  ECmEvent* e = c->q.front();
  c->q.pop_front();
  if (ECmId* i = IdOf(e->ev.id)) ++i->unacked;
  *ev = &e->ev;
  return 0;
}
int AckCmEvent(rdma_cm_event* ev) {
  std::lock_guard<std::mutex> l(F().mu);
  if (ECmId* i = IdOf(ev->id)) --i->unacked;
  delete reinterpret_cast<ECmEvent*>(ev);  // ev is the first member
  return 0;
}
int DestroyId(rdma_cm_id* id) {
  std::lock_guard<std::mutex> l(F().mu);
  ECmId* i = IdOf(id);
  if (!i) return Violation("rdma_destroy_id of an unknown id"), Fail(EINVAL);
  if (id->qp) return Violation("rdma_destroy_id with a QP still attached"), Fail(EBUSY);
  if (i->unacked) return Violation("rdma_destroy_id with unacknowledged events (would hang)"), Fail(EBUSY);
  // Events not yet retrieved for this id are dropped, as the kernel does.
  for (EEvCh* c : F().ev_chs) {
    for (auto it = c->q.begin(); it != c->q.end();) {
      if ((*it)->ev.id == id || (*it)->ev.listen_id == id) {
        delete *it;
        it = c->q.erase(it);
        char b;
        if (read(c->rfd, &b, 1) != 1) Violation("event pipe out of step");
      } else {
        ++it;
      }
    }
  }
  if (i->peer) i->peer->peer = nullptr;
  for (ECmId* x : F().ids)
    if (x->listener == i) x->listener = nullptr;
  if (i->port) {
    auto it = F().ports.find({i->ip, i->port});
    if (it != F().ports.end() && it->second == i) F().ports.erase(it);
  }
  --i->ch->ids;
  F().ids.erase(i);
  --F().stats.cm_ids;
  delete i;
  return 0;
}
const char* EventStr(rdma_cm_event_type t) {
  switch (t) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    default: return "RDMA_CM_EVENT_OTHER";
  }
}

// ---------------------------------------------------------------- addresses
struct IfEntry {
  ifaddrs ifa{};
  sockaddr_in addr{};
  char name[32] = {};
};
int GetIfaddrs(ifaddrs** out) {
  std::lock_guard<std::mutex> l(F().mu);
  ifaddrs* head = nullptr;
  int n = 0;
  for (auto it = F().devs.rbegin(); it != F().devs.rend(); ++it) {
    auto* e = new IfEntry();
    snprintf(e->name, sizeof(e->name), "emu%d", n++);
    e->addr.sin_family = AF_INET;
    inet_pton(AF_INET, (*it)->spec.ip.c_str(), &e->addr.sin_addr);
    e->ifa.ifa_name = e->name;
    e->ifa.ifa_flags = IFF_UP | IFF_RUNNING;
    e->ifa.ifa_addr = reinterpret_cast<sockaddr*>(&e->addr);
    e->ifa.ifa_next = head;
    head = &e->ifa;
  }
  *out = head;
  return 0;
}
void FreeIfaddrs(ifaddrs* l) {
  while (l) {
    ifaddrs* n = l->ifa_next;
    delete reinterpret_cast<IfEntry*>(l);
    l = n;
  }
}

const VerbsApi kEmu = {
    "emulation", GetDeviceList, FreeDeviceList, DeviceName, OpenDevice, CloseDevice, QueryDevice,
    QueryPort, AllocPd, DeallocPd, RegMr, RegDmabufMr, DeregMr, CreateCompChannel,
    DestroyCompChannel, CreateCq, DestroyCq, ReqNotifyCq, GetCqEvent, AckCqEvents, PollCq,
    ModifyQp, PostSend, PostRecv, WcStatusStr, CreateEventChannel, DestroyEventChannel, CreateId,
    DestroyId, BindAddr, Listen, GetSrcPort, ResolveAddr, ResolveRoute, CreateQp, DestroyQp,
    Connect, Accept, Reject, Disconnect, GetCmEvent, AckCmEvent, EventStr, GetIfaddrs, FreeIfaddrs,
};

}  // namespace

void Reset(const std::vector<DeviceSpec>& devices) {
  Fabric& f = F();
  std::lock_guard<std::mutex> l(f.mu);
  if (!g_nic_started) {
    g_nic_started = true;
    EnsureNic();
  }
  auto leak = [&](const char* what, size_t n) {
    if (n) Violation(std::string("leaked ") + std::to_string(n) + " " + what);
  };
  leak("contexts", f.ctxs.size());
  leak("PDs", f.pds.size());
  leak("MRs", f.mrs.size());
  leak("CQs", f.cqs.size());
  leak("QPs", f.qps.size());
  leak("cm ids", f.ids.size());
  leak("event channels", f.ev_chs.size());
  leak("completion channels", f.comp_chs.size());
  // Leaked objects are forgotten (not freed: a test may still hold them).
  f.ctxs.clear();
  f.pds.clear();
  f.mrs.clear();
  f.cqs.clear();
  f.qps.clear();
  f.ids.clear();
  f.ev_chs.clear();
  f.comp_chs.clear();
  f.ports.clear();
  // Old devices stay allocated (contexts may point at them) and reachable.
  f.retired.insert(f.retired.end(), f.devs.begin(), f.devs.end());
  f.devs.clear();
  for (auto& s : devices) {
    auto* d = new EDev();
    d->spec = s;
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->dev.name, sizeof(d->dev.name), "%s", s.name.c_str());
    snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs-%s", s.name.c_str());
    f.devs.push_back(d);
  }
  f.locked_bytes = 0;
  f.fault_armed = false;
  f.overrun_cq = nullptr;
  f.last_fault_qp = 0;
  std::vector<std::string> keep;
  f.stats = Stats();
}

const VerbsApi* Api() { return &kEmu; }

void InjectOnNextSend(Fault fault) {
  std::lock_guard<std::mutex> l(F().mu);
  F().fault_armed = true;
  F().fault = fault;
}

uint32_t LastFaultQp() {
  std::lock_guard<std::mutex> l(F().mu);
  return F().last_fault_qp;
}

Stats GetStats() {
  std::lock_guard<std::mutex> l(F().mu);
  Stats s = F().stats;
  return s;
}

}  // namespace zc::emu
