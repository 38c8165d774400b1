#include "gpu/ipc_cache.h"

#include <cstring>

#include "common/log.h"

namespace zc::gpu {

IpcCache::IpcCache(const DriverTable* drv, PointerCache* cache)
    : fixed_driver_(drv),
      cache_(cache != nullptr ? cache : &PointerCache::Global()) {}

IpcCache::~IpcCache() {
  Status st = CloseAll();
  if (!st.ok()) ZC_WARN(kGpu, "IPC cache teardown: %s", st.message().c_str());
}

Status IpcCache::Driver(const DriverTable** drv) {
  if (fixed_driver_ != nullptr) {
    if (!fixed_driver_->loaded) {
      return Status(ZC_ERR_UNSUPPORTED, "CUDA IPC: no CUDA driver");
    }
    *drv = fixed_driver_;
    return Status::Ok();
  }
  Status st = LoadDriver(drv);
  return st.with_context("CUDA IPC");
}

Status IpcCache::Export(const void* ptr, size_t bytes, IpcDescriptor* out) {
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Driver(&drv));
  if (drv->IpcGetMemHandle == nullptr) {
    return Status(ZC_ERR_UNSUPPORTED,
                  "CUDA IPC export: driver lacks cuIpcGetMemHandle");
  }
  PointerInfo info;
  ZC_RETURN_IF_ERROR(cache_->Classify(ptr, bytes, &info).with_context(
      "CUDA IPC export"));
  if (info.type != MemType::kDevice || info.buffer_id == 0) {
    return Error(ZC_ERR_UNSUPPORTED,
                 "CUDA IPC export of %p: %s memory%s cannot be shared by CUDA "
                 "IPC",
                 ptr, MemTypeName(info.type),
                 info.buffer_id == 0 && info.type == MemType::kDevice
                     ? " (declared, no driver buffer id)"
                     : "");
  }
  // The cached classification may predate a free and re-allocation at the
  // same address: confirm the buffer id before reusing anything.
  if (!cache_->Validate(info)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      exports_.erase(info.buffer_id);  // that allocation is gone
    }
    ZC_RETURN_IF_ERROR(cache_->Classify(ptr, bytes, &info).with_context(
        "CUDA IPC export"));
    if (info.type != MemType::kDevice || info.buffer_id == 0) {
      return Error(ZC_ERR_UNSUPPORTED,
                   "CUDA IPC export of %p: %s memory cannot be shared", ptr,
                   MemTypeName(info.type));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = exports_.find(info.buffer_id);
  if (it != exports_.end()) {
    out->handle = it->second;
    ++stats_.export_reuses;
  } else {
    CuIpcMemHandle h;
    std::memset(&h, 0, sizeof h);
    const CuResult r = drv->IpcGetMemHandle(&h, info.base);
    if (r != cu::kSuccess) {
      return Status(ZC_ERR_SYSTEM,
                    Format("CUDA IPC export of %p: cuIpcGetMemHandle: %s", ptr,
                           CuErrorText(drv, r).c_str()));
    }
    exports_.emplace(info.buffer_id, h);
    out->handle = h;
    ++stats_.exports;
  }
  out->buffer_id = info.buffer_id;
  out->base = info.base;
  out->size = info.size;
  out->offset = reinterpret_cast<uintptr_t>(ptr) - info.base;
  out->device = info.device;
  out->reserved = 0;
  return Status::Ok();
}

Status IpcCache::CloseLocked(const DriverTable* drv,
                             std::map<ImportKey, Import>::iterator it) {
  const CuDevicePtr mapped = it->second.mapped;
  const int peer = it->first.first;
  imports_.erase(it);
  cache_->Invalidate(reinterpret_cast<const void*>(mapped));
  ++stats_.closes;
  if (drv->IpcCloseMemHandle == nullptr) {
    return Status(ZC_ERR_UNSUPPORTED,
                  "CUDA IPC close: driver lacks cuIpcCloseMemHandle");
  }
  const CuResult r = drv->IpcCloseMemHandle(mapped);
  if (r != cu::kSuccess) {
    return Status(ZC_ERR_SYSTEM,
                  Format("CUDA IPC close of peer %d mapping %#llx: "
                         "cuIpcCloseMemHandle: %s",
                         peer, static_cast<unsigned long long>(mapped),
                         CuErrorText(drv, r).c_str()));
  }
  return Status::Ok();
}

Status IpcCache::Open(int peer, const IpcDescriptor& desc, int local_device,
                      void** mapped) {
  *mapped = nullptr;
  if (desc.buffer_id == 0 || desc.size == 0 || desc.offset >= desc.size) {
    return Error(ZC_ERR_INVALID_ARG,
                 "CUDA IPC open from peer %d: malformed descriptor (buffer id "
                 "%llu, size %llu, offset %llu)",
                 peer, static_cast<unsigned long long>(desc.buffer_id),
                 static_cast<unsigned long long>(desc.size),
                 static_cast<unsigned long long>(desc.offset));
  }
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Driver(&drv));
  if (drv->IpcOpenMemHandle == nullptr) {
    return Status(ZC_ERR_UNSUPPORTED,
                  "CUDA IPC open: driver lacks cuIpcOpenMemHandle");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const ImportKey key{peer, desc.buffer_id};
  auto it = imports_.find(key);
  if (it != imports_.end()) {
    ++stats_.open_reuses;
    *mapped = reinterpret_cast<void*>(it->second.mapped + desc.offset);
    return Status::Ok();
  }
  // An older allocation of this peer over the same addresses is gone: close
  // its mapping (it pins the peer's freed memory and would alias).
  const uint64_t lo = desc.base, hi = desc.base + desc.size;
  for (auto cur = imports_.lower_bound({peer, 0});
       cur != imports_.end() && cur->first.first == peer;) {
    const bool overlap = cur->second.base < hi && lo < cur->second.base + cur->second.size;
    if (!overlap) {
      ++cur;
      continue;
    }
    auto next = std::next(cur);
    ZC_TRACE(kGpu, "CUDA IPC: peer %d buffer %llu replaced by %llu; closing",
             peer, static_cast<unsigned long long>(cur->first.second),
             static_cast<unsigned long long>(desc.buffer_id));
    Status st = CloseLocked(drv, cur);
    if (!st.ok()) ZC_WARN(kGpu, "%s", st.message().c_str());
    cur = next;
  }
  if (fixed_driver_ == nullptr) {
    ZC_RETURN_IF_ERROR(EnsureContext(drv, local_device)
                           .with_context(Format("CUDA IPC open from peer %d", peer)));
  }
  CuDevicePtr dptr = 0;
  const CuResult r =
      drv->IpcOpenMemHandle(&dptr, desc.handle, cu::kIpcMemLazyEnablePeerAccess);
  if (r != cu::kSuccess) {
    return Status(ZC_ERR_SYSTEM,
                  Format("CUDA IPC open of peer %d buffer %llu (%llu bytes, "
                         "device %d) on device %d: cuIpcOpenMemHandle: %s",
                         peer, static_cast<unsigned long long>(desc.buffer_id),
                         static_cast<unsigned long long>(desc.size), desc.device,
                         local_device, CuErrorText(drv, r).c_str()));
  }
  imports_.emplace(key, Import{desc.base, desc.size, dptr});
  ++stats_.opens;
  *mapped = reinterpret_cast<void*>(dptr + desc.offset);
  return Status::Ok();
}

Status IpcCache::ClosePeer(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (imports_.empty()) return Status::Ok();
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Driver(&drv));
  Status first;
  for (auto it = imports_.lower_bound({peer, 0});
       it != imports_.end() && it->first.first == peer;) {
    auto next = std::next(it);
    Status st = CloseLocked(drv, it);
    if (first.ok() && !st.ok()) first = st;
    it = next;
  }
  return first;
}

Status IpcCache::CloseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  exports_.clear();
  if (imports_.empty()) return Status::Ok();
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Driver(&drv));
  Status first;
  while (!imports_.empty()) {
    Status st = CloseLocked(drv, imports_.begin());
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

IpcCache::Stats IpcCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace zc::gpu
