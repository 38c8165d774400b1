#include "types.hpp"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <charconv>
#include <cstring>

// torch has uint16, uint32 and uint64 tensors from 2.3 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define ZC_TORCH_HAS_UNSIGNED 1
#else
#define ZC_TORCH_HAS_UNSIGNED 0
#endif

namespace zcomm_torch {

std::string CallPrefix::str() const {
  if (!op_) return *text_;
  return "zcomm rank " + std::to_string(rank_) + "/" + std::to_string(size_) + ": " + op_ + ": ";
}

std::ostream& operator<<(std::ostream& os, const CallPrefix& p) { return os << p.str(); }

std::string CallId::str() const {
  return "rank " + std::to_string(rank) + "/" + std::to_string(size) + ": " + name + " #" +
         std::to_string(seq);
}

std::ostream& operator<<(std::ostream& os, const CallId& c) { return os << c.str(); }

void CallId::Label(char* buf, size_t len) const {
  if (len == 0) return;
  char* end = buf + len - 1;  // the terminating NUL's place
  char* out = buf;
  auto put = [&](const char* s, size_t n) {
    n = std::min(n, static_cast<size_t>(end - out));
    std::memcpy(out, s, n);
    out += n;
  };
  put(name.data(), name.size());
  put(" #", 2);
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, seq);
  put(digits, static_cast<size_t>(r.ptr - digits));
  *out = '\0';
}

zc_dtype ToZcDtype(at::ScalarType t, const CallPrefix& prefix) {
  switch (t) {
    case at::kByte: return ZC_UINT8;
    case at::kChar: return ZC_INT8;
    case at::kShort: return ZC_INT16;
    case at::kInt: return ZC_INT32;
    case at::kLong: return ZC_INT64;
    case at::kBool: return ZC_BOOL;
    case at::kHalf: return ZC_FLOAT16;
    case at::kBFloat16: return ZC_BFLOAT16;
    case at::kFloat: return ZC_FLOAT32;
    case at::kDouble: return ZC_FLOAT64;
#if ZC_TORCH_HAS_UNSIGNED
    case at::kUInt16: return ZC_UINT16;
    case at::kUInt32: return ZC_UINT32;
    case at::kUInt64: return ZC_UINT64;
#endif
    default: break;
  }
  TORCH_CHECK(false, prefix, "dtype ", c10::toString(t),
              " is not supported (zcomm has uint8, int8, int16, int32, int64, bool, float16, "
              "bfloat16, float32, float64"
#if ZC_TORCH_HAS_UNSIGNED
              ", uint16, uint32, uint64"
#endif
              ")");
}

static bool IsFloating(at::ScalarType t) { return at::isFloatingType(t); }

zc_op ToZcOp(const c10d::ReduceOp& op, at::ScalarType t, const CallPrefix& prefix) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ZC_SUM;
    case c10d::ReduceOp::PRODUCT: return ZC_PROD;
    case c10d::ReduceOp::MIN: return ZC_MIN;
    case c10d::ReduceOp::MAX: return ZC_MAX;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(IsFloating(t), prefix, "ReduceOp.AVG needs a floating dtype, got ",
                  c10::toString(t));
      return ZC_AVG;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!IsFloating(t), prefix, "bitwise ReduceOp needs an integer dtype, got ",
                  c10::toString(t));
      return op.op_ == c10d::ReduceOp::BAND ? ZC_BAND
             : op.op_ == c10d::ReduceOp::BOR ? ZC_BOR
                                             : ZC_BXOR;
    default: break;
  }
  TORCH_CHECK(false, prefix, "ReduceOp ", static_cast<int>(op.op_),
              " is not supported (zcomm has SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)");
}

void CheckTensor(const at::Tensor& t, const CallPrefix& prefix, const char* what) {
  TORCH_CHECK(t.defined(), prefix, what, " is undefined");
  TORCH_CHECK(t.device().is_cpu(), prefix, what, " is on ", t.device().str(),
              "; zcomm.torch takes CPU tensors");
  TORCH_CHECK(t.layout() == at::kStrided, prefix, what, " has layout ", t.layout(),
              "; zcomm.torch takes dense (strided) tensors");
  ToZcDtype(t.scalar_type(), prefix);
}

void CheckSingle(const std::vector<at::Tensor>& ts, const CallPrefix& prefix, const char* what) {
  TORCH_CHECK(ts.size() == 1, prefix, "expects exactly one ", what, " tensor per process, got ",
              ts.size());
  CheckTensor(ts[0], prefix, what);
}

void CheckSameAs(const std::vector<at::Tensor>& ts, const at::Tensor& t, const CallPrefix& prefix,
                 const char* what) {
  for (size_t i = 0; i < ts.size(); ++i) {
    CheckTensor(ts[i], prefix, what);
    TORCH_CHECK(ts[i].scalar_type() == t.scalar_type(), prefix, what, "[", i, "] has dtype ",
                c10::toString(ts[i].scalar_type()), ", expected ", c10::toString(t.scalar_type()));
    TORCH_CHECK(ts[i].numel() == t.numel(), prefix, what, "[", i, "] has ", ts[i].numel(),
                " elements, expected ", t.numel());
  }
}

}  // namespace zcomm_torch
