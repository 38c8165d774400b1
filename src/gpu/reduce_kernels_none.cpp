// Stub of the GPU reduction kernels for a build without CUDA: arguments are
// still checked (so errors match the CUDA build), then any call with work to
// do fails with ZC_ERR_UNSUPPORTED.
#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {
Status NoCuda(const char* what) {
  return Error(ZC_ERR_UNSUPPORTED, "%s: zcomm was built without CUDA", what);
}
}  // namespace

bool ReduceKernelsBuilt() { return false; }

Status ReduceInto(void* c, const void* a, const void* b, size_t count,
                  zc_dtype dtype, zc_op op, void* /*stream*/) {
  ZC_RETURN_IF_ERROR(CheckReduceArgs("GPU reduce", c, a, b, count, dtype, op));
  if (count == 0) return Status::Ok();
  return NoCuda("GPU reduce");
}

Status ReduceInPlace(void* a, const void* b, size_t count, zc_dtype dtype,
                     zc_op op, void* stream) {
  return ReduceInto(a, a, b, count, dtype, op, stream);
}

Status ScaleDiv(void* a, size_t count, zc_dtype dtype, double divisor,
                void* /*stream*/) {
  ZC_RETURN_IF_ERROR(CheckScaleArgs(a, count, dtype, divisor));
  if (count == 0) return Status::Ok();
  return NoCuda("GPU scale-div");
}

Status ScaleCopy(void* dst, const void* src, size_t count, zc_dtype dtype,
                 double factor, void* /*stream*/) {
  ZC_RETURN_IF_ERROR(CheckScaleCopyArgs(dst, src, count, dtype, factor));
  if (count == 0) return Status::Ok();
  return NoCuda("GPU scale");
}

Status SynchronizeStream(void* /*stream*/, const char* what) {
  return NoCuda(what != nullptr ? what : "GPU stream synchronize");
}

}  // namespace zc::gpu
