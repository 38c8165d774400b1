// GPU microbenchmarks:
//  1. pointer-cache hit latency (fake driver: runs everywhere; real driver
//     next to one cuPointerGetAttributes call where a GPU exists);
//  2. reduction kernel bandwidth against cuMemcpyDtoD on the same GPU
//     (goal: >= 85% of copy bandwidth).
// Run: ninja -C build gpu-bench   (or build/perf/gpu/gpu_bench [--quick])
// Exits 0 with a "no GPU" line where there is none.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_driver.h"
#include "gpu/pointer_cache.h"
#include "gpu/reduce_kernels.h"

using namespace zc::gpu;
using Clock = std::chrono::steady_clock;

namespace {

// ---- fake driver: one 1 GiB device allocation ------------------------------
constexpr uintptr_t kFakeBase = 0x700000000000ull;
constexpr size_t kFakeSize = 1ull << 30;

CuResult FakeAttrs(unsigned n, int* attrs, void** data, CuDevicePtr p) {
  const bool in = p >= kFakeBase && p < kFakeBase + kFakeSize;
  for (unsigned i = 0; i < n; ++i) {
    unsigned long long v = 0;
    switch (attrs[i]) {
      case cu::kPointerAttrMemoryType: v = in ? cu::kMemoryTypeDevice : 0; break;
      case cu::kPointerAttrBufferId: v = in ? 1 : 0; break;
      case cu::kPointerAttrRangeStartAddr: v = in ? kFakeBase : 0; break;
      case cu::kPointerAttrRangeSize: v = in ? kFakeSize : 0; break;
      default: v = 0; break;
    }
    if (attrs[i] == cu::kPointerAttrDeviceOrdinal) {
      const int d = 0;
      std::memcpy(data[i], &d, sizeof d);
    } else if (attrs[i] == cu::kPointerAttrIsManaged) {
      const bool b = false;
      std::memcpy(data[i], &b, sizeof b);
    } else if (attrs[i] == cu::kPointerAttrMemoryType) {
      const unsigned t = static_cast<unsigned>(v);
      std::memcpy(data[i], &t, sizeof t);
    } else {
      std::memcpy(data[i], &v, sizeof v);
    }
  }
  return 0;
}
CuResult FakeAttr(void* data, int, CuDevicePtr) {
  const unsigned long long one = 1;
  std::memcpy(data, &one, sizeof one);
  return 0;
}
CuResult FakeName(CuResult, const char** s) { *s = "FAKE"; return 0; }

double NsPerOp(Clock::time_point t0, Clock::time_point t1, uint64_t ops) {
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / ops;
}

// ns per Classify over `ptrs` (round robin), single thread.
double ClassifyLatency(PointerCache& cache, const std::vector<const void*>& ptrs,
                       uint64_t iters) {
  PointerInfo info;
  for (const void* p : ptrs) {  // warm, and every pointer must classify
    const zc::Status st = cache.Classify(p, 64, &info);
    if (!st.ok()) {
      std::fprintf(stderr, "classify: %s\n", st.message().c_str());
      return -1.0;
    }
  }
  const auto t0 = Clock::now();
  uint64_t sink = 0;
  for (uint64_t i = 0; i < iters; ++i) {
    if (!cache.Classify(ptrs[i % ptrs.size()], 64, &info).ok()) return -1.0;
    sink += info.buffer_id;
  }
  const auto t1 = Clock::now();
  if (sink == 42) std::printf(" ");
  return NsPerOp(t0, t1, iters);
}

double ConcurrentLatency(PointerCache& cache, const std::vector<const void*>& ptrs,
                         int threads, uint64_t iters) {
  std::vector<double> ns(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] { ns[t] = ClassifyLatency(cache, ptrs, iters); });
  }
  for (auto& t : ts) t.join();
  double sum = 0;
  for (double v : ns) sum += v;
  return sum / threads;
}

void PointerCacheBench(bool quick) {
  const uint64_t iters = quick ? 2'000'000 : 20'000'000;
  DriverTable fake;
  fake.loaded = true;
  fake.PointerGetAttributes = &FakeAttrs;
  fake.PointerGetAttribute = &FakeAttr;
  fake.GetErrorName = &FakeName;
  fake.GetErrorString = &FakeName;
  PointerCache cache(&fake);
  std::vector<const void*> one = {reinterpret_cast<const void*>(kFakeBase + 4096)};
  // 16 distinct allocations: more than the per-thread slots, so most
  // lookups go to the shared map.
  std::vector<const void*> many;
  for (int i = 0; i < 16; ++i) {
    const uintptr_t base = kFakeBase + static_cast<uintptr_t>(i) * (1 << 20);
    cache.Declare(reinterpret_cast<const void*>(base), 1 << 20, MemType::kDevice, 0);
    many.push_back(reinterpret_cast<const void*>(base + 128));
  }
  std::printf("\npointer cache (fake driver)\n");
  std::printf("%-44s %10s\n", "case", "ns/op");
  std::printf("%-44s %10.1f\n", "hit, same pointer (thread-local slot)",
              ClassifyLatency(cache, one, iters));
  std::printf("%-44s %10.1f\n", "hit, 16 allocations (shared map)",
              ClassifyLatency(cache, many, iters / 4));
  const unsigned hw = std::thread::hardware_concurrency();
  const int nt = hw >= 4 ? 4 : 2;
  std::printf("%-44s %10.1f\n",
              (std::string("hit, same pointer, ") + std::to_string(nt) + " threads").c_str(),
              ConcurrentLatency(cache, one, nt, iters / 2));
  std::printf("%-44s %10.1f\n",
              (std::string("hit, 16 allocations, ") + std::to_string(nt) + " threads").c_str(),
              ConcurrentLatency(cache, many, nt, iters / 8));
  // Host pointer without libcuda in the process: the NOLOAD probe.
  PointerCache real(nullptr);
  std::vector<char> host(256);
  std::vector<const void*> hp = {host.data()};
  std::printf("%-44s %10.1f\n",
              LoadedDriver() == nullptr ? "host pointer, no libcuda loaded"
                                        : "host pointer, real driver",
              ClassifyLatency(real, hp, iters / 20));
}

// ---- real GPU -----------------------------------------------------------------
bool Check(const DriverTable* drv, CuResult r, const char* what) {
  if (r == 0) return true;
  std::printf("error: %s: %s\n", what, CuErrorText(drv, r).c_str());
  return false;
}

int GpuBench(bool quick) {
  std::string why;
  if (DeviceCount(&why) == 0) {
    std::printf("\nno GPU: %s; GPU part skipped\n", why.c_str());
    return 0;
  }
  const DriverTable* drv = nullptr;
  zc::Status st = LoadDriver(&drv);
  if (st.ok()) st = EnsureContext(drv, 0);
  if (!st.ok()) {
    std::printf("no GPU: %s\n", st.message().c_str());
    return 0;
  }

  // Pointer cache vs driver on a real allocation.
  CuDevicePtr probe = 0;
  if (!Check(drv, drv->MemAlloc(&probe, 1 << 20), "cuMemAlloc")) return 1;
  {
    PointerCache cache(nullptr);
    std::vector<const void*> p = {reinterpret_cast<const void*>(probe + 64)};
    const uint64_t iters = quick ? 200'000 : 2'000'000;
    const double hit = ClassifyLatency(cache, p, iters);
    int attrs[] = {cu::kPointerAttrMemoryType, cu::kPointerAttrBufferId,
                   cu::kPointerAttrIsManaged, cu::kPointerAttrDeviceOrdinal,
                   cu::kPointerAttrRangeStartAddr, cu::kPointerAttrRangeSize};
    uint64_t v[6];
    void* data[6];
    for (int i = 0; i < 6; ++i) data[i] = &v[i];
    const auto t0 = Clock::now();
    for (uint64_t i = 0; i < iters; ++i) drv->PointerGetAttributes(6, attrs, data, probe + 64);
    const double query = NsPerOp(t0, Clock::now(), iters);
    std::printf("\npointer cache (real driver %d)\n%-44s %10s\n", drv->version,
                "case", "ns/op");
    std::printf("%-44s %10.1f\n", "cache hit (device pointer)", hit);
    std::printf("%-44s %10.1f\n", "cuPointerGetAttributes (6 attributes)", query);
    std::printf("%-44s %10.1fx\n", "speedup", query / hit);
  }
  drv->MemFree(probe);

  // Kernel bandwidth: c = a + b reads 2 and writes 1 buffer; a D2D copy
  // reads 1 and writes 1. Both as bytes moved per second.
  const size_t max_bytes = quick ? (64u << 20) : (256u << 20);
  CuDevicePtr a = 0, b = 0, c = 0;
  if (!Check(drv, drv->MemAlloc(&a, max_bytes), "cuMemAlloc") ||
      !Check(drv, drv->MemAlloc(&b, max_bytes), "cuMemAlloc") ||
      !Check(drv, drv->MemAlloc(&c, max_bytes), "cuMemAlloc")) {
    return 1;
  }
  drv->MemsetD8(a, 0x3c, max_bytes);
  drv->MemsetD8(b, 0x3c, max_bytes);
  std::printf("\nreduction kernels vs cuMemcpyDtoD (GB/s = 1e9 bytes moved / s)\n");
  std::printf("%10s %-9s %-5s %10s %10s %10s %8s\n", "bytes", "type", "op",
              "time(us)", "kernelGB/s", "copyGB/s", "ratio");
  struct Case { zc_dtype d; zc_op op; };
  const Case cases[] = {{ZC_FLOAT32, ZC_SUM}, {ZC_FLOAT16, ZC_SUM},
                        {ZC_BFLOAT16, ZC_SUM}, {ZC_FLOAT64, ZC_MAX},
                        {ZC_INT8, ZC_SUM}, {ZC_INT64, ZC_PROD},
                        {ZC_INT16, ZC_SUM}, {ZC_BOOL, ZC_MAX}};
  int failures = 0;
  for (size_t bytes = 1u << 20; bytes <= max_bytes; bytes *= 4) {
    const int iters = bytes >= (64u << 20) ? 20 : 100;
    // Copy baseline.
    drv->MemcpyDtoD(c, a, bytes);
    drv->CtxSynchronize();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) drv->MemcpyDtoD(c, a, bytes);
    drv->CtxSynchronize();
    const double copy_s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    const double copy_bw = 2.0 * bytes / copy_s / 1e9;
    for (const Case& k : cases) {
      const size_t n = bytes / GpuDtypeSize(k.d);
      void* pa = reinterpret_cast<void*>(a);
      void* pb = reinterpret_cast<void*>(b);
      void* pc = reinterpret_cast<void*>(c);
      st = ReduceInto(pc, pa, pb, n, k.d, k.op, nullptr);
      if (st.ok()) st = SynchronizeStream(nullptr, "bench warm-up");
      if (!st.ok()) {
        std::printf("error: %s\n", st.message().c_str());
        ++failures;
        continue;
      }
      t0 = Clock::now();
      for (int i = 0; i < iters && st.ok(); ++i) st = ReduceInto(pc, pa, pb, n, k.d, k.op, nullptr);
      if (st.ok()) st = SynchronizeStream(nullptr, "bench");
      if (!st.ok()) {
        std::printf("error: %s\n", st.message().c_str());
        ++failures;
        continue;
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
      const double bw = 3.0 * bytes / s / 1e9;
      std::printf("%10zu %-9s %-5s %10.1f %10.1f %10.1f %7.0f%%\n", bytes,
                  GpuDtypeName(k.d), GpuOpName(k.op), s * 1e6, bw, copy_bw,
                  100.0 * bw / copy_bw);
    }
  }
  drv->MemFree(a);
  drv->MemFree(b);
  drv->MemFree(c);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
  }
  std::printf("zcomm GPU benchmarks (kernels %s)\n",
              ReduceKernelsBuilt() ? "built" : "NOT built: zcomm built without CUDA");
  PointerCacheBench(quick);
  if (!ReduceKernelsBuilt()) {
    std::printf("\nno GPU kernels in this build; GPU part skipped\n");
    return 0;
  }
  return GpuBench(quick);
}
