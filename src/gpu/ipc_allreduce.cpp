#include "gpu/ipc_allreduce.h"

#include <algorithm>
#include <vector>

#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {

// Elements [lo, hi) of shard r of n.
void Shard(size_t count, int n, int r, size_t* lo, size_t* hi) {
  const size_t base = count / n, extra = count % n;
  *lo = r * base + std::min<size_t>(r, extra);
  *hi = *lo + base + (static_cast<size_t>(r) < extra ? 1 : 0);
}

}  // namespace

IpcAllreduce::IpcAllreduce(const DriverTable* drv, IpcCache* ipc, const DeviceReducer* reducer)
    : drv_(drv), ipc_(ipc), reducer_(reducer ? reducer : &KernelReducer()) {}

Status IpcAllreduce::Run(const HostGroup& g, const void* send, void* recv, size_t count,
                         zc_dtype dtype, zc_op op, int device) {
  const size_t es = GpuDtypeSize(dtype);
  const size_t bytes = count * es;
  const DriverTable* drv = nullptr;
  Status st = PrepareDevice(drv_, device, "allreduce", &drv);
  const IpcBuf mine[2] = {{send, bytes}, {recv, bytes}};
  PeerBuffers peers;
  ZC_RETURN_IF_ERROR(MapPeerBuffers(g, ipc_, device, mine, 2, st, "allreduce", &peers));

  // Reduce-scatter: our shard, reading every rank's sendbuf.
  size_t lo = 0, hi = 0;
  Shard(count, g.size, g.rank, &lo, &hi);
  if (hi > lo) {
    const zc_op kop = op == ZC_AVG ? ZC_SUM : op;
    const size_t off = lo * es, n = hi - lo;
    char* out = peers.at(1, g.rank) + off;
    const int second = (g.rank + 1) % g.size;
    st = reducer_->reduce(out, peers.at(0, g.rank) + off, peers.at(0, second) + off, n, dtype, kop,
                          nullptr);
    for (int k = 2; st.ok() && k < g.size; ++k)
      st = reducer_->reduce(out, out, peers.at(0, (g.rank + k) % g.size) + off, n, dtype, kop, nullptr);
    if (st.ok() && op == ZC_AVG) st = reducer_->scale_div(out, n, dtype, g.size, nullptr);
    if (st.ok()) st = reducer_->synchronize(nullptr, "CUDA IPC allreduce: shard reduction");
  }
  // Every shard reduced.
  ZC_RETURN_IF_ERROR(IpcAgree(g, st, "allreduce"));

  // Allgather: the other shards from their owners' recvbufs.
  for (int r = 0; st.ok() && r < g.size; ++r) {
    if (r == g.rank) continue;
    size_t rlo = 0, rhi = 0;
    Shard(count, g.size, r, &rlo, &rhi);
    if (rhi == rlo) continue;
    const size_t off = rlo * es;
    st = CuCheck(drv,
                 drv->MemcpyAsync(reinterpret_cast<CuDevicePtr>(peers.at(1, g.rank) + off),
                                  reinterpret_cast<CuDevicePtr>(peers.at(1, r) + off), (rhi - rlo) * es,
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
