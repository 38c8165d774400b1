// Reduction loops for CPUs with AVX2 and F16C (Haswell, Zen and later),
// chosen at run time by reduce_kernels.cpp. The whole file after the pragma
// is compiled for AVX2; every function it defines has internal linkage
// except GetTable, and all headers come before the pragma (see
// reduce_impl.h), so no AVX2 code can leak to a CPU without it.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "collectives/reduce_table.h"

#if defined(__x86_64__) || defined(__i386__)
#define ZC_HAVE_AVX2_KERNELS 1
#pragma GCC target("avx2,f16c")

namespace zc::kernels::avx2 {
namespace {

void LoadHalf(float* __restrict dst, const unsigned char* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i_u*>(src + 2 * i));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i_u*>(src + 2 * i + 16));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h0));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(h1));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = _cvtsh_ss(h);
  }
}

void StoreHalf(unsigned char* dst, const float* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i h0 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i h1 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i_u*>(dst + 2 * i), h0);
    _mm_storeu_si128(reinterpret_cast<__m128i_u*>(dst + 2 * i + 16), h1);
  }
  for (; i < n; ++i) {
    const uint16_t h = static_cast<uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

}  // namespace
}  // namespace zc::kernels::avx2

#define ZC_KERNEL_NS avx2
#include "collectives/reduce_impl.h"

#else
// Not x86: the dispatcher never asks for this table; keep the symbol.
namespace zc::kernels::avx2 {
const Table& GetTable() { return generic::GetTable(); }
}  // namespace zc::kernels::avx2
#endif
