// Helpers of the collectives tests: rank- and index-dependent data for
// every dtype, reference results, and comparison (exact for integers and
// for min/max, a tolerance scaled by the rank count for sums, products and
// averages of floating types).
#pragma once

#include <zcomm/zcomm.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/dtype.h"

namespace zc::test {

inline bool IsFloatType(zc_dtype d) {
  return d == ZC_FLOAT16 || d == ZC_BFLOAT16 || d == ZC_FLOAT32 || d == ZC_FLOAT64;
}
inline bool IsSignedInt(zc_dtype d) {
  return d == ZC_INT8 || d == ZC_INT16 || d == ZC_INT32 || d == ZC_INT64;
}

// Raw element access.
inline double GetF(zc_dtype d, const void* p, size_t i) {
  switch (d) {
    case ZC_FLOAT16: { uint16_t h; memcpy(&h, static_cast<const char*>(p) + 2 * i, 2); return HalfToFloat(h); }
    case ZC_BFLOAT16: { uint16_t h; memcpy(&h, static_cast<const char*>(p) + 2 * i, 2); return BFloat16ToFloat(h); }
    case ZC_FLOAT32: { float f; memcpy(&f, static_cast<const char*>(p) + 4 * i, 4); return f; }
    case ZC_FLOAT64: { double f; memcpy(&f, static_cast<const char*>(p) + 8 * i, 8); return f; }
    default: return 0;
  }
}
inline void SetF(zc_dtype d, void* p, size_t i, double v) {
  char* c = static_cast<char*>(p);
  switch (d) {
    case ZC_FLOAT16: { uint16_t h = FloatToHalf(static_cast<float>(v)); memcpy(c + 2 * i, &h, 2); break; }
    case ZC_BFLOAT16: { uint16_t h = FloatToBFloat16(static_cast<float>(v)); memcpy(c + 2 * i, &h, 2); break; }
    case ZC_FLOAT32: { float f = static_cast<float>(v); memcpy(c + 4 * i, &f, 4); break; }
    case ZC_FLOAT64: memcpy(c + 8 * i, &v, 8); break;
    default: break;
  }
}
// Integers as 64-bit two's complement (sign- or zero-extended).
inline uint64_t GetI(zc_dtype d, const void* p, size_t i) {
  const char* c = static_cast<const char*>(p);
  switch (d) {
    case ZC_INT8: return static_cast<uint64_t>(static_cast<int64_t>(reinterpret_cast<const int8_t*>(c)[i]));
    case ZC_UINT8: case ZC_BOOL: return reinterpret_cast<const uint8_t*>(c)[i];
    case ZC_INT16: { int16_t v; memcpy(&v, c + 2 * i, 2); return static_cast<uint64_t>(static_cast<int64_t>(v)); }
    case ZC_UINT16: { uint16_t v; memcpy(&v, c + 2 * i, 2); return v; }
    case ZC_INT32: { int32_t v; memcpy(&v, c + 4 * i, 4); return static_cast<uint64_t>(static_cast<int64_t>(v)); }
    case ZC_UINT32: { uint32_t v; memcpy(&v, c + 4 * i, 4); return v; }
    case ZC_INT64: case ZC_UINT64: { uint64_t v; memcpy(&v, c + 8 * i, 8); return v; }
    default: return 0;
  }
}
inline void SetI(zc_dtype d, void* p, size_t i, uint64_t v) {
  char* c = static_cast<char*>(p);
  size_t es = DtypeSize(d);
  memcpy(c + es * i, &v, es);  // little endian: the low bytes
}
// Truncate to the type's width and extend back (what GetI of SetI gives).
inline uint64_t Wrap(zc_dtype d, uint64_t v) {
  switch (d) {
    case ZC_INT8: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(v)));
    case ZC_UINT8: case ZC_BOOL: return static_cast<uint8_t>(v);
    case ZC_INT16: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(v)));
    case ZC_UINT16: return static_cast<uint16_t>(v);
    case ZC_INT32: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v)));
    case ZC_UINT32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

// Element i of rank r's input in call `it` (so repeated calls differ).
inline uint64_t IntInput(zc_op op, int r, size_t i, int it) {
  uint64_t h = static_cast<uint64_t>(r) * 131 + i * 7 + static_cast<uint64_t>(it) * 13 + 3;
  // Bitwise ops: each rank clears (band) or sets (bor) a few bits that move
  // with rank, index and call, so results are neither all zeros nor all
  // ones in any width; bxor gets mixed bits.
  if (op == ZC_BAND) return ~((1ull << (h % 8)) | (1ull << ((h / 8) % 61)));
  if (op == ZC_BOR) return (1ull << (h % 8)) | (1ull << ((h / 8) % 61));
  if (op == ZC_BXOR) return h * 0x9e3779b97f4a7c15ull;
  if (op == ZC_PROD) {
    int64_t v = static_cast<int64_t>(h % 3) + 1;
    return static_cast<uint64_t>(i % 5 == 0 ? -v : v);
  }
  return static_cast<uint64_t>(static_cast<int64_t>(h % 61) - 30);
}
// Bool element i of rank r's input: mostly false for the "or" ops (sum, max,
// bor) and mostly true for the "and" ops (prod, min, band), so that results
// are neither all 0 nor all 1 on 1-5 ranks; half and half for bxor. True is
// not always 1: 2, 0x80, 0xff and 0x10 appear too (any nonzero byte is true).
inline uint8_t BoolInput(zc_op op, int r, size_t i, int it) {
  uint64_t h = (static_cast<uint64_t>(r) * 131 + i * 7 + static_cast<uint64_t>(it) * 13 + 3) *
               0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  const unsigned pick = static_cast<unsigned>(h % 4);
  bool truth;
  if (op == ZC_SUM || op == ZC_MAX || op == ZC_BOR) truth = pick == 0;
  else if (op == ZC_BXOR) truth = pick < 2;
  else truth = pick != 0;
  static const uint8_t kTrue[] = {1, 1, 2, 0x80, 0xff, 0x10, 1, 3};
  return truth ? kTrue[(h >> 8) % 8] : 0;
}
inline bool IsOrOp(zc_op op) { return op == ZC_SUM || op == ZC_MAX || op == ZC_BOR; }

inline double FloatInput(zc_op op, int r, size_t i, int it) {
  uint64_t h = static_cast<uint64_t>(r) * 31 + i * 17 + static_cast<uint64_t>(it) * 5;
  double v = 1.0 + static_cast<double>(h % 97) / 97.0;  // [1, 2)
  if (op != ZC_PROD && i % 3 == 1) v = -v;
  return v;
}

inline void FillInput(zc_dtype d, zc_op op, void* p, size_t count, int r, int it) {
  if (IsFloatType(d)) {
    for (size_t i = 0; i < count; ++i) SetF(d, p, i, FloatInput(op, r, i, it));
  } else if (d == ZC_BOOL) {
    for (size_t i = 0; i < count; ++i) static_cast<uint8_t*>(p)[i] = BoolInput(op, r, i, it);
  } else {
    for (size_t i = 0; i < count; ++i) SetI(d, p, i, IntInput(op, r, i, it));
  }
}

// Input value as the dtype holds it.
inline double RoundedFloatInput(zc_dtype d, zc_op op, int r, size_t i, int it) {
  char buf[8];
  SetF(d, buf, 0, FloatInput(op, r, i, it));
  return GetF(d, buf, 0);
}

// Checks element i of `out` against the reduction over ranks[0..n) of the
// inputs at index `src_index` (for reduce-scatter the input index differs
// from the output index). Returns an empty string or a message.
inline std::string CheckReduced(zc_dtype d, zc_op op, const void* out, size_t i, size_t src_index,
                                int n, int it) {
  char msg[256];
  if (IsFloatType(d)) {
    double want = 0, mag = 0;
    for (int r = 0; r < n; ++r) {
      double v = RoundedFloatInput(d, op, r, src_index, it);
      if (r == 0) want = v;
      else if (op == ZC_SUM || op == ZC_AVG) want += v;
      else if (op == ZC_PROD) want *= v;
      else if (op == ZC_MIN) want = std::min(want, v);
      else want = std::max(want, v);
      mag += std::fabs(v);
    }
    if (op == ZC_AVG) {
      want /= n;
      mag /= n;
    }
    if (op == ZC_PROD) mag = std::fabs(want);
    double got = GetF(d, out, i);
    double eps = d == ZC_FLOAT16 ? 1.0 / 1024 : d == ZC_BFLOAT16 ? 1.0 / 128 : d == ZC_FLOAT32 ? 1e-6 : 1e-14;
    double tol = (op == ZC_MIN || op == ZC_MAX) ? 0 : eps * (n + 1) * std::max(mag, 1.0);
    if (!(std::fabs(got - want) <= tol)) {
      snprintf(msg, sizeof msg, "%s %s element %zu: got %.8g want %.8g (tol %.3g)", DtypeName(d),
               OpName(op), i, got, want, tol);
      return msg;
    }
    return "";
  }
  if (d == ZC_BOOL) {
    // Logical: or (sum, max, bor), xor (bxor), and (prod, min, band); the
    // output byte is exactly 0 or 1, whatever true bytes the inputs held.
    bool want = BoolInput(op, 0, src_index, it) != 0;
    for (int r = 1; r < n; ++r) {
      const bool v = BoolInput(op, r, src_index, it) != 0;
      if (IsOrOp(op)) want = want || v;
      else if (op == ZC_BXOR) want = want != v;
      else want = want && v;
    }
    const unsigned got = static_cast<const uint8_t*>(out)[i];
    if (got != (want ? 1u : 0u)) {
      snprintf(msg, sizeof msg, "bool %s element %zu: got byte %u want %u", OpName(op), i, got,
               want ? 1u : 0u);
      return msg;
    }
    return "";
  }
  uint64_t want = 0;
  for (int r = 0; r < n; ++r) {
    uint64_t v = Wrap(d, IntInput(op, r, src_index, it));
    if (r == 0) { want = v; continue; }
    if (op == ZC_SUM) want = Wrap(d, want + v);
    else if (op == ZC_PROD) want = Wrap(d, want * v);
    else if (op == ZC_BAND) want = want & v;
    else if (op == ZC_BOR) want = want | v;
    else if (op == ZC_BXOR) want = Wrap(d, want ^ v);
    else if (op == ZC_MIN) want = IsSignedInt(d) ? (static_cast<int64_t>(v) < static_cast<int64_t>(want) ? v : want) : std::min(want, v);
    else want = IsSignedInt(d) ? (static_cast<int64_t>(v) > static_cast<int64_t>(want) ? v : want) : std::max(want, v);
  }
  uint64_t got = GetI(d, out, i);
  if (got != want) {
    snprintf(msg, sizeof msg, "%s %s element %zu: got %lld want %lld", DtypeName(d), OpName(op), i,
             static_cast<long long>(got), static_cast<long long>(want));
    return msg;
  }
  return "";
}

inline std::vector<zc_op> OpsFor(zc_dtype d) {
  if (IsFloatType(d)) return {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG};
  return {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX};
}

constexpr zc_op kBitwiseOps[] = {ZC_BAND, ZC_BOR, ZC_BXOR};
// The dtypes the bitwise ops take: the integer types and bool.
constexpr zc_dtype kIntDtypes[] = {ZC_INT8,  ZC_UINT8, ZC_INT16,  ZC_UINT16, ZC_INT32,
                                   ZC_UINT32, ZC_INT64, ZC_UINT64, ZC_BOOL};

constexpr zc_dtype kAllDtypes[] = {ZC_INT8,    ZC_UINT8,   ZC_INT32,  ZC_UINT32, ZC_INT64,
                                   ZC_UINT64,  ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64,
                                   ZC_INT16,   ZC_UINT16,  ZC_BOOL};
// The dtypes appended after float64 (int16, uint16, bool).
constexpr zc_dtype kNewDtypes[] = {ZC_INT16, ZC_UINT16, ZC_BOOL};

}  // namespace zc::test
