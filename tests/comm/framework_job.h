/* The body of a framework-style job, written only against
 * include/zcomm/zcomm.h: communicators from unique ids, a duplicate and a
 * second id used from three threads at once, split halves, and on each every
 * collective, the v-variants and nonblocking point to point with rank- and
 * index-dependent data checked exactly. Shared by framework_program.c
 * (ranks forked by the program, the id passed through a pipe) and
 * framework_mpi.c (ranks by mpirun, the id sent by MPI_Bcast). */
#ifndef ZCOMM_TESTS_FRAMEWORK_JOB_H
#define ZCOMM_TESTS_FRAMEWORK_JOB_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#define FW_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s: line %d: ", label, __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                      \
      fprintf(stderr, "\n");                                             \
      return 1;                                                          \
    }                                                                    \
  } while (0)

#define FW_OK(call)                                                      \
  do {                                                                   \
    zc_status s_ = (call);                                               \
    FW_CHECK(s_ == ZC_OK, "%s: %s: %s", #call, zc_status_string(s_),     \
             zc_last_error(comm));                                       \
  } while (0)

/* Small exact values: sums over 5 ranks stay exact in every type. */
static int32_t fw_val(int rank, size_t i, int salt) {
  return (int32_t)((rank + 1) * 7 + (int32_t)((i * 13 + (size_t)salt) % 97));
}

/* Per-rank count of the v-variants: uneven, zero for some ranks. */
static size_t fw_vcount(int rank, size_t base) {
  return (rank % 3 == 1) ? 0 : base + (size_t)rank * 3;
}

static int fw_run_all(zc_comm* comm, const char* label) {
  const int r = zc_rank(comm), n = zc_size(comm);
  const size_t counts[] = {0, 1, 7, 1000, 65537};
  const size_t maxc = 65537 + 16;
  int32_t* a = malloc(maxc * (size_t)n * sizeof(int32_t));
  int32_t* b = malloc(maxc * (size_t)n * sizeof(int32_t));
  int64_t* c = malloc(maxc * sizeof(int64_t));
  double* d = malloc(maxc * sizeof(double));
  FW_CHECK(a && b && c && d, "out of memory");
  int fail = 0;
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !fail; ++ci) {
    const size_t count = counts[ci];
    /* allreduce: sum int32 out of place, then in place; max float64 */
    for (size_t i = 0; i < count; ++i) a[i] = fw_val(r, i, 1);
    FW_OK(zc_allreduce(comm, a, b, count, ZC_INT32, ZC_SUM));
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int q = 0; q < n; ++q) want += fw_val(q, i, 1);
      FW_CHECK(b[i] == want, "allreduce sum count %zu [%zu]: %d != %d", count, i, b[i], want);
    }
    FW_OK(zc_allreduce(comm, a, a, count, ZC_INT32, ZC_SUM));
    FW_CHECK(count == 0 || memcmp(a, b, count * sizeof(int32_t)) == 0, "in-place allreduce differs");
    for (size_t i = 0; i < count; ++i) d[i] = (double)fw_val(r, i, 2) - 50.5;
    FW_OK(zc_allreduce(comm, d, d, count, ZC_FLOAT64, ZC_MAX));
    for (size_t i = 0; i < count; ++i) {
      double want = -1e300;
      for (int q = 0; q < n; ++q) want = (double)fw_val(q, i, 2) - 50.5 > want ? (double)fw_val(q, i, 2) - 50.5 : want;
      FW_CHECK(d[i] == want, "allreduce max float64 [%zu]: %g != %g", i, d[i], want);
    }
    /* bitwise xor and or on int64 */
    for (size_t i = 0; i < count; ++i) c[i] = (int64_t)1 << ((r + (int)i) % 60);
    FW_OK(zc_allreduce(comm, c, c, count, ZC_INT64, ZC_BOR));
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int q = 0; q < n; ++q) want |= (int64_t)1 << ((q + (int)i) % 60);
      FW_CHECK(c[i] == want, "allreduce bor [%zu]", i);
    }
    /* broadcast from a root that moves with the count */
    const int root = (int)(count % (size_t)n);
    for (size_t i = 0; i < count; ++i) a[i] = r == root ? fw_val(root, i, 3) : -1;
    FW_OK(zc_broadcast(comm, a, count, ZC_INT32, root));
    for (size_t i = 0; i < count; ++i) FW_CHECK(a[i] == fw_val(root, i, 3), "broadcast [%zu]", i);
    /* reduce to root */
    for (size_t i = 0; i < count; ++i) a[i] = fw_val(r, i, 4);
    FW_OK(zc_reduce(comm, a, r == root ? b : NULL, count, ZC_INT32, ZC_SUM, root));
    if (r == root)
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) want += fw_val(q, i, 4);
        FW_CHECK(b[i] == want, "reduce [%zu]", i);
      }
    /* allgather, gather, scatter */
    for (size_t i = 0; i < count; ++i) a[i] = fw_val(r, i, 5);
    FW_OK(zc_allgather(comm, a, b, count, ZC_INT32));
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) FW_CHECK(b[(size_t)q * count + i] == fw_val(q, i, 5), "allgather");
    memset(b, 0, count * (size_t)n * sizeof(int32_t));
    FW_OK(zc_gather(comm, a, r == root ? b : NULL, count, ZC_INT32, root));
    if (r == root)
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) FW_CHECK(b[(size_t)q * count + i] == fw_val(q, i, 5), "gather");
    if (r == root)
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) b[(size_t)q * count + i] = fw_val(q, i, 6);
    FW_OK(zc_scatter(comm, r == root ? b : NULL, a, count, ZC_INT32, root));
    for (size_t i = 0; i < count; ++i) FW_CHECK(a[i] == fw_val(r, i, 6), "scatter [%zu]", i);
    /* reduce_scatter, alltoall */
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) a[(size_t)q * count + i] = fw_val(r, (size_t)q * count + i, 7);
    FW_OK(zc_reduce_scatter(comm, a, b, count, ZC_INT32, ZC_SUM));
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int q = 0; q < n; ++q) want += fw_val(q, (size_t)r * count + i, 7);
      FW_CHECK(b[i] == want, "reduce_scatter [%zu]", i);
    }
    FW_OK(zc_alltoall(comm, a, b, count, ZC_INT32));
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        FW_CHECK(b[(size_t)q * count + i] == fw_val(q, (size_t)r * count + i, 7), "alltoall");
    /* allgatherv: uneven blocks stored in reverse rank order */
    {
      size_t rc[8], dsp[8], off = 0;
      for (int q = n - 1; q >= 0; --q) {
        rc[q] = fw_vcount(q, count);
        dsp[q] = off;
        off += rc[q];
      }
      for (size_t i = 0; i < rc[r]; ++i) a[i] = fw_val(r, i, 8);
      FW_OK(zc_allgatherv(comm, a, rc[r], b, rc, dsp, ZC_INT32));
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < rc[q]; ++i) FW_CHECK(b[dsp[q] + i] == fw_val(q, i, 8), "allgatherv");
    }
    /* alltoallv: rank q gets (r + q) % 3 * count / 2 elements from rank r */
    {
      size_t sc[8], sd[8], rcv[8], rd[8], so = 0, ro = 0;
      for (int q = 0; q < n; ++q) {
        sc[q] = (size_t)((r + q) % 3) * count / 2;
        sd[q] = so;
        so += sc[q];
        rcv[q] = (size_t)((q + r) % 3) * count / 2;
        rd[q] = ro;
        ro += rcv[q];
      }
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < sc[q]; ++i) a[sd[q] + i] = fw_val(r, i + (size_t)q * 1000, 9);
      FW_OK(zc_alltoallv(comm, a, sc, sd, b, rcv, rd, ZC_INT32));
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < rcv[q]; ++i)
          FW_CHECK(b[rd[q] + i] == fw_val(q, i + (size_t)r * 1000, 9), "alltoallv from %d [%zu]", q, i);
    }
    /* nonblocking point to point: four messages each way around the ring,
     * posted receives first in reverse tag order, completed in reverse */
    if (n > 1) {
      const int right = (r + 1) % n, left = (r + n - 1) % n;
      zc_request* req[16];
      int nreq = 0;
      const size_t per = count / 4 + 1;
      for (int t = 3; t >= 0; --t)
        FW_OK(zc_irecv(comm, b + (size_t)t * per, per * sizeof(int32_t), left, t, &req[nreq++]));
      for (int t = 0; t < 4; ++t) {
        for (size_t i = 0; i < per; ++i) a[(size_t)t * per + i] = fw_val(r, i, 10 + t);
        FW_OK(zc_isend(comm, a + (size_t)t * per, per * sizeof(int32_t), right, t, &req[nreq++]));
      }
      for (int k = nreq - 1; k >= 0; --k) FW_OK(zc_wait(req[k]));
      for (int t = 0; t < 4; ++t)
        for (size_t i = 0; i < per; ++i)
          FW_CHECK(b[(size_t)t * per + i] == fw_val(left, i, 10 + t), "irecv tag %d [%zu]", t, i);
    }
    FW_OK(zc_barrier(comm));
  }
  free(a);
  free(b);
  free(c);
  free(d);
  return fail;
}

struct fw_thread_arg {
  zc_comm* comm;
  const char* label;
  int result;
};

static void* fw_thread(void* p) {
  struct fw_thread_arg* t = (struct fw_thread_arg*)p;
  t->result = fw_run_all(t->comm, t->label);
  return NULL;
}

/* The whole job of one rank. ids[0] and ids[1] were made by rank 0. */
static int fw_job(int rank, int nranks, const zc_unique_id ids[2]) {
  const char* label = "init";
  zc_comm* comm = NULL;
  FW_OK(zc_comm_init_rank(&comm, nranks, &ids[0], rank));
  FW_CHECK(zc_rank(comm) == rank && zc_size(comm) == nranks, "rank %d of %d", zc_rank(comm), zc_size(comm));
  zc_status async = ZC_ERR_INTERNAL;
  FW_OK(zc_comm_get_async_error(comm, &async));
  FW_CHECK(async == ZC_OK, "async error %s on a healthy communicator", zc_status_string(async));
  if (fw_run_all(comm, "world")) return 1;

  /* A duplicate and a communicator from a second id, all three used from
   * threads of their own at the same time. */
  zc_comm* dup = NULL;
  zc_comm* second = NULL;
  FW_OK(zc_comm_dup(comm, &dup));
  FW_CHECK(zc_rank(dup) == rank && zc_size(dup) == nranks, "dup rank %d of %d", zc_rank(dup), zc_size(dup));
  FW_OK(zc_comm_init_rank(&second, nranks, &ids[1], rank));
  struct fw_thread_arg args[3] = {{comm, "world@thread", -1}, {dup, "dup@thread", -1}, {second, "second-id@thread", -1}};
  pthread_t th[3];
  for (int i = 0; i < 3; ++i) FW_CHECK(pthread_create(&th[i], NULL, fw_thread, &args[i]) == 0, "pthread_create");
  for (int i = 0; i < 3; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; ++i) FW_CHECK(args[i].result == 0, "%s failed", args[i].label);

  /* Split halves, ordered by a descending key; odd ranks of a second split
   * stay out of it. */
  const int lower = (nranks + 1) / 2;
  const int color = rank < lower ? 0 : 1;
  zc_comm* half = NULL;
  FW_OK(zc_comm_split(comm, color, -rank, &half));
  const int half_size = color == 0 ? lower : nranks - lower;
  const int first = color == 0 ? 0 : lower;
  FW_CHECK(zc_size(half) == half_size, "half size %d, want %d", zc_size(half), half_size);
  FW_CHECK(zc_rank(half) == (first + half_size - 1) - rank, "half rank %d (old rank %d)", zc_rank(half), rank);
  zc_comm* evens = NULL;
  FW_OK(zc_comm_split(dup, rank % 2 == 0 ? 5 : ZC_SPLIT_NONE, rank, &evens));
  FW_CHECK((rank % 2 == 0) == (evens != NULL), "ZC_SPLIT_NONE gives NULL");
  /* The halves and the evens run at the same time from two threads. */
  struct fw_thread_arg hargs[2] = {{half, "half@thread", -1}, {evens, "evens@thread", 0}};
  pthread_t hth[2];
  int nth = evens ? 2 : 1;
  for (int i = 0; i < nth; ++i) FW_CHECK(pthread_create(&hth[i], NULL, fw_thread, &hargs[i]) == 0, "pthread_create");
  for (int i = 0; i < nth; ++i) pthread_join(hth[i], NULL);
  for (int i = 0; i < nth; ++i) FW_CHECK(hargs[i].result == 0, "%s failed", hargs[i].label);

  /* Finalize in an order where parents go before their children. */
  label = "finalize";
  FW_OK(zc_finalize(comm));
  comm = second;
  FW_OK(zc_finalize(second));
  comm = dup;
  FW_OK(zc_finalize(dup));
  comm = half;
  FW_OK(zc_finalize(half));
  if (evens) {
    comm = evens;
    FW_OK(zc_finalize(evens));
  }
  return 0;
}

#endif
