/* The job the Slurm and ssh tests run on emulated hosts (tests/slurm), written
 * only against include/zcomm/zcomm.h. Started by srun --mpi=pmix, zcrun or
 * mpirun, it checks:
 *   - what the launcher says against what zcomm got: rank and size against
 *     SLURM_PROCID/SLURM_NTASKS (or ZC_RANK/ZC_SIZE, or OMPI_COMM_WORLD_*),
 *     the local rank against SLURM_LOCALID (or ZC_LOCAL_RANK), and the
 *     locality against the host names every rank reports: zc_local_size is
 *     the number of ranks on this host and the local ranks of a host are
 *     0..local_size-1;
 *   - the transports, from the kernel's view of this process, not zcomm's
 *     logs: the shared-memory segments of other ranks that this process
 *     maps (/proc/self/maps) are exactly those of the other ranks on its
 *     host, and its TCP connections (its sockets in /proc/self/net/tcp) reach
 *     every other host's address and never its own;
 *   - every collective, blocking and nonblocking, on rank- and
 *     index-dependent int64 data of 0, 1, 7, 1031 and 262147 elements (the
 *     last is 2 MiB, more than one pipeline chunk), every root; allreduce
 *     with sum, prod, min, max and avg, in and out of place; a persistent
 *     allreduce plan; send/recv around the ring.
 * Exit 0 when all holds; else 1 with "rank R: what: got ..., want ...".
 *   cluster_job                  the checks above
 *   cluster_job --first          zc_init and one allreduce; rank 0 prints
 *                                "first allreduce done at <unix time s>"
 *   cluster_job --loop SECONDS   the checks, then allreduces until SECONDS
 *                                have passed (for the kill tests); prints
 *                                "ready rank R pid P host H" after zc_init */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

static int g_rank = -1;
static zc_comm* comm = NULL;

#define CHECK_OK(call)                                                         \
  do {                                                                         \
    zc_status s_ = (call);                                                     \
    if (s_ != ZC_OK) {                                                         \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, #call,           \
              zc_status_string(s_), zc_last_error(comm));                      \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT_EQ(what, got, want)                                             \
  do {                                                                         \
    if ((int64_t)(got) != (int64_t)(want)) {                                   \
      fprintf(stderr, "rank %d: %s: got %lld, want %lld\n", g_rank, what,      \
              (long long)(got), (long long)(want));                            \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* Blocking call, or its nonblocking twin (which sets rq) and a wait. */
#define RUN(nb, blocking, nonblocking)                                         \
  do {                                                                         \
    if (!(nb)) {                                                               \
      CHECK_OK(blocking);                                                      \
    } else {                                                                   \
      zc_request* rq = NULL;                                                   \
      CHECK_OK(nonblocking);                                                   \
      CHECK_OK(zc_wait(rq));                                                   \
    }                                                                          \
  } while (0)

static int64_t val(int rank, size_t i) { return (int64_t)(rank + 1) * 1000003 + (int64_t)(i % 100003) * 7; }

static double now_unix(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int env_int(const char* a, const char* b, const char* c) {
  const char* names[3] = {a, b, c};
  for (int k = 0; k < 3; ++k) {
    const char* v = names[k] ? getenv(names[k]) : NULL;
    if (v && *v) return atoi(v);
  }
  return -1;
}

/* ---- locality ------------------------------------------------------------ */

#define HOSTLEN 64
typedef struct {
  char host[HOSTLEN];
  uint32_t addr; /* network order; 0: none */
  int32_t local_rank, local_size;
} rank_info;

/* The address of ZC_SOCKET_IFNAME's exact interface ("=eth0"), else the
 * first non-loopback IPv4 address. */
static uint32_t my_address(void) {
  const char* want = getenv("ZC_SOCKET_IFNAME");
  if (want && want[0] == '=') ++want;
  else want = NULL;
  struct ifaddrs *ifs, *i;
  uint32_t out = 0;
  if (getifaddrs(&ifs) != 0) return 0;
  for (i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
    if (want && strcmp(i->ifa_name, want) != 0) continue;
    out = ((struct sockaddr_in*)i->ifa_addr)->sin_addr.s_addr;
    break;
  }
  freeifaddrs(ifs);
  return out;
}

static int check_identity(int rank, int n, int lrank, int lsize, const rank_info* all) {
  int want_rank = env_int("SLURM_PROCID", "ZC_RANK", "OMPI_COMM_WORLD_RANK");
  int want_size = env_int("SLURM_NTASKS", "ZC_SIZE", "OMPI_COMM_WORLD_SIZE");
  int want_lrank = env_int("SLURM_LOCALID", "ZC_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
  if (want_rank >= 0) EXPECT_EQ("rank against the launcher's", rank, want_rank);
  if (want_size >= 0) EXPECT_EQ("size against the launcher's", n, want_size);
  if (want_lrank >= 0) EXPECT_EQ("local rank against the launcher's", lrank, want_lrank);
  int same = 0;
  unsigned seen = 0;
  for (int r = 0; r < n; ++r) {
    if (strcmp(all[r].host, all[rank].host) != 0) continue;
    ++same;
    EXPECT_EQ("local size of a rank on this host", all[r].local_size, lsize);
    if (all[r].local_rank < 0 || all[r].local_rank >= 32 || (seen >> all[r].local_rank & 1u)) {
      fprintf(stderr, "rank %d: local rank %d of rank %d on %s repeats or is out of range\n", rank,
              all[r].local_rank, r, all[r].host);
      return 1;
    }
    seen |= 1u << all[r].local_rank;
  }
  EXPECT_EQ("local size against the ranks on this host", lsize, same);
  return 0;
}

/* Ranks whose shared-memory segments this process maps: names
 * /dev/shm/zc-<tag>-<rank>-<pid>-... (src/p2p/segment.cpp). */
static unsigned mapped_shm_ranks(int self) {
  FILE* f = fopen("/proc/self/maps", "re");
  char line[1024];
  unsigned mask = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    char* p = strstr(line, "/dev/shm/zc-");
    if (!p) continue;
    p = strchr(p + 12, '-'); /* after the tag */
    if (!p) continue;
    int r = atoi(p + 1);
    if (r != self && r >= 0 && r < 32) mask |= 1u << r;
  }
  fclose(f);
  return mask;
}

/* Remote IPv4 addresses of this process's established TCP connections. */
static int tcp_peers(uint32_t* out, int max) {
  /* socket inodes of our fds */
  unsigned long inodes[512];
  int ni = 0, n = 0;
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  if (!d) return 0;
  while ((e = readdir(d)) && ni < 512) {
    char path[300], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = 0;
    unsigned long ino;
    if (sscanf(target, "socket:[%lu]", &ino) == 1) inodes[ni++] = ino;
  }
  closedir(d);
  FILE* f = fopen("/proc/self/net/tcp", "re");
  char line[512];
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    unsigned la, lp, ra, rp, st;
    unsigned long ino;
    if (sscanf(line, " %*d: %x:%x %x:%x %x %*s %*s %*s %*s %*s %lu", &la, &lp, &ra, &rp, &st, &ino) != 6)
      continue;
    if (st != 1) continue; /* TCP_ESTABLISHED */
    for (int k = 0; k < ni; ++k)
      if (inodes[k] == ino && n < max) out[n++] = ra; /* as stored: network order */
  }
  fclose(f);
  return n;
}

static int check_transports(int rank, int n, const rank_info* all) {
  unsigned want_shm = 0, got_shm = mapped_shm_ranks(rank);
  for (int r = 0; r < n; ++r)
    if (r != rank && strcmp(all[r].host, all[rank].host) == 0) want_shm |= 1u << r;
  if (got_shm != want_shm) {
    fprintf(stderr, "rank %d: maps the shared memory of ranks 0x%x, want 0x%x (the other ranks on %s)\n",
            rank, got_shm, want_shm, all[rank].host);
    return 1;
  }
  uint32_t peers[512];
  int np = tcp_peers(peers, 512);
  char buf[INET_ADDRSTRLEN];
  for (int k = 0; k < np; ++k) {
    if (peers[k] == all[rank].addr) {
      inet_ntop(AF_INET, &peers[k], buf, sizeof buf);
      fprintf(stderr, "rank %d: a TCP connection to its own host's address %s\n", rank, buf);
      return 1;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (strcmp(all[r].host, all[rank].host) == 0) continue;
    int found = 0;
    for (int k = 0; k < np; ++k) found |= peers[k] == all[r].addr;
    if (!found) {
      inet_ntop(AF_INET, &all[r].addr, buf, sizeof buf);
      fprintf(stderr, "rank %d: no TCP connection to rank %d's host %s (%s)\n", rank, r, all[r].host, buf);
      return 1;
    }
  }
  printf("rank %d of %d on %s: local rank %d of %d; shared memory with ranks 0x%x; %d TCP connection(s)\n",
         rank, n, all[rank].host, all[rank].local_rank, all[rank].local_size, got_shm, np);
  return 0;
}

/* ---- collectives ---------------------------------------------------------- */

static int64_t *A, *B;

static int check_allreduce(int rank, int n, size_t count, int nb) {
  for (int op = ZC_SUM; op <= ZC_MAX; ++op) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      for (size_t i = 0; i < count; ++i) A[i] = op == ZC_PROD ? (int64_t)((rank + i) % 3) + 1 : val(rank, i);
      int64_t* out = inplace ? A : B;
      RUN(nb, zc_allreduce(comm, A, out, count, ZC_INT64, (zc_op)op),
          zc_iallreduce(comm, A, out, count, ZC_INT64, (zc_op)op, &rq));
      for (size_t i = 0; i < count; ++i) {
        int64_t want = op == ZC_PROD ? 1 : op == ZC_MIN ? INT64_MAX : op == ZC_MAX ? INT64_MIN : 0;
        for (int r = 0; r < n; ++r) {
          int64_t v = op == ZC_PROD ? (int64_t)((r + i) % 3) + 1 : val(r, i);
          if (op == ZC_SUM) want += v;
          else if (op == ZC_PROD) want *= v;
          else if (op == ZC_MIN) want = v < want ? v : want;
          else want = v > want ? v : want;
        }
        EXPECT_EQ(nb ? "iallreduce" : "allreduce", out[i], want);
      }
    }
  }
  double* f = (double*)A;
  for (size_t i = 0; i < count; ++i) f[i] = rank * 2.0 + (double)(i % 5);
  RUN(nb, zc_allreduce(comm, f, f, count, ZC_FLOAT64, ZC_AVG),
      zc_iallreduce(comm, f, f, count, ZC_FLOAT64, ZC_AVG, &rq));
  for (size_t i = 0; i < count; ++i)
    if (f[i] != (double)(n - 1) + (double)(i % 5)) {
      fprintf(stderr, "rank %d: allreduce avg [%zu]: got %g\n", rank, i, f[i]);
      return 1;
    }
  return 0;
}

static int check_rooted(int rank, int n, size_t count, int nb) {
  for (int root = 0; root < n; ++root) {
    for (size_t i = 0; i < count; ++i) A[i] = rank == root ? val(root, i) : -1;
    RUN(nb, zc_broadcast(comm, A, count, ZC_INT64, root), zc_ibroadcast(comm, A, count, ZC_INT64, root, &rq));
    for (size_t i = 0; i < count; ++i) EXPECT_EQ("broadcast", A[i], val(root, i));

    for (size_t i = 0; i < count; ++i) A[i] = val(rank, i);
    RUN(nb, zc_reduce(comm, A, rank == root ? B : NULL, count, ZC_INT64, ZC_SUM, root),
        zc_ireduce(comm, A, rank == root ? B : NULL, count, ZC_INT64, ZC_SUM, root, &rq));
    if (rank == root)
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int r = 0; r < n; ++r) want += val(r, i);
        EXPECT_EQ("reduce", B[i], want);
      }

    RUN(nb, zc_gather(comm, A, rank == root ? B : NULL, count, ZC_INT64, root),
        zc_igather(comm, A, rank == root ? B : NULL, count, ZC_INT64, root, &rq));
    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) EXPECT_EQ("gather", B[r * count + i], val(r, i));

    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) B[r * count + i] = val(r, i) + root;
    RUN(nb, zc_scatter(comm, rank == root ? B : NULL, A, count, ZC_INT64, root),
        zc_iscatter(comm, rank == root ? B : NULL, A, count, ZC_INT64, root, &rq));
    for (size_t i = 0; i < count; ++i) EXPECT_EQ("scatter", A[i], val(rank, i) + root);
  }
  return 0;
}

static int check_gathers(int rank, int n, size_t count, int nb) {
  for (size_t i = 0; i < count; ++i) A[i] = val(rank, i);
  RUN(nb, zc_allgather(comm, A, B, count, ZC_INT64), zc_iallgather(comm, A, B, count, ZC_INT64, &rq));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ("allgather", B[r * count + i], val(r, i));

  for (size_t i = 0; i < count * n; ++i) A[i] = val(rank, i);
  RUN(nb, zc_reduce_scatter(comm, A, B, count, ZC_INT64, ZC_SUM),
      zc_ireduce_scatter(comm, A, B, count, ZC_INT64, ZC_SUM, &rq));
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int r = 0; r < n; ++r) want += val(r, rank * count + i);
    EXPECT_EQ("reduce_scatter", B[i], want);
  }

  for (int d = 0; d < n; ++d)
    for (size_t i = 0; i < count; ++i) A[d * count + i] = rank * 1000 + d * 10 + (int64_t)(i % 7);
  RUN(nb, zc_alltoall(comm, A, B, count, ZC_INT64), zc_ialltoall(comm, A, B, count, ZC_INT64, &rq));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ("alltoall", B[r * count + i], r * 1000 + rank * 10 + (int64_t)(i % 7));

  /* v-variants: rank r contributes count + r elements (0 when count is 0) */
  size_t cnt[32], disp[32], scnt[32], sdisp[32], total = 0, stotal = 0;
  for (int r = 0; r < n; ++r) {
    cnt[r] = count ? count + (size_t)r : 0;
    disp[r] = total;
    total += cnt[r];
  }
  for (size_t i = 0; i < cnt[rank]; ++i) A[i] = val(rank, i) * 3;
  RUN(nb, zc_allgatherv(comm, A, cnt[rank], B, cnt, disp, ZC_INT64),
      zc_iallgatherv(comm, A, cnt[rank], B, cnt, disp, ZC_INT64, &rq));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < cnt[r]; ++i) EXPECT_EQ("allgatherv", B[disp[r] + i], val(r, i) * 3);

  /* alltoallv: rank s sends count + d elements to rank d */
  for (int d = 0; d < n; ++d) {
    scnt[d] = count ? count + (size_t)d : 0;
    sdisp[d] = stotal;
    stotal += scnt[d];
    for (size_t i = 0; i < scnt[d]; ++i) A[sdisp[d] + i] = rank * 100000 + d * 100 + (int64_t)(i % 97);
  }
  size_t rcnt[32], rdisp[32], rtotal = 0;
  for (int s = 0; s < n; ++s) {
    rcnt[s] = count ? count + (size_t)rank : 0;
    rdisp[s] = rtotal;
    rtotal += rcnt[s];
  }
  RUN(nb, zc_alltoallv(comm, A, scnt, sdisp, B, rcnt, rdisp, ZC_INT64),
      zc_ialltoallv(comm, A, scnt, sdisp, B, rcnt, rdisp, ZC_INT64, &rq));
  for (int s = 0; s < n; ++s)
    for (size_t i = 0; i < rcnt[s]; ++i)
      EXPECT_EQ("alltoallv", B[rdisp[s] + i], s * 100000 + rank * 100 + (int64_t)(i % 97));

  RUN(nb, zc_barrier(comm), zc_ibarrier(comm, &rq));
  return 0;
}

static int check_plan_and_p2p(int rank, int n) {
  const size_t count = 100003;
  zc_plan* plan = NULL;
  CHECK_OK(zc_allreduce_plan_init(comm, count, ZC_INT64, ZC_SUM, &plan));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < count; ++i) A[i] = val(rank, i) + round;
    CHECK_OK(zc_plan_start(plan, A, B));
    CHECK_OK(zc_plan_wait(plan));
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) want += val(r, i) + round;
      EXPECT_EQ("plan allreduce", B[i], want);
    }
  }
  CHECK_OK(zc_plan_free(plan));
  if (n == 1) return 0;
  /* ring: small (eager) and large messages */
  const size_t sizes[2] = {5, 70001};
  for (int k = 0; k < 2; ++k) {
    size_t c = sizes[k];
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (size_t i = 0; i < c; ++i) A[i] = val(rank, i);
    zc_request* rq = NULL;
    CHECK_OK(zc_irecv(comm, B, c * sizeof(int64_t), prev, 7 + k, &rq));
    CHECK_OK(zc_send(comm, A, c * sizeof(int64_t), next, 7 + k));
    CHECK_OK(zc_wait(rq));
    for (size_t i = 0; i < c; ++i) EXPECT_EQ("send/recv", B[i], val(prev, i));
  }
  return 0;
}

static int check_collectives(int rank, int n) {
  const size_t sizes[] = {0, 1, 7, 1031, 262147};
  for (int nb = 0; nb < 2; ++nb) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
      size_t count = sizes[s];
      if (check_allreduce(rank, n, count, nb) || check_rooted(rank, n, count, nb) ||
          check_gathers(rank, n, count, nb))
        return 1;
    }
  }
  return check_plan_and_p2p(rank, n);
}

int main(int argc, char** argv) {
  double start = now_unix();
  int first = argc > 1 && strcmp(argv[1], "--first") == 0;
  double loop = argc > 2 && strcmp(argv[1], "--loop") == 0 ? atof(argv[2]) : 0;
  zc_status st = zc_init(&comm);
  if (st != ZC_OK) {
    fprintf(stderr, "zc_init: %s: %s\n", zc_status_string(st), zc_last_error(NULL));
    return 1;
  }
  int rank = zc_rank(comm), n = zc_size(comm);
  g_rank = rank;
  if (first) {
    int64_t x = rank, y = 0;
    CHECK_OK(zc_allreduce(comm, &x, &y, 1, ZC_INT64, ZC_SUM));
    EXPECT_EQ("first allreduce", y, (int64_t)n * (n - 1) / 2);
    if (rank == 0) printf("first allreduce done at %.6f (process start %.6f)\n", now_unix(), start);
    CHECK_OK(zc_finalize(comm));
    return 0;
  }
  if (n > 32) {
    fprintf(stderr, "cluster_job: at most 32 ranks\n");
    return 1;
  }
  rank_info me, all[32];
  memset(&me, 0, sizeof me);
  gethostname(me.host, HOSTLEN - 1);
  me.addr = my_address();
  me.local_rank = zc_local_rank(comm);
  me.local_size = zc_local_size(comm);
  if (loop > 0) {
    printf("ready rank %d pid %d host %s\n", rank, (int)getpid(), me.host);
    fflush(stdout);
  }
  CHECK_OK(zc_allgather(comm, &me, all, sizeof me, ZC_UINT8));
  if (check_identity(rank, n, me.local_rank, me.local_size, all)) return 1;

  size_t max = 262147 * 32 + 32 * 32;
  A = malloc(max * sizeof(int64_t));
  B = malloc(max * sizeof(int64_t));
  if (!A || !B) return 1;
  if (check_collectives(rank, n)) return 1;
  /* After the collectives every connection a job of this shape uses exists. */
  if (check_transports(rank, n, all)) return 1;
  CHECK_OK(zc_barrier(comm));
  if (rank == 0) printf("cluster_job: %d ranks: every collective verified\n", n);
  fflush(stdout);
  while (loop > 0 && now_unix() - start < loop) {
    int64_t x = 1, y = 0;
    CHECK_OK(zc_allreduce(comm, &x, &y, 1, ZC_INT64, ZC_SUM));
    EXPECT_EQ("loop allreduce", y, n);
    usleep(20000);
  }
  free(A);
  free(B);
  CHECK_OK(zc_finalize(comm));
  return 0;
}
