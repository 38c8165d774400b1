#include "gpu/device_path.h"

#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "gpu/ipc_allreduce.h"
#include "gpu/stream_ordered.h"
#include "p2p/group.h"

namespace zc::gpu {

DevicePath::DevicePath(const DevicePathOptions& opts) : opts_(opts) {}

DevicePath::~DevicePath() = default;  // StreamOrdered's destructor closes it

bool DevicePath::UseIpc(Collectives* c, const void* send, const void* recv, size_t bytes,
                        zc_op op, int* device) {
  // Called when PassThrough() said no. All but the last condition are the same on every
  // rank; the buffers' memory may not be, which the signature's memory path
  // catches.
  if (!opts_.ipc_reachable || IsBitwise(op) ||
      c->ForcedAlgo(coll::Kind::kAllreduce) != coll::Algo::kNone ||
      !IpcAllreduceWanted(bytes, opts_.ipc_mode, opts_.ipc_min_bytes))
    return false;
  if (!ipc_) ipc_ = std::make_unique<IpcAllreduce>(opts_.drv, opts_.cache);
  return ipc_->Eligible(send, recv, bytes, device);
}

Status DevicePath::Allreduce(Collectives* c, const void* send, void* recv, size_t count,
                             zc_dtype dtype, zc_op op, bool* used_ipc) {
  *used_ipc = false;
  const size_t bytes = count * DtypeSize(dtype);
  const StageArg bufs[2] = {StageArg{send, bytes, true, false, "sendbuf"},
                            StageArg{recv, bytes, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->Allreduce(send, recv, count, dtype, op);
  int device = -1;
  if (UseIpc(c, send, recv, bytes, op, &device)) {
    *used_ipc = true;
    const int size = c->group()->size();
    HostGroup g;
    g.rank = c->group()->rank();
    g.size = size;
    g.exchange = [=](const void* in, void* out, size_t bytes) {
      return c->AllreduceExchange(count, dtype, op, coll::MemPath::kCudaIpc, in, out, bytes);
    };
    g.allgather = [c](const void* in, void* out, size_t bytes) {
      return c->Allgather(in, out, bytes, ZC_UINT8);
    };
    g.barrier = [c] { return c->Barrier(); };
    return ipc_->Run(g, send, recv, count, dtype, op, device);
  }
  return RunStaged(bufs, [&](void** h) { return c->Allreduce(h[0], h[1], count, dtype, op); });
}

Status DevicePath::StageRequest(void* buf, size_t bytes, bool send, void** host,
                                std::function<Status()>* finish) {
  *host = buf;
  *finish = nullptr;
  const StageArg arg{buf, bytes, send, !send, "buf"};
  if (PassThrough(&arg, 1)) return Status::Ok();
  auto staging = std::make_shared<HostStaging>(opts_.drv, opts_.cache, opts_.pool);
  ZC_RETURN_IF_ERROR(staging->Stage(&arg, 1, host));
  if (!staging->active()) return Status::Ok();
  // A send's copy is made now; it is held until the request completes.
  if (send) *finish = [staging] { return Status::Ok(); };
  else *finish = [staging] { return staging->CopyOut(); };
  return Status::Ok();
}

Status DevicePath::Stage(const StageArg* args, size_t n, void** host, std::unique_ptr<HostStaging>* staging) {
  staging->reset();
  for (size_t i = 0; i < n; ++i) host[i] = const_cast<void*>(args[i].ptr);
  if (PassThrough(args, n)) return Status::Ok();
  auto s = std::make_unique<HostStaging>(opts_.drv, opts_.cache, opts_.pool);
  ZC_RETURN_IF_ERROR(s->Stage(args, n, host));
  if (s->active()) *staging = std::move(s);
  return Status::Ok();
}

Status DevicePath::StagePlan(const void* send, void* recv, size_t bytes,
                             std::unique_ptr<HostStaging>* staging, const void** hsend,
                             void** hrecv) {
  const StageArg args[2] = {StageArg{send, bytes, true, false, "sendbuf"},
                            StageArg{recv, bytes, false, true, "recvbuf"}};
  void* host[2];
  ZC_RETURN_IF_ERROR(Stage(args, 2, host, staging));
  *hsend = host[0];
  *hrecv = host[1];
  return Status::Ok();
}

Status DevicePath::OnStream(StreamOrdered** out) {
  *out = nullptr;
  if (!opts_.enabled) return Error(ZC_ERR_UNSUPPORTED, "stream-ordered calls: zcomm was built without CUDA");
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (!stream_) {
    const DriverTable* drv = opts_.drv ? opts_.drv : LoadedDriver();
    if (drv == nullptr || !drv->loaded)
      return Error(ZC_ERR_UNSUPPORTED, "stream-ordered calls: no CUDA driver is loaded in this process");
    stream_ = std::make_unique<StreamOrdered>(drv, opts_.cache, opts_.pool, opts_.timeout_s);
  }
  *out = stream_.get();
  return Status::Ok();
}

Status DevicePath::StreamAsyncError() const {
  std::lock_guard<std::mutex> lock(stream_mu_);
  return stream_ ? stream_->async_error() : Status::Ok();
}

void DevicePath::Close() {
  ipc_.reset();
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (stream_) stream_->Close();
}

}  // namespace zc::gpu
