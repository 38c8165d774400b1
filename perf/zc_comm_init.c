/* Cost of making communicators as a framework does: zc_comm_init_rank from
 * a unique id, zc_comm_split into halves and zc_comm_dup, each timed as the
 * slowest rank saw it (max over ranks), repeated; the program forks its
 * ranks itself and passes the ids through pipes.
 *   zc_comm_init [--np N[,N...]] [--reps R]      (default 2,3,4,5 and 20)
 * Prints one line per (ranks, operation): min / median / max in ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

#define OK(call)                                                                      \
  do {                                                                                \
    zc_status s_ = (call);                                                            \
    if (s_ != ZC_OK) {                                                                \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, zc_last_error(NULL));          \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

enum { kInit, kSplit, kDup, kOps };
static const char* kNames[kOps] = {"init_rank", "split", "dup"};

static int rank_main(int rank, int n, int reps, int (*pipes)[2], int result_fd) {
  double* t = calloc((size_t)reps * kOps, sizeof(double));
  for (int i = 0; i < reps; ++i) {
    zc_unique_id id;
    if (rank == 0) {
      OK(zc_get_unique_id(&id));
      for (int q = 1; q < n; ++q)
        if (write(pipes[q][1], &id, sizeof(id)) != (ssize_t)sizeof(id)) return 1;
    } else if (read(pipes[rank][0], &id, sizeof(id)) != (ssize_t)sizeof(id)) {
      return 1;
    }
    zc_comm *comm, *half, *dup;
    double t0 = bu_now_ms();
    OK(zc_comm_init_rank(&comm, n, &id, rank));
    double t1 = bu_now_ms();
    OK(zc_comm_split(comm, rank % 2, rank, &half));
    double t2 = bu_now_ms();
    OK(zc_comm_dup(comm, &dup));
    double t3 = bu_now_ms();
    double mine[kOps] = {t1 - t0, t2 - t1, t3 - t2}, worst[kOps];
    OK(zc_allreduce(comm, mine, worst, kOps, ZC_FLOAT64, ZC_MAX));
    memcpy(t + (size_t)i * kOps, worst, sizeof(worst));
    OK(zc_finalize(half));
    OK(zc_finalize(dup));
    OK(zc_finalize(comm));
  }
  if (rank == 0 && write(result_fd, t, (size_t)reps * kOps * sizeof(double)) < 0) return 1;
  free(t);
  return 0;
}

static int run(int n, int reps) {
  int pipes[8][2], res[2];
  if (pipe(res) != 0) return 1;
  for (int q = 0; q < n; ++q)
    if (pipe(pipes[q]) != 0) return 1;
  pid_t pids[8];
  for (int q = 0; q < n; ++q) {
    pids[q] = fork();
    if (pids[q] == 0) _exit(rank_main(q, n, reps, pipes, res[1]));
  }
  int failed = 0;
  for (int q = 0; q < n; ++q) {
    int st = 0;
    waitpid(pids[q], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  if (failed) {
    fprintf(stderr, "np %d: a rank failed\n", n);
    return 1;
  }
  double* t = calloc((size_t)reps * kOps, sizeof(double));
  if (read(res[0], t, (size_t)reps * kOps * sizeof(double)) != (ssize_t)((size_t)reps * kOps * sizeof(double)))
    return 1;
  for (int op = 0; op < kOps; ++op) {
    double* v = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < reps; ++i) v[i] = t[(size_t)i * kOps + op];
    qsort(v, (size_t)reps, sizeof(double), bu_cmp_double);
    printf("%5d  %-10s %9.3f %9.3f %9.3f\n", n, kNames[op], v[0], v[reps / 2], v[reps - 1]);
    free(v);
  }
  for (int q = 0; q < n; ++q) {
    close(pipes[q][0]);
    close(pipes[q][1]);
  }
  close(res[0]);
  close(res[1]);
  free(t);
  return 0;
}

int main(int argc, char** argv) {
  int nps[8] = {2, 3, 4, 5}, nnp = 4, reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--np") && i + 1 < argc) {
      nnp = 0;
      for (char* s = strtok(argv[++i], ","); s && nnp < 8; s = strtok(NULL, ",")) nps[nnp++] = atoi(s);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--np N[,N...]] [--reps R]\n  (%s: unknown flag)\n", argv[0], argv[i]);
      return 2;
    }
  }
  for (int k = 0; k < nnp; ++k)
    if (nps[k] < 1 || nps[k] > 8 || reps < 1) {
      fprintf(stderr, "--np 1..8 and --reps >= 1\n");
      return 2;
    }
  printf("ranks  operation   min(ms) median(ms)  max(ms)   (slowest rank, %d repetitions; transport %s)\n", reps,
         getenv("ZC_TRANSPORT") ? getenv("ZC_TRANSPORT") : "auto");
  for (int k = 0; k < nnp; ++k)
    if (run(nps[k], reps)) return 1;
  return 0;
}
