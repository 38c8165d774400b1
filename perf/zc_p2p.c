/* zc_p2p — OSU-style point-to-point benchmark of zcomm (C ABI only).
 *
 *   zcrun -np 2 zc_p2p [--min-size 1] [--max-size 1G] [--iters 1000]
 *         [--bw-iters 50] [--min-iters 5] [--window 64] [--warmup 10]
 *         [--buffers zc|malloc] [--mode zerocopy|copy] [--json FILE]
 *
 * Latency: ping-pong between ranks 0 and 1 with zc_send/zc_recv; one-way
 * latency = round trip / 2. Bandwidth: rank 0 sends a window of back-to-back
 * messages, rank 1 receives them all and answers with a 4-byte ack;
 * bandwidth = bytes of the window / time (GB/s, 1e9). For sizes above 4 MiB
 * the window shrinks so that one window holds at most 256 MiB.
 *
 * Buffers come from zc_mem_alloc (registered: the zero-copy path) unless
 * --buffers malloc. --mode copy reproduces a framework that is not zero-copy
 * (paper Fig. 8): before every send the sender memcpy's the tensor from a
 * malloc'd buffer into the registered send buffer, inside the timed loop.
 *
 * The transport is chosen by the library from ZC_TRANSPORT (shm|tcp|auto);
 * the benchmark only records it. Before timing each size, one exchange in
 * each direction is checked byte by byte (#wrong is printed, not asserted).
 * Ranks above 1 only initialize and finalize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

enum { TAG_LAT = 11, TAG_BW = 12, TAG_ACK = 13, TAG_CHECK = 14 };

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

static void* alloc_buf(size_t bytes, int use_zc) {
  void* p = NULL;
  if (bytes == 0) bytes = 1;
  if (use_zc) {
    ZC_CHECK(zc_mem_alloc(g_comm, bytes, &p), "zc_mem_alloc");
  } else {
    p = malloc(bytes);
    if (!p) {
      bu_report_fail(&g_rep, "malloc(%zu) failed", bytes);
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

static void usage(void) {
  fprintf(stderr,
          "usage: zc_p2p [--min-size B] [--max-size B] [--iters N] "
          "[--bw-iters N] [--min-iters N] [--window N] [--warmup N]\n"
          "              [--buffers zc|malloc] [--mode zerocopy|copy] "
          "[--skip-latency] [--skip-bw] [--json FILE]\n");
}

int main(int argc, char** argv) {
  size_t min_size = 1, max_size = BU_GiB;
  int iters = 1000, bw_iters = 50, min_iters = 5, window = 64, warmup = 10;
  int use_zc = 1, copy_mode = 0, do_lat = 1, do_bw = 1;
  const char* json = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--min-size") || !strcmp(a, "-b")) { min_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--max-size") || !strcmp(a, "-e")) { max_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--iters") || !strcmp(a, "-n")) { iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--bw-iters")) { bw_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--min-iters")) { min_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--window")) { window = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--warmup") || !strcmp(a, "-w")) { warmup = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--json")) { json = v; i++; }
    else if (!strcmp(a, "--skip-latency")) do_lat = 0;
    else if (!strcmp(a, "--skip-bw")) do_bw = 0;
    else if (!strcmp(a, "--buffers") && v) {
      if (!strcmp(v, "zc")) use_zc = 1;
      else if (!strcmp(v, "malloc")) use_zc = 0;
      else { usage(); return 2; }
      i++;
    } else if (!strcmp(a, "--mode") && v) {
      if (!strcmp(v, "zerocopy")) copy_mode = 0;
      else if (!strcmp(v, "copy")) copy_mode = 1;
      else { usage(); return 2; }
      i++;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
    else { usage(); return 2; }
  }
  if (min_size < 1) min_size = 1;
  if (window < 1) window = 1;
  if (iters < 1) iters = 1;
  if (bw_iters < 1) bw_iters = 1;
  if (min_iters < 1) min_iters = 1;

  const char* transport = getenv("ZC_TRANSPORT");
  if (!transport || !transport[0]) transport = "auto";
  char variant[96];
  snprintf(variant, sizeof variant, "%s/%s/%s", transport,
           copy_mode ? "copy" : "zerocopy", use_zc ? "zc_mem" : "malloc");
  bu_report_init(&g_rep, NULL, "p2p", "zcomm", variant, 0);
  g_rep.is_p2p = 1;
  snprintf(g_rep.extra, sizeof g_rep.extra,
           "\"transport\": \"%s\", \"mode\": \"%s\", \"buffers\": \"%s\", "
           "\"window\": %d",
           transport, copy_mode ? "copy" : "zerocopy",
           use_zc ? "zc_mem_alloc" : "malloc", window);
  /* Until the rank is known, errors go to the file of every rank's caller
   * (rank 0 writes it; see below). */
  g_rep.path = json;

  ZC_CHECK(zc_init(&g_comm), "zc_init");
  g_rank = zc_rank(g_comm);
  int size = zc_size(g_comm);
  g_rep.ranks = size;
  if (g_rank != 0) g_rep.path = NULL; /* rank 0 owns the JSON file */
  if (size < 2) {
    if (g_rank == 0)
      bu_report_fail(&g_rep, "zc_p2p needs 2 ranks (zcrun -np 2), got %d",
                     size);
    zc_finalize(g_comm);
    return 1;
  }
  int me = g_rank, peer = 1 - g_rank;
  if (me > 1) { /* idle ranks */
    ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
    return 0;
  }

  void* sbuf = alloc_buf(max_size, use_zc);
  void* rbuf = alloc_buf(max_size, use_zc);
  void* src = copy_mode ? alloc_buf(max_size, 0) : NULL;
  int ack = 0;

  if (me == 0) {
    printf("# zc_p2p: ranks=%d transport=%s mode=%s buffers=%s window=%d\n",
           size, transport, copy_mode ? "copy" : "zerocopy",
           use_zc ? "zc_mem_alloc" : "malloc", window);
    printf("# latency = ping-pong round trip / 2; bw = window of messages + "
           "ack, GB/s = 1e9 B/s\n");
    bu_print_p2p_header(stdout);
  }

  char what[128];
  for (size_t sz = min_size; sz <= max_size; sz *= 2) {
    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = sz;
    row.count = sz;
    row.time_us = NAN;
    row.bw = NAN;

    /* -- correctness: one checked exchange in each direction -- */
    long long wrong = 0;
    void* fill_target = copy_mode ? src : sbuf;
    snprintf(what, sizeof what, "check exchange of %zu bytes", sz);
    if (me == 0) {
      bu_fill_bytes(fill_target, sz, 0);
      if (copy_mode) memcpy(sbuf, src, sz);
      ZC_CHECK(zc_send(g_comm, sbuf, sz, peer, TAG_CHECK), what);
      memset(rbuf, 0, sz);
      ZC_CHECK(zc_recv(g_comm, rbuf, sz, peer, TAG_CHECK), what);
      wrong += (long long)bu_check_bytes(rbuf, sz, 1);
      long long other = 0;
      ZC_CHECK(zc_recv(g_comm, &other, sizeof other, peer, TAG_CHECK), what);
      wrong += other;
    } else {
      memset(rbuf, 0, sz);
      ZC_CHECK(zc_recv(g_comm, rbuf, sz, peer, TAG_CHECK), what);
      long long mine = (long long)bu_check_bytes(rbuf, sz, 0);
      bu_fill_bytes(fill_target, sz, 1);
      if (copy_mode) memcpy(sbuf, src, sz);
      ZC_CHECK(zc_send(g_comm, sbuf, sz, peer, TAG_CHECK), what);
      ZC_CHECK(zc_send(g_comm, &mine, sizeof mine, peer, TAG_CHECK), what);
    }
    row.wrong = wrong;

    /* -- latency -- */
    int n = bu_iters_for(sz, iters, min_iters, BU_P2P_KNEE);
    int w = sz <= 64 * BU_KiB ? warmup : (warmup < 2 ? warmup : 2);
    row.iters = n;
    if (do_lat) {
      snprintf(what, sizeof what, "ping-pong of %zu bytes", sz);
      double t0 = 0;
      for (int it = -w; it < n; it++) {
        if (it == 0) t0 = bu_now_us();
        if (me == 0) {
          if (copy_mode) memcpy(sbuf, src, sz);
          ZC_CHECK(zc_send(g_comm, sbuf, sz, peer, TAG_LAT), what);
          ZC_CHECK(zc_recv(g_comm, rbuf, sz, peer, TAG_LAT), what);
        } else {
          ZC_CHECK(zc_recv(g_comm, rbuf, sz, peer, TAG_LAT), what);
          if (copy_mode) memcpy(sbuf, src, sz);
          ZC_CHECK(zc_send(g_comm, sbuf, sz, peer, TAG_LAT), what);
        }
      }
      row.time_us = (bu_now_us() - t0) / (2.0 * n);
    }

    /* -- bandwidth -- */
    if (do_bw) {
      int win = window;
      if (sz > 4 * BU_MiB) {
        size_t cap = (256 * BU_MiB) / sz;
        if (cap < 1) cap = 1;
        if ((size_t)win > cap) win = (int)cap;
      }
      int nb = bu_iters_for(sz * (size_t)win, bw_iters, 2, BU_BW_KNEE);
      int wb = sz <= 64 * BU_KiB ? 2 : 1;
      snprintf(what, sizeof what, "bandwidth window of %d x %zu bytes", win,
               sz);
      double t0 = 0;
      for (int it = -wb; it < nb; it++) {
        if (it == 0) t0 = bu_now_us();
        if (me == 0) {
          for (int k = 0; k < win; k++) {
            if (copy_mode) memcpy(sbuf, src, sz);
            ZC_CHECK(zc_send(g_comm, sbuf, sz, peer, TAG_BW), what);
          }
          ZC_CHECK(zc_recv(g_comm, &ack, sizeof ack, peer, TAG_ACK), what);
        } else {
          for (int k = 0; k < win; k++)
            ZC_CHECK(zc_recv(g_comm, rbuf, sz, peer, TAG_BW), what);
          ZC_CHECK(zc_send(g_comm, &ack, sizeof ack, peer, TAG_ACK), what);
        }
      }
      double t = bu_now_us() - t0;
      row.bw = (double)sz * win * nb / (t * 1e3); /* bytes/us/1e3 = GB/s */
    }

    if (me == 0) {
      bu_print_p2p_row(stdout, &row);
      bu_report_add(&g_rep, &row);
    }
    if (sz > max_size / 2) break; /* no overflow past SIZE_MAX/2 */
  }

  free_buf(src, 0);
  free_buf(rbuf, use_zc);
  free_buf(sbuf, use_zc);
  if (me == 0) bu_report_write(&g_rep, 1);
  ZC_CHECK(zc_finalize(g_comm), "zc_finalize");
  return 0;
}
