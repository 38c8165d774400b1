/* ideal_allreduce — the fastest allreduce this machine's memory allows.
 *
 *   ideal_allreduce [--ranks 2] [-b 16M] [-e 256M] [-n 10] [--reps R] [--inplace]
 *                   [--json FILE]
 *
 * All ranks' buffers live in one process: rank r's input and output are
 * allocated and first touched by thread r, as a rank would. N threads (one per
 * rank) each take 1/N of the elements and, chunk by chunk in L1, add the N
 * inputs and write the sum into the N outputs. Every input byte is read once
 * and every output byte written once; there is no synchronisation inside a
 * run and no communication at all. That is the floor for any allreduce of
 * float32 sums across N processes on this machine: zcomm's time divided by
 * this one says how much memory traffic and waiting it adds.
 *
 * Out of place, two variants per size: plain stores (the CPU reads each
 * output line before writing it) and non-temporal stores (written around the
 * caches, no read); `best_us` is the smaller median of the two. In place
 * (--inplace: every output is its input) plain stores only, `best_us` its
 * median. A run lasts from the first thread's start to the last thread's
 * end. Min/median/max over -n runs; with --reps R, over R repetitions of -n
 * runs each, of the mean per run: the statistic zc_coll reports (the mean per
 * call, median of its --reps repetitions), which the suite compares with
 * this one. Sizes are per-rank buffer bytes, powers of 2 from -b to -e. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/bench_util.h"

enum { kMaxRanks = 64, kChunkFloats = 1024 /* 4 KiB: stays in L1 */ };

typedef struct {
  int ranks, iters, reps, inplace;
  size_t max_bytes;
  float* in[kMaxRanks];
  float* out[kMaxRanks];
  pthread_barrier_t bar;
} shared_t;

typedef struct {
  shared_t* s;
  int id;
  size_t bytes;     /* per-rank buffer bytes of the current size */
  int nt;           /* non-temporal stores */
  int touch_only;   /* 1: first-touch pass (fill own buffers); 2: one run */
  /* Per iteration and thread: when this thread began and ended its slice
   * (spans[2 * (it * ranks + id)], [.. + 1]). */
  double* spans;
} worker_t;

static void slice(size_t n, int ranks, int id, size_t* lo, size_t* hi) {
  /* slices on 16-float (64-byte) boundaries so NT stores stay aligned */
  size_t blocks = n / 16, per = blocks / (size_t)ranks, extra = blocks % (size_t)ranks;
  size_t b0 = (size_t)id * per + ((size_t)id < extra ? (size_t)id : extra);
  size_t b1 = b0 + per + ((size_t)id < extra ? 1 : 0);
  *lo = b0 * 16;
  *hi = id == ranks - 1 ? n : b1 * 16;
}

/* In place the inputs change: every run starts from the same values. */
static float input_value(int rank, size_t i) { return (float)(rank + 1) + (float)(i % 7); }

static void sum_chunk(const shared_t* s, size_t lo, size_t len, float* acc) {
  memcpy(acc, s->in[0] + lo, len * sizeof(float));
  for (int r = 1; r < s->ranks; r++) {
    const float* restrict x = s->in[r] + lo;
    for (size_t j = 0; j < len; j++) acc[j] += x[j];
  }
}

static void store_chunk(const shared_t* s, size_t lo, size_t len,
                        const float* acc, int nt) {
#if defined(__x86_64__)
  if (nt && len % 4 == 0 && lo % 4 == 0) {
    for (int r = 0; r < s->ranks; r++) {
      float* o = s->out[r] + lo;
      for (size_t j = 0; j < len; j += 4)
        _mm_stream_ps(o + j, _mm_load_ps(acc + j));
    }
    return;
  }
#else
  (void)nt;
#endif
  for (int r = 0; r < s->ranks; r++)
    memcpy(s->out[r] + lo, acc, len * sizeof(float));
}

static void reduce_slice(const shared_t* s, size_t lo, size_t hi, int nt) {
  float acc[kChunkFloats] __attribute__((aligned(64)));
  for (size_t c = lo; c < hi; c += kChunkFloats) {
    size_t len = hi - c < kChunkFloats ? hi - c : kChunkFloats;
    sum_chunk(s, c, len, acc);
    store_chunk(s, c, len, acc, nt);
  }
#if defined(__x86_64__)
  if (nt) _mm_sfence();
#endif
}

static void* worker(void* p) {
  worker_t* w = (worker_t*)p;
  shared_t* s = w->s;
  if (w->touch_only == 1) {
    size_t n = s->max_bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
      s->in[w->id][i] = input_value(w->id, i);
      if (s->out[w->id] != s->in[w->id]) s->out[w->id][i] = 0.0f;
    }
    return NULL;
  }
  size_t lo, hi;
  slice(w->bytes / sizeof(float), s->ranks, w->id, &lo, &hi);
  reduce_slice(s, lo, hi, w->nt); /* warm-up, not timed */
  if (w->touch_only == 2) return NULL;
  for (int it = 0; it < s->iters; it++) {
    double* span = w->spans + 2 * ((size_t)it * s->ranks + w->id);
    pthread_barrier_wait(&s->bar);
    span[0] = bu_now_us();
    reduce_slice(s, lo, hi, w->nt);
    span[1] = bu_now_us();
    pthread_barrier_wait(&s->bar);
  }
  return NULL;
}

static int run_threads(shared_t* s, worker_t* w) {
  pthread_t tid[kMaxRanks];
  for (int t = 0; t < s->ranks; t++)
    if (pthread_create(&tid[t], NULL, worker, &w[t]) != 0) return -1;
  for (int t = 0; t < s->ranks; t++) pthread_join(tid[t], NULL);
  return 0;
}

/* Checks the outputs of one run against the inputs' sum at a spread of
 * indices (out of place every run gives the same sums). */
static long count_wrong(const shared_t* s, size_t n) {
  long wrong = 0;
  size_t step = n / 4099 + 1;
  for (size_t i = 0; i < n; i += step) {
    float want = 0;
    for (int r = 0; r < s->ranks; r++) want += input_value(r, i);
    for (int r = 0; r < s->ranks; r++) wrong += s->out[r][i] != want;
  }
  return wrong;
}

static void reset_inputs(const shared_t* s, size_t n) {
  for (int r = 0; r < s->ranks; r++)
    for (size_t i = 0; i < n; i++) s->in[r][i] = input_value(r, i);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void stats(double* t, int n, double* mn, double* med, double* mx) {
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  *mn = t[0];
  *mx = t[n - 1];
  *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double mean(const double* t, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += t[i];
  return sum / n;
}

/* One repetition: -n timed runs after a warm-up; their times in times[]. */
static int measure_once(shared_t* s, size_t bytes, int nt, double* times,
                        long* wrong) {
  worker_t w[kMaxRanks];
  double* spans = (double*)calloc(2 * (size_t)s->iters * s->ranks, sizeof(double));
  if (!spans) return -1;
  for (int t = 0; t < s->ranks; t++)
    w[t] = (worker_t){s, t, bytes, nt, 0, spans};
  if (run_threads(s, w) != 0) { free(spans); return -1; }
  /* A run lasts from the first thread's start to the last thread's end.
   * With more threads than cores, any one thread may get a core only after
   * the others have begun (or finished), so its own clock would miss part
   * of the run. */
  for (int it = 0; it < s->iters; it++) {
    const double* span = spans + 2 * (size_t)it * s->ranks;
    double first = span[0], last = span[1];
    for (int t = 1; t < s->ranks; t++) {
      if (span[2 * t] < first) first = span[2 * t];
      if (span[2 * t + 1] > last) last = span[2 * t + 1];
    }
    times[it] = last - first;
  }
  free(spans);
  /* One more run, checked: in place from known inputs (the timed runs
   * changed them), out of place into cleared outputs. */
  if (s->inplace) reset_inputs(s, bytes / sizeof(float));
  else
    for (int r = 0; r < s->ranks; r++) memset(s->out[r], 0, bytes);
  worker_t once[kMaxRanks];
  for (int t = 0; t < s->ranks; t++) once[t] = (worker_t){s, t, bytes, nt, 2, NULL};
  if (run_threads(s, once) != 0) return -1;
  *wrong += count_wrong(s, bytes / sizeof(float));
  return 0;
}

/* min/median/max into out3: over the -n runs, or with --reps over the
 * repetitions' means. */
static int measure(shared_t* s, size_t bytes, int nt, double* out3,
                   long* wrong) {
  const int reps = s->reps > 0 ? s->reps : 1;
  double* times = (double*)calloc((size_t)s->iters, sizeof(double));
  double* means = (double*)calloc((size_t)reps, sizeof(double));
  int rc = times && means ? 0 : -1;
  for (int r = 0; rc == 0 && r < reps; r++) {
    rc = measure_once(s, bytes, nt, times, wrong);
    means[r] = mean(times, s->iters);
  }
  if (rc == 0 && s->reps > 0) stats(means, s->reps, &out3[0], &out3[1], &out3[2]);
  else if (rc == 0) stats(times, s->iters, &out3[0], &out3[1], &out3[2]);
  free(times);
  free(means);
  return rc;
}

static void usage(void) {
  fprintf(stderr, "usage: ideal_allreduce [--ranks N] [-b BYTES] [-e BYTES] "
                  "[-n ITERS] [--reps R] [--inplace] [--json FILE]\n");
}

int main(int argc, char** argv) {
  shared_t s;
  memset(&s, 0, sizeof s);
  size_t min_bytes = 16 * BU_MiB, max_bytes = 256 * BU_MiB;
  const char* json = NULL;
  s.ranks = 2;
  s.iters = 10;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--ranks")) { s.ranks = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "-b")) { min_bytes = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-e")) { max_bytes = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-n")) { s.iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--reps")) { s.reps = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--json")) { json = v; i++; }
    else if (!strcmp(a, "--inplace")) s.inplace = 1;
    else { usage(); return 2; }
  }
  if (s.ranks < 1 || s.ranks > kMaxRanks || s.iters < 1 || s.reps < 0 || min_bytes < 64 ||
      min_bytes > max_bytes) {
    usage();
    return 2;
  }
  s.max_bytes = max_bytes;
  for (int r = 0; r < s.ranks; r++) {
    s.in[r] = (float*)aligned_alloc(4096, max_bytes);
    s.out[r] = s.inplace ? s.in[r] : (float*)aligned_alloc(4096, max_bytes);
    if (!s.in[r] || !s.out[r]) {
      fprintf(stderr, "error: cannot allocate 2 x %d x %zu bytes\n", s.ranks,
              max_bytes);
      return 1;
    }
  }
  worker_t touch[kMaxRanks];
  for (int t = 0; t < s.ranks; t++)
    touch[t] = (worker_t){&s, t, max_bytes, 0, 1, NULL};
  if (run_threads(&s, touch) != 0) return 1;
  pthread_barrier_init(&s.bar, NULL, (unsigned)s.ranks);

  FILE* f = json ? fopen(json, "w") : NULL;
  if (json && !f) fprintf(stderr, "warning: cannot write %s\n", json);
  if (f)
    fprintf(f, "{\n  \"benchmark\": \"ideal_allreduce\", \"ranks\": %d, "
               "\"iters\": %d, \"reps\": %d, \"statistic\": \"%s\", "
               "\"dtype\": \"float32\", \"op\": \"sum\", "
               "\"inplace\": %s,\n  \"results\": [", s.ranks, s.iters, s.reps,
            s.reps ? "mean of runs, min/median/max over reps" : "min/median/max over runs",
            s.inplace ? "true" : "false");
  if (s.reps)
    printf("# ideal_allreduce: %d ranks as threads, float32 sum, %s, %d reps of %d runs; "
           "mean per run in us (min median max over reps)\n", s.ranks,
           s.inplace ? "in place" : "out of place", s.reps, s.iters);
  else
    printf("# ideal_allreduce: %d ranks as threads, float32 sum, %s, %d runs; "
           "times in us (min median max)\n", s.ranks,
           s.inplace ? "in place" : "out of place", s.iters);
  printf("#%11s %30s %30s %10s\n", "bytes", "plain stores", "non-temporal",
         "best_us");
  long wrong = 0;
  int first = 1;
  for (size_t sz = min_bytes; sz <= max_bytes; sz *= 2) {
    double plain[3], nt[3] = {0, 0, 0};
    if (measure(&s, sz, 0, plain, &wrong) ||
        (!s.inplace && measure(&s, sz, 1, nt, &wrong))) {
      fprintf(stderr, "error: cannot start threads\n");
      return 1;
    }
    double best = s.inplace || plain[1] < nt[1] ? plain[1] : nt[1];
    printf("%12zu %9.1f %9.1f %9.1f  %9.1f %9.1f %9.1f %10.1f\n", sz,
           plain[0], plain[1], plain[2], nt[0], nt[1], nt[2], best);
    fflush(stdout);
    if (f)
      fprintf(f, "%s\n    {\"size\": %zu, \"plain_us\": [%.2f, %.2f, %.2f], "
                 "\"nt_us\": [%.2f, %.2f, %.2f], \"best_us\": %.2f, "
                 "\"wrong\": %ld}",
              first ? "" : ",", sz, plain[0], plain[1], plain[2], nt[0], nt[1],
              nt[2], best, wrong);
    first = 0;
    if (sz > max_bytes / 2) break;
  }
  if (f) {
    fprintf(f, "\n  ],\n  \"complete\": true\n}\n");
    fclose(f);
  }
  if (wrong) fprintf(stderr, "error: %ld wrong results\n", wrong);
  return wrong ? 1 : 0;
}
