// Reduction loops for the baseline ISA (SSE2 on x86-64, or whatever the
// target is): the compiler vectorizes the plain loops of reduce_impl.h, and
// fp16 goes through the branch-free scalar conversions of dtype.h.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "collectives/reduce_table.h"

namespace zc::kernels::generic {
namespace {

typedef uint16_t U16 __attribute__((aligned(1)));

void LoadHalf(float* __restrict dst, const unsigned char* src, size_t n) {
  const U16* s = reinterpret_cast<const U16*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(s[i]);
}

void StoreHalf(unsigned char* dst, const float* __restrict src, size_t n) {
  U16* d = reinterpret_cast<U16*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(src[i]);
}

void LoadBf16(float* __restrict dst, const unsigned char* src, size_t n) {
  const U16* s = reinterpret_cast<const U16*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(s[i]);
}

void StoreBf16(unsigned char* dst, const float* __restrict src, size_t n) {
  U16* d = reinterpret_cast<U16*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(src[i]);
}

}  // namespace
}  // namespace zc::kernels::generic

#define ZC_KERNEL_NS generic
#include "collectives/reduce_impl.h"
