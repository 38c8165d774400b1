#include "collectives/dtype.h"

namespace zc {

const char* DtypeName(zc_dtype d) {
  switch (d) {
    case ZC_INT8: return "int8";
    case ZC_UINT8: return "uint8";
    case ZC_INT32: return "int32";
    case ZC_UINT32: return "uint32";
    case ZC_INT64: return "int64";
    case ZC_UINT64: return "uint64";
    case ZC_FLOAT16: return "float16";
    case ZC_BFLOAT16: return "bfloat16";
    case ZC_FLOAT32: return "float32";
    case ZC_FLOAT64: return "float64";
    case ZC_INT16: return "int16";
    case ZC_UINT16: return "uint16";
    case ZC_BOOL: return "bool";
  }
  return "unknown";
}

const char* OpName(zc_op op) {
  switch (op) {
    case ZC_SUM: return "sum";
    case ZC_PROD: return "prod";
    case ZC_MIN: return "min";
    case ZC_MAX: return "max";
    case ZC_AVG: return "avg";
    case ZC_BAND: return "band";
    case ZC_BOR: return "bor";
    case ZC_BXOR: return "bxor";
  }
  return "unknown";
}

bool IsFloating(zc_dtype d) {
  return d == ZC_FLOAT16 || d == ZC_BFLOAT16 || d == ZC_FLOAT32 ||
         d == ZC_FLOAT64;
}

bool IsInteger(zc_dtype d) { return IsValidDtype(d) && !IsFloating(d) && d != ZC_BOOL; }

Status CheckDtypeOp(zc_dtype d, zc_op op) {
  if (!IsValidDtype(d)) {
    return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d (op %s)",
                 static_cast<int>(d), OpName(op));
  }
  if (!IsValidOp(op)) {
    return Error(ZC_ERR_INVALID_ARG, "unknown op %d (dtype %s)",
                 static_cast<int>(op), DtypeName(d));
  }
  if (op == ZC_AVG && !IsFloating(d)) {
    return Error(ZC_ERR_INVALID_ARG,
                 "op avg is not defined for %s dtype %s (floating dtypes only)",
                 d == ZC_BOOL ? "the" : "integer", DtypeName(d));
  }
  if (IsBitwise(op) && IsFloating(d)) {
    return Error(ZC_ERR_INVALID_ARG,
                 "op %s is defined for integer dtypes and bool only, not %s",
                 OpName(op), DtypeName(d));
  }
  return Status::Ok();
}

}  // namespace zc
