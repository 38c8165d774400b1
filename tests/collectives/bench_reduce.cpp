// Throughput of the CPU reduction kernels against memcpy of the same size.
//
//   bench_reduce [MiB per buffer, default 16] [iterations, default 20]
//
// For each ISA the CPU supports and each dtype it prints, for sum:
//   into   ReduceInto(dst, src)        2 reads + 1 write per element
//   out    Reduce2(dst, a, b)          2 reads + 1 write
//   n4     ReduceN(dst, 4 inputs)      4 reads + 1 write
// "GB/s" is buffer bytes / time (1e9), the rate at which a collective
// consumes one input; "mem GB/s" counts every byte read and written.
// memcpy: bytes / time and 2x that as memory traffic. Best of the
// iterations, after one warm-up pass that also faults the pages in.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "collectives/reduce_kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

double BestSeconds(int iters, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    fn();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s < best) best = s;
  }
  return best;
}

void Fill(std::vector<unsigned char>& v, zc_dtype d) {
  // Ordinary values (1.0-ish): no denormal or NaN slow paths.
  const size_t size = zc::DtypeSize(d);
  for (size_t i = 0; i + size <= v.size(); i += size) {
    const float f = 1.0f + static_cast<float>(i % 97) / 128.0f;
    switch (d) {
      case ZC_FLOAT16: {
        const uint16_t h = zc::FloatToHalf(f);
        std::memcpy(&v[i], &h, 2);
        break;
      }
      case ZC_BFLOAT16: {
        const uint16_t h = zc::FloatToBFloat16(f);
        std::memcpy(&v[i], &h, 2);
        break;
      }
      case ZC_FLOAT32: std::memcpy(&v[i], &f, 4); break;
      case ZC_FLOAT64: {
        const double x = f;
        std::memcpy(&v[i], &x, 8);
        break;
      }
      default: {
        const uint64_t x = i % 251;
        std::memcpy(&v[i], &x, size);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 16;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  const size_t bytes = mib << 20;
  if (bytes == 0 || iters <= 0) {
    std::fprintf(stderr, "usage: %s [MiB] [iterations]\n", argv[0]);
    return 2;
  }
  std::vector<unsigned char> a(bytes), b(bytes), c(bytes), e(bytes), dst(bytes);

  Fill(a, ZC_UINT8);
  const double t_copy = BestSeconds(iters, [&] { std::memcpy(dst.data(), a.data(), bytes); });
  std::printf("buffer %zu MiB, best of %d\n", mib, iters);
  std::printf("%-8s %-9s %-5s %10s %10s\n", "isa", "dtype", "form", "GB/s", "mem GB/s");
  std::printf("%-8s %-9s %-5s %10.2f %10.2f\n", "-", "memcpy", "copy",
              bytes / t_copy / 1e9, 2 * bytes / t_copy / 1e9);

  const zc_dtype dtypes[] = {ZC_FLOAT32, ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT64, ZC_INT32,
                             ZC_UINT8,   ZC_INT16,   ZC_UINT16,   ZC_BOOL};
  for (zc::KernelIsa isa : {zc::KernelIsa::kGeneric, zc::KernelIsa::kAvx2}) {
    if (!zc::SetKernelIsa(isa)) continue;
    for (zc_dtype d : dtypes) {
      const size_t count = bytes / zc::DtypeSize(d);
      for (auto* v : {&a, &b, &c, &e}) Fill(*v, d);
      const void* srcs[4] = {a.data(), b.data(), c.data(), e.data()};
      struct Form {
        const char* name;
        int streams;
        std::function<void()> fn;
      } forms[] = {
          // ReduceInto grows dst each pass: refill-free because sum of
          // ordinary values stays finite for the handful of iterations.
          {"into", 3, [&] { zc::ReduceInto(d, ZC_SUM, dst.data(), a.data(), count); }},
          {"out", 3, [&] { zc::Reduce2(d, ZC_SUM, dst.data(), a.data(), b.data(), count); }},
          {"n4", 5, [&] { zc::ReduceN(d, ZC_SUM, dst.data(), srcs, 4, count); }},
      };
      for (const Form& f : forms) {
        Fill(dst, d);
        const double t = BestSeconds(iters, f.fn);
        std::printf("%-8s %-9s %-5s %10.2f %10.2f\n", zc::KernelIsaName(isa),
                    zc::DtypeName(d), f.name, bytes / t / 1e9,
                    f.streams * bytes / t / 1e9);
      }
    }
  }
  return 0;
}
