/* mpi_pingpong — the Open MPI baseline of zc_p2p: same sizes, same loops,
 * same columns and JSON.
 *
 *   mpirun --allow-run-as-root -np 2 --bind-to core mpi_pingpong
 *          [--min-size 1] [--max-size 1G] [--iters 1000] [--bw-iters 50]
 *          [--min-iters 5] [--window 64] [--warmup 10] [--json FILE]
 *
 * Latency = ping-pong round trip / 2 (MPI_Send/MPI_Recv); bandwidth = a window
 * of back-to-back MPI_Isend (receiver: MPI_Irecv) then a 4-byte ack, as OSU's
 * osu_bw; above 4 MiB the window holds at most 256 MiB, as in zc_p2p. Buffers
 * are malloc'd. One exchange per size is checked byte by byte (#wrong). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench_util.h"

/* Which MPI this build links (perf/peers/meson.build sets it). */
#ifndef BU_MPI_NAME
#define BU_MPI_NAME "openmpi"
#endif

enum { TAG_LAT = 11, TAG_BW = 12, TAG_ACK = 13, TAG_CHECK = 14 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  size_t min_size = 1, max_size = BU_GiB;
  int iters = 1000, bw_iters = 50, min_iters = 5, window = 64, warmup = 10;
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
    else {
      if (rank == 0) fprintf(stderr, "error: unknown option %s\n", a);
      MPI_Finalize();
      return 2;
    }
  }
  if (min_size < 1) min_size = 1;
  if (window < 1) window = 1;

  bu_report rep;
  bu_report_init(&rep, rank == 0 ? json : NULL, "p2p", "mpi", BU_MPI_NAME, nranks);
  rep.is_p2p = 1;
  snprintf(rep.extra, sizeof rep.extra, "\"buffers\": \"malloc\", \"window\": %d",
           window);
  if (nranks < 2) {
    bu_report_fail(&rep, "mpi_pingpong needs 2 ranks");
    MPI_Finalize();
    return 1;
  }
  if (rank > 1) {
    MPI_Finalize();
    return 0;
  }
  const int peer = 1 - rank;
  char* sbuf = (char*)malloc(max_size);
  char* rbuf = (char*)malloc(max_size);
  MPI_Request* reqs = (MPI_Request*)malloc(sizeof(MPI_Request) * (size_t)window);
  if (!sbuf || !rbuf || !reqs) {
    bu_report_fail(&rep, "rank %d: malloc(%zu) failed", rank, max_size);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sbuf, 0, max_size);
  memset(rbuf, 0, max_size);
  int ack = 0;
  if (rank == 0) {
    printf("# mpi_pingpong: Open MPI, ranks=%d window=%d\n", nranks, window);
    bu_print_p2p_header(stdout);
  }

  for (size_t sz = min_size; sz <= max_size; sz *= 2) {
    if (sz > (size_t)0x7fffffff) break; /* MPI int counts */
    const int c = (int)sz;
    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = row.count = sz;

    long long wrong = 0;
    if (rank == 0) {
      bu_fill_bytes(sbuf, sz, 0);
      MPI_Send(sbuf, c, MPI_BYTE, peer, TAG_CHECK, MPI_COMM_WORLD);
      memset(rbuf, 0, sz);
      MPI_Recv(rbuf, c, MPI_BYTE, peer, TAG_CHECK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      wrong += (long long)bu_check_bytes(rbuf, sz, 1);
      long long other = 0;
      MPI_Recv(&other, 1, MPI_LONG_LONG, peer, TAG_CHECK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      wrong += other;
    } else {
      memset(rbuf, 0, sz);
      MPI_Recv(rbuf, c, MPI_BYTE, peer, TAG_CHECK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      long long mine = (long long)bu_check_bytes(rbuf, sz, 0);
      bu_fill_bytes(sbuf, sz, 1);
      MPI_Send(sbuf, c, MPI_BYTE, peer, TAG_CHECK, MPI_COMM_WORLD);
      MPI_Send(&mine, 1, MPI_LONG_LONG, peer, TAG_CHECK, MPI_COMM_WORLD);
    }
    row.wrong = wrong;

    int n = bu_iters_for(sz, iters, min_iters, BU_P2P_KNEE);
    int w = sz <= 64 * BU_KiB ? warmup : (warmup < 2 ? warmup : 2);
    row.iters = n;
    double t0 = 0;
    for (int it = -w; it < n; it++) {
      if (it == 0) t0 = bu_now_us();
      if (rank == 0) {
        MPI_Send(sbuf, c, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
        MPI_Recv(rbuf, c, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(rbuf, c, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, c, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
      }
    }
    row.time_us = (bu_now_us() - t0) / (2.0 * n);

    int win = window;
    if (sz > 4 * BU_MiB) {
      size_t cap = (256 * BU_MiB) / sz;
      if (cap < 1) cap = 1;
      if ((size_t)win > cap) win = (int)cap;
    }
    int nb = bu_iters_for(sz * (size_t)win, bw_iters, 2, BU_BW_KNEE);
    int wb = sz <= 64 * BU_KiB ? 2 : 1;
    for (int it = -wb; it < nb; it++) {
      if (it == 0) t0 = bu_now_us();
      if (rank == 0) {
        for (int k = 0; k < win; k++)
          MPI_Isend(sbuf, c, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[k]);
        MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        for (int k = 0; k < win; k++)
          MPI_Irecv(rbuf, c, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[k]);
        MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
        MPI_Send(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD);
      }
    }
    row.bw = (double)sz * win * nb / ((bu_now_us() - t0) * 1e3);
    if (rank == 0) {
      bu_print_p2p_row(stdout, &row);
      bu_report_add(&rep, &row);
    }
    if (sz > max_size / 2) break;
  }
  if (rank == 0) bu_report_write(&rep, 1);
  free(reqs);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
