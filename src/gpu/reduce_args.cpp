// Argument checks and names for the GPU reduction kernels, compiled in
// every build so that the CUDA and the stub implementation agree.
#include <cmath>
#include <cstdint>

#include "collectives/dtype.h"
#include "gpu/reduce_kernels.h"

namespace zc::gpu {

// The one dtype/op table of the library (collectives/dtype.h).
size_t GpuDtypeSize(zc_dtype dtype) { return DtypeSize(dtype); }
const char* GpuDtypeName(zc_dtype dtype) { return DtypeName(dtype); }
const char* GpuOpName(zc_op op) { return OpName(op); }

Status CheckReduceArgs(const char* what, const void* c, const void* a,
                       const void* b, size_t count, zc_dtype dtype, zc_op op) {
  const size_t es = GpuDtypeSize(dtype);
  if (es == 0) {
    return Error(ZC_ERR_INVALID_ARG, "%s: unknown dtype %d", what,
                 static_cast<int>(dtype));
  }
  if (static_cast<int>(op) < ZC_SUM || static_cast<int>(op) > ZC_BXOR) {
    return Error(ZC_ERR_INVALID_ARG, "%s: unknown op %d", what,
                 static_cast<int>(op));
  }
  // The kernels have no bitwise ops: the C API never sends band/bor/bxor
  // here (UseIpcAllreduce refuses them, so device buffers are staged
  // through host memory and reduced by the CPU kernels).
  if (IsBitwise(op)) {
    return Error(ZC_ERR_UNSUPPORTED,
                 "%s: op %s has no GPU kernel (reduced on the host instead)",
                 what, GpuOpName(op));
  }
  if (op == ZC_AVG && !IsFloating(dtype)) {
    return Error(ZC_ERR_INVALID_ARG,
                 "%s: avg is defined for floating types only, not %s", what,
                 GpuDtypeName(dtype));
  }
  if (count == 0) return Status::Ok();
  if (count > SIZE_MAX / es) {
    return Error(ZC_ERR_INVALID_ARG, "%s: %zu %s elements overflow size_t",
                 what, count, GpuDtypeName(dtype));
  }
  const void* ptrs[] = {c, a, b};
  const char* names[] = {"destination", "first input", "second input"};
  for (int i = 0; i < 3; ++i) {
    if (ptrs[i] == nullptr) {
      return Error(ZC_ERR_INVALID_ARG, "%s: %s is null with count %zu", what,
                   names[i], count);
    }
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % es != 0) {
      return Error(ZC_ERR_INVALID_ARG,
                   "%s: %s %p is not aligned to the %zu-byte %s element", what,
                   names[i], ptrs[i], es, GpuDtypeName(dtype));
    }
  }
  return Status::Ok();
}

Status CheckScaleArgs(const void* a, size_t count, zc_dtype dtype,
                      double divisor) {
  const size_t es = GpuDtypeSize(dtype);
  if (es == 0) {
    return Error(ZC_ERR_INVALID_ARG, "GPU scale-div: unknown dtype %d",
                 static_cast<int>(dtype));
  }
  if (!IsFloating(dtype)) {
    return Error(ZC_ERR_INVALID_ARG,
                 "GPU scale-div: %s is not a floating type (avg needs one)",
                 GpuDtypeName(dtype));
  }
  if (!(divisor > 0.0) || !std::isfinite(divisor)) {
    return Error(ZC_ERR_INVALID_ARG,
                 "GPU scale-div: divisor %g must be positive and finite",
                 divisor);
  }
  if (count == 0) return Status::Ok();
  if (a == nullptr) {
    return Error(ZC_ERR_INVALID_ARG, "GPU scale-div: buffer is null with count %zu",
                 count);
  }
  if (reinterpret_cast<uintptr_t>(a) % es != 0) {
    return Error(ZC_ERR_INVALID_ARG,
                 "GPU scale-div: buffer %p is not aligned to the %zu-byte %s "
                 "element",
                 a, es, GpuDtypeName(dtype));
  }
  return Status::Ok();
}

Status CheckScaleCopyArgs(const void* dst, const void* src, size_t count,
                          zc_dtype dtype, double factor) {
  const size_t es = GpuDtypeSize(dtype);
  if (es == 0)
    return Error(ZC_ERR_INVALID_ARG, "GPU scale: unknown dtype %d", static_cast<int>(dtype));
  if (!std::isfinite(factor))
    return Error(ZC_ERR_INVALID_ARG, "GPU scale: factor %g must be finite", factor);
  if (count == 0) return Status::Ok();
  if (dst == nullptr || src == nullptr)
    return Error(ZC_ERR_INVALID_ARG, "GPU scale: null buffer with %zu elements", count);
  if (reinterpret_cast<uintptr_t>(dst) % es != 0 || reinterpret_cast<uintptr_t>(src) % es != 0)
    return Error(ZC_ERR_INVALID_ARG, "GPU scale: %s buffers must be %zu-byte aligned", GpuDtypeName(dtype), es);
  return Status::Ok();
}

}  // namespace zc::gpu
