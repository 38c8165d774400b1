/* A framework-style job with no launcher: the program forks its N ranks
 * itself, rank 0 makes two unique ids and passes them to the others through
 * pipes, and every rank runs fw_job (framework_job.h). Exits 0 when every
 * rank passed. Usage: framework_program N   (ZC_TRANSPORT picks shm or tcp) */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "framework_job.h"

static int write_all(int fd, const void* p, size_t n) {
  const char* c = (const char*)p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void* p, size_t n) {
  char* c = (char*)p;
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

static int rank_main(int rank, int n, int (*pipes)[2]) {
  zc_unique_id ids[2];
  if (rank == 0) {
    for (int i = 0; i < 2; ++i)
      if (zc_get_unique_id(&ids[i]) != ZC_OK) {
        fprintf(stderr, "rank 0: zc_get_unique_id: %s\n", zc_last_error(NULL));
        return 1;
      }
    for (int q = 1; q < n; ++q)
      if (write_all(pipes[q][1], ids, sizeof(ids)) != 0) return 1;
  } else if (read_all(pipes[rank][0], ids, sizeof(ids)) != 0) {
    fprintf(stderr, "rank %d: no id from rank 0\n", rank);
    return 1;
  }
  return fw_job(rank, n, ids);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || n > 8) {
    fprintf(stderr, "usage: %s N (1..8)\n", argv[0]);
    return 2;
  }
  int pipes[8][2];
  for (int q = 0; q < n; ++q)
    if (pipe(pipes[q]) != 0) return 1;
  pid_t pids[8];
  for (int q = 0; q < n; ++q) {
    pids[q] = fork();
    if (pids[q] < 0) return 1;
    if (pids[q] == 0) {
      int rc = rank_main(q, n, pipes);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
  }
  int failed = 0;
  for (int done = 0; done < n;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, 0);
    if (p < 0) break;
    int q = 0;
    while (q < n && pids[q] != p) ++q;
    if (q == n) continue;
    ++done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d %s %d\n", q, WIFEXITED(status) ? "exited with" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      if (!failed)
        for (int k = 0; k < n; ++k) kill(pids[k], SIGKILL);  // no rank waits out its deadline
      failed = 1;
    }
  }
  if (!failed) printf("framework job of %d ranks: every rank passed\n", n);
  return failed;
}
