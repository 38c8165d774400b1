// CPU reference for the GPU reduction kernels, written independently of
// src/collectives (plain scalar code, obviously correct rather than fast).
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <cstdint>

namespace zc::gpu::testing {

float RefHalfToFloat(uint16_t h);
uint16_t RefFloatToHalf(float f);  // round to nearest even
float RefBf16ToFloat(uint16_t h);
uint16_t RefFloatToBf16(float f);  // round to nearest even

size_t RefDtypeSize(zc_dtype d);

// c[i] = op(a[i], b[i]); AVG reduces as SUM. bool is logical (sum and max:
// or; prod and min: and) and writes 0 or 1.
void RefReduce(void* c, const void* a, const void* b, size_t n, zc_dtype d,
               zc_op op);
// a[i] /= divisor, rounded once (as documented in gpu/reduce_kernels.h).
void RefScaleDiv(void* a, size_t n, zc_dtype d, double divisor);

// Random values; for floating types the first elements are specials
// (+-0, +-inf, NaN, denormals, extremes) when specials is true.
void RefFill(void* buf, size_t n, zc_dtype d, uint64_t seed, bool specials);

// Index of the first element that differs (bitwise; two NaNs are equal), or
// n when none does.
size_t RefFirstMismatch(const void* x, const void* y, size_t n, zc_dtype d);

}  // namespace zc::gpu::testing
