/* trace_call_cost: what the flight recorder adds to a public call made
 * through libzcomm.so (what trace_record_cost, linked with the library's
 * objects, cannot show: a shared library reaches its thread-locals and
 * functions otherwise). The call is an 8-byte zc_allreduce on a
 * communicator of one rank: its own work is a copy, so what it costs is the
 * API's path, the recorder's record included.
 *
 * It runs itself as PAIRS pairs of child processes, recorder on
 * (ZC_TRACE_BUFFER_SIZE=2000) and off (=0), alternated and in turn first;
 * each child times ROUNDS rounds of CALLS calls in CPU time of its thread
 * (other processes on a loaded machine do not count) and keeps its best
 * round. Prints each pair and the median of the differences.
 *   trace_call_cost [PAIRS [ROUNDS [CALLS]]]      (default 11 7 200000)
 *   trace_call_cost --child ROUNDS CALLS          (one side: ns per call)
 * No zcrun needed: zc_init without ZC_STORE or PMIx makes a comm of one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

static double thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* One side: the best round's ns per call, printed on stdout. */
static int child(int rounds, int calls) {
  zc_comm* comm = NULL;
  zc_status s = zc_init(&comm);
  if (s != ZC_OK) {
    fprintf(stderr, "trace_call_cost: zc_init: %s\n", zc_status_string(s));
    return 1;
  }
  float in[2] = {1.0f, 2.0f}, out[2];
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    const double t0 = thread_cpu_ns();
    for (int i = 0; i < calls; i++) {
      s = zc_allreduce(comm, in, out, 2, ZC_FLOAT32, ZC_SUM);
      if (s != ZC_OK) {
        fprintf(stderr, "trace_call_cost: zc_allreduce: %s\n", zc_last_error(comm));
        return 1;
      }
    }
    const double ns = (thread_cpu_ns() - t0) / calls;
    if (ns < best) best = ns;
  }
  printf("%.3f\n", best);
  zc_finalize(comm);
  return 0;
}

/* Runs one child with the given buffer size; its ns per call, or -1. */
static double run_child(const char* self, const char* buffer, int rounds, int calls) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    char r[16], c[16];
    snprintf(r, sizeof r, "%d", rounds);
    snprintf(c, sizeof c, "%d", calls);
    setenv("ZC_TRACE_BUFFER_SIZE", buffer, 1);
    unsetenv("ZC_STORE");
    dup2(fds[1], 1);
    close(fds[0]);
    execl(self, self, "--child", r, c, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[64] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
  return atof(buf);
}

int main(int argc, char** argv) {
  if (argc == 4 && !strcmp(argv[1], "--child")) return child(atoi(argv[2]), atoi(argv[3]));
  const int pairs = argc > 1 ? atoi(argv[1]) : 11;
  const int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const int calls = argc > 3 ? atoi(argv[3]) : 200000;
  if (pairs < 1 || rounds < 1 || calls < 1) {
    fprintf(stderr, "usage: trace_call_cost [PAIRS [ROUNDS [CALLS]]]\n");
    return 2;
  }
  double* diff = calloc((size_t)pairs, sizeof(double));
  double* on_ns = calloc((size_t)pairs, sizeof(double));
  double* off_ns = calloc((size_t)pairs, sizeof(double));
  for (int p = 0; p < pairs; p++) {
    double on, off;
    if (p % 2 == 0) {
      on = run_child(argv[0], "2000", rounds, calls);
      off = run_child(argv[0], "0", rounds, calls);
    } else {
      off = run_child(argv[0], "0", rounds, calls);
      on = run_child(argv[0], "2000", rounds, calls);
    }
    if (on < 0 || off < 0) {
      fprintf(stderr, "trace_call_cost: a child failed\n");
      return 1;
    }
    on_ns[p] = on, off_ns[p] = off, diff[p] = on - off;
    printf("pair %2d: recorder on %7.2f ns, off %7.2f ns per call: %+6.2f ns\n", p + 1, on, off, on - off);
  }
  qsort(diff, (size_t)pairs, sizeof(double), cmp_double);
  qsort(on_ns, (size_t)pairs, sizeof(double), cmp_double);
  qsort(off_ns, (size_t)pairs, sizeof(double), cmp_double);
  printf("8-byte zc_allreduce on 1 rank, median of %d pairs: on %.2f ns, off %.2f ns; "
         "the recorder's share: %.2f ns per call (min %.2f, max %.2f)\n",
         pairs, on_ns[pairs / 2], off_ns[pairs / 2], diff[pairs / 2], diff[0], diff[pairs - 1]);
  free(diff), free(on_ns), free(off_ns);
  return 0;
}
