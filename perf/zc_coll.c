/* zc_coll — nccl-tests-style benchmark of zcomm's collectives (C ABI only).
 *
 *   zcrun -np N zc_coll [--coll NAME|all] [-b 4] [-e 256M] [-f 2 | -i B]
 *                       [-d float32|all] [-o sum|all] [-r 0|all] [-n 20]
 *                       [-w 5] [-c 1] [-a 1] [--reps 3] [--place both]
 *                       [--buffers zc|malloc] [--nonblocking] [--json FILE]
 *                       (--help)
 *
 * Output as nccl-tests: "size count type redop root", then time, algbw,
 * busbw and #wrong out of place, the same in place, and at the end
 * "# Avg bus bandwidth". The first 13 columns are nccl-tests' (scripts that
 * read those read these); zcomm adds, after them, the slowest rank's time and
 * the min and max over repetitions of each half.
 *
 * time: each rank's mean time per call over -n iterations, averaged over the
 * ranks (-a 1, nccl-tests' default; -a 0 rank 0, 2 fastest, 3 slowest). The
 * timed loop runs --reps times per size; time is the median of the
 * repetitions, min and max show the swing. algbw = size / time (GB = 1e9 B),
 * busbw = algbw x the collective's factor (nccl-tests' PERFORMANCE.md).
 *
 * Before timing each half, one call on rank- and index-dependent data is
 * checked on every rank (#wrong: wrong elements summed over ranks). The exit
 * status is 1 when any element was wrong, 2 on a usage error.
 *
 * In place follows NCCL: sendbuf == recvbuf (allreduce, reduce, alltoall),
 * sendbuf = recvbuf + rank's block (allgather), recvbuf = sendbuf + rank's
 * block (reduce_scatter). zc_broadcast has one buffer: it is in place only
 * and its out-of-place half is N/A. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

#define PROG "zc_coll"
#define MAX_REPS 100

static bu_report g_rep;
static zc_comm* g_comm;
static int g_rank = -1;

static void fail_status(const char* what, zc_status s) {
  const char* str = zc_status_string(s);
  const char* detail = g_comm ? zc_last_error(g_comm) : "";
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

typedef struct {
  size_t minb, maxb, stepbytes;
  long factor;
  int coll[6], ncoll;
  int dtype[BU_NDTYPES], ndtype;
  int op[5], nop;
  int root, all_roots;
  int iters, warmup, min_iters, reps, check, average;
  int out_of_place, in_place, use_zc, nonblocking, precise;
  const char* json;
} opts;

static const char* const k_average_names[] = {"rank 0", "average over ranks",
                                              "fastest rank", "slowest rank"};

static void usage(FILE* f) {
  fprintf(f,
"usage: zcrun -np N zc_coll [flags]\n"
"Times zcomm collectives over a range of sizes and checks their results, with\n"
"nccl-tests' flags and columns.\n"
"\n"
"  --coll NAME          allreduce (default), broadcast, reduce, allgather,\n"
"                       reduce_scatter, alltoall, a comma list, or all\n"
"  -b, --minbytes SIZE  smallest size (default 4); sizes in bytes, K, M, G\n"
"                       suffixes are binary (4K = 4096)\n"
"  -e, --maxbytes SIZE  largest size (default 256M); -b above -e is an error\n"
"  -f, --stepfactor F   multiply the size by F (>= 2) from row to row\n"
"                       (default 2)\n"
"  -i, --stepbytes B    add B bytes from row to row instead of -f\n"
"  -d, --datatype T     int8 uint8 int16 uint16 int32 uint32 int64 uint64 bool\n"
"                       float16 bfloat16 float32 (default) float64, or all;\n"
"                       aliases char uchar short ushort int uint half fp16\n"
"                       bf16 float fp32 double fp64\n"
"  -o, --op OP          sum (default) prod min max avg, or all; avg needs a\n"
"                       floating type (skipped for integers and bool under\n"
"                       all); bool's sum and max are or, prod and min are and\n"
"  -r, --root R         root of broadcast and reduce (default 0), or all\n"
"  -n, --iters N        timed iterations per repetition (default 20; above\n"
"                       1 MiB fewer, in proportion to the size; more where\n"
"                       N calls take under 2 ms: as many as fill 2 ms, going\n"
"                       by the slowest rank's warm-up calls)\n"
"      --min-iters N    fewest timed iterations at large sizes (default 3)\n"
"  -w, --warmup_iters N untimed iterations before timing each size\n"
"                       (default 5; at most 1 above 64 KiB), and N calls at\n"
"                       the largest size before each collective's sweep\n"
"      --reps R         repetitions of the timed loop (default 3): time is\n"
"                       their median, min and max columns show the swing\n"
"  -a, --average A      the time column: 0 rank 0, 1 average over ranks\n"
"                       (default, as nccl-tests), 2 fastest, 3 slowest rank\n"
"  -c, --check 0|1      check one call per size and half on rank-dependent\n"
"                       data (default 1); #wrong counts wrong elements\n"
"      --place P        both (default: out-of-place and in-place side by\n"
"                       side), out, or in\n"
"      --inplace        the same as --place in\n"
"      --buffers B      zc: buffers from zc_mem_alloc, registered (default);\n"
"                       malloc: plain memory (the registration cache)\n"
"      --nonblocking    each call as its zc_i* variant followed at once by\n"
"                       zc_wait (the communicator's queue: the waiting\n"
"                       thread runs it), as a framework's blocking call does\n"
"      --json FILE      also write every row to FILE as JSON (rank 0)\n"
"      --precise        times below 10 us with 3 decimals instead of 2 (the\n"
"                       columns keep their widths)\n"
"  -h, --help           this text\n"
"\n"
"Columns: size (bytes; allgather: the gathered buffer, reduce_scatter: the\n"
"scattered input, alltoall: one rank's send buffer), count (elements), type,\n"
"redop, root (-1: none); per half: time (us), algbw = size / time and busbw =\n"
"algbw x factor (GB/s, 1e9 B/s; factor 2(n-1)/n allreduce, (n-1)/n allgather\n"
"reduce_scatter alltoall, 1 broadcast reduce), #wrong; then per half the\n"
"slowest rank's time and the min and max of time over the repetitions.\n"
"Ends with '# Avg bus bandwidth' (mean busbw of every row and half).\n"
"Exit status: 0 ok, 1 a wrong result or a failed call, 2 a usage error.\n"
"Environment: ZC_TRANSPORT=shm|tcp|auto, ZC_ALGO (force an algorithm),\n"
"ZC_SOCKET_IFNAME (tcp interface; lo keeps a one-machine job on loopback).\n");
}

static int has_op(int coll) {
  return coll == BU_ALLREDUCE || coll == BU_REDUCE ||
         coll == BU_REDUCE_SCATTER;
}
static int has_root(int coll) {
  return coll == BU_BROADCAST || coll == BU_REDUCE;
}

/* Parses a comma list of names (or "all") into idx[]; returns the count. */
static int parse_list(const char* flag, const char* text, int (*lookup)(const char*),
                      int nall, int* idx, const char* what) {
  if (strcmp(text, "all") == 0) {
    for (int i = 0; i < nall; i++) idx[i] = i;
    return nall;
  }
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  int n = 0;
  for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    int v = lookup(tok);
    if (v < 0)
      bu_usage_error(PROG, "bad value for %s: '%s' (%s)", flag, tok, what);
    int dup = 0;
    for (int k = 0; k < n; k++) dup |= idx[k] == v;
    if (!dup && n < nall) idx[n++] = v;
  }
  if (n == 0) bu_usage_error(PROG, "bad value for %s: '%s' (%s)", flag, text, what);
  return n;
}

static void parse_args(int argc, char** argv, opts* o) {
  memset(o, 0, sizeof *o);
  o->minb = 4;
  o->maxb = 256 * BU_MiB;
  o->factor = 2;
  o->coll[0] = BU_ALLREDUCE, o->ncoll = 1;
  o->dtype[0] = BU_FLOAT32, o->ndtype = 1;
  o->op[0] = BU_SUM, o->nop = 1;
  o->iters = 20, o->warmup = 5, o->min_iters = 3, o->reps = 3;
  o->check = 1, o->average = 1;
  o->out_of_place = o->in_place = 1, o->use_zc = 1;
  int have_f = 0, have_i = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s, l) (!strcmp(a, s) || !strcmp(a, l))
    if (IS("-h", "--help")) {
      if (bu_first_rank()) usage(stdout);
      exit(0);
    } else if (IS("-b", "--minbytes")) {
      o->minb = bu_arg_size(PROG, a, v), i++;
    } else if (IS("-e", "--maxbytes")) {
      o->maxb = bu_arg_size(PROG, a, v), i++;
    } else if (IS("-f", "--stepfactor")) {
      o->factor = bu_arg_int(PROG, a, v, 2, 1 << 20), i++, have_f = 1;
    } else if (IS("-i", "--stepbytes")) {
      o->stepbytes = bu_arg_size(PROG, a, v), i++, have_i = 1;
      if (o->stepbytes == 0)
        bu_usage_error(PROG, "bad value for %s: '%s' (at least 1 byte)", a, v);
    } else if (IS("-n", "--iters")) {
      o->iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (IS("-w", "--warmup_iters")) {
      o->warmup = (int)bu_arg_int(PROG, a, v, 0, 100000000), i++;
    } else if (!strcmp(a, "--min-iters")) {
      o->min_iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (!strcmp(a, "--reps")) {
      o->reps = (int)bu_arg_int(PROG, a, v, 1, MAX_REPS), i++;
    } else if (IS("-a", "--average")) {
      o->average = (int)bu_arg_int(PROG, a, v, 0, 3), i++;
    } else if (IS("-c", "--check")) {
      o->check = (int)bu_arg_int(PROG, a, v, 0, 1), i++;
    } else if (IS("-r", "--root")) {
      if (v && !strcmp(v, "all")) o->all_roots = 1, i++;
      else o->root = (int)bu_arg_int(PROG, a, v, 0, 1 << 30), i++;
    } else if (IS("-d", "--datatype")) {
      o->ndtype = parse_list(a, bu_arg_str(PROG, a, v), bu_dtype_from_name, BU_NDTYPES,
                             o->dtype, "int8 uint8 int16 uint16 int32 uint32 int64 "
                             "uint64 bool float16 bfloat16 float32 float64, or all"), i++;
    } else if (IS("-o", "--op")) {
      o->nop = parse_list(a, bu_arg_str(PROG, a, v), bu_op_from_name, 5, o->op,
                          "sum prod min max avg, or all"), i++;
    } else if (!strcmp(a, "--coll")) {
      o->ncoll = parse_list(a, bu_arg_str(PROG, a, v), bu_coll_from_name, 6,
                            o->coll, "allreduce broadcast reduce allgather "
                            "reduce_scatter alltoall, or all"), i++;
    } else if (!strcmp(a, "--place")) {
      static const char* const places[] = {"both", "out", "in"};
      const int p = bu_choice_arg(PROG, a, v, places, 3);
      i++;
      o->out_of_place = p != 2;
      o->in_place = p != 1;
    } else if (!strcmp(a, "--inplace")) {
      o->out_of_place = 0, o->in_place = 1;
    } else if (!strcmp(a, "--buffers")) {
      static const char* const buffers[] = {"zc", "malloc"};
      o->use_zc = bu_choice_arg(PROG, a, v, buffers, 2) == 0;
      i++;
    } else if (!strcmp(a, "--nonblocking")) {
      o->nonblocking = 1;
    } else if (!strcmp(a, "--precise")) {
      o->precise = 1;
    } else if (!strcmp(a, "--json")) {
      o->json = bu_arg_str(PROG, a, v), i++;
    } else {
      bu_usage_error(PROG, "unknown flag %s", a);
    }
#undef IS
  }
  if (have_f && have_i) bu_usage_error(PROG, "-f and -i exclude each other");
  if (o->minb > o->maxb)
    bu_usage_error(PROG, "-b %zu is larger than -e %zu: no size to run",
                   o->minb, o->maxb);
}

static int g_nonblocking; /* --nonblocking */

/* The zc_i* variant of coll, completed by zc_wait. */
static zc_status run_coll_nonblocking(int coll, const void* send, void* recv, size_t count,
                                      zc_dtype d, zc_op o, int root) {
  zc_request* req = NULL;
  zc_status st;
  switch (coll) {
    case BU_ALLREDUCE: st = zc_iallreduce(g_comm, send, recv, count, d, o, &req); break;
    case BU_BROADCAST: st = zc_ibroadcast(g_comm, recv, count, d, root, &req); break;
    case BU_REDUCE: st = zc_ireduce(g_comm, send, recv, count, d, o, root, &req); break;
    case BU_ALLGATHER: st = zc_iallgather(g_comm, send, recv, count, d, &req); break;
    case BU_REDUCE_SCATTER: st = zc_ireduce_scatter(g_comm, send, recv, count, d, o, &req); break;
    case BU_ALLTOALL: st = zc_ialltoall(g_comm, send, recv, count, d, &req); break;
    default: return ZC_ERR_INVALID_ARG;
  }
  return st == ZC_OK ? zc_wait(req) : st;
}

static zc_status run_coll(int coll, const void* send, void* recv, size_t count,
                          int dt, int op, int root) {
  zc_dtype d = (zc_dtype)dt;
  zc_op o = (zc_op)op;
  if (g_nonblocking) return run_coll_nonblocking(coll, send, recv, count, d, o, root);
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

/* The next size of the sweep after sz, or 0 past -e (never overflows). */
static size_t next_size(const opts* o, size_t sz) {
  if (o->stepbytes) return sz > o->maxb - o->stepbytes ? 0 : sz + o->stepbytes;
  return sz > o->maxb / (size_t)o->factor ? 0 : sz * (size_t)o->factor;
}

/* Whether some size of the sweep holds an element per rank for some
 * collective and type (else the run would print no row). */
static int any_size(const opts* o, int n) {
  for (size_t sz = o->minb; sz && sz <= o->maxb; sz = next_size(o, sz))
    for (int k = 0; k < o->ncoll; k++)
      for (int d = 0; d < o->ndtype; d++)
        if (bu_coll_count(o->coll[k], sz, bu_dtype_sizes[o->dtype[d]], n) > 0)
          return 1;
  return 0;
}

/* One half of a row (out of place or in place). */
typedef struct {
  int done;
  double time;          /* -a's choice, median over repetitions */
  double tmin, tmax;    /* min, max over repetitions of the same */
  double slowest;       /* slowest rank's mean, median over repetitions */
  double avg;           /* mean over ranks, median over repetitions */
  double algbw, busbw;  /* from time */
  long long wrong;      /* -1: not checked */
  int iters;            /* timed calls per repetition */
  char algo[32];
} half_t;

typedef struct {
  int coll, dt, op, root, n;
  size_t count, size;
  void *sendbuf, *recvbuf;
} call_t;

/* The buffers of one call: NCCL's in-place layouts (see the top). */
static void place(const call_t* c, int inplace, void** send, void** recv) {
  const size_t block = c->count * bu_dtype_sizes[c->dt];
  *send = c->sendbuf;
  *recv = c->recvbuf;
  if (!inplace) return;
  *send = *recv = c->recvbuf;
  if (c->coll == BU_ALLGATHER) *send = (char*)c->recvbuf + (size_t)g_rank * block;
  if (c->coll == BU_REDUCE_SCATTER) *recv = (char*)c->recvbuf + (size_t)g_rank * block;
}

static void measure(const opts* o, const call_t* c, int inplace, half_t* h,
                    const char* what) {
  const int data_op = has_op(c->coll) ? c->op : BU_SUM;
  const size_t ts = bu_dtype_sizes[c->dt];
  void *send, *recv;
  place(c, inplace, &send, &recv);
  memset(h, 0, sizeof *h);
  h->done = 1;
  h->wrong = -1;
  if (o->check) {
    if (c->coll == BU_ALLGATHER && inplace) {
      memset(recv, 0, bu_coll_recv_elems(c->coll, c->count, c->n) * ts);
      bu_fill(send, c->count, c->dt, g_rank, 0, data_op);
    } else {
      bu_coll_fill(c->coll, c->coll == BU_BROADCAST ? recv : send, c->count,
                   c->dt, data_op, g_rank, c->n, c->root);
      if (!inplace && c->coll != BU_BROADCAST)
        memset(recv, 0, bu_coll_recv_elems(c->coll, c->count, c->n) * ts);
    }
    ZC_CHECK(run_coll(c->coll, send, recv, c->count, c->dt, c->op, c->root), what);
    long long w = bu_coll_check(c->coll, recv, c->count, c->dt, data_op,
                                g_rank, c->n, c->root);
    ZC_CHECK(zc_allreduce(g_comm, &w, &h->wrong, 1, ZC_INT64, ZC_SUM),
             "allreduce of #wrong");
  }
  const int it_w = c->size <= 64 * BU_KiB ? o->warmup
                                          : (o->warmup < 1 ? o->warmup : 1);
  double t_warm = 0;
  for (int it = 0; it < it_w; it++) {
    if (it == 1) t_warm = bu_now_us();
    ZC_CHECK(run_coll(c->coll, send, recv, c->count, c->dt, c->op, c->root), what);
  }
  int it_n = bu_iters_for(c->size, o->iters, o->min_iters, BU_COLL_KNEE);
  if (it_w > 1) {  /* bu_iters_to_fill: the slowest rank's warm-up call */
    double per = (bu_now_us() - t_warm) / (it_w - 1), slowest_per = 0;
    ZC_CHECK(zc_allreduce(g_comm, &per, &slowest_per, 1, ZC_FLOAT64, ZC_MAX),
             "allreduce of warm-up times");
    it_n = bu_iters_to_fill(it_n, slowest_per);
  }
  h->iters = it_n;
  double shown[MAX_REPS], slowest[MAX_REPS], avg[MAX_REPS];
  for (int r = 0; r < o->reps; r++) {
    ZC_CHECK(zc_barrier(g_comm), "barrier before timing");
    double t0 = bu_now_us();
    for (int it = 0; it < it_n; it++)
      ZC_CHECK(run_coll(c->coll, send, recv, c->count, c->dt, c->op, c->root), what);
    double mine = (bu_now_us() - t0) / it_n;
    if (r == 0) {
      const char* al = zc_last_algorithm(g_comm);
      snprintf(h->algo, sizeof h->algo, "%s", al ? al : "");
    }
    /* Mean over ranks (nccl-tests), and the fastest and slowest rank. */
    double sum = 0, ext[2] = {mine, -mine}, mx[2] = {0, 0};
    ZC_CHECK(zc_allreduce(g_comm, &mine, &sum, 1, ZC_FLOAT64, ZC_SUM),
             "allreduce of times");
    ZC_CHECK(zc_allreduce(g_comm, ext, mx, 2, ZC_FLOAT64, ZC_MAX),
             "allreduce of times");
    avg[r] = sum / c->n;
    slowest[r] = mx[0];
    const double pick[4] = {mine, avg[r], -mx[1], mx[0]};
    shown[r] = pick[o->average];
  }
  double lo, hi;
  bu_min_med_max(shown, o->reps, &h->tmin, &h->time, &h->tmax);
  bu_min_med_max(slowest, o->reps, &lo, &h->slowest, &hi);
  bu_min_med_max(avg, o->reps, &lo, &h->avg, &hi);
  h->algbw = (double)c->size / (h->time * 1e3);
  h->busbw = h->algbw * bu_busbw_factor(c->coll, c->n);
}

/* As nccl-tests does before a sweep: -w calls at the largest size the sweep
 * reaches (first type and op), so that the first sizes are not timed while
 * connections and buffers are still cold (tcp windows grow over the first
 * megabytes a connection carries; the per-size warm-up is 1 call above
 * 64 KiB). */
static void warm_up_largest(const opts* o, int coll, int n, void* send, void* recv) {
  size_t largest = 0;
  for (size_t sz = o->minb; sz && sz <= o->maxb; sz = next_size(o, sz)) largest = sz;
  const int dt = o->dtype[0];
  const int op = has_op(coll) ? o->op[0] : BU_SUM;
  const size_t count = bu_coll_count(coll, largest, bu_dtype_sizes[dt], n);
  if (count == 0 || largest <= 64 * BU_KiB) return;
  const int root = has_root(coll) ? o->root : 0;
  char what[96];
  snprintf(what, sizeof what, "%s warm-up of %zu elements", bu_coll_names[coll], count);
  for (int it = 0; it < o->warmup; it++)
    ZC_CHECK(run_coll(coll, send, recv, count, dt, op == BU_AVG ? BU_SUM : op, root), what);
}

static void print_header(const opts* o, int coll, int n) {
  printf("#\n# Collective: %s, %d ranks, busbw factor %.4f%s\n", bu_coll_names[coll],
         n, bu_busbw_factor(coll, n),
         coll == BU_BROADCAST && o->out_of_place
             ? " (zc_broadcast has one buffer: out-of-place N/A)"
             : "");
  /* Each label right-aligned over its group of columns (widths of the rows
   * below: 52 for the first five, 32 per half, 28 per spread). */
  printf("#%80s%32s%28s%28s\n", "out-of-place", "in-place",
         "out-of-place", "in-place");
  printf("#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s  %8s %8s %8s"
         "  %8s %8s %8s\n", "size", "count", "type", "redop", "root", "time",
         "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
         "slowest", "min", "max", "slowest", "min", "max");
  printf("#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s  %8s %8s %8s"
         "  %8s %8s %8s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
         "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)",
         "(us)", "(us)", "(us)");
}

static void print_half(const half_t* h, int precise) {
  if (!h->done) {
    printf(" %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  char wrong[24];
  if (h->wrong < 0) snprintf(wrong, sizeof wrong, "N/A");
  else snprintf(wrong, sizeof wrong, "%lld", h->wrong);
  printf(" %8.*f %7.2f %7.2f %6s", bu_us_decimals(h->time, precise), h->time, h->algbw,
         h->busbw, wrong);
}

static void print_spread(const half_t* h, int precise) {
  if (!h->done) printf("  %8s %8s %8s", "N/A", "N/A", "N/A");
  else
    printf("  %8.*f %8.*f %8.*f", bu_us_decimals(h->slowest, precise), h->slowest,
           bu_us_decimals(h->tmin, precise), h->tmin, bu_us_decimals(h->tmax, precise), h->tmax);
}

/* The JSON members of one half. */
static void json_half(char* x, size_t cap, const char* pre, const half_t* h) {
  char k[48];
#define NUM(name, v) (snprintf(k, sizeof k, "%s%s", pre, name), bu_extra_num(x, cap, k, v))
  NUM("time_us", h->slowest);
  NUM("time_avg_us", h->avg);
  NUM("time_shown_us", h->time);
  NUM("time_shown_min_us", h->tmin);
  NUM("time_shown_max_us", h->tmax);
  NUM("algbw_shown_GBps", h->algbw);
  NUM("busbw_shown_GBps", h->busbw);
  NUM("wrong", (double)h->wrong);
#undef NUM
}

int main(int argc, char** argv) {
  opts o;
  parse_args(argc, argv, &o);

  const char* transport = getenv("ZC_TRANSPORT");
  if (!transport || !transport[0]) transport = "auto";
  const char* algo_env = getenv("ZC_ALGO");
  char variant[96];
  snprintf(variant, sizeof variant, "%s%s%s", transport,
           algo_env && algo_env[0] ? "/" : "", algo_env ? algo_env : "");
  bu_report_init(&g_rep, o.json, o.ncoll == 1 ? bu_coll_names[o.coll[0]] : "collectives",
                 "zcomm", variant, 0);
  snprintf(g_rep.dtype, sizeof g_rep.dtype, "%s",
           o.ndtype == 1 ? bu_dtype_names[o.dtype[0]] : "several");
  snprintf(g_rep.op, sizeof g_rep.op, "%s",
           o.nop > 1 ? "several"
           : (o.ncoll == 1 && !has_op(o.coll[0])) ? "none" : bu_op_names[o.op[0]]);
  snprintf(g_rep.extra, sizeof g_rep.extra,
           "\"transport\": \"%s\", \"buffers\": \"%s\", \"nonblocking\": %s, \"places\": \"%s\", "
           "\"reps\": %d, \"time_shown\": \"%s\", \"timing\": \"time_us: "
           "slowest rank's mean time per call (median over reps), as the peer "
           "programs; time_avg_us: mean over ranks (nccl-tests); time_shown_us: "
           "the printed time column; ip_*: in place\"",
           transport, o.use_zc ? "zc_mem_alloc" : "malloc", o.nonblocking ? "true" : "false",
           o.out_of_place && o.in_place ? "both" : o.in_place ? "in" : "out",
           o.reps, k_average_names[o.average]);

  g_nonblocking = o.nonblocking;
  ZC_CHECK(zc_init(&g_comm), "zc_init");
  g_rank = zc_rank(g_comm);
  const int n = zc_size(g_comm);
  g_rep.ranks = n;
  if (g_rank != 0) g_rep.path = NULL; /* rank 0 owns the JSON file */
  if (o.root >= n) {
    if (g_rank == 0)
      fprintf(stderr, PROG ": bad value for -r: %d (the job has %d ranks: 0 to %d)\n",
              o.root, n, n - 1);
    ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
    return 2;
  }

  if (!any_size(&o, n)) {
    if (g_rank == 0)
      fprintf(stderr, PROG ": no size from -b %zu to -e %zu holds one element "
              "per rank of the chosen type(s) at %d ranks: nothing to measure\n",
              o.minb, o.maxb, n);
    ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
    return 2;
  }

  /* Buffers for the largest call of any selected collective and type. */
  size_t bytes = 64;
  for (int k = 0; k < o.ncoll; k++)
    for (int d = 0; d < o.ndtype; d++) {
      const size_t ts = bu_dtype_sizes[o.dtype[d]];
      const size_t cnt = bu_coll_count(o.coll[k], o.maxb, ts, n);
      size_t s = bu_coll_send_elems(o.coll[k], cnt, n) * ts;
      size_t r = bu_coll_recv_elems(o.coll[k], cnt, n) * ts;
      if (s > bytes) bytes = s;
      if (r > bytes) bytes = r;
    }
  void *sendbuf = NULL, *recvbuf = NULL;
  if (o.use_zc) {
    ZC_CHECK(zc_mem_alloc(g_comm, bytes, &sendbuf), "zc_mem_alloc(send)");
    ZC_CHECK(zc_mem_alloc(g_comm, bytes, &recvbuf), "zc_mem_alloc(recv)");
  } else {
    sendbuf = malloc(bytes);
    recvbuf = malloc(bytes);
    if (!sendbuf || !recvbuf) {
      bu_report_fail(&g_rep, "rank %d: malloc of %zu bytes failed", g_rank, bytes);
      zc_abort(g_comm);
      return 1;
    }
  }
  memset(sendbuf, 0, bytes);
  memset(recvbuf, 0, bytes);

  if (g_rank == 0) {
    printf("# zc_coll: %d ranks, transport=%s%s%s, buffers=%s%s, -n %d -w %d "
           "--reps %d, check %s\n", n, transport, algo_env ? " ZC_ALGO=" : "",
           algo_env ? algo_env : "", o.use_zc ? "zc_mem_alloc" : "malloc",
           o.nonblocking ? ", nonblocking (zc_i* + zc_wait)" : "",
           o.iters, o.warmup, o.reps, o.check ? "on" : "off");
    printf("# time: mean per call, %s (-a %d), median of %d repetitions; "
           "slowest: the slowest rank's; min/max: over the repetitions; "
           "GB/s = 1e9 B/s\n", k_average_names[o.average], o.average, o.reps);
  }

  long long wrong_total = 0;
  double busbw_sum = 0;
  long busbw_n = 0;
  char what[160];
  for (int k = 0; k < o.ncoll; k++) {
    const int coll = o.coll[k];
    double coll_sum = 0;
    long coll_n = 0;
    if (g_rank == 0) print_header(&o, coll, n);
    const int nops = has_op(coll) ? o.nop : 1;
    const int nroots = has_root(coll) ? (o.all_roots ? n : 1) : 1;
    warm_up_largest(&o, coll, n, sendbuf, recvbuf);
    for (int d = 0; d < o.ndtype; d++) {
      const int dt = o.dtype[d];
      const size_t ts = bu_dtype_sizes[dt];
      for (int p = 0; p < nops; p++) {
        const int op = has_op(coll) ? o.op[p] : BU_SUM;
        if (has_op(coll) && op == BU_AVG && !bu_dtype_is_float(dt)) {
          if (g_rank == 0)
            printf("# %s %s avg: skipped (avg needs a floating type)\n",
                   bu_coll_names[coll], bu_dtype_names[dt]);
          continue;
        }
        for (int q = 0; q < nroots; q++) {
          const int root = has_root(coll) ? (o.all_roots ? q : o.root) : -1;
          size_t last_size = 0;
          for (size_t sz = o.minb; sz && sz <= o.maxb; sz = next_size(&o, sz)) {
            call_t c = {coll, dt, op, root < 0 ? 0 : root, n, 0, 0, sendbuf, recvbuf};
            c.count = bu_coll_count(coll, sz, ts, n);
            c.size = bu_coll_size(coll, c.count, ts, n);
            if (c.count > 0 && c.size != last_size) {
              last_size = c.size;
              snprintf(what, sizeof what, "%s of %zu elements (%s)",
                       bu_coll_names[coll], c.count, bu_dtype_names[dt]);
              half_t oop, ip;
              memset(&oop, 0, sizeof oop);
              memset(&ip, 0, sizeof ip);
              if (o.out_of_place && coll != BU_BROADCAST) measure(&o, &c, 0, &oop, what);
              if (o.in_place || (coll == BU_BROADCAST && o.out_of_place))
                measure(&o, &c, 1, &ip, what);
              if (g_rank == 0) {
                const char* opname = has_op(coll) ? bu_op_names[op] : "none";
                printf("%12zu %13zu %9s %7s %7d", c.size, c.size / ts,
                       bu_dtype_names[dt], opname, root);
                print_half(&oop, o.precise);
                print_half(&ip, o.precise);
                print_spread(&oop, o.precise);
                print_spread(&ip, o.precise);
                printf("\n");
                fflush(stdout);
                /* JSON: the first measured half at the top level (the
                 * slowest rank's time, as every peer program reports). */
                const half_t* top = oop.done ? &oop : &ip;
                bu_row row;
                memset(&row, 0, sizeof row);
                row.size = c.size;
                row.count = c.size / ts;
                row.iters = top->iters;
                row.time_us = top->slowest;
                row.algbw = (double)c.size / (top->slowest * 1e3);
                row.busbw = row.algbw * bu_busbw_factor(coll, n);
                row.wrong = (oop.done && oop.wrong > 0 ? oop.wrong : 0) +
                            (ip.done && ip.wrong > 0 ? ip.wrong : 0);
                if (o.check == 0) row.wrong = -1;
                snprintf(row.algo, sizeof row.algo, "%s", top->algo);
                bu_extra_str(row.extra, sizeof row.extra, "coll", bu_coll_names[coll]);
                bu_extra_str(row.extra, sizeof row.extra, "dtype", bu_dtype_names[dt]);
                bu_extra_str(row.extra, sizeof row.extra, "op", opname);
                bu_extra_num(row.extra, sizeof row.extra, "root", root);
                bu_extra_str(row.extra, sizeof row.extra, "place",
                             oop.done ? "out" : "in");
                if (oop.done) json_half(row.extra, sizeof row.extra, "oop_", &oop);
                if (ip.done) json_half(row.extra, sizeof row.extra, "ip_", &ip);
                bu_report_add(&g_rep, &row);
              }
              const half_t* halves[2] = {&oop, &ip};
              for (int hh = 0; hh < 2; hh++) {
                if (!halves[hh]->done) continue;
                if (halves[hh]->wrong > 0) wrong_total += halves[hh]->wrong;
                coll_sum += halves[hh]->busbw, coll_n++;
              }
            }
          }
        }
      }
    }
    if (g_rank == 0 && o.ncoll > 1 && coll_n)
      printf("# %s: avg bus bandwidth %.4g GB/s\n", bu_coll_names[coll],
             coll_sum / coll_n);
    busbw_sum += coll_sum;
    busbw_n += coll_n;
  }

  if (o.use_zc) {
    ZC_CHECK(zc_mem_free(g_comm, sendbuf), "zc_mem_free");
    ZC_CHECK(zc_mem_free(g_comm, recvbuf), "zc_mem_free");
  } else {
    free(sendbuf);
    free(recvbuf);
  }
  if (g_rank == 0) {
    printf("# Out of bounds values : %lld %s\n", wrong_total,
           wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.4g\n", busbw_n ? busbw_sum / busbw_n : 0.0);
    printf("#\n");
    if (wrong_total)
      bu_report_fail(&g_rep, "zcomm: %lld wrong elements (see #wrong)", wrong_total);
    else
      bu_report_write(&g_rep, 1);
  }
  ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
  return wrong_total ? 1 : 0;
}
