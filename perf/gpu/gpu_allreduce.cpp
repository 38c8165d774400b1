// CUDA-aware allreduce through the C ABI: float32 sum on device buffers
// (CUDA IPC on one host, or host staging through pinned memory with
// ZC_GPU_IPC=0) next to the same allreduce on host buffers, per message size. Run under zcrun, one rank per process, all on
// the same GPU unless there are several:
//   zcrun -np 2 build/perf/gpu/gpu_allreduce [--quick] [--on-stream]
// --on-stream: the device column is zc_allreduce_on_stream on a
// non-blocking stream followed by cuStreamSynchronize (pipelined staging in
// ZC_GPU_CHUNK_BYTES parts).
// --op broadcast|allgather|reduce_scatter|alltoall: that collective
// instead (root 0; "bytes" is the call's whole size: recvbuf of
// allgather, sendbuf of reduce-scatter and alltoall), blocking only.
// Rank 0 prints one line per size: time per call (median of the repeats)
// and the algorithm bandwidth (bytes / time). Exits 0 with a "no GPU" line
// where there is none.
#include <zcomm/zcomm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_driver.h"
#include "gpu/pinned_pool.h"

using namespace zc::gpu;
using Clock = std::chrono::steady_clock;

namespace {

std::string g_op = "allreduce";  // --op

// One blocking call of g_op moving `bytes` in all (float32).
zc_status Call(zc_comm* comm, const void* s, void* r, size_t bytes) {
  const size_t n = static_cast<size_t>(zc_size(comm)), count = bytes / 4;
  if (g_op == "broadcast") return zc_broadcast(comm, r, count, ZC_FLOAT32, 0);
  if (g_op == "allgather") return zc_allgather(comm, s, r, count / n, ZC_FLOAT32);
  if (g_op == "reduce_scatter") return zc_reduce_scatter(comm, s, r, count / n, ZC_FLOAT32, ZC_SUM);
  if (g_op == "alltoall") return zc_alltoall(comm, s, r, count / n, ZC_FLOAT32);
  return zc_allreduce(comm, s, r, count, ZC_FLOAT32, ZC_SUM);
}

// stream != null: zc_allreduce_on_stream on it, then cuStreamSynchronize.
double MedianUs(zc_comm* comm, const void* s, void* r, size_t count, int iters, const DriverTable* drv = nullptr,
                CuStream stream = nullptr) {
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    zc_barrier(comm);
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      zc_status st;
      if (stream != nullptr) {
        st = zc_allreduce_on_stream(comm, s, r, count, ZC_FLOAT32, ZC_SUM, stream, nullptr);
        if (st == ZC_OK && drv->StreamSynchronize(stream) != 0) st = ZC_ERR_SYSTEM;
      } else {
        st = Call(comm, s, r, count * 4);
      }
      if (st != ZC_OK) {
        std::fprintf(stderr, "%s: %s\n", g_op.c_str(), zc_last_error(comm));
        return -1;
      }
    }
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, on_stream = false;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    on_stream |= std::strcmp(argv[i], "--on-stream") == 0;
    if (std::strcmp(argv[i], "--op") == 0 && i + 1 < argc) g_op = argv[++i];
  }
  if (on_stream && g_op != "allreduce") {
    std::fprintf(stderr, "gpu_allreduce: --on-stream measures allreduce only\n");
    return 2;
  }
  std::string why;
  const int ndev = DeviceCount(&why);
  zc_comm* comm = nullptr;
  if (zc_init(&comm) != ZC_OK) {
    std::fprintf(stderr, "zc_init: %s\n", zc_last_error(nullptr));
    return 1;
  }
  const int rank = zc_rank(comm);
  if (ndev == 0) {
    if (rank == 0) std::printf("gpu_allreduce: no GPU (%s)\n", why.c_str());
    zc_finalize(comm);
    return 0;
  }
  const DriverTable* drv = nullptr;
  zc::Status st = LoadDriver(&drv);
  if (st.ok()) st = EnsureContext(drv, zc_local_rank(comm) % ndev);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
    return 1;
  }
  const size_t max_bytes = quick ? (16u << 20) : (256u << 20);
  CuDevicePtr ds = 0, dr = 0;
  if (drv->MemAlloc(&ds, max_bytes) != 0 || drv->MemAlloc(&dr, max_bytes) != 0) {
    std::fprintf(stderr, "rank %d: cuMemAlloc(%zu) failed\n", rank, max_bytes);
    return 1;
  }
  drv->MemsetD8(ds, 0, max_bytes);
  CuStream stream = nullptr;
  if (on_stream && drv->StreamCreate(&stream, cu::kStreamNonBlocking) != 0) {
    std::fprintf(stderr, "rank %d: cuStreamCreate failed\n", rank);
    return 1;
  }
  std::vector<float> hs(max_bytes / 4, 1.0f), hr(max_bytes / 4);
  if (rank == 0)
    std::printf("# gpu_allreduce: %s, %d ranks, float32 sum, %d GPU(s); time per call (us), algbw GB/s\n"
                "%12s %12s %10s %12s %10s %8s %s\n",
                g_op.c_str(), zc_size(comm), ndev, "bytes", "host_us", "host_GB/s", "device_us", "dev_GB/s",
                "dev/host", on_stream ? "device path: allreduce_on_stream + cuStreamSynchronize" : "device algorithm");
  // Warm-up: pinned pool, IPC mappings, GPU clocks.
  for (size_t bytes : {size_t{4096}, max_bytes}) {
    if (MedianUs(comm, reinterpret_cast<void*>(ds), reinterpret_cast<void*>(dr), bytes / 4, 3, drv, stream) < 0)
      return 1;
  }
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / 4;
    const int iters = bytes <= (1u << 20) ? 50 : (bytes <= (16u << 20) ? 10 : 3);
    const double h = MedianUs(comm, hs.data(), hr.data(), count, iters);
    const double d = MedianUs(comm, reinterpret_cast<void*>(ds), reinterpret_cast<void*>(dr), count, iters, drv, stream);
    if (h < 0 || d < 0) return 1;
    if (rank == 0)
      std::printf("%12zu %12.1f %10.2f %12.1f %10.2f %8.2f %s\n", bytes, h, bytes / h / 1e3, d,
                  bytes / d / 1e3, d / h, on_stream ? "staged, pipelined" : zc_last_algorithm(comm));
  }
  // Pinning costs far more than a copy: a pool that keeps allocating would
  // show in every staged time above.
  const PinnedPool::Stats pool = PinnedPool::Global().stats();
  if (rank == 0)
    std::printf("# pinned pool (rank 0): %llu allocations, %llu reuses, %llu bytes cached\n",
                static_cast<unsigned long long>(pool.allocs), static_cast<unsigned long long>(pool.reuses),
                static_cast<unsigned long long>(pool.cached_bytes));
  drv->MemFree(ds);
  drv->MemFree(dr);
  return zc_finalize(comm) == ZC_OK ? 0 : 1;
}
