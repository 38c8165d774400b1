#include "gpu_fake_driver.h"

#include <cstring>

namespace zc::gpu::testing {

FakeDriver& FakeDriver::Get() {
  static FakeDriver* d = new FakeDriver();
  return *d;
}

FakeDriver::FakeDriver() {
  table_.loaded = true;
  table_.version = 12040;
  table_.Init = &Init;
  table_.GetErrorName = &GetErrorName;
  table_.GetErrorString = &GetErrorString;
  table_.PointerGetAttributes = &PointerGetAttributes;
  table_.PointerGetAttribute = &PointerGetAttribute;
  table_.IpcGetMemHandle = &IpcGetMemHandle;
  table_.IpcOpenMemHandle = &IpcOpenMemHandle;
  table_.IpcCloseMemHandle = &IpcCloseMemHandle;
  absent_.loaded = false;
  absent_.error = "no CUDA driver: fake";
}

void FakeDriver::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  allocs_.clear();
  mappings_.clear();
  fail_ = 0;
  ctx_ = nullptr;
  attr_calls_ = ipc_gets_ = ipc_opens_ = ipc_closes_ = 0;
  // Buffer ids keep growing across resets, as in a real process.
}

DriverTable FakeDriver::StagingTable() const {
  DriverTable t = table_;
  t.MemHostAlloc = &HostAlloc;
  t.MemFreeHost = &FreeHost;
  t.CtxGetCurrent = &CtxGetCurrent;
  t.CtxSetCurrent = &CtxSetCurrent;
  t.CtxGetDevice = &CtxGetDevice;
  t.DeviceGet = &DeviceGet;
  t.DevicePrimaryCtxRetain = &PrimaryCtxRetain;
  return t;
}

CuContext FakeDriver::current_context() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_;
}

CuResult FakeDriver::HostAlloc(void** p, size_t bytes, unsigned) {
  *p = ::operator new(bytes);
  return cu::kSuccess;
}

CuResult FakeDriver::FreeHost(void* p) {
  ::operator delete(p);
  return cu::kSuccess;
}

CuResult FakeDriver::CtxGetCurrent(CuContext* c) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  *c = d.ctx_;
  return cu::kSuccess;
}

CuResult FakeDriver::CtxSetCurrent(CuContext c) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  d.ctx_ = c;
  return cu::kSuccess;
}

CuResult FakeDriver::CtxGetDevice(CuDevice* d) {
  *d = 0;
  return cu::kSuccess;
}

CuResult FakeDriver::DeviceGet(CuDevice* d, int ordinal) {
  *d = ordinal;
  return cu::kSuccess;
}

CuResult FakeDriver::PrimaryCtxRetain(CuContext* c, CuDevice) {
  *c = reinterpret_cast<CuContext>(0x1000);
  return cu::kSuccess;
}

uint64_t FakeDriver::Alloc(uintptr_t base, size_t size, unsigned mem_type,
                           bool managed, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  allocs_[base] = FakeAlloc{base, size, mem_type, managed, device, id};
  id_base_[id] = base;
  return id;
}

void FakeDriver::Free(uintptr_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  allocs_.erase(base);
}

uintptr_t FakeDriver::BaseOf(uint64_t buffer_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = id_base_.find(buffer_id);
  return it == id_base_.end() ? 0 : it->second;
}

void FakeDriver::FailWith(CuResult r) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_ = r;
}

uint64_t FakeDriver::attr_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attr_calls_;
}
uint64_t FakeDriver::ipc_gets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ipc_gets_;
}
uint64_t FakeDriver::ipc_opens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ipc_opens_;
}
uint64_t FakeDriver::ipc_closes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ipc_closes_;
}
size_t FakeDriver::open_mappings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mappings_.size();
}

const FakeAlloc* FakeDriver::FindLocked(uintptr_t p) const {
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return nullptr;
  --it;
  if (p >= it->second.base + it->second.size) return nullptr;
  return &it->second;
}

// Writes values with the widths the real driver uses (1-byte bool, 4-byte
// enum and int, 8-byte id/address/size) to catch width mistakes.
CuResult FakeDriver::PointerGetAttributes(unsigned n, int* attrs, void** data,
                                          CuDevicePtr p) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  ++d.attr_calls_;
  if (d.fail_ != 0) return d.fail_;
  const FakeAlloc* a = d.FindLocked(static_cast<uintptr_t>(p));
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case cu::kPointerAttrMemoryType: {
        const unsigned v = a != nullptr ? a->mem_type : 0;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      case cu::kPointerAttrBufferId: {
        const unsigned long long v = a != nullptr ? a->buffer_id : 0;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      case cu::kPointerAttrIsManaged: {
        const bool v = a != nullptr && a->managed;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      case cu::kPointerAttrDeviceOrdinal: {
        const int v = a != nullptr ? a->device : -2;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      case cu::kPointerAttrRangeStartAddr: {
        const unsigned long long v = a != nullptr ? a->base : 0;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      case cu::kPointerAttrRangeSize: {
        const size_t v = a != nullptr ? a->size : 0;
        std::memcpy(data[i], &v, sizeof v);
        break;
      }
      default:
        return cu::kErrorInvalidValue;
    }
  }
  return cu::kSuccess;
}

CuResult FakeDriver::PointerGetAttribute(void* data, int attr, CuDevicePtr p) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  ++d.attr_calls_;
  if (d.fail_ != 0) return d.fail_;
  const FakeAlloc* a = d.FindLocked(static_cast<uintptr_t>(p));
  if (a == nullptr) return cu::kErrorInvalidValue;  // like the real one
  if (attr != cu::kPointerAttrBufferId) return cu::kErrorInvalidValue;
  const unsigned long long v = a->buffer_id;
  std::memcpy(data, &v, sizeof v);
  return cu::kSuccess;
}

CuResult FakeDriver::GetErrorName(CuResult r, const char** s) {
  switch (r) {
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 3: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    default: *s = nullptr; return cu::kErrorInvalidValue;
  }
}

CuResult FakeDriver::GetErrorString(CuResult r, const char** s) {
  switch (r) {
    case 1: *s = "invalid argument"; return 0;
    case 3: *s = "initialization error"; return 0;
    case 700: *s = "an illegal memory access was encountered"; return 0;
    case 2: *s = "out of memory"; return 0;
    default: *s = nullptr; return cu::kErrorInvalidValue;
  }
}

CuResult FakeDriver::Init(unsigned) { return cu::kSuccess; }

// The handle carries the buffer id, so an open can be checked against it.
CuResult FakeDriver::IpcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  ++d.ipc_gets_;
  const FakeAlloc* a = d.FindLocked(static_cast<uintptr_t>(p));
  if (a == nullptr || a->base != p ||
      a->mem_type != cu::kMemoryTypeDevice || a->managed) {
    return cu::kErrorInvalidValue;
  }
  std::memset(h, 0, sizeof *h);
  std::memcpy(h->reserved, &a->buffer_id, sizeof a->buffer_id);
  return cu::kSuccess;
}

CuResult FakeDriver::IpcOpenMemHandle(CuDevicePtr* p, CuIpcMemHandle h,
                                      unsigned) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  ++d.ipc_opens_;
  uint64_t id = 0;
  std::memcpy(&id, h.reserved, sizeof id);
  for (const auto& m : d.mappings_) {
    if (m.second == id) return cu::kErrorAlreadyMapped;  // real driver rule
  }
  *p = d.next_map_;
  d.next_map_ += 1ull << 30;
  d.mappings_[*p] = id;
  return cu::kSuccess;
}

CuResult FakeDriver::IpcCloseMemHandle(CuDevicePtr p) {
  FakeDriver& d = Get();
  std::lock_guard<std::mutex> lock(d.mu_);
  ++d.ipc_closes_;
  if (d.mappings_.erase(p) == 0) return cu::kErrorInvalidValue;
  return cu::kSuccess;
}

}  // namespace zc::gpu::testing
