// CPU reduction kernels for every dtype x op: the inner loops of allreduce,
// reduce and reduce-scatter.
//
// Semantics shared by every function here:
//  - dtype and op must be valid (check once with CheckDtypeOp); an unknown
//    dtype or op does nothing.
//  - Pointers need no alignment. count 0 does nothing (pointers may be null).
//  - Integer SUM and PROD wrap like two's complement; MIN and MAX compare as
//    the signed or unsigned type.
//  - Bool (one byte; 0 is false, any other value true) is logical: SUM, MAX
//    and BOR are "or", PROD, MIN and BAND "and", BXOR "xor". Every output
//    byte is 0 or 1, whatever the input bytes, a single input (ReduceN with
//    n = 1, ReduceOne) included.
//  - Floating MIN and MAX propagate NaN, like torch.minimum/maximum: the
//    result is NaN where either input is NaN. min(-0, +0) returns the first
//    operand.
//  - AVG reduces as SUM; the caller divides once at the end with ScaleDiv.
//  - float16/bfloat16 are computed in float and rounded once per output
//    element (round to nearest even). For two inputs this equals the exactly
//    rounded result of the exact sum/product.
//  - An output may be the very same buffer as an input (same pointer); other
//    overlaps are not allowed.
//
// The loops are picked at run time: AVX2+F16C where the CPU has them,
// otherwise baseline code the compiler vectorizes for SSE2.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <cstdint>

#include "collectives/dtype.h"

namespace zc {

// dst = op(dst, src)
void ReduceInto(zc_dtype d, zc_op op, void* dst, const void* src,
                size_t count);
// dst = op(a, b); dst may equal a or b.
void Reduce2(zc_dtype d, zc_op op, void* dst, const void* a, const void* b,
             size_t count);
// dst = op(srcs[0], ..., srcs[n-1]) in that order, each input read once and
// dst written once (memory traffic n reads + 1 write). fp16/bf16 accumulate
// in float and round once at the end. dst may equal any srcs[i]. n >= 1.
void ReduceN(zc_dtype d, zc_op op, void* dst, const void* const* srcs, int n,
             size_t count);
// The reduction of a single input (a job of one rank): a copy, except that
// bool bytes become 0 or 1. dst may equal src (in place).
void ReduceOne(zc_dtype d, void* dst, const void* src, size_t count);
// buf[i] = buf[i] / divisor. The quotient is computed in float where the
// divisor is exactly a float, else in double, and rounded to the element
// type: correctly rounded for float32/float64, and for fp16/bf16 with
// integer divisors below 8192 (any world size). Floating types only:
// integer types are left untouched.
void ScaleDiv(zc_dtype d, void* buf, size_t count, double divisor);

// Bulk conversions with the fastest available instructions; same results
// as the scalar functions in dtype.h. src and dst must not overlap.
void HalfToFloatN(float* dst, const void* src, size_t count);
void FloatToHalfN(void* dst, const float* src, size_t count);
void BFloat16ToFloatN(float* dst, const void* src, size_t count);
void FloatToBFloat16N(void* dst, const float* src, size_t count);

// Which loops are in use. For tests and benchmarks: SetKernelIsa returns
// false (and changes nothing) when the CPU lacks the ISA. Not meant to be
// switched while other threads reduce.
enum class KernelIsa { kGeneric, kAvx2 };
KernelIsa ActiveKernelIsa();
const char* KernelIsaName(KernelIsa isa);
bool KernelIsaSupported(KernelIsa isa);
bool SetKernelIsa(KernelIsa isa);

}  // namespace zc
