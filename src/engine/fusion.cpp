#include "engine/fusion.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "collectives/dtype.h"
#include "p2p/group.h"

namespace zc::engine {

namespace {

// Integer scaling as Horovod (torch's (factor * t.double()).to(type)): the
// product in double, truncated toward zero; beyond the type's range it
// saturates at the nearest bound (C++ leaves that conversion undefined).
template <class T>
void ScaleInteger(const void* src, void* dst, size_t count, double factor) {
  static_assert(std::is_integral_v<T>);
  // 2^digits is one past the maximum; -2^digits is the signed minimum. Both
  // are exact in double.
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
  const double lo = std::is_signed_v<T> ? -hi : 0.0;
  const auto* s = static_cast<const T*>(src);
  auto* d = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) {
    const double v = std::trunc(static_cast<double>(s[i]) * factor);
    d[i] = v >= hi   ? std::numeric_limits<T>::max()
           : v <= lo ? std::numeric_limits<T>::min()
                     : static_cast<T>(v);
  }
}

// float16/bfloat16: widen to float, multiply by (float)factor in float,
// round back to nearest even.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Scale16(const void* src, void* dst, size_t count, float factor) {
  const auto* s = static_cast<const uint16_t*>(src);
  auto* d = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < count; ++i) d[i] = FromFloat(ToFloat(s[i]) * factor);
}

}  // namespace

void ScaledCopy(zc_dtype dtype, const void* src, void* dst, size_t count, double factor) {
  if (factor == 1.0 || dtype == ZC_BOOL || !IsValidDtype(dtype)) {
    // An empty tensor may have no storage (a null pointer): nothing to move.
    if (src != dst && count > 0 && IsValidDtype(dtype)) memmove(dst, src, count * DtypeSize(dtype));
    return;
  }
  switch (dtype) {
    case ZC_FLOAT64: {
      auto* s = static_cast<const double*>(src);
      auto* d = static_cast<double*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = s[i] * factor;
      break;
    }
    case ZC_FLOAT32: {
      // In float32 by the factor rounded to float, as Horovod (t * (float)f).
      const float f = static_cast<float>(factor);
      auto* s = static_cast<const float*>(src);
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = s[i] * f;
      break;
    }
    case ZC_FLOAT16:
      Scale16<HalfToFloat, FloatToHalf>(src, dst, count, static_cast<float>(factor));
      break;
    case ZC_BFLOAT16:
      Scale16<BFloat16ToFloat, FloatToBFloat16>(src, dst, count, static_cast<float>(factor));
      break;
    case ZC_INT8: ScaleInteger<int8_t>(src, dst, count, factor); break;
    case ZC_UINT8: ScaleInteger<uint8_t>(src, dst, count, factor); break;
    case ZC_INT16: ScaleInteger<int16_t>(src, dst, count, factor); break;
    case ZC_UINT16: ScaleInteger<uint16_t>(src, dst, count, factor); break;
    case ZC_INT32: ScaleInteger<int32_t>(src, dst, count, factor); break;
    case ZC_UINT32: ScaleInteger<uint32_t>(src, dst, count, factor); break;
    case ZC_INT64: ScaleInteger<int64_t>(src, dst, count, factor); break;
    case ZC_UINT64: ScaleInteger<uint64_t>(src, dst, count, factor); break;
    case ZC_BOOL: break;  // never scaled (Submit refuses factors on bool)
  }
}

FusionBuffer::~FusionBuffer() {
  if (data_) IgnoreError(group_->Free(data_), "destructor: best effort");
}

Status FusionBuffer::Reserve(size_t bytes, char** out) {
  if (bytes > bytes_) {
    size_t want = std::max<size_t>(bytes_ ? bytes_ : 64 << 10, 64 << 10);
    while (want < bytes) want *= 2;
    if (data_) ZC_RETURN_IF_ERROR(group_->Free(data_));
    data_ = nullptr;
    bytes_ = 0;
    MemRegion* r;
    ZC_RETURN_IF_ERROR(group_->Allocate(want, &r).with_context(Format("fusion buffer of %zu bytes", want)));
    data_ = static_cast<char*>(r->data());
    bytes_ = want;
  }
  *out = data_;
  return Status::Ok();
}

Status PlanCache::Allreduce(char* buf, size_t count, zc_dtype dtype, zc_op op, bool* reused) {
  *reused = false;
  Key key{count, dtype, op};
  auto it = plans_.find(key);
  if (it == plans_.end() && count > 0) {
    if (seen_.size() >= kMaxSeen) seen_.clear();
    if (++seen_[key] >= 2 && plans_.size() < kMaxPlans) {
      std::unique_ptr<AllreducePlan> plan;
      ZC_RETURN_IF_ERROR(coll_->PlanAllreduce(count, dtype, op, &plan));
      it = plans_.emplace(key, std::move(plan)).first;
    }
  } else if (it != plans_.end()) {
    *reused = true;
  }
  if (it == plans_.end()) return coll_->Allreduce(buf, buf, count, dtype, op);
  ZC_RETURN_IF_ERROR(it->second->Start(buf, buf));
  return it->second->Wait();
}

}  // namespace zc::engine
