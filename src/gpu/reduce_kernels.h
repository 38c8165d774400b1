// GPU reduction kernels: the inner loops of CUDA-aware allreduce, reduce
// and reduce-scatter (Awan et al. §V-A). Usable without CUDA headers; the
// stream is a cudaStream_t (or CUstream) passed as void*, nullptr for the
// legacy default stream. Calls are asynchronous on that stream; use
// SynchronizeStream() before reading results on the host.
//
// Semantics, the same as the CPU kernels in src/collectives:
//  - every zc_dtype x zc_op; AVG reduces as SUM and the caller divides once
//    at the end with ScaleDiv (AVG on an integer type or bool:
//    ZC_ERR_INVALID_ARG);
//  - integer SUM and PROD wrap (two's complement); MIN/MAX compare as the
//    signed or unsigned type;
//  - bool is logical and writes 0 or 1 (any nonzero input byte is true):
//    SUM and MAX are "or", PROD and MIN "and";
//  - floating MIN/MAX propagate NaN (result is NaN where either input is);
//    equal operands give the first;
//  - float16/bfloat16 are 16-bit words computed in float and rounded once
//    per output element (round to nearest even);
//  - count 0 does nothing (pointers may be null);
//  - pointers must be aligned to the element size (the GPU faults on
//    misaligned loads): else ZC_ERR_INVALID_ARG. 16-byte vector loads are
//    used where the buffers are mutually aligned, scalar ones elsewhere.
// Kernels run on the calling thread's current CUDA device; the buffers and
// the stream must belong to it.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>

#include "common/status.h"

namespace zc::gpu {

// True when this build contains the CUDA kernels. Without CUDA every call
// below that has work to do returns ZC_ERR_UNSUPPORTED "zcomm was built
// without CUDA".
bool ReduceKernelsBuilt();

// c = op(a, b), elementwise over count elements. c may equal a or b.
Status ReduceInto(void* c, const void* a, const void* b, size_t count,
                  zc_dtype dtype, zc_op op, void* stream);

// a = op(a, b).
Status ReduceInPlace(void* a, const void* b, size_t count, zc_dtype dtype,
                     zc_op op, void* stream);

// a = a / divisor, floating types only (the last step of AVG). float32 and
// 16-bit types divide in float when divisor is exact in float, float64 in
// double; the result is rounded once to the element type.
Status ScaleDiv(void* a, size_t count, zc_dtype dtype, double divisor,
                void* stream);

// dst = src * factor elementwise, with Horovod's numerics (the engine's
// prescale and postscale on device tensors; the CPU version is
// engine::ScaledCopy): float32 multiplies by (float)factor in float32,
// float64 in double, float16/bfloat16 widen to float, multiply by
// (float)factor and round back (nearest even); integer types multiply in
// double, truncate toward zero and saturate at the type's bounds; bool and
// factor 1 copy. dst may equal src (other overlaps are not allowed);
// pointers element-aligned; factor finite.
Status ScaleCopy(void* dst, const void* src, size_t count, zc_dtype dtype,
                 double factor, void* stream);

// Waits for the stream; a kernel fault surfaces here. what names the
// operation in the message.
Status SynchronizeStream(void* stream, const char* what);

// Shared argument checks (used by the CUDA and the stub implementation):
// dtype/op valid, AVG floating only, non-null and element-aligned pointers
// when count > 0. `what` names the operation in the message.
Status CheckReduceArgs(const char* what, const void* c, const void* a,
                       const void* b, size_t count, zc_dtype dtype, zc_op op);
Status CheckScaleArgs(const void* a, size_t count, zc_dtype dtype,
                      double divisor);
Status CheckScaleCopyArgs(const void* dst, const void* src, size_t count,
                          zc_dtype dtype, double factor);

// Element size in bytes (0 for an unknown dtype) and names for messages.
size_t GpuDtypeSize(zc_dtype dtype);
const char* GpuDtypeName(zc_dtype dtype);
const char* GpuOpName(zc_op op);

}  // namespace zc::gpu
