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

void LoadHalf(float* __restrict dst, const unsigned char* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = HalfToFloat(h);
  }
}

void StoreHalf(unsigned char* dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToHalf(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

}  // namespace
}  // namespace zc::kernels::generic

#define ZC_KERNEL_NS generic
#include "collectives/reduce_impl.h"
