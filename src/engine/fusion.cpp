#include "engine/fusion.h"

#include <cstring>

#include "collectives/dtype.h"
#include "p2p/group.h"

namespace zc::engine {

void ScaledCopy(zc_dtype dtype, const void* src, void* dst, size_t count, double factor) {
  if (factor == 1.0 || !IsFloating(dtype)) {
    if (src != dst) memmove(dst, src, count * DtypeSize(dtype));
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
      auto* s = static_cast<const float*>(src);
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<float>(s[i] * factor);
      break;
    }
    case ZC_FLOAT16: {
      auto* s = static_cast<const uint16_t*>(src);
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = FloatToHalf(static_cast<float>(HalfToFloat(s[i]) * factor));
      break;
    }
    case ZC_BFLOAT16: {
      auto* s = static_cast<const uint16_t*>(src);
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i)
        d[i] = FloatToBFloat16(static_cast<float>(BFloat16ToFloat(s[i]) * factor));
      break;
    }
    default:
      break;
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
