#include "ps/sgd.h"

#include <algorithm>

#include "collectives/reduce_kernels.h"

namespace zc::ps {
namespace {

template <typename T>
void Axpy(T* v, const T* g, size_t n, T scale) {
  for (size_t i = 0; i < n; ++i) v[i] -= scale * g[i];  // vectorized by the compiler
}

// 16-bit floats: convert a block to float with the collectives' bulk
// converters, update, round back.
template <typename ToF, typename FromF>
void Axpy16(void* value, const void* grad, size_t n, float scale, ToF to_float, FromF from_float) {
  constexpr size_t kBlock = 1024;
  float v[kBlock], g[kBlock];
  auto* vp = static_cast<uint16_t*>(value);
  auto* gp = static_cast<const uint16_t*>(grad);
  for (size_t i = 0; i < n; i += kBlock) {
    size_t m = std::min(kBlock, n - i);
    to_float(v, vp + i, m);
    to_float(g, gp + i, m);
    for (size_t j = 0; j < m; ++j) v[j] -= scale * g[j];
    from_float(vp + i, v, m);
  }
}

}  // namespace

void SgdUpdate(zc_dtype dtype, void* value, const void* grad, size_t count, double scale) {
  switch (dtype) {
    case ZC_FLOAT32:
      Axpy(static_cast<float*>(value), static_cast<const float*>(grad), count, static_cast<float>(scale));
      break;
    case ZC_FLOAT64:
      Axpy(static_cast<double*>(value), static_cast<const double*>(grad), count, scale);
      break;
    case ZC_FLOAT16:
      Axpy16(value, grad, count, static_cast<float>(scale), HalfToFloatN, FloatToHalfN);
      break;
    case ZC_BFLOAT16:
      Axpy16(value, grad, count, static_cast<float>(scale), BFloat16ToFloatN, FloatToBFloat16N);
      break;
    default:
      break;  // refused at declare time
  }
}

}  // namespace zc::ps
