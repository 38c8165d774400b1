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
#include <type_traits>
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
[[gnu::always_inline]] inline double GetF(zc_dtype d, const void* p, size_t i) {
  switch (d) {
    case ZC_FLOAT16: { uint16_t h; memcpy(&h, static_cast<const char*>(p) + 2 * i, 2); return HalfToFloat(h); }
    case ZC_BFLOAT16: { uint16_t h; memcpy(&h, static_cast<const char*>(p) + 2 * i, 2); return BFloat16ToFloat(h); }
    case ZC_FLOAT32: { float f; memcpy(&f, static_cast<const char*>(p) + 4 * i, 4); return f; }
    case ZC_FLOAT64: { double f; memcpy(&f, static_cast<const char*>(p) + 8 * i, 8); return f; }
    default: return 0;
  }
}
[[gnu::always_inline]] inline void SetF(zc_dtype d, void* p, size_t i, double v) {
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
[[gnu::always_inline]] inline uint64_t GetI(zc_dtype d, const void* p, size_t i) {
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
[[gnu::always_inline]] inline void SetI(zc_dtype d, void* p, size_t i, uint64_t v) {
  char* c = static_cast<char*>(p);
  size_t es = DtypeSize(d);
  memcpy(c + es * i, &v, es);  // little endian: the low bytes
}
// Truncate to the type's width and extend back (what GetI of SetI gives).
[[gnu::always_inline]] inline uint64_t Wrap(zc_dtype d, uint64_t v) {
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
[[gnu::always_inline]] inline uint64_t IntInput(zc_op op, int r, size_t i, int it) {
  uint64_t h = static_cast<uint64_t>(r) * 131 + i * 7 + static_cast<uint64_t>(it) * 13 + 3;
  // Bitwise ops: each rank clears (band) or sets (bor) a few bits that move
  // with rank, index and call, so results are neither all zeros nor all
  // ones in any width; bxor gets mixed bits.
  if (op == ZC_BAND) return ~((1ull << (h % 8)) | (1ull << ((h / 8) % 61)));
  if (op == ZC_BOR) return (1ull << (h % 8)) | (1ull << ((h / 8) % 61));
  if (op == ZC_BXOR) return h * 0x9e3779b97f4a7c15ull;
  if (op == ZC_PROD) {
    // Hashed: h % 3 of ranks 131 apart takes every residue on 3 ranks, and
    // the product would be 6 in every call (a stale result would pass).
    int64_t v = static_cast<int64_t>(((h * 0x9e3779b97f4a7c15ull) >> 32) % 3) + 1;
    return static_cast<uint64_t>(i % 5 == 0 ? -v : v);
  }
  return static_cast<uint64_t>(static_cast<int64_t>(h % 61) - 30);
}
// Bool element i of rank r's input: mostly false for the "or" ops (sum, max,
// bor) and mostly true for the "and" ops (prod, min, band), so that results
// are neither all 0 nor all 1 on 1-5 ranks; half and half for bxor. True is
// not always 1: 2, 0x80, 0xff and 0x10 appear too (any nonzero byte is true).
[[gnu::always_inline]] inline uint8_t BoolInput(zc_op op, int r, size_t i, int it) {
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

// Floating inputs are +-(1 + k / 97) for k in [0, 97): the step k and the
// sign of element i of rank r's input in call `it`.
[[gnu::always_inline]] inline unsigned FloatInputStep(int r, size_t i, int it) {
  uint64_t h = static_cast<uint64_t>(r) * 31 + i * 17 + static_cast<uint64_t>(it) * 5;
  return static_cast<unsigned>(h % 97);
}
[[gnu::always_inline]] inline bool FloatInputNegative(zc_op op, size_t i) {
  return op != ZC_PROD && i % 3 == 1;
}
[[gnu::always_inline]] inline double FloatInput(zc_op op, int r, size_t i, int it) {
  double v = 1.0 + static_cast<double>(FloatInputStep(r, i, it)) / 97.0;  // [1, 2)
  return FloatInputNegative(op, i) ? -v : v;
}

// Calls body(std::integral_constant<zc_dtype, d>) with the dtype as a
// compile-time constant: the element helpers above switch on the dtype, and
// a loop over millions of elements should switch once, not per element.
template <typename Body>
inline auto WithDtype(zc_dtype d, Body&& body) {
  switch (d) {
#define ZC_TEST_DTYPE_CASE(D) \
    case D: return body(std::integral_constant<zc_dtype, D>{});
    ZC_TEST_DTYPE_CASE(ZC_INT8) ZC_TEST_DTYPE_CASE(ZC_UINT8) ZC_TEST_DTYPE_CASE(ZC_INT16)
    ZC_TEST_DTYPE_CASE(ZC_UINT16) ZC_TEST_DTYPE_CASE(ZC_INT32) ZC_TEST_DTYPE_CASE(ZC_UINT32)
    ZC_TEST_DTYPE_CASE(ZC_INT64) ZC_TEST_DTYPE_CASE(ZC_UINT64) ZC_TEST_DTYPE_CASE(ZC_FLOAT16)
    ZC_TEST_DTYPE_CASE(ZC_BFLOAT16) ZC_TEST_DTYPE_CASE(ZC_FLOAT32) ZC_TEST_DTYPE_CASE(ZC_FLOAT64)
#undef ZC_TEST_DTYPE_CASE
    default: return body(std::integral_constant<zc_dtype, ZC_BOOL>{});
  }
}

[[gnu::always_inline]] inline void FillElement(zc_dtype d, zc_op op, void* p, size_t i, int r, int it) {
  if (IsFloatType(d)) SetF(d, p, i, FloatInput(op, r, i, it));
  else if (d == ZC_BOOL) static_cast<uint8_t*>(p)[i] = BoolInput(op, r, i, it);
  else SetI(d, p, i, IntInput(op, r, i, it));
}

inline void FillInput(zc_dtype d, zc_op op, void* p, size_t count, int r, int it) {
  WithDtype(d, [&](auto dt) {
    for (size_t i = 0; i < count; ++i) FillElement(dt, op, p, i, r, it);
  });
}

// 1 + k / 97 as each floating dtype holds it, for every k, computed once:
// the checks need every rank's input per element, and converting each one
// to half precision in software made them the tests' main cost. Rounding to
// nearest is symmetric, so the sign is applied afterwards.
inline const double* RoundedFloatSteps(zc_dtype d) {
  struct Steps { double of[4][97]; };
  static const Steps steps = [] {
    Steps s{};
    const zc_dtype types[4] = {ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64};
    for (int t = 0; t < 4; ++t)
      for (unsigned k = 0; k < 97; ++k) {
        char buf[8];
        SetF(types[t], buf, 0, 1.0 + static_cast<double>(k) / 97.0);
        s.of[t][k] = GetF(types[t], buf, 0);
      }
    return s;
  }();
  return steps.of[d == ZC_FLOAT16 ? 0 : d == ZC_BFLOAT16 ? 1 : d == ZC_FLOAT32 ? 2 : 3];
}

// Input value as the dtype holds it.
[[gnu::always_inline]] inline double RoundedFloatInput(zc_dtype d, zc_op op, int r, size_t i, int it) {
  const double v = RoundedFloatSteps(d)[FloatInputStep(r, i, it)];
  return FloatInputNegative(op, i) ? -v : v;
}

// Checks element i of `out` against the reduction over ranks[0..n) of the
// inputs at index `src_index` (for reduce-scatter the input index differs
// from the output index). True when it matches; otherwise false, with the
// message in msg.
[[gnu::always_inline]] inline bool ElementReduced(zc_dtype d, zc_op op, const void* out, size_t i,
                                                  size_t src_index, int n, int it, char (&msg)[256]) {
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
      return false;
    }
    return true;
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
      return false;
    }
    return true;
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
    return false;
  }
  return true;
}

// The message for element i, or an empty string.
inline std::string CheckReduced(zc_dtype d, zc_op op, const void* out, size_t i, size_t src_index,
                                int n, int it) {
  char msg[256];
  return ElementReduced(d, op, out, i, src_index, n, it, msg) ? std::string() : std::string(msg);
}

// Checks out[0..count) against the inputs at src_first.. (CheckReduced for
// every element). Returns an empty string or the first mismatch's message.
inline std::string CheckReducedRange(zc_dtype d, zc_op op, const void* out, size_t count,
                                     size_t src_first, int n, int it) {
  char msg[256];
  const bool ok = WithDtype(d, [&](auto dt) {
    for (size_t i = 0; i < count; ++i)
      if (!ElementReduced(dt, op, out, i, src_first + i, n, it, msg)) return false;
    return true;
  });
  return ok ? std::string() : std::string(msg);
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
