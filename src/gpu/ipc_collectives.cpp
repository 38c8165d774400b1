#include "gpu/ipc_collectives.h"

#include <cstdint>

#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {

bool Overlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

size_t ScratchSize(size_t bytes) {
  size_t s = size_t{1} << 20;
  while (s < bytes) s <<= 1;
  return s;
}

}  // namespace

IpcCollectives::IpcCollectives(const DriverTable* drv, IpcCache* ipc, const DeviceReducer* reducer)
    : fixed_drv_(drv), ipc_(ipc), reducer_(reducer ? reducer : &KernelReducer()) {}

IpcCollectives::~IpcCollectives() {
  if (scratch_ && drv_ && drv_->MemFree) drv_->MemFree(scratch_);
}

Status IpcCollectives::Begin(int device, const char* what, const void* send, size_t bytes,
                             bool snapshot, const void** src) {
  *src = send;
  ZC_RETURN_IF_ERROR(PrepareDevice(fixed_drv_, device, what, &drv_));
  if (!snapshot) return Status::Ok();
  if (scratch_bytes_ < bytes) {
    if (!drv_->MemAlloc || !drv_->MemFree)
      return Error(ZC_ERR_UNSUPPORTED, "CUDA IPC %s: the driver lacks cuMemAlloc", what);
    if (scratch_) drv_->MemFree(scratch_);  // peers close their mapping when they see the new one
    scratch_ = 0;
    scratch_bytes_ = 0;
    const size_t want = ScratchSize(bytes);
    ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->MemAlloc(&scratch_, want),
                               Format("CUDA IPC %s: cuMemAlloc of a %zu-byte scratch buffer", what, want).c_str()));
    scratch_bytes_ = want;
  }
  void* scratch = reinterpret_cast<void*>(scratch_);
  ZC_RETURN_IF_ERROR(Copy(scratch, send, bytes, what));
  ZC_RETURN_IF_ERROR(CuCheck(drv_, drv_->StreamSynchronize(nullptr),
                             Format("CUDA IPC %s: copy of sendbuf into the scratch buffer", what).c_str()));
  *src = scratch;
  return Status::Ok();
}

Status IpcCollectives::Copy(void* dst, const void* src, size_t n, const char* what) {
  if (n == 0 || dst == src) return Status::Ok();
  return CuCheck(drv_,
                 drv_->MemcpyAsync(reinterpret_cast<CuDevicePtr>(dst), reinterpret_cast<CuDevicePtr>(src),
                                   n, nullptr),
                 Format("CUDA IPC %s: cuMemcpyAsync of %zu bytes", what, n).c_str());
}

Status IpcCollectives::Finish(const HostGroup& g, Status st, const char* what) {
  // Even after a failure: nothing of ours may still read a peer's buffer
  // once the agreement lets that peer return.
  Status sync = CuCheck(drv_, drv_->StreamSynchronize(nullptr), Format("CUDA IPC %s: copies", what).c_str());
  if (st.ok()) st = sync;
  return IpcAgree(g, st, what);
}

Status IpcCollectives::Broadcast(const HostGroup& g, void* buf, size_t bytes, int root, int device) {
  const void* src = nullptr;
  Status st = Begin(device, "broadcast", buf, bytes, false, &src);
  const IpcBuf mine{buf, bytes};
  PeerBuffers peers;
  ZC_RETURN_IF_ERROR(MapPeerBuffers(g, ipc_, device, &mine, g.rank == root ? 1 : 0, st, "broadcast", &peers));
  if (g.rank != root) {
    if (peers.at(0, root) == nullptr)
      st = Error(ZC_ERR_INTERNAL, "CUDA IPC broadcast: root %d exported no buffer", root);
    else
      st = Copy(buf, peers.at(0, root), bytes, "broadcast");
  }
  return Finish(g, st, "broadcast");
}

Status IpcCollectives::Allgather(const HostGroup& g, const void* send, void* recv, size_t block,
                                 int device) {
  char* out = static_cast<char*>(recv);
  char* own = out + static_cast<size_t>(g.rank) * block;
  // Peers read sendbuf while this rank writes the other blocks of recvbuf.
  const bool snapshot = send != own && Overlap(send, block, recv, block * g.size);
  const void* src = nullptr;
  Status st = Begin(device, "allgather", send, block, snapshot, &src);
  const IpcBuf mine{src, block};
  PeerBuffers peers;
  ZC_RETURN_IF_ERROR(MapPeerBuffers(g, ipc_, device, &mine, 1, st, "allgather", &peers));
  for (int r = 0; st.ok() && r < g.size; ++r)
    st = Copy(out + static_cast<size_t>(r) * block, peers.at(0, r), block, "allgather");
  return Finish(g, st, "allgather");
}

Status IpcCollectives::ReduceScatter(const HostGroup& g, const void* send, void* recv,
                                     size_t recvcount, zc_dtype dtype, zc_op op, int device) {
  const size_t block = recvcount * GpuDtypeSize(dtype), total = block * g.size;
  const size_t off = static_cast<size_t>(g.rank) * block;
  // Peers read the other blocks of sendbuf while this rank writes recvbuf.
  const bool snapshot = recv != static_cast<const char*>(send) + off && Overlap(send, total, recv, block);
  const void* src = nullptr;
  Status st = Begin(device, "reduce_scatter", send, total, snapshot, &src);
  const IpcBuf mine{src, total};
  PeerBuffers peers;
  ZC_RETURN_IF_ERROR(MapPeerBuffers(g, ipc_, device, &mine, 1, st, "reduce_scatter", &peers));
  const zc_op kop = op == ZC_AVG ? ZC_SUM : op;
  const int second = (g.rank + 1) % g.size;
  st = reducer_->reduce(recv, peers.at(0, g.rank) + off, peers.at(0, second) + off, recvcount, dtype,
                        kop, nullptr);
  for (int k = 2; st.ok() && k < g.size; ++k)
    st = reducer_->reduce(recv, recv, peers.at(0, (g.rank + k) % g.size) + off, recvcount, dtype, kop,
                          nullptr);
  if (st.ok() && op == ZC_AVG) st = reducer_->scale_div(recv, recvcount, dtype, g.size, nullptr);
  if (st.ok()) st = reducer_->synchronize(nullptr, "CUDA IPC reduce_scatter: reduction");
  return Finish(g, st, "reduce_scatter");
}

Status IpcCollectives::Alltoall(const HostGroup& g, const void* send, void* recv, size_t block,
                                int device) {
  const size_t total = block * g.size;
  // Peers read block p of sendbuf while this rank writes recvbuf.
  const bool snapshot = Overlap(send, total, recv, total);
  const void* src = nullptr;
  Status st = Begin(device, "alltoall", send, total, snapshot, &src);
  const IpcBuf mine{src, total};
  PeerBuffers peers;
  ZC_RETURN_IF_ERROR(MapPeerBuffers(g, ipc_, device, &mine, 1, st, "alltoall", &peers));
  char* out = static_cast<char*>(recv);
  const size_t mine_off = static_cast<size_t>(g.rank) * block;
  for (int r = 0; st.ok() && r < g.size; ++r)
    st = Copy(out + static_cast<size_t>(r) * block, peers.at(0, r) + mine_off, block, "alltoall");
  return Finish(g, st, "alltoall");
}

}  // namespace zc::gpu
