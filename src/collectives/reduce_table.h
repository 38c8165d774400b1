// The dispatch table behind reduce_kernels.h: one instance per ISA, each
// built from reduce_impl.h in its own translation unit.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace zc::kernels {

struct Table {
  // dst = op(a, b); handles dst == a and/or dst == b.
  using BinaryFn = void (*)(void* dst, const void* a, const void* b,
                            size_t count);
  using ReduceNFn = void (*)(void* dst, const void* const* srcs, int n,
                             size_t count);
  using ScaleFn = void (*)(void* buf, size_t count, double divisor);
  using ToFloatFn = void (*)(float* dst, const void* src, size_t count);
  using FromFloatFn = void (*)(void* dst, const float* src, size_t count);

  // Bitwise ops on floating types are null (never called: CheckDtypeOp).
  BinaryFn binary[kNumDtypes][kNumOps];
  ReduceNFn reduce_n[kNumDtypes][kNumOps];
  ScaleFn scale_div[kNumDtypes];  // null for integer types
  ToFloatFn half_to_float, bf16_to_float;
  FromFloatFn float_to_half, float_to_bf16;
};

namespace generic {
const Table& GetTable();
}
namespace avx2 {
const Table& GetTable();  // call only where the CPU has AVX2 and F16C
}

}  // namespace zc::kernels
