#include "gpu/device_path.h"

#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "gpu/ipc_allreduce.h"
#include "gpu/ipc_cache.h"
#include "gpu/ipc_collectives.h"
#include "gpu/pipelined_staging.h"
#include "gpu/pointer_cache.h"
#include "gpu/stream_ordered.h"
#include "p2p/group.h"

namespace zc::gpu {

DevicePath::DevicePath(const DevicePathOptions& opts) : opts_(opts) {}

// StreamOrdered's destructor closes it; the IPC collectives go before the
// cache they use (declared after it).
DevicePath::~DevicePath() = default;

bool DevicePath::UseIpc(Collectives* c, coll::Kind kind, const StageArg* bufs, size_t n,
                        size_t bytes, zc_op op, int* device) {
  // Called when PassThrough() said no. All but the last condition are the
  // same on every rank; the buffers' memory may not be, which the first
  // exchange's signature (its memory path) catches.
  const bool reduces = kind == coll::Kind::kAllreduce || kind == coll::Kind::kReduceScatter;
  if (!opts_.ipc_reachable || (reduces && IsBitwise(op)) || c->ForcedAlgo(kind) != coll::Algo::kNone ||
      !IpcWanted(bytes, opts_.ipc_mode, opts_.ipc_min_bytes))
    return false;
  std::vector<IpcBuf> ipc_bufs;
  for (size_t i = 0; i < n; ++i) ipc_bufs.push_back(IpcBuf{bufs[i].ptr, bufs[i].bytes});
  if (!IpcEligible(opts_.cache, ipc_bufs.data(), n, device)) return false;
  if (!ipc_cache_) {
    ipc_cache_ = std::make_unique<IpcCache>(opts_.drv, opts_.cache);
    ipc_ = std::make_unique<IpcAllreduce>(opts_.drv, ipc_cache_.get(), opts_.reducer);
    ipc_coll_ = std::make_unique<IpcCollectives>(opts_.drv, ipc_cache_.get(), opts_.reducer);
  }
  return true;
}

size_t DevicePath::PartBytes(const StageArg* bufs, size_t n, size_t bytes, zc_dtype dtype) const {
  const size_t es = DtypeSize(dtype);
  const size_t part = es ? opts_.chunk_bytes / es * es : 0;
  if (part == 0 || bytes <= part || !PipelinedStaging::Supported(opts_.drv ? opts_.drv : LoadedDriver())) return 0;
  PointerCache& cache = opts_.cache ? *opts_.cache : PointerCache::Global();
  for (size_t i = 0; i < n; ++i) {
    if (bufs[i].bytes == 0) continue;
    PointerInfo info;
    // A buffer the cache refuses (past its allocation's end) is staged,
    // and staging reports it.
    if (!cache.Classify(bufs[i].ptr, bufs[i].bytes, &info).ok() || info.type == MemType::kDevice ||
        info.type == MemType::kManaged)
      return part;
  }
  return 0;
}

PipelinedStaging* DevicePath::Pipeline() {
  if (!pipe_) {
    const DriverTable* drv = opts_.drv ? opts_.drv : LoadedDriver();
    pipe_ = std::make_unique<PipelinedStaging>(drv, opts_.cache, opts_.pool, opts_.timeout_s);
  }
  return pipe_.get();
}

namespace {

char* At(void* p, size_t offset) { return p ? static_cast<char*>(p) + offset : nullptr; }

// Aborts c's job with st: the peers waiting for this rank fail at once.
std::function<void(const Status&)> Aborter(Collectives* c) {
  return [c](const Status& st) {
    if (!c->group()->aborted()) c->group()->Abort(st, -1);
  };
}

}  // namespace

HostGroup DevicePath::IpcGroup(Collectives* c, coll::Kind kind, size_t count, zc_dtype dtype, zc_op op,
                               int root) {
  HostGroup g;
  g.rank = c->group()->rank();
  g.size = c->group()->size();
  if (kind == coll::Kind::kAllreduce) {
    g.exchange = [=](const void* in, void* out, size_t bytes) {
      return c->AllreduceExchange(count, dtype, op, coll::MemPath::kCudaIpc, in, out, bytes);
    };
  } else if (kind == coll::Kind::kBroadcast) {
    // Only the root exports: its record goes down the host broadcast's
    // tree; the others' records stay empty (no buffer, status ok; a
    // failure of theirs reaches every rank in the agreement after it).
    const int rank = g.rank, size = g.size;
    g.exchange = [=](const void* in, void* out, size_t bytes) {
      char* all = static_cast<char*>(out);
      std::memset(all, 0, bytes * size);
      char* slot = all + static_cast<size_t>(root) * bytes;
      if (rank == root) std::memcpy(slot, in, bytes);
      return c->IpcExchange(kind, count, dtype, op, root, nullptr, slot, bytes);
    };
  } else {
    g.exchange = [=](const void* in, void* out, size_t bytes) {
      return c->IpcExchange(kind, count, dtype, op, root, in, out, bytes);
    };
  }
  g.allgather = [c](const void* in, void* out, size_t bytes) {
    return c->Allgather(in, out, bytes, ZC_UINT8);
  };
  g.barrier = [c] { return c->Barrier(); };
  return g;
}

Status DevicePath::Allreduce(Collectives* c, const void* send, void* recv, size_t count,
                             zc_dtype dtype, zc_op op, bool* used_ipc) {
  *used_ipc = false;
  const size_t bytes = count * DtypeSize(dtype);
  const StageArg bufs[2] = {StageArg{send, bytes, true, false, "sendbuf"},
                            StageArg{recv, bytes, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->Allreduce(send, recv, count, dtype, op);
  int device = -1;
  if (UseIpc(c, coll::Kind::kAllreduce, bufs, 2, bytes, op, &device)) {
    *used_ipc = true;
    return ipc_->Run(IpcGroup(c, coll::Kind::kAllreduce, count, dtype, op, -1), send, recv, count, dtype,
                     op, device);
  }
  if (const size_t part = PartBytes(bufs, 2, bytes, dtype)) {
    PipelinedStaging::Hooks hooks;
    hooks.what = "allreduce";
    hooks.exchange = [&](bool mine, PipelinedStaging::Told* told) {
      const int32_t failed = mine;
      std::vector<int32_t> all(c->group()->size(), 0);
      ZC_RETURN_IF_ERROR(c->AllreduceExchange(count, dtype, op, coll::MemPath::kStagedParts, &failed,
                                              all.data(), sizeof(failed)));
      for (int r = 0; r < static_cast<int>(all.size()) && told->who < 0; ++r)
        if (all[r] != 0) told->who = r;
      told->any = told->who >= 0;
      told->everyone = true;  // an allgather: every rank saw every flag
      return Status::Ok();
    };
    hooks.part = [&](void* const* h, size_t off, size_t n) {
      return c->Allreduce(At(h[0], off), At(h[1], off), n / DtypeSize(dtype), dtype, op);
    };
    hooks.abort = Aborter(c);
    return Pipeline()->Run(bufs, 2, part, hooks);
  }
  return RunStaged(bufs, [&](void** h) { return c->Allreduce(h[0], h[1], count, dtype, op); });
}

Status DevicePath::Broadcast(Collectives* c, void* buf, size_t count, zc_dtype dtype, int root,
                             bool* used_ipc) {
  *used_ipc = false;
  const size_t bytes = count * DtypeSize(dtype);
  const bool is_root = c->group()->rank() == root;
  const StageArg bufs[1] = {StageArg{buf, bytes, is_root, !is_root, "buf"}};
  if (PassThrough(bufs, 1)) return c->Broadcast(buf, count, dtype, root);
  int device = -1;
  if (UseIpc(c, coll::Kind::kBroadcast, bufs, 1, bytes, ZC_SUM, &device)) {
    *used_ipc = true;
    return ipc_coll_->Broadcast(IpcGroup(c, coll::Kind::kBroadcast, count, dtype, ZC_SUM, root), buf,
                                bytes, root, device);
  }
  if (const size_t part = PartBytes(bufs, 1, bytes, dtype)) {
    PipelinedStaging::Hooks hooks;
    hooks.what = "broadcast";
    hooks.exchange = [&](bool mine, PipelinedStaging::Told* told) {
      uint8_t failed = mine;  // the root's travels down the tree
      ZC_RETURN_IF_ERROR(c->PartsExchange(coll::Kind::kBroadcast, count, dtype, ZC_SUM, root, &failed));
      told->any = mine || failed;
      told->who = failed ? root : mine ? c->group()->rank() : -1;
      told->everyone = failed;  // the root's failure reached every rank
      return Status::Ok();
    };
    hooks.part = [&](void* const* h, size_t off, size_t n) {
      return c->Broadcast(At(h[0], off), n / DtypeSize(dtype), dtype, root);
    };
    hooks.abort = Aborter(c);
    return Pipeline()->Run(bufs, 1, part, hooks);
  }
  return RunStaged(bufs, [&](void** h) { return c->Broadcast(h[0], count, dtype, root); });
}

Status DevicePath::Reduce(Collectives* c, const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op,
                          int root) {
  const size_t bytes = count * DtypeSize(dtype);
  const bool is_root = c->group()->rank() == root;
  const StageArg bufs[2] = {StageArg{send, bytes, true, false, "sendbuf"},
                            StageArg{is_root ? recv : nullptr, is_root ? bytes : 0, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->Reduce(send, recv, count, dtype, op, root);
  if (const size_t part = PartBytes(bufs, 2, bytes, dtype)) {
    PipelinedStaging::Hooks hooks;
    hooks.what = "reduce";
    hooks.exchange = [&](bool mine, PipelinedStaging::Told* told) {
      uint8_t failed = mine;  // at the root: whether any rank's was set
      ZC_RETURN_IF_ERROR(c->PartsExchange(coll::Kind::kReduce, count, dtype, op, root, &failed));
      told->any = mine || failed;
      told->who = mine ? c->group()->rank() : -1;
      return Status::Ok();
    };
    hooks.part = [&](void* const* h, size_t off, size_t n) {
      return c->Reduce(At(h[0], off), is_root ? At(h[1], off) : recv, n / DtypeSize(dtype), dtype, op, root);
    };
    hooks.abort = Aborter(c);
    return Pipeline()->Run(bufs, 2, part, hooks);
  }
  return RunStaged(bufs, [&](void** h) { return c->Reduce(h[0], is_root ? h[1] : recv, count, dtype, op, root); });
}

Status DevicePath::Allgather(Collectives* c, const void* send, void* recv, size_t sendcount,
                             zc_dtype dtype, bool* used_ipc) {
  *used_ipc = false;
  const size_t block = sendcount * DtypeSize(dtype), total = block * c->group()->size();
  const StageArg bufs[2] = {StageArg{send, block, true, false, "sendbuf"},
                            StageArg{recv, total, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->Allgather(send, recv, sendcount, dtype);
  int device = -1;
  if (UseIpc(c, coll::Kind::kAllgather, bufs, 2, total, ZC_SUM, &device)) {
    *used_ipc = true;
    return ipc_coll_->Allgather(IpcGroup(c, coll::Kind::kAllgather, sendcount, dtype, ZC_SUM, -1), send,
                                recv, block, device);
  }
  return RunStaged(bufs, [&](void** h) { return c->Allgather(h[0], h[1], sendcount, dtype); });
}

Status DevicePath::AllgatherList(Collectives* c, const void* send, void* const* recvs, size_t sendcount,
                                 zc_dtype dtype) {
  const size_t n = static_cast<size_t>(c->group()->size()), block = sendcount * DtypeSize(dtype);
  std::vector<StageArg> bufs;
  bufs.reserve(n + 1);
  bufs.push_back(StageArg{send, block, true, false, "sendbuf"});
  for (size_t k = 0; k < n; ++k) bufs.push_back(StageArg{recvs[k], block, false, true, "recvbufs"});
  if (PassThrough(bufs.data(), bufs.size())) return c->AllgatherList(send, recvs, sendcount, dtype);
  std::vector<void*> host(bufs.size());
  return RunStaged(bufs.data(), bufs.size(), host.data(),
                   [&](void** h) { return c->AllgatherList(h[0], h + 1, sendcount, dtype); });
}

Status DevicePath::ReduceScatter(Collectives* c, const void* send, void* recv, size_t recvcount,
                                 zc_dtype dtype, zc_op op, bool* used_ipc) {
  *used_ipc = false;
  const size_t block = recvcount * DtypeSize(dtype), total = block * c->group()->size();
  const StageArg bufs[2] = {StageArg{send, total, true, false, "sendbuf"},
                            StageArg{recv, block, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->ReduceScatter(send, recv, recvcount, dtype, op);
  int device = -1;
  if (UseIpc(c, coll::Kind::kReduceScatter, bufs, 2, total, op, &device)) {
    *used_ipc = true;
    return ipc_coll_->ReduceScatter(IpcGroup(c, coll::Kind::kReduceScatter, recvcount, dtype, op, -1),
                                    send, recv, recvcount, dtype, op, device);
  }
  return RunStaged(bufs, [&](void** h) { return c->ReduceScatter(h[0], h[1], recvcount, dtype, op); });
}

Status DevicePath::Alltoall(Collectives* c, const void* send, void* recv, size_t count, zc_dtype dtype,
                            bool* used_ipc) {
  *used_ipc = false;
  const size_t block = count * DtypeSize(dtype), total = block * c->group()->size();
  const StageArg bufs[2] = {StageArg{send, total, true, false, "sendbuf"},
                            StageArg{recv, total, false, true, "recvbuf"}};
  if (PassThrough(bufs, 2)) return c->Alltoall(send, recv, count, dtype);
  int device = -1;
  if (UseIpc(c, coll::Kind::kAlltoall, bufs, 2, total, ZC_SUM, &device)) {
    *used_ipc = true;
    return ipc_coll_->Alltoall(IpcGroup(c, coll::Kind::kAlltoall, count, dtype, ZC_SUM, -1), send, recv,
                               block, device);
  }
  return RunStaged(bufs, [&](void** h) { return c->Alltoall(h[0], h[1], count, dtype); });
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
  if (pipe_) pipe_->Close();
  ipc_coll_.reset();
  ipc_.reset();
  ipc_cache_.reset();
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (stream_) stream_->Close();
}

}  // namespace zc::gpu
