/* zc_p2p — OSU-style point-to-point benchmark of zcomm (C ABI only).
 *
 *   zcrun -np 2 zc_p2p [-t latency,bw,bibw|all] [-b 1] [-e 1G] [-n 1000]
 *         [--bw-iters 50] [--min-iters 5] [-W 64] [-w 10] [--reps 3]
 *         [--buffers zc|malloc] [--mode zerocopy|copy] [--json FILE] (--help)
 *
 * Three tests, each its own table as OSU's programs print them:
 *   latency (osu_latency): ping-pong of zc_send/zc_recv between ranks 0 and
 *     1; one-way latency = round trip / 2, in us;
 *   bw (osu_bw): rank 0 posts a window of W zc_isend, rank 1 a window of W
 *     zc_irecv, both wait for all, rank 1 answers with a 4-byte ack;
 *     bandwidth = bytes of the windows / time, MB/s = 1e6 B/s;
 *   bibw (osu_bibw): both ranks post W zc_irecv and W zc_isend and wait for
 *     all; bandwidth counts both directions.
 * Above 4 MiB the window shrinks so that one window holds at most 256 MiB.
 * Each test's timed loop runs --reps times per size: the value is their
 * median, min and max show the swing.
 *
 * Buffers come from zc_mem_alloc (registered: the zero-copy path) unless
 * --buffers malloc. --mode copy reproduces a framework that is not zero-copy
 * (paper Fig. 8): before every send the sender memcpy's the tensor from a
 * malloc'd buffer into registered memory, inside the timed loop (in bw and
 * bibw into the window's own slot, since the earlier sends are in flight).
 *
 * The transport is chosen by the library from ZC_TRANSPORT (shm|tcp|auto).
 * Before timing each size, one exchange in each direction is checked byte
 * by byte (#wrong); the exit status is 1 when a byte was wrong, 2 on a usage
 * error. Ranks above 1 only initialize and finalize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

#define PROG "zc_p2p"
#define MAX_REPS 100
#define MAX_SIZES 64
#define MAX_WINDOW 4096

enum { TAG_LAT = 11, TAG_BW = 12, TAG_ACK = 13, TAG_CHECK = 14 };
enum { T_LAT = 1, T_BW = 2, T_BIBW = 4 };

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
  size_t min_size, max_size;
  int tests, iters, bw_iters, min_iters, window, warmup, reps;
  int use_zc, copy_mode, precise;
  const char* json;
} opts;

static void usage(FILE* f) {
  fprintf(f,
"usage: zcrun -np 2 zc_p2p [flags]\n"
"Point-to-point latency and bandwidth of zc_send/zc_recv and zc_isend/zc_irecv\n"
"between ranks 0 and 1, as OSU's osu_latency, osu_bw and osu_bibw.\n"
"\n"
"  -t, --test T         latency, bw, bibw, a comma list, or all (default)\n"
"  -b, --min-size SIZE  smallest message (default 1); sizes in bytes, K, M, G\n"
"                       suffixes are binary (4K = 4096); doubled row to row\n"
"  -e, --max-size SIZE  largest message (default 1G); -b above -e is an error\n"
"  -m MIN:MAX           both at once, as OSU's -m (MAX alone: -e)\n"
"  -n, -i, --iters N    ping-pongs per repetition of the latency test\n"
"                       (default 1000; above 64 KiB fewer, in proportion)\n"
"      --bw-iters N     windows per repetition of bw and bibw (default 50;\n"
"                       fewer when a window holds more than 16 MiB)\n"
"      --min-iters N    fewest iterations at large sizes (default 5)\n"
"  -W, --window N       messages in flight per window in bw and bibw\n"
"                       (default 64; at most 256 MiB per window)\n"
"  -w, -x, --warmup N   untimed ping-pongs before timing each size (default\n"
"                       10; at most 2 above 64 KiB); bw/bibw: 2 windows, 1\n"
"                       above 64 KiB\n"
"      --reps R         repetitions of each timed loop (default 3): the value\n"
"                       is their median, min and max columns show the swing\n"
"      --buffers B      zc: buffers from zc_mem_alloc, registered (default);\n"
"                       malloc: plain memory (the registration cache)\n"
"      --mode M         zerocopy (default) or copy: the sender first memcpy's\n"
"                       each message from a malloc'd buffer (a framework that\n"
"                       is not zero-copy)\n"
"      --skip-latency   the same as leaving latency out of -t\n"
"      --skip-bw        the same as leaving bw out of -t\n"
"      --json FILE      also write the rows to FILE as JSON (rank 0)\n"
"      --precise        latencies below 10 us with 3 decimals instead of 2\n"
"                       (the columns keep their widths)\n"
"  -h, --help           this text\n"
"\n"
"Tables: latency in us (one way: round trip / 2); bw and bibw in MB/s\n"
"(1e6 B/s; bibw counts both directions); min and max over the repetitions;\n"
"#wrong: wrong bytes of one checked exchange each way per size.\n"
"Exit status: 0 ok, 1 a wrong byte or a failed call, 2 a usage error.\n"
"Environment: ZC_TRANSPORT=shm|tcp|auto, ZC_SOCKET_IFNAME (tcp interface; lo\n"
"keeps a one-machine job on loopback). Needs 2 ranks; more only idle.\n");
}

static int test_from_name(const char* s) {
  if (!strcmp(s, "latency") || !strcmp(s, "lat")) return T_LAT;
  if (!strcmp(s, "bw")) return T_BW;
  if (!strcmp(s, "bibw")) return T_BIBW;
  if (!strcmp(s, "all")) return T_LAT | T_BW | T_BIBW;
  return -1;
}

static void parse_args(int argc, char** argv, opts* o) {
  memset(o, 0, sizeof *o);
  o->min_size = 1, o->max_size = BU_GiB;
  o->tests = T_LAT | T_BW | T_BIBW;
  o->iters = 1000, o->bw_iters = 50, o->min_iters = 5, o->window = 64;
  o->warmup = 10, o->reps = 3, o->use_zc = 1;
  int skip = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s, l) (!strcmp(a, s) || !strcmp(a, l))
    if (IS("-h", "--help")) {
      if (bu_first_rank()) usage(stdout);
      exit(0);
    } else if (IS("-t", "--test")) {
      char buf[128];
      snprintf(buf, sizeof buf, "%s", bu_arg_str(PROG, a, v));
      i++;
      o->tests = 0;
      for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok;
           tok = strtok_r(NULL, ",", &save)) {
        int t = test_from_name(tok);
        if (t < 0)
          bu_usage_error(PROG, "bad value for %s: '%s' (latency, bw, bibw, or all)",
                         a, tok);
        o->tests |= t;
      }
      if (!o->tests)
        bu_usage_error(PROG, "bad value for %s: '%s' (latency, bw, bibw, or all)", a, v);
    } else if (IS("-b", "--min-size")) {
      o->min_size = bu_arg_size(PROG, a, v), i++;
    } else if (IS("-e", "--max-size")) {
      o->max_size = bu_arg_size(PROG, a, v), i++;
    } else if (!strcmp(a, "-m")) {
      const char* r = bu_arg_str(PROG, a, v);
      const char* colon = strchr(r, ':');
      i++;
      if (colon) {
        char lo[64];
        snprintf(lo, sizeof lo, "%.*s", (int)(colon - r), r);
        o->min_size = bu_arg_size(PROG, "-m (MIN)", lo);
        o->max_size = bu_arg_size(PROG, "-m (MAX)", colon + 1);
      } else {
        o->max_size = bu_arg_size(PROG, a, r);
      }
    } else if (IS("-n", "--iters") || !strcmp(a, "-i")) {
      o->iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (!strcmp(a, "--bw-iters")) {
      o->bw_iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (!strcmp(a, "--min-iters")) {
      o->min_iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (IS("-W", "--window")) {
      o->window = (int)bu_arg_int(PROG, a, v, 1, MAX_WINDOW), i++;
    } else if (IS("-w", "--warmup") || !strcmp(a, "-x")) {
      o->warmup = (int)bu_arg_int(PROG, a, v, 0, 100000000), i++;
    } else if (!strcmp(a, "--reps")) {
      o->reps = (int)bu_arg_int(PROG, a, v, 1, MAX_REPS), i++;
    } else if (!strcmp(a, "--skip-latency")) {
      skip |= T_LAT;
    } else if (!strcmp(a, "--skip-bw")) {
      skip |= T_BW;
    } else if (!strcmp(a, "--buffers")) {
      static const char* const buffers[] = {"zc", "malloc"};
      o->use_zc = bu_choice_arg(PROG, a, v, buffers, 2) == 0;
      i++;
    } else if (!strcmp(a, "--mode")) {
      static const char* const modes[] = {"zerocopy", "copy"};
      o->copy_mode = bu_choice_arg(PROG, a, v, modes, 2);
      i++;
    } else if (!strcmp(a, "--json")) {
      o->json = bu_arg_str(PROG, a, v), i++;
    } else if (!strcmp(a, "--precise")) {
      o->precise = 1;
    } else {
      bu_usage_error(PROG, "unknown flag %s", a);
    }
#undef IS
  }
  o->tests &= ~skip;
  if (!o->tests) bu_usage_error(PROG, "every test is skipped: nothing to run");
  if (o->min_size < 1) bu_usage_error(PROG, "bad value for -b: 0 (at least 1 byte)");
  if (o->min_size > o->max_size)
    bu_usage_error(PROG, "-b %zu is larger than -e %zu: no size to run",
                   o->min_size, o->max_size);
}

/* Messages in one bw/bibw window of sz bytes (at most 256 MiB above 4 MiB). */
static int window_for(const opts* o, size_t sz) {
  int win = o->window;
  if (sz > 4 * BU_MiB) {
    size_t cap = (256 * BU_MiB) / sz;
    if (cap < 1) cap = 1;
    if ((size_t)win > cap) win = (int)cap;
  }
  return win;
}

static void* alloc_buf(size_t bytes, int use_zc) {
  void* p = NULL;
  if (bytes == 0) bytes = 1;
  if (use_zc) {
    ZC_CHECK(zc_mem_alloc(g_comm, bytes, &p), "zc_mem_alloc");
  } else {
    p = malloc(bytes);
    if (!p) {
      bu_report_fail(&g_rep, "rank %d: malloc(%zu) failed", g_rank, bytes);
      zc_abort(g_comm);
      exit(1);
    }
  }
  memset(p, 0, bytes);
  return p;
}

static void free_buf(void* p, int use_zc) {
  if (!p) return;
  if (use_zc) ZC_CHECK(zc_mem_free(g_comm, p), "zc_mem_free");
  else free(p);
}

typedef struct {
  void *sbuf, *rbuf, *src; /* src: copy mode's malloc'd tensor */
  zc_request** reqs;       /* 2 x window */
} bufs;

/* One exchange in each direction, checked byte by byte on both sides;
 * rank 0 returns the wrong bytes of both. */
static long long check_size(const opts* o, const bufs* b, size_t sz) {
  char what[96];
  const int peer = 1 - g_rank;
  void* fill_target = o->copy_mode ? b->src : b->sbuf;
  snprintf(what, sizeof what, "check exchange of %zu bytes", sz);
  long long wrong = 0;
  if (g_rank == 0) {
    bu_fill_bytes(fill_target, sz, 0);
    if (o->copy_mode) memcpy(b->sbuf, b->src, sz);
    ZC_CHECK(zc_send(g_comm, b->sbuf, sz, peer, TAG_CHECK), what);
    memset(b->rbuf, 0, sz);
    ZC_CHECK(zc_recv(g_comm, b->rbuf, sz, peer, TAG_CHECK), what);
    wrong += (long long)bu_check_bytes(b->rbuf, sz, 1);
    long long other = 0;
    ZC_CHECK(zc_recv(g_comm, &other, sizeof other, peer, TAG_CHECK), what);
    wrong += other;
  } else {
    memset(b->rbuf, 0, sz);
    ZC_CHECK(zc_recv(g_comm, b->rbuf, sz, peer, TAG_CHECK), what);
    long long mine = (long long)bu_check_bytes(b->rbuf, sz, 0);
    bu_fill_bytes(fill_target, sz, 1);
    if (o->copy_mode) memcpy(b->sbuf, b->src, sz);
    ZC_CHECK(zc_send(g_comm, b->sbuf, sz, peer, TAG_CHECK), what);
    ZC_CHECK(zc_send(g_comm, &mine, sizeof mine, peer, TAG_CHECK), what);
  }
  return wrong;
}

/* The timed loops return the elapsed time in us (rank 0's is reported). */
static double run_latency(const opts* o, const bufs* b, size_t sz, int n,
                          int warm) {
  char what[96];
  const int peer = 1 - g_rank;
  snprintf(what, sizeof what, "ping-pong of %zu bytes", sz);
  double t0 = 0;
  for (int it = -warm; it < n; it++) {
    if (it == 0) t0 = bu_now_us();
    if (g_rank == 0) {
      if (o->copy_mode) memcpy(b->sbuf, b->src, sz);
      ZC_CHECK(zc_send(g_comm, b->sbuf, sz, peer, TAG_LAT), what);
      ZC_CHECK(zc_recv(g_comm, b->rbuf, sz, peer, TAG_LAT), what);
    } else {
      ZC_CHECK(zc_recv(g_comm, b->rbuf, sz, peer, TAG_LAT), what);
      if (o->copy_mode) memcpy(b->sbuf, b->src, sz);
      ZC_CHECK(zc_send(g_comm, b->sbuf, sz, peer, TAG_LAT), what);
    }
  }
  return bu_now_us() - t0;
}

/* Posts the window's sends: copy mode fills slot k of sbuf first (the
 * earlier sends still own their slots), zero-copy sends sbuf each time. */
static void post_sends(const opts* o, const bufs* b, size_t sz, int win,
                       zc_request** reqs, const char* what) {
  const int peer = 1 - g_rank;
  for (int k = 0; k < win; k++) {
    char* p = (char*)b->sbuf + (o->copy_mode ? (size_t)k * sz : 0);
    if (o->copy_mode) memcpy(p, b->src, sz);
    ZC_CHECK(zc_isend(g_comm, p, sz, peer, TAG_BW, &reqs[k]), what);
  }
}

static void post_recvs(const bufs* b, size_t sz, int win, zc_request** reqs,
                       const char* what) {
  /* All into one buffer, as OSU's osu_bw and osu_bibw. */
  for (int k = 0; k < win; k++)
    ZC_CHECK(zc_irecv(g_comm, b->rbuf, sz, 1 - g_rank, TAG_BW, &reqs[k]), what);
}

static void wait_all(zc_request** reqs, int n, const char* what) {
  for (int k = 0; k < n; k++) ZC_CHECK(zc_wait(reqs[k]), what);
}

static double run_bw(const opts* o, const bufs* b, size_t sz, int win, int n,
                     int warm, int bidir) {
  char what[128];
  const int peer = 1 - g_rank;
  int ack = 0;
  snprintf(what, sizeof what, "%s window of %d x %zu bytes",
           bidir ? "bibw" : "bw", win, sz);
  double t0 = 0;
  for (int it = -warm; it < n; it++) {
    if (it == 0) t0 = bu_now_us();
    if (bidir) {
      post_recvs(b, sz, win, b->reqs, what);
      post_sends(o, b, sz, win, b->reqs + win, what);
      wait_all(b->reqs, 2 * win, what);
    } else if (g_rank == 0) {
      post_sends(o, b, sz, win, b->reqs, what);
      wait_all(b->reqs, win, what);
      ZC_CHECK(zc_recv(g_comm, &ack, sizeof ack, peer, TAG_ACK), what);
    } else {
      post_recvs(b, sz, win, b->reqs, what);
      wait_all(b->reqs, win, what);
      ZC_CHECK(zc_send(g_comm, &ack, sizeof ack, peer, TAG_ACK), what);
    }
  }
  return bu_now_us() - t0;
}

static const char* const k_titles[3] = {
    "latency (osu_latency): ping-pong of zc_send/zc_recv, one-way latency = "
    "round trip / 2",
    "bw (osu_bw): window of zc_isend, zc_irecv, 4-byte ack per window; "
    "MB/s = 1e6 B/s",
    "bibw (osu_bibw): windows of zc_isend and zc_irecv both ways at once; "
    "MB/s = 1e6 B/s, both directions"};

int main(int argc, char** argv) {
  opts o;
  parse_args(argc, argv, &o);

  const char* transport = getenv("ZC_TRANSPORT");
  if (!transport || !transport[0]) transport = "auto";
  char variant[96];
  snprintf(variant, sizeof variant, "%s/%s/%s", transport,
           o.copy_mode ? "copy" : "zerocopy", o.use_zc ? "zc_mem" : "malloc");
  bu_report_init(&g_rep, o.json, "p2p", "zcomm", variant, 0);
  g_rep.is_p2p = 1;
  snprintf(g_rep.extra, sizeof g_rep.extra,
           "\"transport\": \"%s\", \"mode\": \"%s\", \"buffers\": \"%s\", "
           "\"window\": %d, \"reps\": %d, \"tests\": \"%s%s%s\", \"timing\": "
           "\"median over reps; bw_GBps: osu_bw's window of zc_isend\"",
           transport, o.copy_mode ? "copy" : "zerocopy",
           o.use_zc ? "zc_mem_alloc" : "malloc", o.window, o.reps,
           o.tests & T_LAT ? "latency " : "", o.tests & T_BW ? "bw " : "",
           o.tests & T_BIBW ? "bibw" : "");

  ZC_CHECK(zc_init(&g_comm), "zc_init");
  g_rank = zc_rank(g_comm);
  const int size = zc_size(g_comm);
  g_rep.ranks = size;
  if (g_rank != 0) g_rep.path = NULL; /* rank 0 owns the JSON file */
  if (size < 2) {
    bu_report_fail(&g_rep, PROG " needs 2 ranks (zcrun -np 2), got %d", size);
    ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
    return 2;
  }
  if (g_rank > 1) { /* idle ranks */
    ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
    return 0;
  }

  /* The sizes, and the staging room copy mode needs for a whole window. */
  size_t sizes[MAX_SIZES];
  int nsizes = 0;
  size_t send_bytes = o.max_size;
  for (size_t sz = o.min_size; nsizes < MAX_SIZES; sz *= 2) {
    sizes[nsizes++] = sz;
    if (o.copy_mode && (o.tests & (T_BW | T_BIBW)) &&
        (size_t)window_for(&o, sz) * sz > send_bytes)
      send_bytes = (size_t)window_for(&o, sz) * sz;
    if (sz > o.max_size / 2) break;
  }
  bufs b;
  b.sbuf = alloc_buf(send_bytes, o.use_zc);
  b.rbuf = alloc_buf(o.max_size, o.use_zc);
  b.src = o.copy_mode ? alloc_buf(o.max_size, 0) : NULL;
  b.reqs = (zc_request**)calloc(2 * (size_t)o.window, sizeof(zc_request*));
  if (!b.reqs) fail_status("calloc of requests", ZC_ERR_NO_MEMORY);

  bu_row rows[MAX_SIZES];
  long long wrong_total = 0;
  for (int s = 0; s < nsizes; s++) {
    memset(&rows[s], 0, sizeof rows[s]);
    rows[s].size = rows[s].count = sizes[s];
    rows[s].time_us = rows[s].bw = NAN;
    rows[s].wrong = -1;
  }
  if (g_rank == 0)
    printf("# zc_p2p: ranks=%d transport=%s mode=%s buffers=%s window=%d "
           "reps=%d\n", size, transport, o.copy_mode ? "copy" : "zerocopy",
           o.use_zc ? "zc_mem_alloc" : "malloc", o.window, o.reps);

  double lat[MAX_SIZES][3], bw[MAX_SIZES][3], bibw[MAX_SIZES][3];
  for (int s = 0; s < nsizes; s++)
    for (int k = 0; k < 3; k++) lat[s][k] = bw[s][k] = bibw[s][k] = NAN;
  for (int t = 0; t < 3; t++) {
    const int test = 1 << t;
    if (!(o.tests & test)) continue;
    if (g_rank == 0) {
      printf("#\n# %s\n", k_titles[t]);
      if (test == T_LAT)
        printf("%-10s%18s%12s%12s%12s%8s\n", "# Size", "Latency (us)",
               "Min (us)", "Max (us)", "Iterations", "#wrong");
      else
        printf("%-10s%18s%12s%12s%8s%12s%8s\n", "# Size", "Bandwidth (MB/s)",
               "Min (MB/s)", "Max (MB/s)", "Window", "Iterations", "#wrong");
    }
    for (int s = 0; s < nsizes; s++) {
      const size_t sz = sizes[s];
      if (rows[s].wrong < 0) { /* checked once, by the first test */
        rows[s].wrong = check_size(&o, &b, sz);
        if (rows[s].wrong > 0) wrong_total += rows[s].wrong;
      }
      double v[MAX_REPS], mn, med, mx;
      int iters, win = 0;
      if (test == T_LAT) {
        iters = bu_iters_for(sz, o.iters, o.min_iters, BU_P2P_KNEE);
        int warm = sz <= 64 * BU_KiB ? o.warmup : (o.warmup < 2 ? o.warmup : 2);
        for (int r = 0; r < o.reps; r++)
          v[r] = run_latency(&o, &b, sz, iters, r == 0 ? warm : 0) / (2.0 * iters);
        rows[s].iters = iters;
      } else {
        win = window_for(&o, sz);
        iters = bu_iters_for(sz * (size_t)win, o.bw_iters, 2, BU_BW_KNEE);
        if (iters > o.bw_iters) iters = o.bw_iters;
        int warm = sz <= 64 * BU_KiB ? 2 : 1;
        const int bidir = test == T_BIBW;
        for (int r = 0; r < o.reps; r++) {
          double us = run_bw(&o, &b, sz, win, iters, r == 0 ? warm : 0, bidir);
          v[r] = (bidir ? 2.0 : 1.0) * (double)sz * win * iters / us; /* B/us = MB/s */
        }
      }
      bu_min_med_max(v, o.reps, &mn, &med, &mx);
      double* slot = test == T_LAT ? lat[s] : test == T_BW ? bw[s] : bibw[s];
      slot[0] = mn, slot[1] = med, slot[2] = mx;
      if (g_rank == 0) {
        char wrong[24];
        snprintf(wrong, sizeof wrong, "%lld", rows[s].wrong);
        if (test == T_LAT)
          printf("%-10zu%18.*f%12.*f%12.*f%12d%8s\n", sz, bu_us_decimals(med, o.precise), med,
                 bu_us_decimals(mn, o.precise), mn, bu_us_decimals(mx, o.precise), mx, iters, wrong);
        else
          printf("%-10zu%18.2f%12.2f%12.2f%8d%12d%8s\n", sz, med, mn, mx, win,
                 iters, wrong);
        fflush(stdout);
        /* The JSON row: what is measured so far (rewritten each size). */
        bu_row* w = &rows[s];
        if (test == T_LAT) w->time_us = med;
        if (test == T_BW) w->bw = med * 1e-3; /* GB/s, as the peer programs */
        w->extra[0] = '\0';
        if (o.tests & T_LAT) {
          bu_extra_num(w->extra, sizeof w->extra, "latency_min_us", lat[s][0]);
          bu_extra_num(w->extra, sizeof w->extra, "latency_max_us", lat[s][2]);
        }
        if (o.tests & T_BW) {
          bu_extra_num(w->extra, sizeof w->extra, "bw_MBps", bw[s][1]);
          bu_extra_num(w->extra, sizeof w->extra, "bw_min_MBps", bw[s][0]);
          bu_extra_num(w->extra, sizeof w->extra, "bw_max_MBps", bw[s][2]);
        }
        if (o.tests & T_BIBW) {
          bu_extra_num(w->extra, sizeof w->extra, "bibw_MBps", bibw[s][1]);
          bu_extra_num(w->extra, sizeof w->extra, "bibw_min_MBps", bibw[s][0]);
          bu_extra_num(w->extra, sizeof w->extra, "bibw_max_MBps", bibw[s][2]);
          bu_extra_num(w->extra, sizeof w->extra, "bibw_GBps", bibw[s][1] * 1e-3);
        }
        if (o.tests & (T_BW | T_BIBW))
          bu_extra_num(w->extra, sizeof w->extra, "window", window_for(&o, sz));
        g_rep.rows = rows; /* the sizes checked so far */
        g_rep.nrows = g_rep.cap = (size_t)(rows[nsizes - 1].wrong >= 0 ? nsizes : s + 1);
        bu_report_write(&g_rep, 0);
      }
    }
  }

  free(b.reqs);
  free_buf(b.src, 0);
  free_buf(b.rbuf, o.use_zc);
  free_buf(b.sbuf, o.use_zc);
  if (g_rank == 0) {
    printf("#\n# #wrong total: %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
    if (wrong_total)
      bu_report_fail(&g_rep, "zcomm: %lld wrong bytes (see #wrong)", wrong_total);
    else
      bu_report_write(&g_rep, 1);
  }
  g_rep.rows = NULL; /* on the stack */
  ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
  /* Rank 1 learns the count from rank 0 only through the check exchanges;
   * both ranks saw the same bytes, so rank 0's verdict is the job's. */
  return g_rank == 0 && wrong_total ? 1 : 0;
}
