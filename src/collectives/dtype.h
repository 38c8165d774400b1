// Element types and reduction ops of the C ABI: sizes, names, validation,
// and scalar fp16/bf16 <-> float conversion (round to nearest even).
//
// The conversions are inline and branch-free so that loops over them
// vectorize; they are exact for every input, NaN, infinities, zeros and
// denormals included, and match the F16C instructions bit for bit on
// non-NaN values. A NaN stays a NaN of the same sign (made quiet).
//
// Note for reduce_avx2.cpp: this header must be included BEFORE its
// `#pragma GCC target`, so these inline functions are compiled for the
// baseline ISA wherever the linker keeps their out-of-line copy.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/status.h"

namespace zc {

// The last zc_dtype; wire formats that carry a dtype refuse larger values.
constexpr zc_dtype kLastDtype = ZC_BOOL;
constexpr int kNumDtypes = kLastDtype + 1;
constexpr int kNumOps = ZC_BXOR + 1;

inline bool IsValidDtype(zc_dtype d) {
  return static_cast<int>(d) >= 0 && static_cast<int>(d) < kNumDtypes;
}
inline bool IsValidOp(zc_op op) {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumOps;
}

// 0 for an unknown dtype. Inline: asked several times per collective.
inline size_t DtypeSize(zc_dtype d) {
  switch (d) {
    case ZC_INT8:
    case ZC_UINT8:
    case ZC_BOOL:
      return 1;
    case ZC_INT16:
    case ZC_UINT16:
    case ZC_FLOAT16:
    case ZC_BFLOAT16:
      return 2;
    case ZC_INT32:
    case ZC_UINT32:
    case ZC_FLOAT32:
      return 4;
    case ZC_INT64:
    case ZC_UINT64:
    case ZC_FLOAT64:
      return 8;
  }
  return 0;
}
const char* DtypeName(zc_dtype d);  // "float32"; "unknown" otherwise
const char* OpName(zc_op op);       // "sum"; "unknown" otherwise
bool IsFloating(zc_dtype d);        // float16, bfloat16, float32, float64
// int8 .. uint64, int16, uint16 (not bool, not floating).
bool IsInteger(zc_dtype d);
// band, bor, bxor: integer dtypes and bool only.
inline bool IsBitwise(zc_op op) { return op == ZC_BAND || op == ZC_BOR || op == ZC_BXOR; }

// OK, or ZC_ERR_INVALID_ARG for an unknown dtype or op, AVG on an integer
// type or bool, or a bitwise op on a floating type; the message names both.
Status CheckDtypeOp(zc_dtype d, zc_op op);

namespace detail {
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

inline float HalfToFloat(uint16_t h) {
  using detail::BitsFloat;
  using detail::FloatBits;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exp|mant
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);  // rebias 15 -> 127
  const uint32_t infnan = em + (224u << 23);  // exponent 31 -> 255
  // Denormal: (2^-14 * (1 + m/1024)) - 2^-14 = m * 2^-24, exact in float.
  const uint32_t denorm =
      FloatBits(BitsFloat(normal + (1u << 23)) - BitsFloat(113u << 23));
  // Selected with masks, not branches: every candidate is computed anyway,
  // so the compiler may vectorize without speculating float operations.
  const uint32_t is_infnan = 0u - static_cast<uint32_t>(exp == 0x0f800000u);
  const uint32_t is_denorm = 0u - static_cast<uint32_t>(exp == 0);
  const uint32_t r = (infnan & is_infnan) | (denorm & is_denorm) |
                     (normal & ~(is_infnan | is_denorm));
  return BitsFloat(r | sign);
}

inline uint16_t FloatToHalf(float f) {
  using detail::BitsFloat;
  using detail::FloatBits;
  const uint32_t u = FloatBits(f) & 0x7fffffffu;
  const uint32_t sign = (FloatBits(f) >> 16) & 0x8000u;
  // |f| >= 65536: infinity, or NaN kept quiet with its top payload bits.
  // Values in [65520, 65536) overflow through the carry of the normal path.
  const uint32_t big =
      u > 0x7f800000u ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  // |f| < 2^-14: adding 0.5 rounds to a multiple of 2^-24 (the half
  // denormal step) in hardware, ties to even; the low bits are the result.
  const uint32_t small = FloatBits(BitsFloat(u) + 0.5f) - 0x3f000000u;
  // Normal: rebias and round to nearest even on the 13 dropped bits.
  const uint32_t normal =
      (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t is_big = 0u - static_cast<uint32_t>(u >= 0x47800000u);
  const uint32_t is_small = 0u - static_cast<uint32_t>(u < 0x38800000u);
  const uint32_t r = (big & is_big) | (small & is_small) |
                     (normal & ~(is_big | is_small));
  return static_cast<uint16_t>(r | sign);
}

inline float BFloat16ToFloat(uint16_t h) {
  return detail::BitsFloat(static_cast<uint32_t>(h) << 16);
}

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t u = detail::FloatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;  // quiet, sign and payload kept
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan
                                                               : rounded);
}

}  // namespace zc
