// The collectives tests' checker (coll_check.h) against the library's own
// reduction kernels (tested against a scalar reference in reduce_kernels):
// every dtype and op on 1-5 ranks' inputs, whole buffers and slices of them
// (reduce-scatter), and one corrupted element named by its index. The
// range check switches on the dtype once and takes the floating inputs'
// rounding from a table; it must agree with the element check everywhere.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coll_check.h"
#include "collectives/reduce_kernels.h"

namespace zc::test {
namespace {

std::vector<zc_op> CheckedOps(zc_dtype d) {
  std::vector<zc_op> ops = OpsFor(d);
  if (!IsFloatType(d)) ops.insert(ops.end(), std::begin(kBitwiseOps), std::end(kBitwiseOps));
  return ops;
}

// op over n ranks' inputs of `count` elements, as the checker expects it.
std::vector<char> Reduced(zc_dtype d, zc_op op, int n, size_t count, int it) {
  const size_t es = DtypeSize(d);
  std::vector<std::vector<char>> in(n, std::vector<char>(count * es));
  std::vector<const void*> srcs;
  for (int r = 0; r < n; ++r) {
    FillInput(d, op, in[r].data(), count, r, it);
    srcs.push_back(in[r].data());
  }
  std::vector<char> out(count * es);
  if (n == 1) {
    ReduceOne(d, out.data(), srcs[0], count);
  } else {
    ReduceN(d, op == ZC_AVG ? ZC_SUM : op, out.data(), srcs.data(), n, count);
    if (op == ZC_AVG) ScaleDiv(d, out.data(), count, n);
  }
  return out;
}

// Makes element i wrong by more than any tolerance.
void Corrupt(zc_dtype d, void* out, size_t i) {
  if (IsFloatType(d)) SetF(d, out, i, GetF(d, out, i) + 3.0);
  else if (d == ZC_BOOL) static_cast<uint8_t*>(out)[i] ^= 1;
  else SetI(d, out, i, GetI(d, out, i) + 1);
}

TEST(CollCheck, RoundedInputsAreEachDtypesRounding) {
  for (zc_dtype d : {ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64})
    for (zc_op op : OpsFor(d))
      for (int r = 0; r < 5; ++r)
        for (int it = 0; it < 3; ++it)
          for (size_t i = 0; i < 400; ++i) {
            char buf[8];
            SetF(d, buf, 0, FloatInput(op, r, i, it));
            ASSERT_EQ(RoundedFloatInput(d, op, r, i, it), GetF(d, buf, 0))
                << DtypeName(d) << " " << OpName(op) << " r " << r << " i " << i << " it " << it;
          }
}

TEST(CollCheck, RangeAcceptsTheReductionAndNamesACorruptedElement) {
  const size_t count = 4099;  // prime
  for (zc_dtype d : kAllDtypes)
    for (zc_op op : CheckedOps(d))
      for (int n = 1; n <= 5; ++n) {
        SCOPED_TRACE(std::string(DtypeName(d)) + " " + OpName(op) + " on " + std::to_string(n) +
                     " ranks");
        std::vector<char> out = Reduced(d, op, n, count, 7);
        ASSERT_EQ(CheckReducedRange(d, op, out.data(), count, 0, n, 7), "");
        // Another call's inputs, or another rank count, are not this result.
        EXPECT_NE(CheckReducedRange(d, op, out.data(), count, 0, n, 8), "");
        for (size_t bad : {size_t{0}, count / 2, count - 1}) {
          std::vector<char> wrong = out;
          Corrupt(d, wrong.data(), bad);
          const std::string msg = CheckReducedRange(d, op, wrong.data(), count, 0, n, 7);
          EXPECT_NE(msg.find("element " + std::to_string(bad) + ":"), std::string::npos) << msg;
          EXPECT_EQ(msg, CheckReduced(d, op, wrong.data(), bad, bad, n, 7));
        }
      }
}

TEST(CollCheck, SlicesCheckAgainstTheirOwnInputs) {
  const int n = 3;
  const size_t block = 1031;  // prime
  for (zc_dtype d : kAllDtypes) {
    const zc_op op = d == ZC_BOOL ? ZC_MAX : ZC_SUM;
    std::vector<char> out = Reduced(d, op, n, block * n, 11);
    for (int r = 0; r < n; ++r) {
      const char* slice = out.data() + r * block * DtypeSize(d);
      EXPECT_EQ(CheckReducedRange(d, op, slice, block, r * block, n, 11), "")
          << DtypeName(d) << " block " << r;
      if (r > 0) {
        EXPECT_NE(CheckReducedRange(d, op, slice, block, 0, n, 11), "")
            << DtypeName(d) << " block " << r << " against block 0's inputs";
      }
    }
  }
}

}  // namespace
}  // namespace zc::test
