// Reduction kernels and dtype helpers against a plain scalar reference:
// integers in 64-bit wrap-around arithmetic, floating types in double with a
// single rounding to the element type (fp16/bf16 rounding by nearest search
// in the table of all values, independent of the code under test). Every
// case runs once per ISA the CPU supports (generic and AVX2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/reduce_kernels.h"

namespace zc {
namespace {

// ---- reference fp16 / bf16 ---------------------------------------------------

double RefHalfToDouble(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 31;
  const int man = h & 1023;
  if (exp == 31) {
    return man ? std::numeric_limits<double>::quiet_NaN()
               : sign * std::numeric_limits<double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

double RefBf16ToDouble(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exp = (h >> 7) & 255;
  const int man = h & 127;
  if (exp == 255) {
    return man ? std::numeric_limits<double>::quiet_NaN()
               : sign * std::numeric_limits<double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(man, -133);
  return sign * std::ldexp(128 + man, exp - 134);
}

// Ascending magnitudes of every finite non-negative value, indexed by bit
// pattern, plus one more entry for infinity: 2^(emax+1), whose pattern is
// even, so a tie with the largest finite value rounds to infinity as IEEE
// says.
struct RoundTable {
  std::vector<double> mag;
  uint16_t inf_bits;
};

RoundTable MakeTable(bool half) {
  RoundTable t;
  t.inf_bits = half ? 0x7c00 : 0x7f80;
  for (uint32_t b = 0; b < t.inf_bits; ++b) {
    t.mag.push_back(half ? RefHalfToDouble(static_cast<uint16_t>(b))
                         : RefBf16ToDouble(static_cast<uint16_t>(b)));
  }
  t.mag.push_back(half ? 65536.0 : std::ldexp(1.0, 128));
  return t;
}

uint16_t RefRound(const RoundTable& t, double v) {
  if (std::isnan(v)) return static_cast<uint16_t>(t.inf_bits == 0x7c00 ? 0x7e00 : 0x7fc0);
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= t.mag.back()) return sign | t.inf_bits;
  auto it = std::upper_bound(t.mag.begin(), t.mag.end(), a);
  const size_t hi = static_cast<size_t>(it - t.mag.begin());
  const size_t lo = hi - 1;
  size_t pick;
  if (a == t.mag[lo]) {
    pick = lo;
  } else {
    const double dlo = a - t.mag[lo], dhi = t.mag[hi] - a;
    pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  }
  return static_cast<uint16_t>(sign | pick);
}

// The same rounding by arithmetic: scale to the grid of the value's binade
// (or the denormal grid) and round with nearbyint (ties to even). Much
// faster than the table, for the sweeps; checked against the table below.
uint16_t RefRoundArith(bool half, double v) {
  const int p = half ? 10 : 7, emin = half ? -14 : -126, emax = half ? 15 : 127;
  const int bias = half ? 15 : 127;
  const uint16_t inf = half ? 0x7c00 : 0x7f80;
  if (std::isnan(v)) return half ? 0x7e00 : 0x7fc0;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isinf(a)) return sign | inf;
  int e;
  std::frexp(a, &e);
  const int exp = std::max(e - 1, emin);
  double r = std::nearbyint(std::ldexp(a, p - exp));  // exact scaling
  int field = exp + bias;
  if (r < std::ldexp(1.0, p)) field = 0;        // denormal (or zero)
  if (r == std::ldexp(1.0, p + 1)) {            // rounded up a binade
    r /= 2;
    ++field;
  }
  if (field > emax + bias) return sign | inf;
  const uint32_t mant = static_cast<uint32_t>(r) & ((1u << p) - 1);
  return static_cast<uint16_t>(sign | (field << p) | mant);
}

const RoundTable& HalfTable() {
  static const RoundTable t = MakeTable(true);
  return t;
}
const RoundTable& Bf16Table() {
  static const RoundTable t = MakeTable(false);
  return t;
}

// ---- reference elements -------------------------------------------------------

uint64_t LoadBits(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian host
  return v;
}

double ToDouble(zc_dtype d, uint64_t bits) {
  switch (d) {
    case ZC_FLOAT16: return RefHalfToDouble(static_cast<uint16_t>(bits));
    case ZC_BFLOAT16: return RefBf16ToDouble(static_cast<uint16_t>(bits));
    case ZC_FLOAT32: {
      float f;
      const uint32_t b = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b, 4);
      return f;
    }
    default: {
      double f;
      std::memcpy(&f, &bits, 8);
      return f;
    }
  }
}

uint64_t FromDouble(zc_dtype d, double v) {
  switch (d) {
    case ZC_FLOAT16: return RefRoundArith(true, v);
    case ZC_BFLOAT16: return RefRoundArith(false, v);
    case ZC_FLOAT32: {
      const float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, &v, 8);
      return b;
    }
  }
}

bool IsSigned(zc_dtype d) {
  return d == ZC_INT8 || d == ZC_INT16 || d == ZC_INT32 || d == ZC_INT64;
}

int64_t SignExtend(uint64_t bits, size_t size) {
  const int shift = 64 - 8 * static_cast<int>(size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

double RefFloatOp(zc_op op, double a, double b) {
  switch (op) {
    case ZC_SUM:
    case ZC_AVG: return a + b;
    case ZC_PROD: return a * b;
    case ZC_MIN: return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a);
    case ZC_MAX: return std::isnan(a) ? a : std::isnan(b) ? b : (b > a ? b : a);
    case ZC_BAND:
    case ZC_BOR:
    case ZC_BXOR: break;  // integer types only
  }
  return 0;
}

uint64_t RefIntOp(zc_dtype d, zc_op op, uint64_t a, uint64_t b) {
  const size_t size = DtypeSize(d);
  switch (op) {
    case ZC_SUM:
    case ZC_AVG: return a + b;
    case ZC_PROD: return a * b;
    case ZC_BAND: return a & b;
    case ZC_BOR: return a | b;
    case ZC_BXOR: return a ^ b;
    case ZC_MIN:
    case ZC_MAX: {
      bool b_less;
      if (IsSigned(d)) {
        b_less = SignExtend(b, size) < SignExtend(a, size);
      } else {
        const uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
        b_less = (b & mask) < (a & mask);
      }
      return (op == ZC_MIN) == b_less ? b : a;
    }
  }
  return 0;
}

// Reference of op over inputs[0..n-1] at element i, as the element's bits.
uint64_t RefReduce(zc_dtype d, zc_op op, const std::vector<const uint8_t*>& in,
                   size_t i) {
  const size_t size = DtypeSize(d);
  if (d == ZC_BOOL) {
    // Logical on truth values (any nonzero byte is true); the result is 0
    // or 1, for a single input too.
    bool acc = in[0][i] != 0;
    for (size_t k = 1; k < in.size(); ++k) {
      const bool v = in[k][i] != 0;
      if (op == ZC_SUM || op == ZC_MAX || op == ZC_BOR || op == ZC_AVG) acc = acc || v;
      else if (op == ZC_BXOR) acc = acc != v;
      else acc = acc && v;
    }
    return acc ? 1 : 0;
  }
  if (IsFloating(d)) {
    double acc = ToDouble(d, LoadBits(in[0] + i * size, size));
    for (size_t k = 1; k < in.size(); ++k) {
      acc = RefFloatOp(op, acc, ToDouble(d, LoadBits(in[k] + i * size, size)));
    }
    return FromDouble(d, acc);
  }
  uint64_t acc = LoadBits(in[0] + i * size, size);
  for (size_t k = 1; k < in.size(); ++k) {
    acc = RefIntOp(d, op, acc, LoadBits(in[k] + i * size, size));
  }
  return acc;
}

bool SameElement(zc_dtype d, uint64_t got, uint64_t want) {
  const size_t size = DtypeSize(d);
  const uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
  got &= mask;
  want &= mask;
  if (IsFloating(d) && std::isnan(ToDouble(d, got)) &&
      std::isnan(ToDouble(d, want))) {
    return true;  // any NaN is a NaN
  }
  return got == want;
}

// memcmp with count 0 may see null pointers (empty vectors).
bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// ---- buffers ----------------------------------------------------------------------

constexpr uint8_t kFill = 0xa5;
constexpr size_t kGuard = 32;

// A buffer at a chosen misalignment with guard bytes on both sides.
class Buffer {
 public:
  Buffer(size_t bytes, size_t offset)
      : store_(bytes + offset + 64 + 2 * kGuard, kFill), bytes_(bytes) {
    uintptr_t base = reinterpret_cast<uintptr_t>(store_.data()) + kGuard;
    base = (base + 63) & ~uintptr_t{63};
    p_ = reinterpret_cast<uint8_t*>(base) + offset;
  }
  uint8_t* data() { return p_; }
  bool GuardsIntact() const {
    for (const uint8_t* q = store_.data(); q < p_; ++q) {
      if (*q != kFill) return false;
    }
    for (const uint8_t* q = p_ + bytes_; q < store_.data() + store_.size(); ++q) {
      if (*q != kFill) return false;
    }
    return true;
  }

 private:
  std::vector<uint8_t> store_;
  size_t bytes_;
  uint8_t* p_;
};

// ---- inputs ---------------------------------------------------------------------

enum class Values {
  kRandom,  // full bit patterns and ordinary numbers, specials included
  kExact,   // small k * 2^e: float accumulation of up to 5 inputs is exact
};

void FillInput(zc_dtype d, zc_op op, Values mode, uint8_t* p, size_t count,
               std::mt19937_64& rng) {
  const size_t size = DtypeSize(d);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = rng();
    if (IsFloating(d)) {
      const uint64_t r = rng() % 1000;
      double v;
      if (mode == Values::kExact && op != ZC_MIN && op != ZC_MAX) {
        const bool prod = op == ZC_PROD;
        const int64_t kmax = prod ? 8 : 64, emax = prod ? 2 : 4;
        const int64_t k = static_cast<int64_t>(rng() % (2 * kmax + 1)) - kmax;
        const int e = static_cast<int>(rng() % (2 * emax + 1)) - static_cast<int>(emax);
        v = std::ldexp(static_cast<double>(k), e);
        if (r < 3) v = std::numeric_limits<double>::quiet_NaN();
        if (r == 4) v = std::numeric_limits<double>::infinity();
        if (r == 5) v = -std::numeric_limits<double>::infinity();
        if (r == 6) v = -0.0;
        bits = FromDouble(d, v);
      } else if (d == ZC_FLOAT32 || d == ZC_FLOAT64) {
        // Raw patterns cover huge, tiny, denormal and NaN values; the rest
        // are ordinary numbers whose sums and products round.
        if (r >= 250) {
          v = std::uniform_real_distribution<double>(-1000, 1000)(rng);
          if (r < 260) v = 1e-40;  // float denormal
          if (r >= 260 && r < 265) v = -0.0;
          bits = FromDouble(d, v);
        }
      }
      // fp16/bf16 random: raw 16-bit patterns (all values, specials too).
    } else if (d == ZC_BOOL) {
      // false a third of the time; true as 1 or as any other nonzero byte.
      const uint64_t r = rng() % 6;
      bits = r < 2 ? 0 : r < 4 ? 1 : ((bits & 0xff) | 2);
    }
    std::memcpy(p + i * size, &bits, size);
  }
}

std::string Describe(zc_dtype d, uint64_t bits) {
  char buf[96];
  if (IsFloating(d)) {
    std::snprintf(buf, sizeof buf, "%.17g (bits 0x%llx)", ToDouble(d, bits),
                  static_cast<unsigned long long>(bits));
  } else {
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(bits));
  }
  return buf;
}

// Checks out[0..count) against the reference over the saved inputs.
::testing::AssertionResult Matches(zc_dtype d, zc_op op, const uint8_t* out,
                                   const std::vector<const uint8_t*>& in,
                                   size_t count) {
  const size_t size = DtypeSize(d);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want = RefReduce(d, op, in, i);
    const uint64_t got = LoadBits(out + i * size, size);
    if (!SameElement(d, got, want)) {
      std::string inputs;
      for (const uint8_t* p : in) {
        inputs += ' ';
        inputs += Describe(d, LoadBits(p + i * size, size));
      }
      return ::testing::AssertionFailure()
             << DtypeName(d) << " " << OpName(op) << " element " << i << " of "
             << count << ": got " << Describe(d, got) << ", want "
             << Describe(d, want) << "; inputs" << inputs;
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- ISA loop -------------------------------------------------------------------

std::vector<KernelIsa> SupportedIsas() {
  std::vector<KernelIsa> v;
  for (KernelIsa isa : {KernelIsa::kGeneric, KernelIsa::kAvx2}) {
    if (KernelIsaSupported(isa)) v.push_back(isa);
  }
  return v;
}

class IsaRestorer {
 public:
  IsaRestorer() : saved_(ActiveKernelIsa()) {}
  ~IsaRestorer() { SetKernelIsa(saved_); }

 private:
  KernelIsa saved_;
};

// ---- the dtype x op sweep ----------------------------------------------------------

const zc_dtype kDtypes[] = {ZC_INT8,    ZC_UINT8,    ZC_INT32,   ZC_UINT32,
                            ZC_INT64,   ZC_UINT64,   ZC_FLOAT16, ZC_BFLOAT16,
                            ZC_FLOAT32, ZC_FLOAT64,  ZC_INT16,   ZC_UINT16,
                            ZC_BOOL};
const zc_op kOps[] = {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG, ZC_BAND, ZC_BOR, ZC_BXOR};
const size_t kCounts[] = {0, 1, 2, 3, 7, 13, 1024, 65537};

// Misalignments: the one from the brief (+2 bytes for 16-bit types, +4 for
// 8-byte types; +2 for 4-byte types) and a fully odd one (+1 byte).
// The large count (more than one 8 KiB block, odd tail) runs at the brief's
// offset only, which keeps the binary fast under the sanitizers.
std::vector<size_t> Offsets(zc_dtype d, size_t count) {
  const size_t size = DtypeSize(d);
  const size_t brief = size == 1 ? 1 : size == 8 ? 4 : 2;
  if (count > 4096) return {brief};
  if (size == 1) return {0, 1};
  return {0, brief, 1};
}

using Case = std::tuple<zc_dtype, zc_op>;

class ReduceSweep : public ::testing::TestWithParam<Case> {
 protected:
  zc_dtype d() const { return std::get<0>(GetParam()); }
  zc_op op() const { return std::get<1>(GetParam()); }
};

// Inputs are kept in `saved` copies so in-place results can be checked.
struct Inputs {
  std::vector<Buffer> bufs;
  std::vector<std::vector<uint8_t>> saved;
  std::vector<const uint8_t*> SavedPtrs() const {
    std::vector<const uint8_t*> v;
    for (const auto& s : saved) v.push_back(s.data());
    return v;
  }
};

Inputs MakeInputs(zc_dtype d, zc_op op, Values mode, int n, size_t count,
                  size_t misalign, std::mt19937_64& rng) {
  Inputs in;
  const size_t bytes = count * DtypeSize(d);
  for (int k = 0; k < n; ++k) {
    in.bufs.emplace_back(bytes, k % 2 == 0 ? misalign : 0);
    FillInput(d, op, mode, in.bufs.back().data(), count, rng);
    in.saved.emplace_back(in.bufs.back().data(), in.bufs.back().data() + bytes);
  }
  return in;
}

TEST_P(ReduceSweep, BinaryFormsMatchReference) {
  if (CheckDtypeOp(d(), op()).code() != ZC_OK) GTEST_SKIP() << "invalid pair";
  IsaRestorer restore;
  std::mt19937_64 rng(1234 + d() * 10 + op());
  const size_t size = DtypeSize(d());
  for (KernelIsa isa : SupportedIsas()) {
    ASSERT_TRUE(SetKernelIsa(isa));
    for (size_t count : kCounts) {
      for (size_t off : Offsets(d(), count)) {
        SCOPED_TRACE(::testing::Message() << KernelIsaName(isa) << " count "
                                          << count << " offset " << off);
        const size_t bytes = count * size;
        {  // dst = op(a, b), all distinct
          Inputs in = MakeInputs(d(), op(), Values::kRandom, 2, count, off, rng);
          Buffer dst(bytes, off == 0 ? 1 : 0);
          Reduce2(d(), op(), dst.data(), in.bufs[0].data(), in.bufs[1].data(), count);
          EXPECT_TRUE(Matches(d(), op(), dst.data(), in.SavedPtrs(), count));
          EXPECT_TRUE(dst.GuardsIntact());
          EXPECT_TRUE(SameBytes(in.bufs[1].data(), in.saved[1].data(), bytes));
        }
        {  // ReduceInto: a = op(a, b)
          Inputs in = MakeInputs(d(), op(), Values::kRandom, 2, count, off, rng);
          ReduceInto(d(), op(), in.bufs[0].data(), in.bufs[1].data(), count);
          EXPECT_TRUE(Matches(d(), op(), in.bufs[0].data(), in.SavedPtrs(), count));
          EXPECT_TRUE(in.bufs[0].GuardsIntact());
        }
        {  // Reduce2 with dst == a, then dst == b (operand order kept)
          Inputs in = MakeInputs(d(), op(), Values::kRandom, 2, count, off, rng);
          Reduce2(d(), op(), in.bufs[0].data(), in.bufs[0].data(), in.bufs[1].data(), count);
          EXPECT_TRUE(Matches(d(), op(), in.bufs[0].data(), in.SavedPtrs(), count));
          Inputs in2 = MakeInputs(d(), op(), Values::kRandom, 2, count, off, rng);
          Reduce2(d(), op(), in2.bufs[1].data(), in2.bufs[0].data(), in2.bufs[1].data(), count);
          EXPECT_TRUE(Matches(d(), op(), in2.bufs[1].data(), in2.SavedPtrs(), count));
          EXPECT_TRUE(in2.bufs[1].GuardsIntact());
        }
        {  // a == b: into a distinct dst, then fully in place
          Inputs in = MakeInputs(d(), op(), Values::kRandom, 1, count, off, rng);
          std::vector<const uint8_t*> twice = {in.saved[0].data(), in.saved[0].data()};
          Buffer dst(bytes, 0);
          Reduce2(d(), op(), dst.data(), in.bufs[0].data(), in.bufs[0].data(), count);
          EXPECT_TRUE(Matches(d(), op(), dst.data(), twice, count));
          Reduce2(d(), op(), in.bufs[0].data(), in.bufs[0].data(), in.bufs[0].data(), count);
          EXPECT_TRUE(Matches(d(), op(), in.bufs[0].data(), twice, count));
        }
      }
    }
  }
}

TEST_P(ReduceSweep, ReduceNMatchesReference) {
  if (CheckDtypeOp(d(), op()).code() != ZC_OK) GTEST_SKIP() << "invalid pair";
  IsaRestorer restore;
  std::mt19937_64 rng(99 + d() * 10 + op());
  const size_t size = DtypeSize(d());
  for (KernelIsa isa : SupportedIsas()) {
    ASSERT_TRUE(SetKernelIsa(isa));
    for (size_t count : kCounts) {
      for (size_t off : Offsets(d(), count)) {
        for (int n = 1; n <= 5; ++n) {
          // Two inputs compare exactly against double for any values; more
          // use values whose float accumulation is exact.
          const Values mode = n <= 2 ? Values::kRandom : Values::kExact;
          // dst: -1 distinct, else the index of the input it aliases.
          std::vector<int> aliases = {-1, n - 1};
          if (count <= 4096) aliases = {-1, 0, n / 2, n - 1};
          for (int alias : aliases) {
            SCOPED_TRACE(::testing::Message()
                         << KernelIsaName(isa) << " count " << count << " offset "
                         << off << " n " << n << " dst alias " << alias);
            Inputs in = MakeInputs(d(), op(), mode, n, count, off, rng);
            std::vector<const void*> srcs;
            for (auto& b : in.bufs) srcs.push_back(b.data());
            Buffer own(count * size, 3 % size);
            Buffer& dst = alias < 0 ? own : in.bufs[alias];
            ReduceN(d(), op(), dst.data(), srcs.data(), n, count);
            ASSERT_TRUE(Matches(d(), op(), dst.data(), in.SavedPtrs(), count));
            EXPECT_TRUE(dst.GuardsIntact());
            for (int k = 0; k < n; ++k) {
              if (k == alias) continue;
              ASSERT_TRUE(SameBytes(in.bufs[k].data(), in.saved[k].data(),
                                    count * size))
                  << "input " << k << " modified";
            }
            if (n == 1 && alias >= 0) break;  // the only alias there is
          }
        }
      }
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(DtypeName(std::get<0>(info.param))) + "_" +
         OpName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOps, ReduceSweep,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps)),
                         CaseName);

// ---- specific semantics ------------------------------------------------------------

// Bitwise ops on rank- and index-dependent integers of every width, with
// every ISA, through all three entry points; floating types are refused by
// CheckDtypeOp and ignored (nothing written) by the kernels.
TEST(ReduceKernels, BitwiseOpsOnIntegers) {
  IsaRestorer restore;
  const zc_dtype ints[] = {ZC_INT8,  ZC_UINT8, ZC_INT16, ZC_UINT16,
                           ZC_INT32, ZC_UINT32, ZC_INT64, ZC_UINT64};
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    for (zc_dtype d : ints) {
      const size_t es = DtypeSize(d), count = 1027;
      for (zc_op op : {ZC_BAND, ZC_BOR, ZC_BXOR}) {
        SCOPED_TRACE(::testing::Message() << KernelIsaName(isa) << " " << DtypeName(d) << " "
                                          << OpName(op));
        const int n = 5;
        std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * es));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            // rank r clears (band), sets (bor) or flips (bxor) bits that
            // depend on r and i.
            uint64_t v = 0x9e3779b97f4a7c15ull * (i + 1) ^ (0xff51afd7ed558ccdull >> r);
            if (op == ZC_BAND) v = ~(1ull << ((r * 7 + i) % (8 * es)));
            if (op == ZC_BOR) v = 1ull << ((r * 5 + i * 3) % (8 * es));
            std::memcpy(in[r].data() + i * es, &v, es);
          }
        std::vector<const void*> srcs;
        for (auto& b : in) srcs.push_back(b.data());
        std::vector<uint8_t> outn(count * es), out2(count * es), into(in[0]);
        ReduceN(d, op, outn.data(), srcs.data(), n, count);
        Reduce2(d, op, out2.data(), in[0].data(), in[1].data(), count);
        ReduceInto(d, op, into.data(), in[1].data(), count);
        const uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
        for (size_t i = 0; i < count; ++i) {
          uint64_t want = 0, want2 = 0, got = 0, got2 = 0, got_into = 0;
          for (int r = 0; r < n; ++r) {
            uint64_t v = 0;
            std::memcpy(&v, in[r].data() + i * es, es);
            want = r == 0 ? v : RefIntOp(d, op, want, v);
            if (r == 1) want2 = want;
          }
          std::memcpy(&got, outn.data() + i * es, es);
          std::memcpy(&got2, out2.data() + i * es, es);
          std::memcpy(&got_into, into.data() + i * es, es);
          ASSERT_EQ(got, want & mask) << "ReduceN element " << i;
          ASSERT_EQ(got2, want2 & mask) << "Reduce2 element " << i;
          ASSERT_EQ(got_into, want2 & mask) << "ReduceInto element " << i;
        }
      }
    }
    float f[2] = {1.5f, 2.5f}, g[2] = {3.0f, 4.0f};
    EXPECT_EQ(CheckDtypeOp(ZC_FLOAT32, ZC_BXOR).code(), ZC_ERR_INVALID_ARG);
    ReduceInto(ZC_FLOAT32, ZC_BXOR, f, g, 2);  // refused pair: a no-op
    EXPECT_EQ(f[0], 1.5f);
    EXPECT_EQ(f[1], 2.5f);
  }
}

TEST(ReduceKernels, IntegerSumAndProdWrap) {
  IsaRestorer restore;
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    int8_t a8[3] = {127, -128, 100}, b8[3] = {1, -1, 100};
    Reduce2(ZC_INT8, ZC_SUM, a8, a8, b8, 3);
    EXPECT_EQ(a8[0], -128);
    EXPECT_EQ(a8[1], 127);
    EXPECT_EQ(a8[2], static_cast<int8_t>(200 - 256));
    int32_t a32[1] = {INT32_MAX}, b32[1] = {2};
    ReduceInto(ZC_INT32, ZC_PROD, a32, b32, 1);
    EXPECT_EQ(a32[0], -2);
    int64_t a64[1] = {INT64_MIN}, b64[1] = {-1};
    ReduceInto(ZC_INT64, ZC_PROD, a64, b64, 1);
    EXPECT_EQ(a64[0], INT64_MIN);
    uint8_t u8[1] = {255}, v8[1] = {255};
    ReduceInto(ZC_UINT8, ZC_PROD, u8, v8, 1);
    EXPECT_EQ(u8[0], 1);
    uint32_t u32[1] = {0}, v32[1] = {1};
    ReduceInto(ZC_UINT32, ZC_MIN, u32, v32, 1);
    EXPECT_EQ(u32[0], 0u);
    uint64_t u64[1] = {~0ull}, v64[1] = {1};
    ReduceInto(ZC_UINT64, ZC_MAX, u64, v64, 1);
    EXPECT_EQ(u64[0], ~0ull);
    // 16-bit: sums and products wrap (65535 * 65535 must not overflow int
    // on the way: UBSan checks it); min/max compare signed or unsigned.
    int16_t a16[4] = {32767, -32768, 300, -7}, b16[4] = {1, -1, 300, 5};
    int16_t s16[4], p16[4], m16[4];
    Reduce2(ZC_INT16, ZC_SUM, s16, a16, b16, 4);
    Reduce2(ZC_INT16, ZC_PROD, p16, a16, b16, 4);
    Reduce2(ZC_INT16, ZC_MIN, m16, a16, b16, 4);
    EXPECT_EQ(s16[0], -32768);
    EXPECT_EQ(s16[1], 32767);
    EXPECT_EQ(s16[2], 600);
    EXPECT_EQ(p16[1], -32768);  // -32768 * -1 wraps to itself
    EXPECT_EQ(p16[2], static_cast<int16_t>(90000 - 131072));
    EXPECT_EQ(p16[3], -35);
    EXPECT_EQ(m16[3], -7);
    uint16_t u16[3] = {65535, 65535, 0}, v16[3] = {65535, 1, 65535};
    uint16_t ps[3], ss[3], mx[3];
    Reduce2(ZC_UINT16, ZC_PROD, ps, u16, v16, 3);
    Reduce2(ZC_UINT16, ZC_SUM, ss, u16, v16, 3);
    Reduce2(ZC_UINT16, ZC_MAX, mx, u16, v16, 3);
    EXPECT_EQ(ps[0], 1);  // 65535^2 mod 65536
    EXPECT_EQ(ss[1], 0);
    EXPECT_EQ(mx[2], 65535);
    const void* srcs16[3] = {u16, v16, u16};
    ReduceN(ZC_UINT16, ZC_PROD, ps, srcs16, 3, 3);
    EXPECT_EQ(ps[0], 65535);  // (-1)^3
  }
}

// Bool is logical on truth values (any nonzero byte is true) and writes
// only 0 or 1: every pair of byte values through every op and entry point,
// single inputs (ReduceN n = 1, ReduceOne) included, every ISA.
TEST(ReduceKernels, BoolIsLogicalAndWritesZeroOrOne) {
  IsaRestorer restore;
  std::vector<uint8_t> a(256 * 256 + 5), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i / 256);
    b[i] = static_cast<uint8_t>(i % 256);
  }
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    SCOPED_TRACE(KernelIsaName(isa));
    for (zc_op op : {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_BAND, ZC_BOR, ZC_BXOR}) {
      ASSERT_TRUE(CheckDtypeOp(ZC_BOOL, op).ok()) << OpName(op);
      std::vector<uint8_t> out2(a.size()), outn(a.size()), into(a);
      Reduce2(ZC_BOOL, op, out2.data(), a.data(), b.data(), a.size());
      ReduceInto(ZC_BOOL, op, into.data(), b.data(), a.size());
      const void* srcs[3] = {a.data(), b.data(), a.data()};
      ReduceN(ZC_BOOL, op, outn.data(), srcs, 3, a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        const bool x = a[i] != 0, y = b[i] != 0;
        bool want, want3;
        if (op == ZC_SUM || op == ZC_MAX || op == ZC_BOR) {
          want = x || y;
          want3 = want;
        } else if (op == ZC_BXOR) {
          want = x != y;
          want3 = y;  // x ^ y ^ x
        } else {
          want = x && y;
          want3 = want;
        }
        ASSERT_EQ(out2[i], want ? 1 : 0) << OpName(op) << " " << int(a[i]) << ", " << int(b[i]);
        ASSERT_EQ(into[i], want ? 1 : 0) << OpName(op) << " into " << int(a[i]) << ", " << int(b[i]);
        ASSERT_EQ(outn[i], want3 ? 1 : 0) << OpName(op) << " n=3 " << int(a[i]) << ", " << int(b[i]);
      }
      // One input (a job of one rank): the truth value as 0 or 1, out of
      // place and in place.
      const void* one[1] = {b.data()};
      std::vector<uint8_t> o1(b.size(), 0x77), inplace(b);
      ReduceN(ZC_BOOL, op, o1.data(), one, 1, b.size());
      const void* self[1] = {inplace.data()};
      ReduceN(ZC_BOOL, op, inplace.data(), self, 1, inplace.size());
      for (size_t i = 0; i < b.size(); ++i) {
        ASSERT_EQ(o1[i], b[i] != 0 ? 1 : 0) << OpName(op) << " n=1 byte " << int(b[i]);
        ASSERT_EQ(inplace[i], b[i] != 0 ? 1 : 0) << OpName(op) << " n=1 in place byte " << int(b[i]);
      }
    }
    std::vector<uint8_t> c(b.size(), 0x55);
    ReduceOne(ZC_BOOL, c.data(), b.data(), b.size());
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(c[i], b[i] != 0 ? 1 : 0) << "ReduceOne byte " << int(b[i]);
    ReduceOne(ZC_BOOL, a.data(), a.data(), 300);  // in place
    for (size_t i = 0; i < 300; ++i) ASSERT_EQ(a[i], (i / 256) != 0 ? 1 : 0);
    for (size_t i = 0; i < 300; ++i) a[i] = static_cast<uint8_t>(i / 256);
    // Other dtypes: ReduceOne copies the bytes.
    int16_t x16[3] = {-5, 2, 0x7f00}, y16[3] = {};
    ReduceOne(ZC_INT16, y16, x16, 3);
    EXPECT_EQ(std::memcmp(x16, y16, sizeof x16), 0);
  }
  EXPECT_EQ(CheckDtypeOp(ZC_BOOL, ZC_AVG).code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(CheckDtypeOp(ZC_BOOL, ZC_AVG).message().find("bool"), std::string::npos);
}

template <class T>
void CheckNanPropagation(zc_dtype d, T nan, T one) {
  for (zc_op op : {ZC_MIN, ZC_MAX}) {
    SCOPED_TRACE(OpName(op));
    T a[2] = {nan, one}, b[2] = {one, nan}, out[2];
    Reduce2(d, op, out, a, b, 2);
    for (T v : out) {
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof v);
      EXPECT_TRUE(std::isnan(ToDouble(d, bits))) << DtypeName(d);
    }
    const void* srcs[3] = {a, b, a};
    ReduceN(d, op, out, srcs, 3, 2);
    for (T v : out) {
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof v);
      EXPECT_TRUE(std::isnan(ToDouble(d, bits))) << DtypeName(d);
    }
  }
}

TEST(ReduceKernels, MinMaxPropagateNaN) {
  IsaRestorer restore;
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    SCOPED_TRACE(KernelIsaName(isa));
    CheckNanPropagation<float>(ZC_FLOAT32, NAN, 1.0f);
    CheckNanPropagation<double>(ZC_FLOAT64, NAN, 1.0);
    CheckNanPropagation<uint16_t>(ZC_FLOAT16, 0x7e00, 0x3c00);
    CheckNanPropagation<uint16_t>(ZC_BFLOAT16, 0x7fc0, 0x3f80);
    // Infinities are ordinary values for min/max.
    float a[1] = {INFINITY}, b[1] = {-INFINITY}, out[1];
    Reduce2(ZC_FLOAT32, ZC_MIN, out, a, b, 1);
    EXPECT_EQ(out[0], -INFINITY);
  }
}

TEST(ReduceKernels, FloatingSpecialValues) {
  IsaRestorer restore;
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    SCOPED_TRACE(KernelIsaName(isa));
    // fp16: 65504 + 65504 overflows to inf; inf + -inf is NaN; -0 + -0 = -0;
    // denormal + denormal; 2048 + 1 is a tie that rounds to even (2048).
    uint16_t a[5] = {0x7bff, 0x7c00, 0x8000, 0x0001, 0x6800};
    uint16_t b[5] = {0x7bff, 0xfc00, 0x8000, 0x0001, 0x3c00};
    uint16_t out[5];
    Reduce2(ZC_FLOAT16, ZC_SUM, out, a, b, 5);
    EXPECT_EQ(out[0], 0x7c00);
    EXPECT_TRUE(std::isnan(RefHalfToDouble(out[1])));
    EXPECT_EQ(out[2], 0x8000);
    EXPECT_EQ(out[3], 0x0002);
    EXPECT_EQ(out[4], 0x6800);
    // bf16: max + max overflows; 1 + 2^-8 is a tie to even (1).
    uint16_t c[2] = {0x7f7f, 0x3f80}, e[2] = {0x7f7f, 0x3b80};
    Reduce2(ZC_BFLOAT16, ZC_SUM, out, c, e, 2);
    EXPECT_EQ(out[0], 0x7f80);
    EXPECT_EQ(out[1], 0x3f80);
    // fp16 accumulates in float: 2048 + 1 + 1 = 2050 exactly, where pairwise
    // rounding in fp16 would give 2048.
    uint16_t one[1] = {0x3c00}, big[1] = {0x6800};
    const void* srcs[3] = {big, one, one};
    ReduceN(ZC_FLOAT16, ZC_SUM, out, srcs, 3, 1);
    EXPECT_EQ(out[0], 0x6801);
    // float32 denormals are kept (no flush to zero).
    float fd[1] = {1e-45f}, fe[1] = {1e-45f}, fo[1];
    Reduce2(ZC_FLOAT32, ZC_SUM, fo, fd, fe, 1);
    EXPECT_EQ(fo[0], 2 * 1e-45f);
    EXPECT_NE(fo[0], 0.0f);
  }
}

TEST(ReduceKernels, ScaleDivFloatingTypes) {
  IsaRestorer restore;
  std::mt19937_64 rng(7);
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    for (zc_dtype d : {ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64}) {
      // Integer divisors (world sizes) and, for 32/64-bit, one that is not
      // exactly a float (2^24 + 1) to take the double path.
      std::vector<double> divisors = {1, 2, 3, 5, 7, 12, 100, 1000};
      if (d == ZC_FLOAT32 || d == ZC_FLOAT64) divisors.push_back(16777217.0);
      for (double div : divisors) {
        for (size_t count : {size_t{1}, size_t{13}, size_t{4099}}) {
          SCOPED_TRACE(::testing::Message() << KernelIsaName(isa) << " "
                                            << DtypeName(d) << " / " << div
                                            << " count " << count);
          const size_t size = DtypeSize(d);
          Buffer buf(count * size, size == 8 ? 4 : 2);
          FillInput(d, ZC_SUM, Values::kRandom, buf.data(), count, rng);
          std::vector<uint8_t> saved(buf.data(), buf.data() + count * size);
          ScaleDiv(d, buf.data(), count, div);
          for (size_t i = 0; i < count; ++i) {
            const double x = ToDouble(d, LoadBits(saved.data() + i * size, size));
            const uint64_t want = FromDouble(d, x / div);
            const uint64_t got = LoadBits(buf.data() + i * size, size);
            ASSERT_TRUE(SameElement(d, got, want))
                << "element " << i << ": " << Describe(d, LoadBits(saved.data() + i * size, size))
                << " -> " << Describe(d, got) << ", want " << Describe(d, want);
          }
          EXPECT_TRUE(buf.GuardsIntact());
        }
      }
    }
  }
  // Integer types are left alone.
  int32_t v[2] = {10, 20};
  ScaleDiv(ZC_INT32, v, 2, 2.0);
  EXPECT_EQ(v[0], 10);
  EXPECT_EQ(v[1], 20);
}

TEST(ReduceKernels, AvgReducesAsSum) {
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3];
  Reduce2(ZC_FLOAT32, ZC_AVG, out, a, b, 3);
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(out[2], 9.0f);
  ScaleDiv(ZC_FLOAT32, out, 3, 2.0);
  EXPECT_EQ(out[1], 3.5f);
}

TEST(ReduceKernels, InvalidDtypeOrOpDoesNothing) {
  int32_t a[2] = {1, 2}, b[2] = {3, 4};
  ReduceInto(static_cast<zc_dtype>(42), ZC_SUM, a, b, 2);
  ReduceInto(ZC_INT32, static_cast<zc_op>(-1), a, b, 2);
  const void* srcs[1] = {b};
  ReduceN(static_cast<zc_dtype>(-3), ZC_SUM, a, srcs, 1, 2);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[1], 2);
}

// ---- conversions -------------------------------------------------------------------

TEST(ReduceKernelsConvert, HalfAllValuesRoundTrip) {
  IsaRestorer restore;
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = HalfToFloat(x);
    const double want = RefHalfToDouble(x);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      const uint16_t back = FloatToHalf(f);
      ASSERT_TRUE(std::isnan(RefHalfToDouble(back))) << h;
      ASSERT_EQ(back & 0x8000, x & 0x8000) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << h;
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << h;
    ASSERT_EQ(FloatToHalf(f), x) << h;
  }
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    SCOPED_TRACE(KernelIsaName(isa));
    std::vector<float> f(65536);
    std::vector<uint16_t> back(65536);
    HalfToFloatN(f.data(), all.data(), all.size());
    FloatToHalfN(back.data(), f.data(), f.size());
    for (uint32_t h = 0; h < 65536; ++h) {
      const float s = HalfToFloat(static_cast<uint16_t>(h));
      if (std::isnan(s)) {
        ASSERT_TRUE(std::isnan(f[h])) << h;
        ASSERT_TRUE(std::isnan(RefHalfToDouble(back[h]))) << h;
        continue;
      }
      ASSERT_EQ(std::memcmp(&f[h], &s, 4), 0) << h;
      ASSERT_EQ(back[h], h) << h;
    }
  }
}

TEST(ReduceKernelsConvert, Bf16AllValuesRoundTrip) {
  IsaRestorer restore;
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = BFloat16ToFloat(x);
    const double want = RefBf16ToDouble(x);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      const uint16_t back = FloatToBFloat16(f);
      ASSERT_TRUE(std::isnan(RefBf16ToDouble(back))) << h;
      ASSERT_EQ(back & 0x8000, x & 0x8000) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << h;
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << h;
    ASSERT_EQ(FloatToBFloat16(f), x) << h;
  }
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    std::vector<float> f(65536);
    std::vector<uint16_t> back(65536);
    BFloat16ToFloatN(f.data(), all.data(), all.size());
    FloatToBFloat16N(back.data(), f.data(), f.size());
    for (uint32_t h = 0; h < 65536; ++h) {
      if (std::isnan(RefBf16ToDouble(static_cast<uint16_t>(h)))) {
        ASSERT_TRUE(std::isnan(f[h]));
        ASSERT_TRUE(std::isnan(RefBf16ToDouble(back[h])));
        continue;
      }
      ASSERT_EQ(back[h], h) << h;
    }
  }
}

// Floats at, just below and just above every midpoint between neighbouring
// 16-bit values, plus random floats, rounded by the scalar and the bulk
// functions, against the table reference.
void CheckRounding(bool half) {
  std::vector<float> in;
  const uint32_t top = half ? 0x7c00 : 0x7f80;
  for (uint32_t b = 0; b < top; ++b) {
    const double lo = half ? RefHalfToDouble(b) : RefBf16ToDouble(b);
    const double hi = b + 1 == top ? (half ? 65536.0 : std::ldexp(1.0, 128))
                                   : (half ? RefHalfToDouble(b + 1) : RefBf16ToDouble(b + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      in.push_back(m);
      in.push_back(-m);
    }
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    in.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 1e-40f, -1e-40f, INFINITY, -INFINITY, NAN, -NAN,
                  65504.0f, 65519.996f, 65520.0f, 1e10f, -1e10f, 3.4028235e38f,
                  5.960464477539063e-08f, 2.9802322387695312e-08f}) {
    in.push_back(f);
  }
  uint32_t snan_bits = 0x7f800001u;  // signalling NaN stays NaN
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  in.push_back(snan);

  const RoundTable& table = half ? HalfTable() : Bf16Table();
  auto same = [&](uint16_t got, uint16_t want) {
    const double g = half ? RefHalfToDouble(got) : RefBf16ToDouble(got);
    const double w = half ? RefHalfToDouble(want) : RefBf16ToDouble(want);
    return (std::isnan(g) && std::isnan(w)) || got == want;
  };
  for (float f : in) {
    const uint16_t want = RefRound(table, f);
    ASSERT_TRUE(same(RefRoundArith(half, f), want)) << "references disagree at " << f;
    const uint16_t got = half ? FloatToHalf(f) : FloatToBFloat16(f);
    ASSERT_TRUE(same(got, want)) << f << " got 0x" << std::hex << got << " want 0x" << want;
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x8000, std::signbit(f) ? 0x8000 : 0);
    }
  }
  IsaRestorer restore;
  for (KernelIsa isa : SupportedIsas()) {
    SetKernelIsa(isa);
    std::vector<uint16_t> out(in.size());
    if (half) {
      FloatToHalfN(out.data(), in.data(), in.size());
    } else {
      FloatToBFloat16N(out.data(), in.data(), in.size());
    }
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_TRUE(same(out[i], RefRound(table, in[i])))
          << KernelIsaName(isa) << " " << in[i] << " got 0x" << std::hex << out[i];
    }
  }
}

TEST(ReduceKernelsConvert, HalfRoundsToNearestEven) { CheckRounding(true); }
TEST(ReduceKernelsConvert, Bf16RoundsToNearestEven) { CheckRounding(false); }

TEST(ReduceKernelsConvert, HalfSpecialValues) {
  EXPECT_EQ(HalfToFloat(0x7c00), INFINITY);
  EXPECT_EQ(HalfToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));  // signalling
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie rounds to even: inf
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);      // tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);      // tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);   // to normal
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1e-40f), 0x0000);
  EXPECT_EQ(FloatToHalf(-NAN) & 0xfe00, 0xfe00);
  EXPECT_EQ(FloatToBFloat16(3.4028235e38f), 0x7f80);  // overflows on rounding
  EXPECT_EQ(FloatToBFloat16(-INFINITY), 0xff80);
  EXPECT_EQ(FloatToBFloat16(1e-40f), 0x0001);  // bf16 keeps float denormals
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(FloatToBFloat16(NAN) & 0x7fc0, 0x7fc0);
}

// ---- dtype helpers -----------------------------------------------------------------

TEST(ReduceKernelsDtype, SizesAndNames) {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
  const char* names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                         "uint64", "float16", "bfloat16", "float32", "float64",
                         "int16",  "uint16",  "bool"};
  ASSERT_EQ(kNumDtypes, 13);
  // The appended values keep the numbers of the C ABI.
  EXPECT_EQ(static_cast<int>(ZC_INT16), 10);
  EXPECT_EQ(static_cast<int>(ZC_UINT16), 11);
  EXPECT_EQ(static_cast<int>(ZC_BOOL), 12);
  for (int i = 0; i < kNumDtypes; ++i) {
    const zc_dtype d = static_cast<zc_dtype>(i);
    EXPECT_EQ(DtypeSize(d), sizes[i]);
    EXPECT_EQ(zc_dtype_size(d), sizes[i]);
    EXPECT_STREQ(DtypeName(d), names[i]);
    EXPECT_EQ(IsFloating(d), i >= ZC_FLOAT16 && i <= ZC_FLOAT64);
    EXPECT_EQ(IsInteger(d), !IsFloating(d) && d != ZC_BOOL);
  }
  EXPECT_EQ(DtypeSize(static_cast<zc_dtype>(13)), 0u);
  EXPECT_EQ(zc_dtype_size(static_cast<zc_dtype>(13)), 0u);
  EXPECT_EQ(DtypeSize(static_cast<zc_dtype>(-1)), 0u);
  EXPECT_STREQ(DtypeName(static_cast<zc_dtype>(99)), "unknown");
  EXPECT_FALSE(IsFloating(static_cast<zc_dtype>(99)));
  EXPECT_STREQ(OpName(ZC_SUM), "sum");
  EXPECT_STREQ(OpName(ZC_PROD), "prod");
  EXPECT_STREQ(OpName(ZC_MIN), "min");
  EXPECT_STREQ(OpName(ZC_MAX), "max");
  EXPECT_STREQ(OpName(ZC_AVG), "avg");
  EXPECT_STREQ(OpName(ZC_BAND), "band");
  EXPECT_STREQ(OpName(ZC_BOR), "bor");
  EXPECT_STREQ(OpName(ZC_BXOR), "bxor");
  EXPECT_STREQ(OpName(static_cast<zc_op>(8)), "unknown");
}

TEST(ReduceKernelsDtype, CheckDtypeOp) {
  for (zc_dtype d : kDtypes) {
    for (zc_op op : kOps) {
      const Status st = CheckDtypeOp(d, op);
      if ((op == ZC_AVG && !IsFloating(d)) || (IsBitwise(op) && IsFloating(d))) {
        EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
        EXPECT_NE(st.message().find(OpName(op)), std::string::npos) << st.message();
        EXPECT_NE(st.message().find(DtypeName(d)), std::string::npos) << st.message();
      } else {
        EXPECT_TRUE(st.ok()) << st.message();
      }
    }
  }
  Status st = CheckDtypeOp(static_cast<zc_dtype>(42), ZC_MAX);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("42"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("max"), std::string::npos) << st.message();
  st = CheckDtypeOp(ZC_FLOAT32, static_cast<zc_op>(9));
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("float32"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace zc
