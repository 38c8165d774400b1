/* mpi_allreduce — the Open MPI baseline of zc_coll: MPI_Allreduce with the
 * same sweep, data, check, timing and columns.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np N --bind-to core|none
 *          mpi_allreduce [-b 4] [-e 256M] [-f 2] [-d float32] [-o sum]
 *          [-n 20] [-w 5] [--min-iters 3] [-c 1] [--inplace] [--json FILE]
 *
 * float16, bfloat16 and bool have no MPI type here and are refused. Open MPI picks its own
 * algorithm (tuned component); set OMPI_MCA_coll_tuned_* to force one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench_util.h"

/* Which MPI this build links (perf/peers/meson.build sets it). */
#ifndef BU_MPI_NAME
#define BU_MPI_NAME "openmpi"
#endif

static MPI_Datatype mpi_type(int dt) {
  switch (dt) {
    case BU_INT8: return MPI_INT8_T;
    case BU_UINT8: return MPI_UINT8_T;
    case BU_INT16: return MPI_INT16_T;
    case BU_UINT16: return MPI_UINT16_T;
    case BU_INT32: return MPI_INT32_T;
    case BU_UINT32: return MPI_UINT32_T;
    case BU_INT64: return MPI_INT64_T;
    case BU_UINT64: return MPI_UINT64_T;
    case BU_FLOAT32: return MPI_FLOAT;
    case BU_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
    case BU_SUM: return MPI_SUM;
    case BU_PROD: return MPI_PROD;
    case BU_MIN: return MPI_MIN;
    case BU_MAX: return MPI_MAX;
    default: return MPI_OP_NULL; /* avg: a sum, scaled below */
  }
}

static void scale(void* buf, size_t count, int dt, int n) {
  if (dt == BU_FLOAT32) {
    float* p = (float*)buf;
    for (size_t i = 0; i < count; i++) p[i] /= (float)n;
  } else if (dt == BU_FLOAT64) {
    double* p = (double*)buf;
    for (size_t i = 0; i < count; i++) p[i] /= n;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  size_t min_size = 4, max_size = 256 * BU_MiB;
  long factor = 2;
  int dt = BU_FLOAT32, op = BU_SUM, iters = 20, warmup = 5, min_iters = 3;
  int check = 1, inplace = 0;
  const char* json = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-b")) { min_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-e")) { max_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-f")) { factor = bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-n")) { iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-w")) { warmup = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--min-iters")) { min_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-c")) { check = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--inplace")) inplace = 1;
    else if (!strcmp(a, "--json")) { json = v; i++; }
    else if (!strcmp(a, "-d") && v) { dt = bu_dtype_from_name(v); i++; }
    else if (!strcmp(a, "-o") && v) { op = bu_op_from_name(v); i++; }
    else {
      if (rank == 0) fprintf(stderr, "error: unknown option %s\n", a);
      MPI_Finalize();
      return 2;
    }
  }
  if (factor < 2) factor = 2;
  if (min_iters < 1) min_iters = 1;
  bu_report rep;
  bu_report_init(&rep, rank == 0 ? json : NULL, "allreduce", "mpi", BU_MPI_NAME,
                 n);
  if (dt < 0 || op < 0 || mpi_type(dt) == MPI_DATATYPE_NULL ||
      (op == BU_AVG && !bu_dtype_is_float(dt))) {
    bu_report_fail(&rep, "unsupported dtype/op for MPI");
    MPI_Finalize();
    return 2;
  }
  snprintf(rep.dtype, sizeof rep.dtype, "%s", bu_dtype_names[dt]);
  snprintf(rep.op, sizeof rep.op, "%s", bu_op_names[op]);
  snprintf(rep.extra, sizeof rep.extra,
           "\"inplace\": %s, \"timing\": \"max over ranks of mean time per "
           "call\"", inplace ? "true" : "false");
  const size_t ts = bu_dtype_sizes[dt];
  const MPI_Datatype mt = mpi_type(dt);
  const MPI_Op mo = op == BU_AVG ? MPI_SUM : mpi_op(op);

  size_t bytes = max_size / ts * ts;
  if (bytes == 0) bytes = ts;
  void* sendbuf = malloc(bytes);
  void* recvbuf = malloc(bytes);
  if (!sendbuf || !recvbuf) {
    bu_report_fail(&rep, "rank %d: malloc(%zu) failed", rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sendbuf, 0, bytes);
  memset(recvbuf, 0, bytes);
  if (rank == 0) {
    printf("# mpi_allreduce: Open MPI, ranks=%d %s\n", n,
           inplace ? "in-place" : "out-of-place");
    printf("# time = slowest rank's mean per call; GB/s = 1e9 B/s; "
           "busbw factor %.4f\n", bu_busbw_factor(BU_ALLREDUCE, n));
    bu_print_coll_header(stdout);
  }
  {
    /* As zc_coll and nccl-tests: -w calls at the largest size of the sweep
     * first, so the first sizes do not run on cold connections. */
    size_t largest = bu_sweep_largest(min_size, max_size, (size_t)factor);
    size_t count = largest / ts;
    if (largest > 64 * BU_KiB && count > 0 && count <= 0x7fffffff)
      for (int it = 0; it < warmup; it++)
        MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, mt, mo,
                      MPI_COMM_WORLD);
  }
  size_t last = 0;
  for (size_t sz = min_size; sz <= max_size; sz *= (size_t)factor) {
    size_t count = sz / ts;
    size_t size = count * ts;
    if (count == 0 || size == last || count > 0x7fffffff) {
      if (sz > max_size / (size_t)factor) break;
      continue;
    }
    last = size;
    const void* send = inplace ? MPI_IN_PLACE : sendbuf;
    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = size;
    row.count = count;
    row.wrong = -1;
    if (check) {
      bu_fill(inplace ? recvbuf : sendbuf, count, dt, rank, 0, op);
      if (!inplace) memset(recvbuf, 0, size);
      MPI_Allreduce(send, recvbuf, (int)count, mt, mo, MPI_COMM_WORLD);
      if (op == BU_AVG) scale(recvbuf, count, dt, n);
      long long w = bu_coll_check(BU_ALLREDUCE, recvbuf, count, dt, op, rank,
                                  n, 0);
      MPI_Allreduce(&w, &row.wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (inplace) bu_fill(recvbuf, count, dt, rank, 0, op);
    }
    int it_n = bu_iters_for(size, iters, min_iters, BU_COLL_KNEE);
    int it_w = size <= 64 * BU_KiB ? warmup : (warmup < 1 ? warmup : 1);
    double t_warm = 0;
    for (int it = 0; it < it_w; it++) {
      if (it == 1) t_warm = bu_now_us();
      MPI_Allreduce(send, recvbuf, (int)count, mt, mo, MPI_COMM_WORLD);
      if (op == BU_AVG) scale(recvbuf, count, dt, n);
    }
    if (it_w > 1) { /* bu_iters_to_fill: the slowest rank's warm-up call */
      double per = (bu_now_us() - t_warm) / (it_w - 1), slowest_per = 0;
      MPI_Allreduce(&per, &slowest_per, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      it_n = bu_iters_to_fill(it_n, slowest_per);
    }
    row.iters = it_n;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bu_now_us();
    for (int it = 0; it < it_n; it++) {
      MPI_Allreduce(send, recvbuf, (int)count, mt, mo, MPI_COMM_WORLD);
      if (op == BU_AVG) scale(recvbuf, count, dt, n);
    }
    double mine = (bu_now_us() - t0) / it_n, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    row.time_us = slowest;
    row.algbw = (double)size / (slowest * 1e3);
    row.busbw = row.algbw * bu_busbw_factor(BU_ALLREDUCE, n);
    if (rank == 0) {
      bu_print_coll_row(stdout, &row, bu_dtype_names[dt], bu_op_names[op]);
      bu_report_add(&rep, &row);
    }
    if (sz > max_size / (size_t)factor) break;
  }
  if (rank == 0) bu_report_write(&rep, 1);
  free(sendbuf);
  free(recvbuf);
  MPI_Finalize();
  return 0;
}
