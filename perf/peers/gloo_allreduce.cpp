// gloo_allreduce — the Gloo baseline of zc_coll (Debian's libgloo-dev).
//
// Each rank is a separate process, started by perf/run_suite.py (or by hand):
//   gloo_allreduce --rank R --size N --store DIR [--prefix P]
//                  [--algo ring|ring_chunked|halving_doubling|allreduce]
//                  [-b 4] [-e 256M] [-f 2] [-d float32|float64] [-n 20] [-w 5]
//                  [--min-iters 3] [-c 1] [--timeout-s 600] [--json FILE]
// Rendezvous through a gloo::rendezvous::FileStore in DIR (a fresh temporary
// directory per run); transport gloo::transport::tcp on the loopback
// interface. Algorithms:
//   ring              gloo::AllreduceRing: passes whole buffers around the ring
//                     (n-1 steps of size S: not bandwidth-optimal)
//   ring_chunked      gloo::AllreduceRingChunked (reduce-scatter + allgather)
//   halving_doubling  gloo::AllreduceHalvingDoubling
//   allreduce         gloo::allreduce() (the newer API torch.distributed uses;
//                     ring over segments); in place as torch calls it, or
//                     --out-of-place (input and output buffers)
// Sums are taken in place repeatedly in the timed loop, as in
// torch.distributed. Columns, check and timing as in
// zc_coll; op is sum.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/bench_util.h"

#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

enum class Algo { kRing, kRingChunked, kHalvingDoubling, kAllreduce };

const char* AlgoName(Algo a) {
  switch (a) {
    case Algo::kRing: return "ring";
    case Algo::kRingChunked: return "ring_chunked";
    case Algo::kHalvingDoubling: return "halving_doubling";
    default: return "allreduce";
  }
}

struct Args {
  int rank = -1, size = -1;
  std::string store, prefix = "zcperf";
  Algo algo = Algo::kRing;
  size_t min_size = 4, max_size = 256 * BU_MiB;
  long factor = 2;
  int dt = BU_FLOAT32;
  int iters = 20, warmup = 5, min_iters = 3, check = 1;
  bool out_of_place = false;  // gloo::allreduce only (--out-of-place)
  double timeout_s = 600;
  const char* json = nullptr;
};

template <typename T>
void RunOnce(Algo algo, const std::shared_ptr<gloo::Context>& ctx, T* buf,
             T* out, size_t count, uint32_t tag,
             std::unique_ptr<gloo::Algorithm>* cached) {
  if (algo == Algo::kAllreduce) {
    gloo::AllreduceOptions opts(ctx);
    if (out != buf) opts.setInput(buf, count);
    opts.setOutput(out, count);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<T>));
    opts.setTag(tag);
    gloo::allreduce(opts);
    return;
  }
  if (!*cached) {
    std::vector<T*> ptrs{buf};
    switch (algo) {
      case Algo::kRing:
        cached->reset(new gloo::AllreduceRing<T>(ctx, ptrs, (int)count));
        break;
      case Algo::kRingChunked:
        cached->reset(new gloo::AllreduceRingChunked<T>(ctx, ptrs, (int)count));
        break;
      default:
        cached->reset(
            new gloo::AllreduceHalvingDoubling<T>(ctx, ptrs, (int)count));
        break;
    }
  }
  (*cached)->run();
}

double MaxOverRanks(const std::shared_ptr<gloo::Context>& ctx, double v) {
  std::vector<double*> ptrs{&v};
  gloo::AllreduceRing<double> ar(ctx, ptrs, 1,
                                 gloo::ReductionFunction<double>::max);
  ar.run();
  return v;
}

long long SumOverRanks(const std::shared_ptr<gloo::Context>& ctx,
                       long long v) {
  double d = (double)v;
  std::vector<double*> ptrs{&d};
  gloo::AllreduceRing<double> ar(ctx, ptrs, 1);
  ar.run();
  return (long long)d;
}

template <typename T>
int Bench(const Args& a, const std::shared_ptr<gloo::Context>& ctx,
          bu_report* rep) {
  const int n = a.size;
  const size_t ts = sizeof(T);
  size_t max_count = a.max_size / ts;
  if (max_count == 0) max_count = 1;
  std::vector<T> buf(max_count), out(max_count);
  if (a.rank == 0) {
    const char* iface = getenv("GLOO_SOCKET_IFNAME");
    printf("# gloo_allreduce: algo=%s ranks=%d transport=tcp(%s)\n",
           AlgoName(a.algo), n, iface && iface[0] ? iface : "lo");
    printf("# time = slowest rank's mean per call; GB/s = 1e9 B/s; "
           "busbw factor %.4f\n", bu_busbw_factor(BU_ALLREDUCE, n));
    bu_print_coll_header(stdout);
  }
  uint32_t tag = 100;
  {
    // As zc_coll and nccl-tests: -w calls at the largest size of the sweep
    // first, so the first sizes do not run on cold connections.
    const size_t largest = bu_sweep_largest(a.min_size, a.max_size, (size_t)a.factor);
    const size_t count = largest / ts;
    if (largest > 64 * BU_KiB && count > 0 && count <= 0x7fffffff) {
      std::unique_ptr<gloo::Algorithm> warm;
      T* res = a.algo == Algo::kAllreduce && a.out_of_place ? out.data() : buf.data();
      for (int it = 0; it < a.warmup; it++)
        RunOnce<T>(a.algo, ctx, buf.data(), res, count, tag++, &warm);
    }
  }
  size_t last = 0;
  for (size_t sz = a.min_size; sz <= a.max_size; sz *= (size_t)a.factor) {
    const size_t count = sz / ts;
    const size_t size = count * ts;
    if (count == 0 || size == last || count > 0x7fffffff) {
      if (sz > a.max_size / (size_t)a.factor) break;
      continue;
    }
    last = size;
    T* in = buf.data();
    T* res = (a.algo == Algo::kAllreduce && a.out_of_place) ? out.data() : buf.data();
    std::unique_ptr<gloo::Algorithm> cached;
    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = size;
    row.count = count;
    row.wrong = -1;
    snprintf(row.algo, sizeof row.algo, "%s", AlgoName(a.algo));
    if (a.check) {
      bu_fill(in, count, a.dt, a.rank, 0, BU_SUM);
      RunOnce<T>(a.algo, ctx, in, res, count, tag++, &cached);
      long long w =
          bu_coll_check(BU_ALLREDUCE, res, count, a.dt, BU_SUM, a.rank, n, 0);
      row.wrong = SumOverRanks(ctx, w);
    }
    int it_n = bu_iters_for(size, a.iters, a.min_iters, BU_COLL_KNEE);
    int it_w = size <= 64 * BU_KiB ? a.warmup : (a.warmup < 1 ? a.warmup : 1);
    double t_warm = 0;
    for (int it = 0; it < it_w; it++) {
      if (it == 1) t_warm = bu_now_us();
      RunOnce<T>(a.algo, ctx, in, res, count, tag++, &cached);
    }
    if (it_w > 1)  // bu_iters_to_fill: the slowest rank's warm-up call
      it_n = bu_iters_to_fill(it_n, MaxOverRanks(ctx, (bu_now_us() - t_warm) / (it_w - 1)));
    row.iters = it_n;
    gloo::BarrierAllToAll(ctx).run();
    double t0 = bu_now_us();
    for (int it = 0; it < it_n; it++)
      RunOnce<T>(a.algo, ctx, in, res, count, tag++, &cached);
    double mine = (bu_now_us() - t0) / it_n;
    double slowest = MaxOverRanks(ctx, mine);
    row.time_us = slowest;
    row.algbw = (double)size / (slowest * 1e3);
    row.busbw = row.algbw * bu_busbw_factor(BU_ALLREDUCE, n);
    if (a.rank == 0) {
      bu_print_coll_row(stdout, &row, bu_dtype_names[a.dt], "sum");
      bu_report_add(rep, &row);
    }
    if (sz > a.max_size / (size_t)a.factor) break;
  }
  return 0;
}

void Usage() {
  fprintf(stderr,
          "usage: gloo_allreduce --rank R --size N --store DIR [--prefix P]\n"
          "       [--algo ring|ring_chunked|halving_doubling|allreduce] [-b B] "
          "[-e B] [-f F]\n"
          "       [-d float32|float64] [-n N] [-w N] [--min-iters N] [-c 0|1] "
          "[--timeout-s S] [--out-of-place] [--json FILE]\n");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    const char* o = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(o, "--rank")) { a.rank = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "--size")) { a.size = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "--store") && v) { a.store = v; i++; }
    else if (!strcmp(o, "--prefix") && v) { a.prefix = v; i++; }
    else if (!strcmp(o, "-b")) { a.min_size = bu_size_arg(o, v); i++; }
    else if (!strcmp(o, "-e")) { a.max_size = bu_size_arg(o, v); i++; }
    else if (!strcmp(o, "-f")) { a.factor = bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "-n")) { a.iters = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "-w")) { a.warmup = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "--min-iters")) { a.min_iters = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "-c")) { a.check = (int)bu_int_arg(o, v); i++; }
    else if (!strcmp(o, "--timeout-s") && v) { a.timeout_s = atof(v); i++; }
    else if (!strcmp(o, "--json") && v) { a.json = v; i++; }
    else if (!strcmp(o, "--out-of-place")) a.out_of_place = true;
    else if (!strcmp(o, "-d") && v) { a.dt = bu_dtype_from_name(v); i++; }
    else if (!strcmp(o, "--algo") && v) {
      if (!strcmp(v, "ring")) a.algo = Algo::kRing;
      else if (!strcmp(v, "ring_chunked")) a.algo = Algo::kRingChunked;
      else if (!strcmp(v, "halving_doubling")) a.algo = Algo::kHalvingDoubling;
      else if (!strcmp(v, "allreduce")) a.algo = Algo::kAllreduce;
      else { Usage(); return 2; }
      i++;
    } else if (!strcmp(o, "-h") || !strcmp(o, "--help")) { Usage(); return 0; }
    else { Usage(); return 2; }
  }
  if (a.rank < 0 || a.size < 1 || a.rank >= a.size || a.store.empty()) {
    Usage();
    return 2;
  }
  if (a.factor < 2) a.factor = 2;
  if (a.min_iters < 1) a.min_iters = 1;

  bu_report rep;
  bu_report_init(&rep, a.rank == 0 ? a.json : nullptr, "allreduce", "gloo",
                 AlgoName(a.algo), a.size);
  snprintf(rep.op, sizeof rep.op, "sum");
  snprintf(rep.extra, sizeof rep.extra,
           "\"transport\": \"tcp(lo)\", \"inplace\": %s, \"timing\": \"max "
           "over ranks of mean time per call\"",
           (a.algo == Algo::kAllreduce && a.out_of_place) ? "false" : "true");
  if (a.dt != BU_FLOAT32 && a.dt != BU_FLOAT64) {
    bu_report_fail(&rep, "gloo_allreduce supports -d float32|float64");
    return 2;
  }
  snprintf(rep.dtype, sizeof rep.dtype, "%s", bu_dtype_names[a.dt]);
  try {
    gloo::transport::tcp::attr attr;
    // GLOO_SOCKET_IFNAME as torch.distributed reads it (network namespaces
    // in scripts/hier_bench.sh); loopback by default.
    const char* iface = getenv("GLOO_SOCKET_IFNAME");
    attr.iface = iface && iface[0] ? iface : "lo";
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(a.store);
    gloo::rendezvous::PrefixStore store(a.prefix, file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(a.rank, a.size);
    ctx->setTimeout(std::chrono::milliseconds((long long)(a.timeout_s * 1e3)));
    ctx->connectFullMesh(store, dev);
    int rc = a.dt == BU_FLOAT32 ? Bench<float>(a, ctx, &rep)
                                : Bench<double>(a, ctx, &rep);
    if (a.rank == 0) bu_report_write(&rep, 1);
    return rc;
  } catch (const std::exception& e) {
    bu_report_fail(&rep, "gloo rank %d: %s", a.rank, e.what());
    return 1;
  }
}
