/* zc_coll — nccl-tests-like sweep of zcomm collectives (C ABI only).
 *
 *   zcrun -np N zc_coll [--coll allreduce|broadcast|reduce|allgather|
 *                        reduce_scatter|alltoall] [-b 4] [-e 256M] [-f 2]
 *                       [-d float32] [-o sum] [-n 20] [-w 5] [--min-iters 3]
 *                       [-r root] [-c 1] [--inplace] [--buffers zc|malloc]
 *                       [--json FILE]
 *
 * Columns (as nccl-tests): size count type redop time(us) algbw(GB/s)
 * busbw(GB/s) #wrong. size follows nccl-tests: bytes of one rank's buffer for
 * allreduce/broadcast/reduce, of the gathered buffer for allgather, of the
 * scattered input for reduce_scatter, of one rank's send buffer for alltoall.
 * algbw = size / time, GB = 1e9 B; busbw = algbw x 2(n-1)/n (allreduce),
 * (n-1)/n (allgather, reduce_scatter, alltoall), 1 (broadcast, reduce).
 * time = the slowest rank's mean time per call over the timed iterations.
 *
 * Before timing each size, one call on rank- and index-dependent data is
 * checked on every rank; #wrong sums the wrong elements over all ranks. It is
 * printed and written to the JSON, never asserted. The transport and
 * algorithm come from the library (ZC_TRANSPORT, ZC_ALGO); the algorithm the
 * library reports (zc_last_algorithm) is written to the JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

static bu_report g_rep;
static zc_comm* g_comm;
static int g_rank = -1;

static void fail_status(const char* what, zc_status s) {
  const char* str = zc_status_string(s);
  const char* detail =
      g_comm ? zc_last_error(g_comm) : "";
  bu_report_fail(&g_rep, "zcomm rank %d: %s: %s (%d)%s%s", g_rank, what, str,
                 (int)s, detail && detail[0] ? ": " : "", detail ? detail : "");
  if (g_comm) zc_abort(g_comm);
  exit(1);
}

#define ZC_CHECK(call, what)                 \
  do {                                       \
    zc_status s_ = (call);                   \
    if (s_ != ZC_OK) fail_status(what, s_);  \
  } while (0)

static zc_status run_coll(int coll, const void* send, void* recv, size_t count,
                          int dt, int op, int root) {
  zc_dtype d = (zc_dtype)dt;
  zc_op o = (zc_op)op;
  switch (coll) {
    case BU_ALLREDUCE: return zc_allreduce(g_comm, send, recv, count, d, o);
    case BU_BROADCAST: return zc_broadcast(g_comm, recv, count, d, root);
    case BU_REDUCE: return zc_reduce(g_comm, send, recv, count, d, o, root);
    case BU_ALLGATHER: return zc_allgather(g_comm, send, recv, count, d);
    case BU_REDUCE_SCATTER:
      return zc_reduce_scatter(g_comm, send, recv, count, d, o);
    case BU_ALLTOALL: return zc_alltoall(g_comm, send, recv, count, d);
    default: return ZC_ERR_INVALID_ARG;
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: zc_coll [--coll allreduce|broadcast|reduce|allgather|"
          "reduce_scatter|alltoall]\n"
          "               [-b MIN] [-e MAX] [-f FACTOR] [-d DTYPE] [-o OP] "
          "[-n ITERS] [-w WARMUP] [--min-iters N]\n"
          "               [-r ROOT] [-c 0|1] [--inplace] "
          "[--buffers zc|malloc] [--json FILE]\n");
}

int main(int argc, char** argv) {
  size_t min_size = 4, max_size = 256 * BU_MiB;
  long factor = 2;
  int coll = BU_ALLREDUCE, dt = BU_FLOAT32, op = BU_SUM;
  int iters = 20, warmup = 5, min_iters = 3, root = 0, check = 1;
  int inplace = 0, use_zc = 1;
  const char* json = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-b") || !strcmp(a, "--minbytes")) { min_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) { max_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) { factor = bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) { iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters")) { warmup = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--min-iters")) { min_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-r") || !strcmp(a, "--root")) { root = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-c") || !strcmp(a, "--check")) { check = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--inplace")) inplace = 1;
    else if (!strcmp(a, "--json")) { json = v; i++; }
    else if ((!strcmp(a, "-d") || !strcmp(a, "--datatype")) && v) {
      dt = bu_dtype_from_name(v);
      if (dt < 0) { fprintf(stderr, "error: unknown dtype '%s'\n", v); return 2; }
      i++;
    } else if ((!strcmp(a, "-o") || !strcmp(a, "--op")) && v) {
      op = bu_op_from_name(v);
      if (op < 0) { fprintf(stderr, "error: unknown op '%s'\n", v); return 2; }
      i++;
    } else if (!strcmp(a, "--coll") && v) {
      coll = bu_coll_from_name(v);
      if (coll < 0) { fprintf(stderr, "error: unknown collective '%s'\n", v); return 2; }
      i++;
    } else if (!strcmp(a, "--buffers") && v) {
      if (!strcmp(v, "zc")) use_zc = 1;
      else if (!strcmp(v, "malloc")) use_zc = 0;
      else { usage(); return 2; }
      i++;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
    else { usage(); return 2; }
  }
  if (factor < 2) factor = 2;
  if (iters < 1) iters = 1;
  if (min_iters < 1) min_iters = 1;
  if (warmup < 0) warmup = 0;
  const size_t ts = bu_dtype_sizes[dt];
  const int has_op = coll == BU_ALLREDUCE || coll == BU_REDUCE ||
                     coll == BU_REDUCE_SCATTER;
  const int data_op = has_op ? op : BU_SUM;
  const char* op_name = has_op ? bu_op_names[op] : "none";

  const char* transport = getenv("ZC_TRANSPORT");
  if (!transport || !transport[0]) transport = "auto";
  const char* algo_env = getenv("ZC_ALGO");
  char variant[96];
  snprintf(variant, sizeof variant, "%s%s%s", transport,
           algo_env && algo_env[0] ? "/" : "", algo_env ? algo_env : "");
  bu_report_init(&g_rep, json, bu_coll_names[coll], "zcomm", variant, 0);
  snprintf(g_rep.dtype, sizeof g_rep.dtype, "%s", bu_dtype_names[dt]);
  snprintf(g_rep.op, sizeof g_rep.op, "%s", op_name);
  snprintf(g_rep.extra, sizeof g_rep.extra,
           "\"transport\": \"%s\", \"buffers\": \"%s\", \"inplace\": %s, "
           "\"root\": %d, \"timing\": \"max over ranks of mean time per call\"",
           transport, use_zc ? "zc_mem_alloc" : "malloc",
           inplace ? "true" : "false", root);

  ZC_CHECK(zc_init(&g_comm), "zc_init");
  g_rank = zc_rank(g_comm);
  const int n = zc_size(g_comm);
  g_rep.ranks = n;
  if (g_rank != 0) g_rep.path = NULL; /* rank 0 owns the JSON file */
  if (root < 0 || root >= n) root = 0;

  /* Buffers for the largest size. */
  size_t max_count = bu_coll_count(coll, max_size, ts, n);
  size_t send_bytes = bu_coll_send_elems(coll, max_count, n) * ts;
  size_t recv_bytes = bu_coll_recv_elems(coll, max_count, n) * ts;
  if (send_bytes == 0) send_bytes = ts;
  if (recv_bytes == 0) recv_bytes = ts;
  void* sendbuf = NULL;
  void* recvbuf = NULL;
  if (use_zc) {
    ZC_CHECK(zc_mem_alloc(g_comm, send_bytes, &sendbuf), "zc_mem_alloc(send)");
    ZC_CHECK(zc_mem_alloc(g_comm, recv_bytes, &recvbuf), "zc_mem_alloc(recv)");
  } else {
    sendbuf = malloc(send_bytes);
    recvbuf = malloc(recv_bytes);
    if (!sendbuf || !recvbuf) {
      bu_report_fail(&g_rep, "rank %d: malloc failed", g_rank);
      exit(1);
    }
  }
  memset(sendbuf, 0, send_bytes);
  memset(recvbuf, 0, recv_bytes);
  const int inplace_ok = inplace && coll == BU_ALLREDUCE;
  if (inplace && !inplace_ok && g_rank == 0)
    fprintf(stderr, "warning: --inplace applies to allreduce only\n");

  if (g_rank == 0) {
    printf("# zc_coll: %s ranks=%d transport=%s%s%s buffers=%s%s\n",
           bu_coll_names[coll], n, transport, algo_env ? " ZC_ALGO=" : "",
           algo_env ? algo_env : "", use_zc ? "zc_mem_alloc" : "malloc",
           inplace_ok ? " in-place" : " out-of-place");
    printf("# time = slowest rank's mean per call; GB/s = 1e9 B/s; "
           "busbw factor %.4f\n", bu_busbw_factor(coll, n));
    bu_print_coll_header(stdout);
  }

  char what[160];
  size_t last_size = 0;
  for (size_t sz = min_size; sz <= max_size; sz *= (size_t)factor) {
    size_t count = bu_coll_count(coll, sz, ts, n);
    size_t size = bu_coll_size(coll, count, ts, n);
    if (count == 0 || size == last_size) {
      if (sz > max_size / (size_t)factor) break;
      continue;
    }
    last_size = size;
    void* send = inplace_ok ? recvbuf : sendbuf;
    snprintf(what, sizeof what, "%s of %zu elements (%s)", bu_coll_names[coll],
             count, bu_dtype_names[dt]);

    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = size;
    row.count = size / ts;
    row.wrong = -1;

    if (check) {
      bu_coll_fill(coll, inplace_ok ? recvbuf : (coll == BU_BROADCAST ? recvbuf : sendbuf),
                   count, dt, data_op, g_rank, n, root);
      if (coll != BU_BROADCAST && !inplace_ok)
        memset(recvbuf, 0, bu_coll_recv_elems(coll, count, n) * ts);
      ZC_CHECK(run_coll(coll, send, recvbuf, count, dt, op, root), what);
      long long w = bu_coll_check(coll, recvbuf, count, dt, data_op, g_rank, n,
                                  root);
      long long total = 0;
      ZC_CHECK(zc_allreduce(g_comm, &w, &total, 1, ZC_INT64, ZC_SUM),
               "allreduce of #wrong");
      row.wrong = total;
      if (inplace_ok) /* restore the input for the timed loop */
        bu_coll_fill(coll, recvbuf, count, dt, data_op, g_rank, n, root);
    }
    {
      /* One call more, to name the algorithm the library picked. */
      ZC_CHECK(run_coll(coll, send, recvbuf, count, dt, op, root), what);
      const char* al = zc_last_algorithm(g_comm);
      snprintf(row.algo, sizeof row.algo, "%s", al ? al : "");
    }

    int it_n = bu_iters_for(size, iters, min_iters, BU_COLL_KNEE);
    int it_w = size <= 64 * BU_KiB ? warmup : (warmup < 1 ? warmup : 1);
    row.iters = it_n;
    for (int it = 0; it < it_w; it++)
      ZC_CHECK(run_coll(coll, send, recvbuf, count, dt, op, root), what);
    ZC_CHECK(zc_barrier(g_comm), "barrier");
    double t0 = bu_now_us();
    for (int it = 0; it < it_n; it++)
      ZC_CHECK(run_coll(coll, send, recvbuf, count, dt, op, root), what);
    double mine = (bu_now_us() - t0) / it_n, slowest = 0;
    ZC_CHECK(zc_allreduce(g_comm, &mine, &slowest, 1, ZC_FLOAT64, ZC_MAX),
             "allreduce of times");
    row.time_us = slowest;
    row.algbw = (double)size / (slowest * 1e3);
    row.busbw = row.algbw * bu_busbw_factor(coll, n);
    if (g_rank == 0) {
      bu_print_coll_row(stdout, &row, bu_dtype_names[dt], op_name);
      bu_report_add(&g_rep, &row);
    }
    if (sz > max_size / (size_t)factor) break;
  }

  if (use_zc) {
    ZC_CHECK(zc_mem_free(g_comm, sendbuf), "zc_mem_free");
    ZC_CHECK(zc_mem_free(g_comm, recvbuf), "zc_mem_free");
  } else {
    free(sendbuf);
    free(recvbuf);
  }
  if (g_rank == 0) bu_report_write(&g_rep, 1);
  ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
  return 0;
}
