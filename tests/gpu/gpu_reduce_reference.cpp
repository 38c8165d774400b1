#include "gpu_reduce_reference.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace zc::gpu::testing {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct Half { uint16_t v; };
struct Bf16 { uint16_t v; };
struct Bool { uint8_t v; };  // one byte: 0 false, anything else true

template <class T> struct Cvt {
  using C = T;
  static C Load(T v) { return v; }
  static T Store(C v) { return v; }
  static bool IsNan(T v) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
    return false;
  }
};
template <> struct Cvt<Half> {
  using C = float;
  static C Load(Half v) { return RefHalfToFloat(v.v); }
  static Half Store(C v) { return Half{RefFloatToHalf(v)}; }
  static bool IsNan(Half v) { return (v.v & 0x7c00) == 0x7c00 && (v.v & 0x3ff) != 0; }
};
template <> struct Cvt<Bf16> {
  using C = float;
  static C Load(Bf16 v) { return RefBf16ToFloat(v.v); }
  static Bf16 Store(C v) { return Bf16{RefFloatToBf16(v)}; }
  static bool IsNan(Bf16 v) { return (v.v & 0x7f80) == 0x7f80 && (v.v & 0x7f) != 0; }
};

template <> struct Cvt<Bool> {
  using C = bool;
  static C Load(Bool v) { return v.v != 0; }
  static Bool Store(C v) { return Bool{static_cast<uint8_t>(v ? 1 : 0)}; }
  static bool IsNan(Bool) { return false; }
};

// Bool is logical and writes 0 or 1: sum and max are "or", prod and min
// "and".
Bool ApplyBool(Bool a, Bool b, zc_op op) {
  const bool x = a.v != 0, y = b.v != 0;
  switch (op) {
    case ZC_SUM:
    case ZC_AVG:
    case ZC_MAX:
    case ZC_BOR: return Cvt<Bool>::Store(x || y);
    case ZC_PROD:
    case ZC_MIN:
    case ZC_BAND: return Cvt<Bool>::Store(x && y);
    case ZC_BXOR: return Cvt<Bool>::Store(x != y);
  }
  return a;
}

// Numbers: integer sums and products wrap, computed in an unsigned type at
// least as wide as unsigned int (16-bit operands would promote to int,
// where 65535 * 65535 overflows).
template <class T>
T ApplyNumber(T a, T b, zc_op op) {
  using C = typename Cvt<T>::C;
  const C x = Cvt<T>::Load(a), y = Cvt<T>::Load(b);
  switch (op) {
    case ZC_SUM:
    case ZC_AVG:
      if constexpr (std::is_integral_v<C>) {
        using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
        return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
      } else {
        return Cvt<T>::Store(x + y);
      }
    case ZC_PROD:
      if constexpr (std::is_integral_v<C>) {
        using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
        return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
      } else {
        return Cvt<T>::Store(x * y);
      }
    case ZC_MIN:
      if constexpr (std::is_integral_v<C>) return y < x ? b : a;
      else return (y < x || std::isnan(y)) ? b : a;
    case ZC_MAX:
      if constexpr (std::is_integral_v<C>) return y > x ? b : a;
      else return (y > x || std::isnan(y)) ? b : a;
    case ZC_BAND:
    case ZC_BOR:
    case ZC_BXOR:
      break;  // no GPU kernel: the reference is never asked for them
  }
  return a;
}

template <class T>
T Apply(T a, T b, zc_op op) {
  if constexpr (std::is_same_v<T, Bool>) return ApplyBool(a, b, op);
  else return ApplyNumber(a, b, op);
}

template <class T>
void Reduce(void* c, const void* a, const void* b, size_t n, zc_op op) {
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    const T z = Apply<T>(x, y, op);
    std::memcpy(static_cast<char*>(c) + i * sizeof(T), &z, sizeof(T));
  }
}

template <class T>
void Scale(void* a, size_t n, double divisor) {
  const float fd = static_cast<float>(divisor);
  const bool in_float = static_cast<double>(fd) == divisor;
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, static_cast<char*>(a) + i * sizeof(T), sizeof(T));
    T z;
    if constexpr (std::is_same_v<T, double>) {
      z = x / divisor;
    } else {
      const float v = Cvt<T>::Load(x);
      z = Cvt<T>::Store(in_float ? v / fd
                                 : static_cast<float>(static_cast<double>(v) / divisor));
    }
    std::memcpy(static_cast<char*>(a) + i * sizeof(T), &z, sizeof(T));
  }
}

uint64_t Next(uint64_t* s) {  // splitmix64
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class T>
void Fill(void* buf, size_t n, uint64_t seed, bool specials) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    T v;
    const uint64_t r = Next(&s);
    if constexpr (std::is_same_v<T, Bool>) {
      // false a third of the time; true as 1 or as another nonzero byte
      const uint64_t k = r % 6;
      v = Bool{static_cast<uint8_t>(k < 2 ? 0 : k < 4 ? 1 : ((r >> 8) & 0xff) | 2)};
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(r);
    } else {
      using C = typename Cvt<T>::C;
      // Magnitudes around 1..100 with random signs exercise rounding.
      const double u = static_cast<double>(r >> 11) / 9007199254740992.0;
      C x = static_cast<C>((u - 0.5) * 200.0);
      if (specials) {
        const C kSpecial[] = {C(0), -C(0), std::numeric_limits<C>::infinity(),
                              -std::numeric_limits<C>::infinity(),
                              std::numeric_limits<C>::quiet_NaN(),
                              std::numeric_limits<C>::denorm_min(),
                              std::numeric_limits<C>::min(), C(65504), C(-65504),
                              C(1e-6)};
        constexpr size_t kN = sizeof(kSpecial) / sizeof(kSpecial[0]);
        if (i < kN) x = kSpecial[(i + seed) % kN];
      }
      v = Cvt<T>::Store(x);
    }
    std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
  }
}

template <class T>
size_t Mismatch(const void* x, const void* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, static_cast<const char*>(x) + i * sizeof(T), sizeof(T));
    std::memcpy(&b, static_cast<const char*>(y) + i * sizeof(T), sizeof(T));
    if (std::memcmp(&a, &b, sizeof(T)) == 0) continue;
    if (Cvt<T>::IsNan(a) && Cvt<T>::IsNan(b)) continue;
    return i;
  }
  return n;
}

template <template <class> class F, class... Args>
void Dispatch(zc_dtype d, Args... args) {
  switch (d) {
    case ZC_INT8: F<int8_t>::Run(args...); break;
    case ZC_UINT8: F<uint8_t>::Run(args...); break;
    case ZC_INT32: F<int32_t>::Run(args...); break;
    case ZC_UINT32: F<uint32_t>::Run(args...); break;
    case ZC_INT64: F<int64_t>::Run(args...); break;
    case ZC_UINT64: F<uint64_t>::Run(args...); break;
    case ZC_FLOAT16: F<Half>::Run(args...); break;
    case ZC_BFLOAT16: F<Bf16>::Run(args...); break;
    case ZC_FLOAT32: F<float>::Run(args...); break;
    case ZC_FLOAT64: F<double>::Run(args...); break;
    case ZC_INT16: F<int16_t>::Run(args...); break;
    case ZC_UINT16: F<uint16_t>::Run(args...); break;
    case ZC_BOOL: F<Bool>::Run(args...); break;
  }
}

template <class T> struct ReduceF {
  static void Run(void* c, const void* a, const void* b, size_t n, zc_op op) {
    Reduce<T>(c, a, b, n, op);
  }
};
template <class T> struct ScaleF {
  static void Run(void* a, size_t n, double divisor) {
    if constexpr (std::is_integral_v<T> || std::is_same_v<T, Bool>) return;  // not defined
    else Scale<T>(a, n, divisor);
  }
};
template <class T> struct FillF {
  static void Run(void* buf, size_t n, uint64_t seed, bool specials) {
    Fill<T>(buf, n, seed, specials);
  }
};
template <class T> struct MismatchF {
  static void Run(const void* x, const void* y, size_t n, size_t* out) {
    *out = Mismatch<T>(x, y, n);
  }
};

}  // namespace

float RefHalfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) {
    return m == 0 ? sign * std::numeric_limits<float>::infinity()
                  : std::copysign(std::numeric_limits<float>::quiet_NaN(), sign);
  }
  return sign * std::ldexp(static_cast<float>(1024 + m), e - 25);
}

uint16_t RefFloatToHalf(float f) {
  const uint16_t sign = static_cast<uint16_t>((Bits(f) >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // at or past the halfway point to 2^16
  if (a < std::ldexp(1.0f, -14)) {
    // Denormal: a multiple of 2^-24, rounded to nearest even (nearbyint in
    // the default rounding mode). 1024 becomes the smallest normal: right.
    const float m = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(m);
  }
  int e = 0;
  const float m = std::frexp(a, &e);          // a = m * 2^e, m in [0.5, 1)
  uint32_t r = static_cast<uint32_t>(std::nearbyint(m * 2048.0f));  // 11 bits
  int E = e - 1 + 15;
  if (r == 2048) {
    r = 1024;
    ++E;
  }
  if (E >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>((E << 10) | (r - 1024));
}

float RefBf16ToFloat(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

uint16_t RefFloatToBf16(float f) {
  const uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

size_t RefDtypeSize(zc_dtype d) {
  switch (d) {
    case ZC_INT8: case ZC_UINT8: case ZC_BOOL: return 1;
    case ZC_INT16: case ZC_UINT16: case ZC_FLOAT16: case ZC_BFLOAT16: return 2;
    case ZC_INT32: case ZC_UINT32: case ZC_FLOAT32: return 4;
    case ZC_INT64: case ZC_UINT64: case ZC_FLOAT64: return 8;
  }
  return 0;
}

void RefReduce(void* c, const void* a, const void* b, size_t n, zc_dtype d,
               zc_op op) {
  Dispatch<ReduceF>(d, c, a, b, n, op);
}

void RefScaleDiv(void* a, size_t n, zc_dtype d, double divisor) {
  Dispatch<ScaleF>(d, a, n, divisor);
}

void RefFill(void* buf, size_t n, zc_dtype d, uint64_t seed, bool specials) {
  Dispatch<FillF>(d, buf, n, seed, specials);
}

size_t RefFirstMismatch(const void* x, const void* y, size_t n, zc_dtype d) {
  size_t out = n;
  Dispatch<MismatchF>(d, x, y, n, &out);
  return out;
}

}  // namespace zc::gpu::testing
