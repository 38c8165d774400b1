#include "gpu/ipc_allreduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu/pointer_cache.h"
#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {

// One rank's contribution to the exchange.
struct Record {
  IpcDescriptor send, recv;
  int32_t status;  // zc_status of its exports
  int32_t device;
};

// Elements [lo, hi) of shard r of n.
void Shard(size_t count, int n, int r, size_t* lo, size_t* hi) {
  const size_t base = count / n, extra = count % n;
  *lo = r * base + std::min<size_t>(r, extra);
  *hi = *lo + base + (static_cast<size_t>(r) < extra ? 1 : 0);
}

// Every rank learns every rank's status (one allgather, which also serves
// as the barrier between steps): a failure on one rank fails the call on
// all of them instead of leaving peers with a missing shard.
Status Agree(const HostGroup& g, const Status& st) {
  const int32_t code = st.code();
  std::vector<int32_t> codes(g.size);
  ZC_RETURN_IF_ERROR(g.allgather(&code, codes.data(), sizeof code));
  if (!st.ok()) return st;
  for (int r = 0; r < g.size; ++r) {
    if (codes[r] != ZC_OK) {
      return Error(ZC_ERR_SYSTEM, "CUDA IPC allreduce failed on rank %d (%s)", r,
                   zc_status_string(static_cast<zc_status>(codes[r])));
    }
  }
  return Status::Ok();
}

}  // namespace

bool IpcAllreduceWanted(size_t bytes, const std::string& mode, size_t min_bytes) {
  if (mode == "0") return false;
  if (mode == "1") return true;
  return bytes >= min_bytes;
}

IpcAllreduce::IpcAllreduce(const DriverTable* drv, PointerCache* cache)
    : drv_(drv), cache_(cache), ipc_(drv, cache) {}

bool IpcAllreduce::Eligible(const void* send, const void* recv, size_t bytes, int* device) {
  PointerInfo a, b;
  PointerCache& cache = cache_ ? *cache_ : PointerCache::Global();
  if (!cache.Classify(send, bytes, &a).ok() || a.type != MemType::kDevice) return false;
  if (!cache.Classify(recv, bytes, &b).ok() || b.type != MemType::kDevice) return false;
  if (a.device != b.device) return false;
  *device = a.device;
  return true;
}

Status IpcAllreduce::Run(const HostGroup& g, const void* send, void* recv, size_t count,
                         zc_dtype dtype, zc_op op, int device) {
  if (!g.exchange || !g.allgather || !g.barrier)
    return Error(ZC_ERR_INTERNAL, "CUDA IPC allreduce: the host group lacks a step");
  const size_t es = GpuDtypeSize(dtype);
  const size_t bytes = count * es;

  // Any failure up to the exchange is carried in it (mine.status): peers
  // must not wait for a rank that gave up alone. Our inputs must be complete
  // before peers read them: the caller's work on any stream of this context.
  const DriverTable* drv = drv_;
  Status st = drv ? Status::Ok() : LoadDriver(&drv);
  if (st.ok()) st = EnsureContext(drv, device);
  if (st.ok()) st = CuCheck(drv, drv->CtxSynchronize(), "cuCtxSynchronize before CUDA IPC allreduce");
  Record mine{};
  mine.device = device;
  if (st.ok()) st = ipc_.Export(send, bytes, &mine.send).with_context("export sendbuf");
  if (st.ok()) st = ipc_.Export(recv, bytes, &mine.recv).with_context("export recvbuf");
  mine.status = st.code();
  std::vector<Record> all(g.size);
  ZC_RETURN_IF_ERROR(g.exchange(&mine, all.data(), sizeof(Record)));
  if (!st.ok()) return st;
  for (int r = 0; r < g.size; ++r) {
    if (all[r].status != ZC_OK) {
      return Error(ZC_ERR_SYSTEM, "CUDA IPC allreduce: rank %d could not prepare its buffers (%s)",
                   r, zc_status_string(static_cast<zc_status>(all[r].status)));
    }
  }

  // Peers' buffers in our address space (cached mappings).
  std::vector<const char*> psend(g.size);
  std::vector<char*> precv(g.size);
  for (int r = 0; r < g.size; ++r) {
    if (r == g.rank) {
      psend[r] = static_cast<const char*>(send);
      precv[r] = static_cast<char*>(recv);
      continue;
    }
    void* m = nullptr;
    st = ipc_.Open(r, all[r].send, device, &m);
    if (!st.ok()) break;
    psend[r] = static_cast<const char*>(m);
    st = ipc_.Open(r, all[r].recv, device, &m);
    if (!st.ok()) break;
    precv[r] = static_cast<char*>(m);
  }
  // All mapped, all inputs ready.
  ZC_RETURN_IF_ERROR(Agree(g, st));

  // Reduce-scatter: our shard, reading every rank's sendbuf.
  size_t lo = 0, hi = 0;
  Shard(count, g.size, g.rank, &lo, &hi);
  if (hi > lo) {
    const zc_op kop = op == ZC_AVG ? ZC_SUM : op;
    const size_t off = lo * es, n = hi - lo;
    char* out = precv[g.rank] + off;
    const int second = (g.rank + 1) % g.size;
    st = ReduceInto(out, psend[g.rank] + off, psend[second] + off, n, dtype, kop, nullptr);
    for (int k = 2; st.ok() && k < g.size; ++k) {
      st = ReduceInPlace(out, psend[(g.rank + k) % g.size] + off, n, dtype, kop, nullptr);
    }
    if (st.ok() && op == ZC_AVG) st = ScaleDiv(out, n, dtype, g.size, nullptr);
    if (st.ok()) st = SynchronizeStream(nullptr, "CUDA IPC allreduce: shard reduction");
  }
  // Every shard reduced.
  ZC_RETURN_IF_ERROR(Agree(g, st));

  // Allgather: the other shards from their owners' recvbufs.
  for (int r = 0; st.ok() && r < g.size; ++r) {
    if (r == g.rank) continue;
    size_t rlo = 0, rhi = 0;
    Shard(count, g.size, r, &rlo, &rhi);
    if (rhi == rlo) continue;
    const size_t off = rlo * es;
    st = CuCheck(drv,
                 drv->MemcpyAsync(reinterpret_cast<CuDevicePtr>(precv[g.rank] + off),
                                  reinterpret_cast<CuDevicePtr>(precv[r] + off), (rhi - rlo) * es,
                                  nullptr),
                 "CUDA IPC allreduce: copy of a peer's shard");
  }
  if (st.ok()) st = CuCheck(drv, drv->StreamSynchronize(nullptr), "CUDA IPC allreduce: copies");
  // No peer still reads our recvbuf when the caller gets it back.
  Status bar = g.barrier();
  if (!st.ok()) return st;
  return bar;
}

}  // namespace zc::gpu
