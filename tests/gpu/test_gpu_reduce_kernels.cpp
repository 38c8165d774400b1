// GPU reduction kernels against the CPU reference. Argument checks and the
// reference itself are tested everywhere; the kernels need a CUDA device and
// skip cleanly without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/fusion.h"
#include "gpu/cuda_driver.h"
#include "gpu/reduce_kernels.h"
#include "gpu_device.h"
#include "gpu_reduce_reference.h"

namespace zc::gpu {
namespace {

using namespace zc::gpu::testing;

const zc_dtype kAllDtypes[] = {ZC_INT8,    ZC_UINT8,    ZC_INT32,  ZC_UINT32,
                               ZC_INT64,   ZC_UINT64,   ZC_FLOAT16,
                               ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64,
                               ZC_INT16,   ZC_UINT16,   ZC_BOOL};
const zc_op kAllOps[] = {ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG};

bool IsFloating(zc_dtype d) {
  return d == ZC_FLOAT16 || d == ZC_BFLOAT16 || d == ZC_FLOAT32 || d == ZC_FLOAT64;
}

// ---- runs everywhere ------------------------------------------------------

TEST(GpuReduceArgs, Validation) {
  alignas(16) float buf[8] = {};
  EXPECT_EQ(CheckReduceArgs("t", buf, buf, buf, 4, ZC_INT32, ZC_AVG).code(),
            ZC_ERR_INVALID_ARG);
  EXPECT_EQ(CheckReduceArgs("t", buf, buf, buf, 4, static_cast<zc_dtype>(42), ZC_SUM).code(),
            ZC_ERR_INVALID_ARG);
  EXPECT_EQ(CheckReduceArgs("t", buf, buf, buf, 4, ZC_FLOAT32, static_cast<zc_op>(9)).code(),
            ZC_ERR_INVALID_ARG);
  Status st = CheckReduceArgs("GPU reduce", buf, nullptr, buf, 4, ZC_FLOAT32, ZC_SUM);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("first input is null"), std::string::npos) << st.message();
  const void* odd = reinterpret_cast<const char*>(buf) + 2;
  st = CheckReduceArgs("GPU reduce", buf, odd, buf, 1, ZC_FLOAT32, ZC_SUM);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("not aligned"), std::string::npos) << st.message();
  EXPECT_TRUE(CheckReduceArgs("t", nullptr, nullptr, nullptr, 0, ZC_FLOAT32, ZC_SUM).ok());
  EXPECT_TRUE(CheckReduceArgs("t", buf, buf, buf, 4, ZC_FLOAT16, ZC_AVG).ok());
  for (zc_dtype d : {ZC_INT16, ZC_UINT16, ZC_BOOL}) {
    st = CheckReduceArgs("GPU reduce", buf, buf, buf, 4, d, ZC_AVG);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << GpuDtypeName(d);
    EXPECT_NE(st.message().find(GpuDtypeName(d)), std::string::npos) << st.message();
    EXPECT_TRUE(CheckReduceArgs("t", buf, buf, buf, 4, d, ZC_MAX).ok()) << GpuDtypeName(d);
    EXPECT_EQ(CheckScaleArgs(buf, 4, d, 2.0).code(), ZC_ERR_INVALID_ARG) << GpuDtypeName(d);
  }
  // 16-bit elements must be 2-byte aligned.
  st = CheckReduceArgs("GPU reduce", buf, odd, buf, 1, ZC_INT16, ZC_SUM);
  EXPECT_TRUE(st.ok()) << st.message();  // odd is 2 bytes past buf
  st = CheckReduceArgs("GPU reduce", buf, reinterpret_cast<const char*>(buf) + 1, buf, 1, ZC_UINT16,
                       ZC_SUM);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  // No GPU kernel for the bitwise ops: the C API stages such buffers
  // through host memory; a direct call says so.
  for (zc_op op : {ZC_BAND, ZC_BOR, ZC_BXOR}) {
    st = CheckReduceArgs("GPU reduce", buf, buf, buf, 4, ZC_INT32, op);
    EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
    EXPECT_NE(st.message().find("no GPU kernel"), std::string::npos) << st.message();
  }

  EXPECT_EQ(CheckScaleArgs(buf, 4, ZC_INT64, 2.0).code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(CheckScaleArgs(buf, 4, ZC_FLOAT32, 0.0).code(), ZC_ERR_INVALID_ARG);
  EXPECT_TRUE(CheckScaleArgs(nullptr, 0, ZC_FLOAT32, 4.0).ok());
}

TEST(GpuReduceArgs, EntryPointsCheckBeforeLaunching) {
  alignas(16) int32_t buf[4] = {};
  // Same answers with and without CUDA: validation comes first.
  EXPECT_EQ(ReduceInto(buf, buf, buf, 4, ZC_INT32, ZC_AVG, nullptr).code(),
            ZC_ERR_INVALID_ARG);
  EXPECT_EQ(ScaleDiv(buf, 4, ZC_INT32, 2.0, nullptr).code(), ZC_ERR_INVALID_ARG);
  EXPECT_TRUE(ReduceInto(nullptr, nullptr, nullptr, 0, ZC_FLOAT32, ZC_SUM, nullptr).ok());
  EXPECT_TRUE(ReduceInPlace(nullptr, nullptr, 0, ZC_FLOAT32, ZC_MAX, nullptr).ok());
  // ScaleCopy (the engine's scale factors on device tensors).
  EXPECT_EQ(ScaleCopy(buf, buf, 4, ZC_INT32, NAN, nullptr).code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(ScaleCopy(buf, nullptr, 4, ZC_INT32, 2.0, nullptr).code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(ScaleCopy(buf, reinterpret_cast<char*>(buf) + 1, 2, ZC_INT32, 2.0, nullptr).code(),
            ZC_ERR_INVALID_ARG);
  EXPECT_EQ(ScaleCopy(buf, buf, 4, static_cast<zc_dtype>(42), 2.0, nullptr).code(), ZC_ERR_INVALID_ARG);
  EXPECT_TRUE(ScaleCopy(nullptr, nullptr, 0, ZC_FLOAT16, 0.5, nullptr).ok());
}

TEST(GpuReduceArgs, BuildWithoutCudaSaysSo) {
  if (ReduceKernelsBuilt()) GTEST_SKIP() << "this build has the CUDA kernels";
  alignas(16) float buf[4] = {};
  Status st = ReduceInto(buf, buf, buf, 4, ZC_FLOAT32, ZC_SUM, nullptr);
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("zcomm was built without CUDA"), std::string::npos)
      << st.message();
  EXPECT_EQ(ScaleDiv(buf, 4, ZC_FLOAT32, 2.0, nullptr).code(), ZC_ERR_UNSUPPORTED);
  EXPECT_EQ(ScaleCopy(buf, buf, 4, ZC_FLOAT32, 2.0, nullptr).code(), ZC_ERR_UNSUPPORTED);
}

TEST(GpuReduceReference, HalfConversions) {
  EXPECT_EQ(RefFloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(RefFloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(RefFloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(RefFloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(RefFloatToHalf(65520.0f), 0x7c00);     // tie rounds to even: inf
  EXPECT_EQ(RefFloatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(RefFloatToHalf(5.9604645e-8f), 0x0001);  // 2^-24
  EXPECT_EQ(RefFloatToHalf(2.9802322e-8f), 0x0000);  // 2^-25: tie to even (0)
  EXPECT_EQ(RefFloatToHalf(1.0f + 1.0f / 2048), 0x3c00);      // tie to even
  EXPECT_EQ(RefFloatToHalf(1.0f + 3.0f / 2048), 0x3c02);      // tie to even
  EXPECT_EQ(RefFloatToHalf(-0.0f), 0x8000);
  // Every non-NaN half survives a round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;
    ASSERT_EQ(RefFloatToHalf(RefHalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(GpuReduceReference, Bf16Conversions) {
  EXPECT_EQ(RefFloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(RefFloatToBf16(-1.0f), 0xbf80);
  EXPECT_EQ(RefFloatToBf16(1.0f + 1.0f / 256), 0x3f80);  // tie to even
  EXPECT_EQ(RefFloatToBf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(RefBf16ToFloat(0x4049), 3.140625f);
}

TEST(GpuReduceReference, Semantics) {
  int8_t a[2] = {127, -128}, b[2] = {1, -1}, c[2];
  RefReduce(c, a, b, 2, ZC_INT8, ZC_SUM);
  EXPECT_EQ(c[0], -128);  // wraps
  EXPECT_EQ(c[1], 127);
  float x[2] = {1.0f, std::nanf("")}, y[2] = {std::nanf(""), 2.0f}, z[2];
  RefReduce(z, x, y, 2, ZC_FLOAT32, ZC_MIN);
  EXPECT_TRUE(std::isnan(z[0]));  // NaN propagates either way
  EXPECT_TRUE(std::isnan(z[1]));
  uint16_t h[1] = {RefFloatToHalf(3.0f)};
  RefScaleDiv(h, 1, ZC_FLOAT16, 2.0);
  EXPECT_EQ(RefHalfToFloat(h[0]), 1.5f);
  // 16-bit integers wrap (65535 * 65535 with no int overflow on the way).
  int16_t s16[2] = {32767, -300}, t16[2] = {1, 300}, r16[2];
  RefReduce(r16, s16, t16, 2, ZC_INT16, ZC_SUM);
  EXPECT_EQ(r16[0], -32768);
  RefReduce(r16, s16, t16, 2, ZC_INT16, ZC_PROD);
  EXPECT_EQ(r16[1], static_cast<int16_t>(-90000 + 131072));
  RefReduce(r16, s16, t16, 2, ZC_INT16, ZC_MIN);
  EXPECT_EQ(r16[1], -300);
  uint16_t u16[1] = {65535}, v16[1] = {65535}, w16[1];
  RefReduce(w16, u16, v16, 1, ZC_UINT16, ZC_PROD);
  EXPECT_EQ(w16[0], 1);
  RefReduce(w16, u16, v16, 1, ZC_UINT16, ZC_SUM);
  EXPECT_EQ(w16[0], 65534);
  // bool: logical on truth values, 0 or 1 out, from any true byte.
  const uint8_t p[4] = {0, 2, 0x80, 0xff}, q[4] = {0, 0x80, 0, 1};
  uint8_t r[4];
  RefReduce(r, p, q, 4, ZC_BOOL, ZC_SUM);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 4), (std::vector<uint8_t>{0, 1, 1, 1}));
  RefReduce(r, p, q, 4, ZC_BOOL, ZC_PROD);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 4), (std::vector<uint8_t>{0, 1, 0, 1}));
  RefReduce(r, p, q, 4, ZC_BOOL, ZC_MAX);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 4), (std::vector<uint8_t>{0, 1, 1, 1}));
  RefReduce(r, p, q, 4, ZC_BOOL, ZC_MIN);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 4), (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(RefDtypeSize(ZC_BOOL), 1u);
  EXPECT_EQ(RefDtypeSize(ZC_INT16), 2u);
  EXPECT_EQ(RefDtypeSize(ZC_UINT16), 2u);
}

// ---- needs a CUDA device ----------------------------------------------------

class GpuReduceKernelTest : public ::testing::TestWithParam<zc_dtype> {
 protected:
  void SetUp() override {
    ZC_SKIP_WITHOUT_DEVICE(NoDeviceReason(/*need_cuda_build=*/true));
    Status st = OpenDevice0(&drv_);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void TearDown() override {
    for (CuDevicePtr p : allocs_) drv_->MemFree(p);
  }
  char* DevAlloc(size_t bytes) {
    CuDevicePtr p = 0;
    EXPECT_EQ(drv_->MemAlloc(&p, bytes), 0);
    allocs_.push_back(p);
    return reinterpret_cast<char*>(p);
  }
  void ToDev(char* dst, const std::vector<char>& src) {
    ASSERT_EQ(drv_->MemcpyHtoD(reinterpret_cast<CuDevicePtr>(dst), src.data(), src.size()), 0);
  }
  std::vector<char> FromDev(const char* src, size_t bytes) {
    std::vector<char> out(bytes);
    EXPECT_EQ(drv_->MemcpyDtoH(out.data(), reinterpret_cast<CuDevicePtr>(src), bytes), 0);
    return out;
  }

  const DriverTable* drv_ = nullptr;
  std::vector<CuDevicePtr> allocs_;
};

struct Offsets {
  size_t c, a, b;  // in elements, from a 256-byte aligned base
};

TEST_P(GpuReduceKernelTest, MatchesCpuReference) {
  const zc_dtype d = GetParam();
  const size_t es = RefDtypeSize(d);
  const size_t kSizes[] = {0, 1, 3, 4097, (1u << 20) + 3};
  // Aligned; all off by the same (not 16-byte aligned); mutually misaligned.
  const Offsets kOffsets[] = {{0, 0, 0}, {1, 1, 1}, {3, 1, 2}};
  constexpr size_t kPad = 64;  // elements of guard space around each buffer
  const size_t max_n = kSizes[4] + 2 * kPad;
  char* da = DevAlloc(max_n * es);
  char* db = DevAlloc(max_n * es);
  char* dc = DevAlloc(max_n * es);
  std::vector<char> ha(max_n * es), hb(max_n * es), hc(max_n * es);
  RefFill(ha.data(), max_n, d, 1, true);
  RefFill(hb.data(), max_n, d, 2, true);
  RefFill(hc.data(), max_n, d, 3, false);  // guard pattern

  for (zc_op op : kAllOps) {
    if (op == ZC_AVG && !IsFloating(d)) continue;
    for (size_t n : kSizes) {
      for (const Offsets& o : kOffsets) {
        SCOPED_TRACE(std::string(GpuDtypeName(d)) + " " + GpuOpName(op) +
                     " n=" + std::to_string(n) + " offsets c/a/b=" +
                     std::to_string(o.c) + "/" + std::to_string(o.a) + "/" +
                     std::to_string(o.b));
        ToDev(da, ha);
        ToDev(db, hb);
        ToDev(dc, hc);
        // Expected: guards untouched, the range reduced.
        std::vector<char> want = hc;
        RefReduce(want.data() + o.c * es, ha.data() + o.a * es, hb.data() + o.b * es, n, d, op);
        if (op == ZC_AVG) RefScaleDiv(want.data() + o.c * es, n, d, 3.0);

        Status st = ReduceInto(dc + o.c * es, da + o.a * es, db + o.b * es, n, d, op, nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
        if (op == ZC_AVG) {
          st = ScaleDiv(dc + o.c * es, n, d, 3.0, nullptr);
          ASSERT_TRUE(st.ok()) << st.message();
        }
        st = SynchronizeStream(nullptr, "test");
        ASSERT_TRUE(st.ok()) << st.message();
        std::vector<char> got = FromDev(dc, max_n * es);
        size_t bad = RefFirstMismatch(got.data(), want.data(), max_n, d);
        ASSERT_EQ(bad, max_n) << "first mismatch at element " << bad
                              << " (range starts at " << o.c << ")";

        // In place: a = op(a, b).
        std::vector<char> want_a = ha;
        RefReduce(want_a.data() + o.a * es, ha.data() + o.a * es, hb.data() + o.b * es, n, d, op);
        st = ReduceInPlace(da + o.a * es, db + o.b * es, n, d, op, nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_TRUE(SynchronizeStream(nullptr, "test").ok());
        got = FromDev(da, max_n * es);
        bad = RefFirstMismatch(got.data(), want_a.data(), max_n, d);
        ASSERT_EQ(bad, max_n) << "in place: first mismatch at element " << bad;
      }
    }
  }
}

// ScaleCopy against the engine's CPU scaling (engine::ScaledCopy), bit for
// bit: factors below and above 1, negative, one that saturates integers,
// and 1 (a copy); out of place and in place; guards untouched.
TEST_P(GpuReduceKernelTest, ScaleCopyMatchesEngineScaling) {
  const zc_dtype d = GetParam();
  const size_t es = RefDtypeSize(d);
  const size_t kSizes[] = {0, 1, 7, 4097, (1u << 20) + 3};
  constexpr size_t kPad = 64;
  const size_t max_n = kSizes[4] + 2 * kPad;
  char* da = DevAlloc(max_n * es);
  char* dc = DevAlloc(max_n * es);
  std::vector<char> ha(max_n * es), hc(max_n * es);
  RefFill(ha.data(), max_n, d, 5, true);
  RefFill(hc.data(), max_n, d, 6, false);  // guard pattern
  const double kFactors[] = {0.5, 3.0, -1.25, 1e10, 1.0};
  for (double f : kFactors) {
    if (d == ZC_BOOL && f != 1.0) continue;  // the engine never scales bool
    for (size_t n : kSizes) {
      SCOPED_TRACE(std::string(GpuDtypeName(d)) + " factor " + std::to_string(f) + " n=" + std::to_string(n));
      ToDev(da, ha);
      ToDev(dc, hc);
      std::vector<char> want = hc;
      engine::ScaledCopy(d, ha.data() + kPad * es, want.data() + kPad * es, n, f);
      Status st = ScaleCopy(dc + kPad * es, da + kPad * es, n, d, f, nullptr);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_TRUE(SynchronizeStream(nullptr, "test").ok());
      std::vector<char> got = FromDev(dc, max_n * es);
      size_t bad = RefFirstMismatch(got.data(), want.data(), max_n, d);
      ASSERT_EQ(bad, max_n) << "first mismatch at element " << bad;
      // In place.
      std::vector<char> want_a = ha;
      engine::ScaledCopy(d, want_a.data() + kPad * es, want_a.data() + kPad * es, n, f);
      st = ScaleCopy(da + kPad * es, da + kPad * es, n, d, f, nullptr);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_TRUE(SynchronizeStream(nullptr, "test").ok());
      got = FromDev(da, max_n * es);
      bad = RefFirstMismatch(got.data(), want_a.data(), max_n, d);
      ASSERT_EQ(bad, max_n) << "in place: first mismatch at element " << bad;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GpuReduceKernelTest, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<zc_dtype>& info) {
                           return std::string(GpuDtypeName(info.param));
                         });

}  // namespace
}  // namespace zc::gpu
