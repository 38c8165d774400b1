#include "gpu/ipc_exchange.h"

#include <cstring>

#include "gpu/pointer_cache.h"
#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {

// One rank's contribution to the exchange: plain bytes, same layout on
// every rank (same host, same build).
struct Record {
  IpcDescriptor bufs[PeerBuffers::kMaxBufs];
  int32_t nbufs;
  int32_t status;  // zc_status of its local steps and exports
};

}  // namespace

const DeviceReducer& KernelReducer() {
  static const DeviceReducer* r = new DeviceReducer{
      [](void* c, const void* a, const void* b, size_t n, zc_dtype d, zc_op op, void* s) {
        return ReduceInto(c, a, b, n, d, op, s);
      },
      [](void* a, size_t n, zc_dtype d, double div, void* s) { return ScaleDiv(a, n, d, div, s); },
      [](void* s, const char* what) { return SynchronizeStream(s, what); },
      [](void* dst, const void* src, size_t n, zc_dtype d, double f, void* s) {
        return ScaleCopy(dst, src, n, d, f, s);
      }};
  return *r;
}

bool IpcWanted(size_t bytes, const std::string& mode, size_t min_bytes) {
  if (bytes == 0 || mode == "0") return false;
  if (mode == "1") return true;
  return bytes >= min_bytes;
}

bool IpcEligible(PointerCache* cache, const IpcBuf* bufs, size_t n, int* device) {
  PointerCache& pc = cache ? *cache : PointerCache::Global();
  int dev = -1;
  for (size_t i = 0; i < n; ++i) {
    if (bufs[i].bytes == 0) continue;
    PointerInfo info;
    if (!pc.Classify(bufs[i].ptr, bufs[i].bytes, &info).ok() || info.type != MemType::kDevice)
      return false;
    if (dev >= 0 && info.device != dev) return false;
    dev = info.device;
  }
  if (dev < 0) return false;
  *device = dev;
  return true;
}

Status IpcAgree(const HostGroup& g, const Status& st, const char* what) {
  const int32_t code = st.code();
  std::vector<int32_t> codes(g.size);
  ZC_RETURN_IF_ERROR(g.allgather(&code, codes.data(), sizeof code));
  if (!st.ok()) return st;
  for (int r = 0; r < g.size; ++r) {
    if (codes[r] != ZC_OK)
      return Error(ZC_ERR_SYSTEM, "CUDA IPC %s failed on rank %d (%s)", what, r,
                   zc_status_string(static_cast<zc_status>(codes[r])));
  }
  return Status::Ok();
}

Status PrepareDevice(const DriverTable* fixed, int device, const char* what,
                     const DriverTable** drv) {
  *drv = fixed;
  Status st = fixed ? Status::Ok() : LoadDriver(drv);
  if (st.ok()) st = EnsureContext(*drv, device);
  if (st.ok())
    st = CuCheck(*drv, (*drv)->CtxSynchronize(), Format("cuCtxSynchronize before CUDA IPC %s", what).c_str());
  return st;
}

Status MapPeerBuffers(const HostGroup& g, IpcCache* ipc, int device, const IpcBuf* mine, int n,
                      const Status& before, const char* what, PeerBuffers* out) {
  if (!g.exchange || !g.allgather || !g.barrier)
    return Error(ZC_ERR_INTERNAL, "CUDA IPC %s: the host group lacks a step", what);
  if (n < 0 || n > PeerBuffers::kMaxBufs)
    return Error(ZC_ERR_INTERNAL, "CUDA IPC %s: %d buffers", what, n);
  // A failure up to the exchange is carried in it: peers must not wait for
  // a rank that gave up alone.
  Status st = before;
  Record rec;
  std::memset(&rec, 0, sizeof rec);
  rec.nbufs = n;
  for (int k = 0; st.ok() && k < n; ++k)
    st = ipc->Export(mine[k].ptr, mine[k].bytes, &rec.bufs[k]).with_context(Format("export buffer %d", k));
  rec.status = st.code();
  std::vector<Record> all(g.size);
  ZC_RETURN_IF_ERROR(g.exchange(&rec, all.data(), sizeof(Record)));
  // Every rank sees the same records: a failure in one fails all at once.
  if (!st.ok() && all[g.rank].status != ZC_OK) return st;
  for (int r = 0; r < g.size; ++r) {
    if (all[r].status != ZC_OK)
      return Error(ZC_ERR_SYSTEM, "CUDA IPC %s: rank %d could not prepare its buffers (%s)", what, r,
                   zc_status_string(static_cast<zc_status>(all[r].status)));
  }
  // A failure the exchange did not carry (broadcast carries the root's
  // record only): the agreement does.
  if (!st.ok()) return IpcAgree(g, st, what);
  for (auto& v : out->at_) v.assign(g.size, nullptr);
  for (int r = 0; st.ok() && r < g.size; ++r) {
    const int nb = std::min<int>(all[r].nbufs, PeerBuffers::kMaxBufs);
    for (int k = 0; st.ok() && k < nb; ++k) {
      if (r == g.rank) {
        out->at_[k][r] = static_cast<char*>(const_cast<void*>(mine[k].ptr));
        continue;
      }
      void* m = nullptr;
      st = ipc->Open(r, all[r].bufs[k], device, &m);
      out->at_[k][r] = static_cast<char*>(m);
    }
  }
  // All mapped, all inputs complete.
  return IpcAgree(g, st, what);
}

}  // namespace zc::gpu
