/* memcpy_bw — the physical limits of shared-memory transfers on this machine.
 *
 *   memcpy_bw [--size 256M] [--min-size 4K] [--iters 10] [--threads 1]
 *             [--json FILE]
 *
 * For each size (powers of 2 from --min-size to --size) and `--threads`
 * threads, each copying its own buffers:
 *   memcpy_GBps   bytes copied / time (one memcpy of S bytes counts S; this
 *                 is what a shm transfer of S bytes can reach at best)
 *   copy_GBps     STREAM "copy" a[i] = b[i] on doubles, counted as in
 *                 STREAM: read + write = 2 x S bytes / time
 *   triad_GBps    STREAM "triad" a[i] = b[i] + q * c[i]: 3 x S bytes / time
 * GB = 1e9 B. Buffers are touched before timing; the best of `--iters`
 * repetitions is reported (STREAM's convention). Rows with threads > 1 report
 * the aggregate over all threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench_util.h"

typedef struct {
  size_t bytes;
  int iters;
  double* a;
  double* b;
  double* c;
  pthread_barrier_t* bar;
  double best[3]; /* seconds: memcpy, copy, triad */
} job;

static void* worker(void* p) {
  job* j = (job*)p;
  const size_t n = j->bytes / sizeof(double);
  double* restrict a = j->a;
  double* restrict b = j->b;
  double* restrict c = j->c;
  const double q = 3.0;
  for (int k = 0; k < 3; k++) j->best[k] = 1e30;
  for (int it = 0; it < j->iters; it++) {
    double t0, t;
    pthread_barrier_wait(j->bar);
    t0 = bu_now_us();
    memcpy(a, b, j->bytes);
    t = bu_now_us() - t0;
    if (t < j->best[0]) j->best[0] = t;
    pthread_barrier_wait(j->bar);
    t0 = bu_now_us();
    for (size_t i = 0; i < n; i++) a[i] = b[i];
    t = bu_now_us() - t0;
    if (t < j->best[1]) j->best[1] = t;
    pthread_barrier_wait(j->bar);
    t0 = bu_now_us();
    for (size_t i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    t = bu_now_us() - t0;
    if (t < j->best[2]) j->best[2] = t;
  }
  /* keep the compiler from dropping the loops */
  if (a[n / 2] == -1.2345) fprintf(stderr, "!");
  return NULL;
}

int main(int argc, char** argv) {
  size_t max_size = 256 * BU_MiB, min_size = 4 * BU_KiB;
  int iters = 10, threads = 1;
  const char* json = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--size")) { max_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--min-size")) { min_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--iters")) { iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--threads")) { threads = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--json")) { json = v; i++; }
    else {
      fprintf(stderr, "usage: memcpy_bw [--size B] [--min-size B] [--iters N] "
                      "[--threads N] [--json FILE]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  if (iters < 1) iters = 1;
  if (min_size < 64) min_size = 64;

  job* jobs = (job*)calloc((size_t)threads, sizeof(job));
  pthread_t* tids = (pthread_t*)calloc((size_t)threads, sizeof(pthread_t));
  for (int t = 0; t < threads; t++) {
    jobs[t].a = (double*)aligned_alloc(4096, max_size);
    jobs[t].b = (double*)aligned_alloc(4096, max_size);
    jobs[t].c = (double*)aligned_alloc(4096, max_size);
    if (!jobs[t].a || !jobs[t].b || !jobs[t].c) {
      fprintf(stderr, "error: cannot allocate 3 x %zu bytes\n", max_size);
      return 1;
    }
    memset(jobs[t].a, 0, max_size);
    for (size_t i = 0; i < max_size / sizeof(double); i++) {
      jobs[t].b[i] = (double)(i % 1000);
      jobs[t].c[i] = 0.5;
    }
  }

  FILE* f = json ? fopen(json, "w") : NULL;
  if (json && !f) fprintf(stderr, "warning: cannot write %s\n", json);
  if (f)
    fprintf(f, "{\n  \"benchmark\": \"memcpy\", \"threads\": %d, \"iters\": "
               "%d,\n  \"results\": [", threads, iters);
  printf("# memcpy_bw: threads=%d, best of %d; GB/s = 1e9 B/s\n", threads,
         iters);
  printf("#%11s %14s %14s %14s\n", "size", "memcpy(GB/s)", "copy(GB/s)",
         "triad(GB/s)");
  int first = 1;
  for (size_t sz = min_size; sz <= max_size; sz *= 2) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    /* small sizes: repeat more so a run lasts long enough to time */
    int it = iters;
    if (sz < BU_MiB) it = iters * (int)(BU_MiB / sz < 1000 ? BU_MiB / sz : 1000);
    for (int t = 0; t < threads; t++) {
      jobs[t].bytes = sz;
      jobs[t].iters = it;
      jobs[t].bar = &bar;
      pthread_create(&tids[t], NULL, worker, &jobs[t]);
    }
    double worst[3] = {0, 0, 0};
    for (int t = 0; t < threads; t++) {
      pthread_join(tids[t], NULL);
      for (int k = 0; k < 3; k++)
        if (jobs[t].best[k] > worst[k]) worst[k] = jobs[t].best[k];
    }
    pthread_barrier_destroy(&bar);
    double tot = (double)sz * threads;
    double m = tot / (worst[0] * 1e3);
    double c = 2 * tot / (worst[1] * 1e3);
    double tr = 3 * tot / (worst[2] * 1e3);
    printf("%12zu %14.2f %14.2f %14.2f\n", sz, m, c, tr);
    fflush(stdout);
    if (f)
      fprintf(f, "%s\n    {\"size\": %zu, \"memcpy_GBps\": %.4g, "
                 "\"copy_GBps\": %.4g, \"triad_GBps\": %.4g}",
              first ? "" : ",", sz, m, c, tr);
    first = 0;
    if (sz > max_size / 2) break;
  }
  if (f) {
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
  }
  return 0;
}
