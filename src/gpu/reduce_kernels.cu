// CUDA reduction kernels (interface and semantics in reduce_kernels.h).
//
// One elementwise kernel per (element type, op): a grid-stride loop over
// 16-byte vectors in the mutually aligned middle of the buffers, and a
// grid-stride loop over the scalar head and tail (or over everything when
// the buffers are not mutually aligned). Memory-bound by design: the grid is
// capped at one full wave of resident threads, each thread streaming
// several vectors, so it runs at copy bandwidth.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <cmath>
#include <type_traits>

#include "gpu/reduce_kernels.h"

namespace zc::gpu {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxDevices = 128;

// Tags for the 16-bit floating types (stored as uint16_t words) and bool
// (one byte, 0 false, anything else true).
struct F16 {};
struct BF16 {};
struct Bool {};

template <class T>
struct Elem {
  using S = T;  // storage
  using C = T;  // compute
  __device__ static C Load(S v) { return v; }
  __device__ static S Store(C v) { return v; }
};
template <>
struct Elem<F16> {
  using S = uint16_t;
  using C = float;
  __device__ static C Load(S v) { return __half2float(__ushort_as_half(v)); }
  __device__ static S Store(C v) { return __half_as_ushort(__float2half_rn(v)); }
};
template <>
struct Elem<BF16> {
  using S = uint16_t;
  using C = float;
  __device__ static C Load(S v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static S Store(C v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};

template <>
struct Elem<Bool> {
  using S = uint8_t;
  using C = uint8_t;
  __device__ static C Load(S v) { return v; }
  __device__ static S Store(C v) { return v; }
};

// Integer sum and product in an unsigned type at least as wide as unsigned
// int (8- and 16-bit operands would promote to int, where 65535 * 65535
// overflows).
template <class C>
using WideUnsigned =
    std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;

// Bool is logical and writes 0 or 1: SUM and MAX are "or", PROD and MIN
// "and" (the bitwise ops have no GPU kernel, as for the other types).
__device__ inline uint8_t LogicalOr(uint8_t a, uint8_t b) { return (a | b) != 0; }
__device__ inline uint8_t LogicalAnd(uint8_t a, uint8_t b) { return (a != 0) & (b != 0); }

// Each op maps two stored elements to one. SUM/PROD compute in C and round
// once; MIN/MAX select one of the stored inputs, so they are exact and keep
// NaN payloads.
struct OpSum {
  template <class T>
  __device__ static typename Elem<T>::S Apply(typename Elem<T>::S a,
                                              typename Elem<T>::S b) {
    using C = typename Elem<T>::C;
    if constexpr (std::is_same_v<T, Bool>) {
      return LogicalOr(a, b);
    } else if constexpr (std::is_integral_v<C>) {
      using U = WideUnsigned<C>;
      return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return Elem<T>::Store(Elem<T>::Load(a) + Elem<T>::Load(b));
    }
  }
};
struct OpProd {
  template <class T>
  __device__ static typename Elem<T>::S Apply(typename Elem<T>::S a,
                                              typename Elem<T>::S b) {
    using C = typename Elem<T>::C;
    if constexpr (std::is_same_v<T, Bool>) {
      return LogicalAnd(a, b);
    } else if constexpr (std::is_integral_v<C>) {
      using U = WideUnsigned<C>;
      return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return Elem<T>::Store(Elem<T>::Load(a) * Elem<T>::Load(b));
    }
  }
};
struct OpMin {
  template <class T>
  __device__ static typename Elem<T>::S Apply(typename Elem<T>::S a,
                                              typename Elem<T>::S b) {
    if constexpr (std::is_same_v<T, Bool>) {
      return LogicalAnd(a, b);
    } else {
      const auto x = Elem<T>::Load(a), y = Elem<T>::Load(b);
      return ((y < x) | (y != y)) ? b : a;  // y != y: y is NaN
    }
  }
};
struct OpMax {
  template <class T>
  __device__ static typename Elem<T>::S Apply(typename Elem<T>::S a,
                                              typename Elem<T>::S b) {
    if constexpr (std::is_same_v<T, Bool>) {
      return LogicalOr(a, b);
    } else {
      const auto x = Elem<T>::Load(a), y = Elem<T>::Load(b);
      return ((y > x) | (y != y)) ? b : a;
    }
  }
};

// Vector part: [head, head + nvec * kV); scalar part: [0, head) and the tail.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    Reduce3Kernel(typename Elem<T>::S* c, const typename Elem<T>::S* a,
                  const typename Elem<T>::S* b, size_t head, size_t nvec,
                  size_t n) {
  using S = typename Elem<T>::S;
  constexpr int kV = 16 / sizeof(S);
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const uint4* av = reinterpret_cast<const uint4*>(a + head);
  const uint4* bv = reinterpret_cast<const uint4*>(b + head);
  uint4* cv = reinterpret_cast<uint4*>(c + head);
  for (size_t i = tid; i < nvec; i += stride) {
    const uint4 x = av[i], y = bv[i];
    S xs[kV], ys[kV];
    memcpy(xs, &x, sizeof x);
    memcpy(ys, &y, sizeof y);
#pragma unroll
    for (int k = 0; k < kV; ++k) xs[k] = Op::template Apply<T>(xs[k], ys[k]);
    uint4 z;
    memcpy(&z, xs, sizeof z);
    cv[i] = z;
  }
  const size_t tail = head + nvec * kV;
  const size_t nscalar = head + (n - tail);
  for (size_t i = tid; i < nscalar; i += stride) {
    const size_t j = i < head ? i : tail + (i - head);
    c[j] = Op::template Apply<T>(a[j], b[j]);
  }
}

// x / divisor, rounded once: in float where the divisor is exact in float
// (and the type is not float64), else in double.
template <class T>
struct Scale {
  float fd;
  double dd;
  bool in_float;
  __device__ typename Elem<T>::S operator()(typename Elem<T>::S v) const {
    if constexpr (std::is_same_v<T, double>) {
      return v / dd;
    } else {
      const float x = Elem<T>::Load(v);
      return Elem<T>::Store(in_float ? x / fd
                                     : static_cast<float>(static_cast<double>(x) / dd));
    }
  }
};

template <class T>
__global__ void __launch_bounds__(kThreads)
    ScaleKernel(typename Elem<T>::S* a, Scale<T> f, size_t head, size_t nvec,
                size_t n) {
  using S = typename Elem<T>::S;
  constexpr int kV = 16 / sizeof(S);
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  uint4* av = reinterpret_cast<uint4*>(a + head);
  for (size_t i = tid; i < nvec; i += stride) {
    uint4 x = av[i];
    S xs[kV];
    memcpy(xs, &x, sizeof x);
#pragma unroll
    for (int k = 0; k < kV; ++k) xs[k] = f(xs[k]);
    memcpy(&x, xs, sizeof x);
    av[i] = x;
  }
  const size_t tail = head + nvec * kV;
  const size_t nscalar = head + (n - tail);
  for (size_t i = tid; i < nscalar; i += stride) {
    const size_t j = i < head ? i : tail + (i - head);
    a[j] = f(a[j]);
  }
}

// Blocks for `work` items: enough for one item per thread, capped at the
// resident threads of the whole GPU (grid-stride covers the rest).
std::atomic<int> g_max_blocks[kMaxDevices];

cudaError_t GridFor(size_t work, unsigned* blocks) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  int cap = dev < kMaxDevices ? g_max_blocks[dev].load(std::memory_order_relaxed) : 0;
  if (cap == 0) {
    int sms = 0, threads_per_sm = 0;
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    e = cudaDeviceGetAttribute(&threads_per_sm,
                               cudaDevAttrMaxThreadsPerMultiProcessor, dev);
    if (e != cudaSuccess) return e;
    cap = sms * (threads_per_sm / kThreads > 0 ? threads_per_sm / kThreads : 1);
    if (dev < kMaxDevices) g_max_blocks[dev].store(cap, std::memory_order_relaxed);
  }
  const size_t want = (work + kThreads - 1) / kThreads;
  *blocks = static_cast<unsigned>(want < static_cast<size_t>(cap) ? (want > 0 ? want : 1)
                                                                  : cap);
  return cudaSuccess;
}

// Splits [0, n) into scalar head, 16-byte vectors and scalar tail. All
// pointers must share their offset within 16 bytes for the vector part.
template <class S>
void Split(size_t n, const void* const* ptrs, int nptrs, size_t* head,
           size_t* nvec) {
  constexpr size_t kV = 16 / sizeof(S);
  const uintptr_t mis = reinterpret_cast<uintptr_t>(ptrs[0]) % 16;
  for (int i = 1; i < nptrs; ++i) {
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != mis) {
      *head = n;
      *nvec = 0;
      return;
    }
  }
  size_t h = ((16 - mis) % 16) / sizeof(S);
  if (h > n) h = n;
  *head = h;
  *nvec = (n - h) / kV;
}

template <class T, class Op>
cudaError_t Launch3(void* c, const void* a, const void* b, size_t n,
                    cudaStream_t s) {
  using S = typename Elem<T>::S;
  const void* ptrs[] = {c, a, b};
  size_t head = 0, nvec = 0;
  Split<S>(n, ptrs, 3, &head, &nvec);
  const size_t nscalar = n - nvec * (16 / sizeof(S));
  unsigned blocks = 0;
  cudaError_t e = GridFor(nvec > nscalar ? nvec : nscalar, &blocks);
  if (e != cudaSuccess) return e;
  Reduce3Kernel<T, Op><<<blocks, kThreads, 0, s>>>(
      static_cast<S*>(c), static_cast<const S*>(a), static_cast<const S*>(b),
      head, nvec, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t LaunchOp(zc_op op, void* c, const void* a, const void* b,
                     size_t n, cudaStream_t s) {
  switch (op) {
    case ZC_SUM:
    case ZC_AVG: return Launch3<T, OpSum>(c, a, b, n, s);
    case ZC_PROD: return Launch3<T, OpProd>(c, a, b, n, s);
    case ZC_MIN: return Launch3<T, OpMin>(c, a, b, n, s);
    case ZC_MAX: return Launch3<T, OpMax>(c, a, b, n, s);
    case ZC_BAND:
    case ZC_BOR:
    case ZC_BXOR: break;  // no GPU kernel: refused by CheckReduceArgs
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t LaunchScale(void* a, size_t n, double divisor, cudaStream_t s) {
  using S = typename Elem<T>::S;
  const void* ptrs[] = {a};
  size_t head = 0, nvec = 0;
  Split<S>(n, ptrs, 1, &head, &nvec);
  const size_t nscalar = n - nvec * (16 / sizeof(S));
  unsigned blocks = 0;
  cudaError_t e = GridFor(nvec > nscalar ? nvec : nscalar, &blocks);
  if (e != cudaSuccess) return e;
  Scale<T> f;
  f.fd = static_cast<float>(divisor);
  f.dd = divisor;
  f.in_float = static_cast<double>(f.fd) == divisor;
  ScaleKernel<T><<<blocks, kThreads, 0, s>>>(static_cast<S*>(a), f, head,
                                             nvec, n);
  return cudaGetLastError();
}

Status CudaStatus(cudaError_t e, const char* what, const char* detail) {
  const zc_status code = (e == cudaErrorNoDevice ||
                          e == cudaErrorInsufficientDriver)
                             ? ZC_ERR_UNSUPPORTED
                             : ZC_ERR_SYSTEM;
  return Error(code, "%s (%s): %s: %s", what, detail, cudaGetErrorName(e),
               cudaGetErrorString(e));
}

// dst[i] = src[i] * factor with Horovod's numerics (ScaleCopy). A plain
// grid-stride loop: the engine scales its fusion buffer once per fused set,
// a memory-bound pass next to the collective.
template <class T>
struct Scaled {
  using S = typename Elem<T>::S;
  float ff;
  __device__ S operator()(S v) const { return Elem<T>::Store(Elem<T>::Load(v) * ff); }
};
template <>
struct Scaled<double> {
  using S = double;
  double fd;
  __device__ S operator()(S v) const { return v * fd; }
};
// Integers: the product in double, truncated toward zero, saturated at the
// type's bounds (2^digits is one past the maximum; exact in double).
template <class I>
struct ScaledInt {
  using S = I;
  double fd, hi, lo;
  I vmax, vmin;  // the type's bounds (numeric_limits is host code)
  __device__ S operator()(S v) const {
    const double p = trunc(static_cast<double>(v) * fd);
    return p >= hi ? vmax : p <= lo ? vmin : static_cast<I>(p);
  }
};

template <class F>
__global__ void __launch_bounds__(kThreads)
ScaleCopyKernel(typename F::S* dst, const typename F::S* src, F f, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = f(src[i]);
}

template <class F>
cudaError_t LaunchScaleCopy(void* dst, const void* src, size_t n, F f, cudaStream_t s) {
  unsigned blocks = 0;
  cudaError_t e = GridFor(n, &blocks);
  if (e != cudaSuccess) return e;
  using S = typename F::S;
  ScaleCopyKernel<F><<<blocks, kThreads, 0, s>>>(static_cast<S*>(dst), static_cast<const S*>(src), f, n);
  return cudaGetLastError();
}

template <class I>
cudaError_t LaunchScaleInt(void* dst, const void* src, size_t n, double factor, cudaStream_t s) {
  ScaledInt<I> f;
  f.fd = factor;
  f.hi = std::ldexp(1.0, std::numeric_limits<I>::digits);
  f.lo = std::is_signed<I>::value ? -f.hi : 0.0;
  f.vmax = std::numeric_limits<I>::max();
  f.vmin = std::numeric_limits<I>::min();
  return LaunchScaleCopy(dst, src, n, f, s);
}

}  // namespace

bool ReduceKernelsBuilt() { return true; }

Status ReduceInto(void* c, const void* a, const void* b, size_t count,
                  zc_dtype dtype, zc_op op, void* stream) {
  ZC_RETURN_IF_ERROR(CheckReduceArgs("GPU reduce", c, a, b, count, dtype, op));
  if (count == 0) return Status::Ok();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (dtype) {
    case ZC_INT8: e = LaunchOp<int8_t>(op, c, a, b, count, s); break;
    case ZC_UINT8: e = LaunchOp<uint8_t>(op, c, a, b, count, s); break;
    case ZC_INT32: e = LaunchOp<int32_t>(op, c, a, b, count, s); break;
    case ZC_UINT32: e = LaunchOp<uint32_t>(op, c, a, b, count, s); break;
    case ZC_INT64: e = LaunchOp<int64_t>(op, c, a, b, count, s); break;
    case ZC_UINT64: e = LaunchOp<uint64_t>(op, c, a, b, count, s); break;
    case ZC_FLOAT16: e = LaunchOp<F16>(op, c, a, b, count, s); break;
    case ZC_BFLOAT16: e = LaunchOp<BF16>(op, c, a, b, count, s); break;
    case ZC_FLOAT32: e = LaunchOp<float>(op, c, a, b, count, s); break;
    case ZC_FLOAT64: e = LaunchOp<double>(op, c, a, b, count, s); break;
    case ZC_INT16: e = LaunchOp<int16_t>(op, c, a, b, count, s); break;
    case ZC_UINT16: e = LaunchOp<uint16_t>(op, c, a, b, count, s); break;
    case ZC_BOOL: e = LaunchOp<Bool>(op, c, a, b, count, s); break;
  }
  if (e == cudaSuccess) return Status::Ok();
  return CudaStatus(e, "GPU reduce launch",
                    Format("%s %s, %zu elements", GpuDtypeName(dtype),
                           GpuOpName(op), count)
                        .c_str());
}

Status ReduceInPlace(void* a, const void* b, size_t count, zc_dtype dtype,
                     zc_op op, void* stream) {
  return ReduceInto(a, a, b, count, dtype, op, stream);
}

Status ScaleDiv(void* a, size_t count, zc_dtype dtype, double divisor,
                void* stream) {
  ZC_RETURN_IF_ERROR(CheckScaleArgs(a, count, dtype, divisor));
  if (count == 0) return Status::Ok();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (dtype) {
    case ZC_FLOAT16: e = LaunchScale<F16>(a, count, divisor, s); break;
    case ZC_BFLOAT16: e = LaunchScale<BF16>(a, count, divisor, s); break;
    case ZC_FLOAT32: e = LaunchScale<float>(a, count, divisor, s); break;
    case ZC_FLOAT64: e = LaunchScale<double>(a, count, divisor, s); break;
    default: break;  // rejected by CheckScaleArgs
  }
  if (e == cudaSuccess) return Status::Ok();
  return CudaStatus(e, "GPU scale-div launch",
                    Format("%s, %zu elements, divisor %g", GpuDtypeName(dtype),
                           count, divisor)
                        .c_str());
}

Status ScaleCopy(void* dst, const void* src, size_t count, zc_dtype dtype,
                 double factor, void* stream) {
  ZC_RETURN_IF_ERROR(CheckScaleCopyArgs(dst, src, count, dtype, factor));
  if (count == 0) return Status::Ok();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  if (factor == 1.0 || dtype == ZC_BOOL) {
    if (dst != src) e = cudaMemcpyAsync(dst, src, count * GpuDtypeSize(dtype), cudaMemcpyDeviceToDevice, s);
  } else {
    const float ff = static_cast<float>(factor);
    switch (dtype) {
      case ZC_FLOAT16: e = LaunchScaleCopy(dst, src, count, Scaled<F16>{ff}, s); break;
      case ZC_BFLOAT16: e = LaunchScaleCopy(dst, src, count, Scaled<BF16>{ff}, s); break;
      case ZC_FLOAT32: e = LaunchScaleCopy(dst, src, count, Scaled<float>{ff}, s); break;
      case ZC_FLOAT64: e = LaunchScaleCopy(dst, src, count, Scaled<double>{factor}, s); break;
      case ZC_INT8: e = LaunchScaleInt<int8_t>(dst, src, count, factor, s); break;
      case ZC_UINT8: e = LaunchScaleInt<uint8_t>(dst, src, count, factor, s); break;
      case ZC_INT16: e = LaunchScaleInt<int16_t>(dst, src, count, factor, s); break;
      case ZC_UINT16: e = LaunchScaleInt<uint16_t>(dst, src, count, factor, s); break;
      case ZC_INT32: e = LaunchScaleInt<int32_t>(dst, src, count, factor, s); break;
      case ZC_UINT32: e = LaunchScaleInt<uint32_t>(dst, src, count, factor, s); break;
      case ZC_INT64: e = LaunchScaleInt<int64_t>(dst, src, count, factor, s); break;
      case ZC_UINT64: e = LaunchScaleInt<uint64_t>(dst, src, count, factor, s); break;
      default: break;  // bool copied above; others rejected by the checks
    }
  }
  if (e == cudaSuccess) return Status::Ok();
  return CudaStatus(e, "GPU scale launch",
                    Format("%s, %zu elements, factor %g", GpuDtypeName(dtype), count, factor).c_str());
}

Status SynchronizeStream(void* stream, const char* what) {
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess) return Status::Ok();
  return CudaStatus(e, what != nullptr ? what : "GPU stream synchronize",
                    "cudaStreamSynchronize");
}

}  // namespace zc::gpu
