#include "gpu/host_staging.h"

#include <algorithm>

namespace zc::gpu {

HostStaging::HostStaging(const DriverTable* drv, PointerCache* cache, PinnedPool* pool)
    : fixed_driver_(drv),
      cache_(cache != nullptr ? cache : &PointerCache::Global()),
      pool_(pool != nullptr ? pool : &PinnedPool::Global()) {}

HostStaging::~HostStaging() {
  for (Item& it : items_) pool_->Release(it.host, it.cap);
}

const DriverTable* HostStaging::driver() const {
  return fixed_driver_ != nullptr ? fixed_driver_ : LoadedDriver();
}

Status HostStaging::Plan(const StageArg* args, size_t n, void** host, const DriverTable** drv_out) {
  // Classify; host memory is final at once.
  std::vector<size_t> dev_args;
  for (size_t i = 0; i < n; ++i) {
    host[i] = const_cast<void*>(args[i].ptr);
    if (args[i].ptr == nullptr || args[i].bytes == 0) continue;
    PointerInfo info;
    Status st = cache_->Classify(args[i].ptr, args[i].bytes, &info);
    if (!st.ok()) return st.with_context(args[i].name);
    if (info.type != MemType::kDevice && info.type != MemType::kManaged) continue;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(args[i].ptr);
    items_.push_back(Item{lo, lo + args[i].bytes, info.device, args[i].in, args[i].out,
                          args[i].name});
    dev_args.push_back(i);
  }
  if (items_.empty()) return Status::Ok();

  // Merge overlapping ranges so aliased buffers share one copy.
  std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) { return a.lo < b.lo; });
  std::vector<Item> merged;
  for (const Item& it : items_) {
    if (!merged.empty() && it.lo < merged.back().hi) {
      Item& m = merged.back();
      m.hi = std::max(m.hi, it.hi);
      m.in |= it.in;
      m.out |= it.out;
    } else {
      merged.push_back(it);
    }
  }
  items_ = std::move(merged);

  const DriverTable* drv = driver();
  if (drv == nullptr || drv->MemcpyDtoH == nullptr || drv->MemcpyHtoD == nullptr) {
    return Error(ZC_ERR_UNSUPPORTED, "%s is CUDA memory, but the driver lacks cuMemcpy",
                 items_[0].name);
  }
  // The copies and the pinning need a context; the buffers' device's primary
  // context is the one the application's CUDA runtime uses.
  const int device = std::max(items_[0].device, 0);
  ZC_RETURN_IF_ERROR(EnsureContext(drv, device));

  for (Item& it : items_) {
    Status st = pool_->Acquire(it.hi - it.lo, &it.host, &it.cap);
    if (!st.ok()) return st.with_context(it.name);
  }
  for (size_t i : dev_args) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(args[i].ptr);
    for (const Item& it : items_) {
      if (p >= it.lo && p < it.hi) {
        host[i] = static_cast<char*>(it.host) + (p - it.lo);
        break;
      }
    }
  }
  *drv_out = drv;
  return Status::Ok();
}

Status HostStaging::CopyError(const DriverTable* drv, const Item& it, bool to_host, CuResult r) const {
  if (to_host)
    return Error(ZC_ERR_SYSTEM, "%s: copy of %zu bytes from GPU %d to host: %s", it.name,
                 static_cast<size_t>(it.hi - it.lo), it.device, CuErrorText(drv, r).c_str());
  return Error(ZC_ERR_SYSTEM, "%s: copy of %zu bytes from host to GPU %d: %s", it.name,
               static_cast<size_t>(it.hi - it.lo), it.device, CuErrorText(drv, r).c_str());
}

Status HostStaging::Stage(const StageArg* args, size_t n, void** host) {
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Plan(args, n, host, &drv));
  for (Item& it : items_) {
    if (!it.in) continue;
    CuResult r = drv->MemcpyDtoH(it.host, static_cast<CuDevicePtr>(it.lo), it.hi - it.lo);
    if (r != cu::kSuccess) return CopyError(drv, it, true, r);
  }
  return Status::Ok();
}

Status HostStaging::PlanOnStream(const StageArg* args, size_t n, void** host) {
  const DriverTable* drv = nullptr;
  ZC_RETURN_IF_ERROR(Plan(args, n, host, &drv));
  if (items_.empty()) return Status::Ok();
  if (drv->MemcpyDtoHAsync == nullptr || drv->MemcpyHtoDAsync == nullptr)
    return Error(ZC_ERR_UNSUPPORTED, "%s is CUDA memory, but the driver lacks cuMemcpyDtoHAsync", items_[0].name);
  return Status::Ok();
}

Status HostStaging::CopyInOnStream(CuStream stream, size_t offset, size_t len) {
  const DriverTable* drv = driver();
  for (const Item& it : items_) {
    const size_t size = it.hi - it.lo;
    if (!it.in || offset >= size) continue;
    const size_t n = std::min(len, size - offset);
    CuResult r = drv->MemcpyDtoHAsync(static_cast<char*>(it.host) + offset, static_cast<CuDevicePtr>(it.lo + offset),
                                      n, stream);
    if (r != cu::kSuccess) return CopyError(drv, it, true, r);
  }
  return Status::Ok();
}

Status HostStaging::CopyOutOnStream(CuStream stream, size_t offset, size_t len) {
  const DriverTable* drv = driver();
  for (const Item& it : items_) {
    const size_t size = it.hi - it.lo;
    if (!it.out || offset >= size) continue;
    const size_t n = std::min(len, size - offset);
    CuResult r = drv->MemcpyHtoDAsync(static_cast<CuDevicePtr>(it.lo + offset), static_cast<char*>(it.host) + offset,
                                      n, stream);
    if (r != cu::kSuccess) return CopyError(drv, it, false, r);
  }
  return Status::Ok();
}

Status HostStaging::CopyOut() {
  const DriverTable* drv = driver();
  for (const Item& it : items_) {
    if (!it.out) continue;
    const size_t bytes = it.hi - it.lo;
    CuResult r = drv->MemcpyHtoD(static_cast<CuDevicePtr>(it.lo), it.host, bytes);
    if (r != cu::kSuccess) return CopyError(drv, it, false, r);
  }
  return Status::Ok();
}

}  // namespace zc::gpu
