// The reduction loops, written once and compiled once per ISA. Not a normal
// header: a translation unit includes it after it has
//  - included <cstddef>, <cstdint>, <cstring>, <type_traits> and
//    "collectives/reduce_table.h" (before any `#pragma GCC target`, so that
//    inline library code is never compiled for a wider ISA than the CPU's),
//  - defined ZC_KERNEL_NS (the namespace under zc::kernels), and
//  - defined, in zc::kernels::ZC_KERNEL_NS, the 16-bit block conversions
//      void LoadHalf(float* dst, const unsigned char* src, size_t n);
//      void StoreHalf(unsigned char* dst, const float* src, size_t n);
//      void LoadBf16(float* dst, const unsigned char* src, size_t n);
//      void StoreBf16(unsigned char* dst, const float* src, size_t n);
//
// Everything here has internal linkage so the per-ISA copies never meet.
//
// Aliasing: dst may be the same pointer as an input. The loops take
// __restrict pointers so they vectorize without runtime overlap checks; to
// keep that honest, each call site passes every distinct buffer through
// exactly one pointer (dst == a becomes the two-pointer loop d = op(d, b)).
// ReduceN works in blocks through a local accumulator, so any input may be
// dst: all inputs of a block are read before that block of dst is written.

#ifndef ZC_KERNEL_NS
#error "define ZC_KERNEL_NS before including reduce_impl.h"
#endif

namespace zc::kernels::ZC_KERNEL_NS {
namespace {

// Element types with alignment 1: loads and stores through them are defined
// for any address (UBSan agrees), and still vectorize.
template <class T>
struct Unaligned;
#define ZC_DEFINE_UNALIGNED(T)                       \
  template <>                                        \
  struct Unaligned<T> {                              \
    typedef T type __attribute__((aligned(1)));      \
  };
ZC_DEFINE_UNALIGNED(int8_t)
ZC_DEFINE_UNALIGNED(uint8_t)
ZC_DEFINE_UNALIGNED(int16_t)
ZC_DEFINE_UNALIGNED(int32_t)
ZC_DEFINE_UNALIGNED(uint32_t)
ZC_DEFINE_UNALIGNED(int64_t)
ZC_DEFINE_UNALIGNED(uint64_t)
ZC_DEFINE_UNALIGNED(uint16_t)
ZC_DEFINE_UNALIGNED(float)
ZC_DEFINE_UNALIGNED(double)
#undef ZC_DEFINE_UNALIGNED

// ---- ops ------------------------------------------------------------------
// Integer sum and product are computed in an unsigned type at least as wide
// as unsigned int: wrap-around with no undefined behaviour. (8- and 16-bit
// operands would otherwise promote to int, where 65535 * 65535 overflows.)
template <class T>
using WideUnsigned =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <class T>
struct OpSum {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = WideUnsigned<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
template <class T>
struct OpProd {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = WideUnsigned<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
// Floating min/max propagate NaN (b != b is "b is NaN"; a NaN a is kept
// because no comparison with it is true). Equal operands give a.
template <class T>
struct OpMin {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      return ((b < a) | (b != b)) ? b : a;
    }
  }
};
template <class T>
struct OpMax {
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b > a ? b : a;
    } else {
      return ((b > a) | (b != b)) ? b : a;
    }
  }
};

// Bitwise ops, integer types only (the table leaves the floating entries
// null; CheckDtypeOp refuses them). The operands promote to int or wider
// and the result fits the type again.
template <class T>
struct OpBand {
  static T Apply(T a, T b) { return static_cast<T>(a & b); }
};
template <class T>
struct OpBor {
  static T Apply(T a, T b) { return static_cast<T>(a | b); }
};
template <class T>
struct OpBxor {
  static T Apply(T a, T b) { return static_cast<T>(a ^ b); }
};

// Bool (one byte, 0 false, anything else true): logical ops on the truth
// values, always writing 0 or 1. Branch-free byte arithmetic, so the loops
// vectorize like the uint8 ones (compare with zero, combine, mask to bit 0).
struct OpLogicalOr {
  static uint8_t Apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>((a | b) != 0); }
};
struct OpLogicalAnd {
  static uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};
struct OpLogicalXor {
  static uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) ^ (b != 0));
  }
};

// ---- elementwise loops ----------------------------------------------------
// Pointers are spelled through Unaligned<T>::type, never deduced: a template
// argument would drop the aligned(1) attribute.
template <class T>
using UPtr = typename Unaligned<T>::type*;
template <class T>
using UCPtr = const typename Unaligned<T>::type*;

template <class T, class Op>
void Loop3(UPtr<T> __restrict d, UCPtr<T> __restrict a, UCPtr<T> __restrict b,
           size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::Apply(a[i], b[i]);
}
// d = op(d, s) when kDstFirst, else d = op(s, d).
template <class T, class Op, bool kDstFirst>
void Loop2(UPtr<T> __restrict d, UCPtr<T> __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    d[i] = kDstFirst ? Op::Apply(d[i], s[i]) : Op::Apply(s[i], d[i]);
  }
}
template <class T, class Op>
void Loop1(UPtr<T> __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::Apply(d[i], d[i]);
}

// ---- native types (integers, float, double) -------------------------------
template <class T, class Op>
void Binary(void* dst, const void* a, const void* b, size_t n) {
  UPtr<T> d = static_cast<UPtr<T>>(dst);
  UCPtr<T> pa = static_cast<UCPtr<T>>(a);
  UCPtr<T> pb = static_cast<UCPtr<T>>(b);
  if (d == pa) {
    if (d == pb) {
      Loop1<T, Op>(d, n);
    } else {
      Loop2<T, Op, true>(d, pb, n);
    }
  } else if (d == pb) {
    Loop2<T, Op, false>(d, pa, n);
  } else {
    Loop3<T, Op>(d, pa, pb, n);
  }
}

// Accumulator blocks of 8 KiB: with n inputs that is n short sequential
// streams per block, which the hardware prefetchers follow well, and the
// accumulator stays in L1.
constexpr size_t kBlockBytes = 8192;

template <class T, class Op>
void ReduceNNative(void* dst, const void* const* srcs, int n, size_t count) {
  if (n <= 0 || count == 0) return;
  if (n == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * sizeof(T));
    return;
  }
  if (n == 2) {
    Binary<T, Op>(dst, srcs[0], srcs[1], count);
    return;
  }
  constexpr size_t kBlock = kBlockBytes / sizeof(T);
  alignas(64) T acc[kBlock];
  UPtr<T> d = static_cast<UPtr<T>>(dst);
  UCPtr<T> last = static_cast<UCPtr<T>>(srcs[n - 1]);
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t m = count - off < kBlock ? count - off : kBlock;
    Loop3<T, Op>(acc, static_cast<UCPtr<T>>(srcs[0]) + off,
                 static_cast<UCPtr<T>>(srcs[1]) + off, m);
    for (int k = 2; k < n - 1; ++k) {
      Loop2<T, Op, true>(acc, static_cast<UCPtr<T>>(srcs[k]) + off, m);
    }
    // The last input goes straight to dst (one write, no extra copy).
    if (d == last) {
      Loop2<T, Op, false>(d + off, acc, m);
    } else {
      Loop3<T, Op>(d + off, acc, last + off, m);
    }
  }
}

// Bool: as the uint8 loops with the logical ops, and a single input is
// normalized too (every reduction writes 0 or 1, one rank included).
template <class Op>
void ReduceNBool(void* dst, const void* const* srcs, int n, size_t count) {
  if (n <= 0 || count == 0) return;
  if (n == 1) {
    Binary<uint8_t, OpLogicalOr>(dst, srcs[0], srcs[0], count);
    return;
  }
  ReduceNNative<uint8_t, Op>(dst, srcs, n, count);
}

template <class T>
void ScaleDivNative(void* buf, size_t n, double divisor) {
  UPtr<T> p = static_cast<UPtr<T>>(buf);
  if constexpr (sizeof(T) == 4) {
    // Float division is correctly rounded, so where the divisor is exactly
    // a float this equals the double quotient rounded to float.
    const float fd = static_cast<float>(divisor);
    if (static_cast<double>(fd) == divisor) {
      for (size_t i = 0; i < n; ++i) p[i] = p[i] / fd;
    } else {
      for (size_t i = 0; i < n; ++i) {
        p[i] = static_cast<float>(static_cast<double>(p[i]) / divisor);
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / divisor;
  }
}

// ---- float16 / bfloat16 ---------------------------------------------------
struct HalfCvt {
  static void Load(float* d, const unsigned char* s, size_t n) { LoadHalf(d, s, n); }
  static void Store(unsigned char* d, const float* s, size_t n) { StoreHalf(d, s, n); }
};
struct Bf16Cvt {
  static void Load(float* d, const unsigned char* s, size_t n) { LoadBf16(d, s, n); }
  static void Store(unsigned char* d, const float* s, size_t n) { StoreBf16(d, s, n); }
};

constexpr size_t kBlock16 = kBlockBytes / sizeof(float);

// Inputs widen to float block by block, reduce in float, and round once on
// the way out. A whole block of every input is read before the block of dst
// is written, so dst may be any of the inputs.
template <class Cvt, class Op>
void ReduceN16(void* dst, const void* const* srcs, int n, size_t count) {
  if (n <= 0 || count == 0) return;
  if (n == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * 2);
    return;
  }
  alignas(64) float acc[kBlock16];
  alignas(64) float tmp[kBlock16];
  unsigned char* d = static_cast<unsigned char*>(dst);
  for (size_t off = 0; off < count; off += kBlock16) {
    const size_t m = count - off < kBlock16 ? count - off : kBlock16;
    Cvt::Load(acc, static_cast<const unsigned char*>(srcs[0]) + 2 * off, m);
    for (int k = 1; k < n; ++k) {
      Cvt::Load(tmp, static_cast<const unsigned char*>(srcs[k]) + 2 * off, m);
      Loop2<float, Op, true>(acc, tmp, m);
    }
    Cvt::Store(d + 2 * off, acc, m);
  }
}

template <class Cvt, class Op>
void Binary16(void* dst, const void* a, const void* b, size_t n) {
  const void* srcs[2] = {a, b};
  ReduceN16<Cvt, Op>(dst, srcs, 2, n);
}

template <class Cvt>
void ScaleDiv16(void* buf, size_t count, double divisor) {
  alignas(64) float tmp[kBlock16];
  unsigned char* p = static_cast<unsigned char*>(buf);
  // Both ways round twice (to float, then to 16 bits), which is exact for
  // these 11/8-bit formats because float carries more than twice the bits.
  const float fd = static_cast<float>(divisor);
  const bool float_exact = static_cast<double>(fd) == divisor;
  for (size_t off = 0; off < count; off += kBlock16) {
    const size_t m = count - off < kBlock16 ? count - off : kBlock16;
    Cvt::Load(tmp, p + 2 * off, m);
    if (float_exact) {
      for (size_t i = 0; i < m; ++i) tmp[i] = tmp[i] / fd;
    } else {
      for (size_t i = 0; i < m; ++i) {
        tmp[i] = static_cast<float>(static_cast<double>(tmp[i]) / divisor);
      }
    }
    Cvt::Store(p + 2 * off, tmp, m);
  }
}

void HalfToFloatBulk(float* dst, const void* src, size_t n) {
  LoadHalf(dst, static_cast<const unsigned char*>(src), n);
}
void FloatToHalfBulk(void* dst, const float* src, size_t n) {
  StoreHalf(static_cast<unsigned char*>(dst), src, n);
}
void Bf16ToFloatBulk(float* dst, const void* src, size_t n) {
  LoadBf16(dst, static_cast<const unsigned char*>(src), n);
}
void FloatToBf16Bulk(void* dst, const float* src, size_t n) {
  StoreBf16(static_cast<unsigned char*>(dst), src, n);
}

// ---- the table --------------------------------------------------------------
template <class T>
constexpr void FillNative(Table& t, zc_dtype d) {
  t.binary[d][ZC_SUM] = &Binary<T, OpSum<T>>;
  t.binary[d][ZC_PROD] = &Binary<T, OpProd<T>>;
  t.binary[d][ZC_MIN] = &Binary<T, OpMin<T>>;
  t.binary[d][ZC_MAX] = &Binary<T, OpMax<T>>;
  t.binary[d][ZC_AVG] = &Binary<T, OpSum<T>>;
  t.reduce_n[d][ZC_SUM] = &ReduceNNative<T, OpSum<T>>;
  t.reduce_n[d][ZC_PROD] = &ReduceNNative<T, OpProd<T>>;
  t.reduce_n[d][ZC_MIN] = &ReduceNNative<T, OpMin<T>>;
  t.reduce_n[d][ZC_MAX] = &ReduceNNative<T, OpMax<T>>;
  t.reduce_n[d][ZC_AVG] = &ReduceNNative<T, OpSum<T>>;
  if constexpr (std::is_floating_point_v<T>) {
    t.scale_div[d] = &ScaleDivNative<T>;
  } else {
    t.scale_div[d] = nullptr;
    t.binary[d][ZC_BAND] = &Binary<T, OpBand<T>>;
    t.binary[d][ZC_BOR] = &Binary<T, OpBor<T>>;
    t.binary[d][ZC_BXOR] = &Binary<T, OpBxor<T>>;
    t.reduce_n[d][ZC_BAND] = &ReduceNNative<T, OpBand<T>>;
    t.reduce_n[d][ZC_BOR] = &ReduceNNative<T, OpBor<T>>;
    t.reduce_n[d][ZC_BXOR] = &ReduceNNative<T, OpBxor<T>>;
  }
}

constexpr void FillBool(Table& t) {
  const zc_dtype d = ZC_BOOL;
  t.binary[d][ZC_SUM] = &Binary<uint8_t, OpLogicalOr>;
  t.binary[d][ZC_MAX] = &Binary<uint8_t, OpLogicalOr>;
  t.binary[d][ZC_BOR] = &Binary<uint8_t, OpLogicalOr>;
  t.binary[d][ZC_PROD] = &Binary<uint8_t, OpLogicalAnd>;
  t.binary[d][ZC_MIN] = &Binary<uint8_t, OpLogicalAnd>;
  t.binary[d][ZC_BAND] = &Binary<uint8_t, OpLogicalAnd>;
  t.binary[d][ZC_BXOR] = &Binary<uint8_t, OpLogicalXor>;
  t.binary[d][ZC_AVG] = &Binary<uint8_t, OpLogicalOr>;  // as SUM; CheckDtypeOp refuses it
  t.reduce_n[d][ZC_SUM] = &ReduceNBool<OpLogicalOr>;
  t.reduce_n[d][ZC_MAX] = &ReduceNBool<OpLogicalOr>;
  t.reduce_n[d][ZC_BOR] = &ReduceNBool<OpLogicalOr>;
  t.reduce_n[d][ZC_PROD] = &ReduceNBool<OpLogicalAnd>;
  t.reduce_n[d][ZC_MIN] = &ReduceNBool<OpLogicalAnd>;
  t.reduce_n[d][ZC_BAND] = &ReduceNBool<OpLogicalAnd>;
  t.reduce_n[d][ZC_BXOR] = &ReduceNBool<OpLogicalXor>;
  t.reduce_n[d][ZC_AVG] = &ReduceNBool<OpLogicalOr>;
  t.scale_div[d] = nullptr;
}

template <class Cvt>
constexpr void Fill16(Table& t, zc_dtype d) {
  t.binary[d][ZC_SUM] = &Binary16<Cvt, OpSum<float>>;
  t.binary[d][ZC_PROD] = &Binary16<Cvt, OpProd<float>>;
  t.binary[d][ZC_MIN] = &Binary16<Cvt, OpMin<float>>;
  t.binary[d][ZC_MAX] = &Binary16<Cvt, OpMax<float>>;
  t.binary[d][ZC_AVG] = &Binary16<Cvt, OpSum<float>>;
  t.reduce_n[d][ZC_SUM] = &ReduceN16<Cvt, OpSum<float>>;
  t.reduce_n[d][ZC_PROD] = &ReduceN16<Cvt, OpProd<float>>;
  t.reduce_n[d][ZC_MIN] = &ReduceN16<Cvt, OpMin<float>>;
  t.reduce_n[d][ZC_MAX] = &ReduceN16<Cvt, OpMax<float>>;
  t.reduce_n[d][ZC_AVG] = &ReduceN16<Cvt, OpSum<float>>;
  t.scale_div[d] = &ScaleDiv16<Cvt>;
}

constexpr Table MakeTable() {
  Table t{};
  FillNative<int8_t>(t, ZC_INT8);
  FillNative<uint8_t>(t, ZC_UINT8);
  FillNative<int32_t>(t, ZC_INT32);
  FillNative<uint32_t>(t, ZC_UINT32);
  FillNative<int64_t>(t, ZC_INT64);
  FillNative<uint64_t>(t, ZC_UINT64);
  Fill16<HalfCvt>(t, ZC_FLOAT16);
  Fill16<Bf16Cvt>(t, ZC_BFLOAT16);
  FillNative<float>(t, ZC_FLOAT32);
  FillNative<double>(t, ZC_FLOAT64);
  FillNative<int16_t>(t, ZC_INT16);
  FillNative<uint16_t>(t, ZC_UINT16);
  FillBool(t);
  t.half_to_float = &HalfToFloatBulk;
  t.float_to_half = &FloatToHalfBulk;
  t.bf16_to_float = &Bf16ToFloatBulk;
  t.float_to_bf16 = &FloatToBf16Bulk;
  return t;
}

constexpr Table kTable = MakeTable();

}  // namespace

const Table& GetTable() { return kTable; }

}  // namespace zc::kernels::ZC_KERNEL_NS
