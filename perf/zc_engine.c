/* The engine's per-step overhead and negotiation cost (zcomm_engine.h).
 * Run under zcrun:  zcrun -np N zc_engine [--tensors T] [--elems E] [--steps S]
 * Each step allreduces T float32 tensors of E elements through the engine
 * (submitted all at once in a rank-dependent order, then waited for), for
 * several configurations of ZC_FUSION_THRESHOLD and ZC_CYCLE_TIME, and the
 * same tensors through T blocking zc_allreduce calls as the baseline. Prints
 * per configuration the median step time (max over ranks) and, from the
 * engine's counters over the measured steps, cycles per step, negotiation
 * collectives per cycle, cache hits and fused sets per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include "common/bench_util.h"

#define OK(call)                                                                              \
  do {                                                                                        \
    zc_status s_ = (call);                                                                    \
    if (s_ != ZC_OK) {                                                                        \
      fprintf(stderr, "%s: %s: %s\n", #call, zc_status_string(s_), zc_last_error(NULL));      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

/* Median over steps of the slowest rank's step time. */
static double median_max(zc_comm* comm, double* t, int steps) {
  OK(zc_allreduce(comm, t, t, (size_t)steps, ZC_FLOAT64, ZC_MAX));
  qsort(t, (size_t)steps, sizeof(double), bu_cmp_double);
  return t[steps / 2];
}

int main(int argc, char** argv) {
  int tensors = 128, elems = 256, steps = 50, warm = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--tensors")) tensors = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--elems")) elems = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
  }
  zc_comm* comm;
  OK(zc_init(&comm));
  const int rank = zc_rank(comm), n = zc_size(comm);
  float** in = malloc(sizeof(float*) * (size_t)tensors);
  float** out = malloc(sizeof(float*) * (size_t)tensors);
  zc_engine_handle** h = malloc(sizeof(zc_engine_handle*) * (size_t)tensors);
  double* t = malloc(sizeof(double) * (size_t)steps);
  for (int k = 0; k < tensors; ++k) {
    in[k] = malloc(sizeof(float) * (size_t)elems);
    out[k] = malloc(sizeof(float) * (size_t)elems);
    for (int i = 0; i < elems; ++i) in[k][i] = (float)(rank + i + k);
  }
  if (rank == 0)
    printf("# engine: %d ranks, %d float32 tensors of %d elements (%d bytes) per step, %d steps\n", n, tensors,
           elems, elems * 4, steps);

  /* Baseline: one blocking allreduce per tensor. */
  for (int s = 0; s < warm + steps; ++s) {
    double t0 = bu_now_ms();
    for (int k = 0; k < tensors; ++k) OK(zc_allreduce(comm, in[k], out[k], (size_t)elems, ZC_FLOAT32, ZC_SUM));
    if (s >= warm) t[s - warm] = bu_now_ms() - t0;
  }
  double base = median_max(comm, t, steps);
  if (rank == 0) printf("%-34s step %8.3f ms\n", "baseline (zc_allreduce per tensor)", base);

  const char* configs[][2] = {{"128M", "1"}, {"0", "1"}, {"128M", "0.1"}, {"0", "0.1"}, {"128M", "5"}};
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; ++c) {
    setenv("ZC_FUSION_THRESHOLD", configs[c][0], 1);
    setenv("ZC_CYCLE_TIME", configs[c][1], 1);
    zc_engine* eng;
    OK(zc_engine_create(comm, &eng));
    zc_engine_stats a, b;
    for (int s = 0; s < warm + steps; ++s) {
      if (s == warm) {
        /* Counters are published at the end of a cycle, after its handles
         * are done: wait for the cycle that finished the warm-up steps. */
        do OK(zc_engine_get_stats(eng, &a, sizeof a));
        while (a.operations_done < (uint64_t)warm * (uint64_t)tensors);
      }
      double t0 = bu_now_ms();
      for (int j = 0; j < tensors; ++j) {
        int k = (j * 7 + rank * 13) % tensors;
        char name[32];
        snprintf(name, sizeof name, "grad.%d", k);
        int64_t shape[1] = {elems};
        OK(zc_engine_allreduce(eng, name, in[k], out[k], 1, shape, ZC_FLOAT32, ZC_SUM, 1.0, 1.0, &h[k]));
      }
      for (int k = 0; k < tensors; ++k) {
        OK(zc_engine_wait(h[k]));
        zc_engine_handle_free(h[k]);
      }
      if (s >= warm) t[s - warm] = bu_now_ms() - t0;
    }
    /* The last cycle's counters are published at its end: a barrier op
     * completes in a later cycle than every measured tensor. */
    zc_engine_handle* hb;
    OK(zc_engine_barrier(eng, &hb));
    OK(zc_engine_wait(hb));
    zc_engine_handle_free(hb);
    OK(zc_engine_get_stats(eng, &b, sizeof b));
    double med = median_max(comm, t, steps);
    double cycles = (double)(b.cycles - a.cycles);
    if (rank == 0)
      printf("fusion %-5s cycle %-4s ms          step %8.3f ms (%.2fx baseline) | per step: %.2f cycles, "
             "%.2f cache hits, %.2f fused sets, %.2f data collectives | %.3f negotiation collectives per cycle, "
             "%llu plan reuses\n",
             configs[c][0], configs[c][1], med, med / base, cycles / steps,
             (double)(b.cache_hits - a.cache_hits) / steps, (double)(b.fused_sets - a.fused_sets) / steps,
             (double)(b.data_collectives - a.data_collectives) / steps,
             (double)(b.negotiation_collectives - a.negotiation_collectives) / cycles,
             (unsigned long long)(b.plan_reuses - a.plan_reuses));
    OK(zc_engine_destroy(eng));
  }
  for (int k = 0; k < tensors; ++k) {
    free(in[k]);
    free(out[k]);
  }
  free(in);
  free(out);
  free(h);
  free(t);
  OK(zc_finalize(comm));
  return 0;
}
