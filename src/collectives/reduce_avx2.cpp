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
#if defined(__clang__)
// clang ignores GCC's pragma; this one gives every function up to the pop
// at the end of the file the same target (scripts/fuzz.sh builds with clang).
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,f16c")
#endif

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

// bf16 is the top half of a float: widen by a shift.
void LoadBf16(float* __restrict dst, const unsigned char* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i_u*>(src + 2 * i));
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = BFloat16ToFloat(h);
  }
}

// Round to nearest even as FloatToBFloat16 does (NaN kept quiet), then
// narrow: the values fit 16 bits, so unsigned saturation packs them exactly;
// the permute undoes packus's per-lane interleave.
void StoreBf16(unsigned char* dst, const float* __restrict src, size_t n) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i r[2];
    for (int k = 0; k < 2; ++k) {
      const __m256 f = _mm256_loadu_ps(src + i + 8 * k);
      const __m256i u = _mm256_castps_si256(f);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
      const __m256 is_nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
      r[k] = _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(is_nan));
    }
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(dst + 2 * i), packed);
  }
  for (; i < n; ++i) {
    const uint16_t h = FloatToBFloat16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

}  // namespace
}  // namespace zc::kernels::avx2

#define ZC_KERNEL_NS avx2
#include "collectives/reduce_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif

#else
// Not x86: the dispatcher never asks for this table; keep the symbol.
namespace zc::kernels::avx2 {
const Table& GetTable() { return generic::GetTable(); }
}  // namespace zc::kernels::avx2
#endif
