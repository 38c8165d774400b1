/* An outside program written only against include/zcomm/zcomm.h: checks
 * allreduce (every op, several sizes, in and out of place), broadcast,
 * reduce, allgather, reduce_scatter, alltoall, barrier and iallreduce with
 * exact integer values, and the int16, uint16 and bool dtypes. Exits
 * non-zero on the first wrong value.
 * Run: zcrun -np N ./c_abi_program */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

static int g_rank = -1;

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

static int64_t val(int rank, size_t i) { return (int64_t)((rank + 1) * 3 + (int64_t)(i % 101)); }

int main(void) {
  zc_comm* comm = NULL;
  zc_status st = zc_init(&comm);
  if (st != ZC_OK) {
    fprintf(stderr, "zc_init: %s: %s\n", zc_status_string(st), zc_last_error(NULL));
    return 1;
  }
  int rank = zc_rank(comm), n = zc_size(comm);
  g_rank = rank;
  const size_t sizes[] = {1, 3, 17, 1000, 300001};
  size_t max = 300001 * (size_t)n;
  int64_t* a = malloc(max * sizeof(int64_t));
  int64_t* b = malloc(max * sizeof(int64_t));
  if (!a || !b) return 1;

  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); ++si) {
    size_t count = sizes[si];
    /* allreduce: sum, prod, min, max; out of place then in place */
    for (int op = ZC_SUM; op <= ZC_MAX; ++op) {
      for (int inplace = 0; inplace < 2; ++inplace) {
        for (size_t i = 0; i < count; ++i) a[i] = op == ZC_PROD ? (int64_t)(rank % 3) + 1 : val(rank, i);
        int64_t* out = inplace ? a : b;
        CHECK_OK(zc_allreduce(comm, a, out, count, ZC_INT64, (zc_op)op));
        for (size_t i = 0; i < count; ++i) {
          int64_t want = op == ZC_PROD ? 1 : op == ZC_MIN ? INT64_MAX : op == ZC_MAX ? INT64_MIN : 0;
          for (int r = 0; r < n; ++r) {
            int64_t v = op == ZC_PROD ? (int64_t)(r % 3) + 1 : val(r, i);
            if (op == ZC_SUM) want += v;
            else if (op == ZC_PROD) want *= v;
            else if (op == ZC_MIN) want = v < want ? v : want;
            else want = v > want ? v : want;
          }
          EXPECT_EQ("allreduce", out[i], want);
        }
      }
    }
    /* float32 avg */
    {
      float* f = (float*)a;
      for (size_t i = 0; i < count; ++i) f[i] = (float)(rank * 2);
      CHECK_OK(zc_allreduce(comm, f, f, count, ZC_FLOAT32, ZC_AVG));
      for (size_t i = 0; i < count; ++i)
        if (f[i] != (float)(n - 1)) {
          fprintf(stderr, "rank %d: avg: got %g want %d\n", rank, f[i], n - 1);
          return 1;
        }
    }
    /* broadcast from every root */
    for (int root = 0; root < n; ++root) {
      for (size_t i = 0; i < count; ++i) a[i] = rank == root ? val(root, i) : -1;
      CHECK_OK(zc_broadcast(comm, a, count, ZC_INT64, root));
      for (size_t i = 0; i < count; ++i) EXPECT_EQ("broadcast", a[i], val(root, i));
    }
    /* reduce to the last rank */
    {
      int root = n - 1;
      for (size_t i = 0; i < count; ++i) a[i] = val(rank, i);
      CHECK_OK(zc_reduce(comm, a, rank == root ? b : NULL, count, ZC_INT64, ZC_SUM, root));
      if (rank == root)
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int r = 0; r < n; ++r) want += val(r, i);
          EXPECT_EQ("reduce", b[i], want);
        }
    }
    /* allgather */
    for (size_t i = 0; i < count; ++i) a[i] = val(rank, i);
    CHECK_OK(zc_allgather(comm, a, b, count, ZC_INT64));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) EXPECT_EQ("allgather", b[r * count + i], val(r, i));
    /* reduce_scatter: block k of rank r holds val(r, k*count+i) */
    for (size_t i = 0; i < count * n; ++i) a[i] = val(rank, i);
    CHECK_OK(zc_reduce_scatter(comm, a, b, count, ZC_INT64, ZC_SUM));
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) want += val(r, rank * count + i);
      EXPECT_EQ("reduce_scatter", b[i], want);
    }
    /* alltoall: block for rank d from rank r holds r*1000+d*10+i%7 */
    for (int d = 0; d < n; ++d)
      for (size_t i = 0; i < count; ++i) a[d * count + i] = rank * 1000 + d * 10 + (int64_t)(i % 7);
    CHECK_OK(zc_alltoall(comm, a, b, count, ZC_INT64));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        EXPECT_EQ("alltoall", b[r * count + i], r * 1000 + rank * 10 + (int64_t)(i % 7));
    CHECK_OK(zc_barrier(comm));
  }
  /* nonblocking allreduce */
  {
    size_t count = 4097;
    for (size_t i = 0; i < count; ++i) a[i] = val(rank, i);
    zc_request* req = NULL;
    CHECK_OK(zc_iallreduce(comm, a, b, count, ZC_INT64, ZC_SUM, &req));
    CHECK_OK(zc_wait(req));
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) want += val(r, i);
      EXPECT_EQ("iallreduce", b[i], want);
    }
  }
  /* int16, uint16 and bool from C: their enum values and sizes, an int16
   * sum that wraps, a uint16 max, bool's logical or/and written as 0/1. */
  {
    EXPECT_EQ("ZC_INT16", ZC_INT16, 10);
    EXPECT_EQ("ZC_UINT16", ZC_UINT16, 11);
    EXPECT_EQ("ZC_BOOL", ZC_BOOL, 12);
    EXPECT_EQ("size int16", zc_dtype_size(ZC_INT16), 2);
    EXPECT_EQ("size uint16", zc_dtype_size(ZC_UINT16), 2);
    EXPECT_EQ("size bool", zc_dtype_size(ZC_BOOL), 1);
    int16_t s16[3] = {32767, (int16_t)(-rank), (int16_t)(rank * 100)};
    CHECK_OK(zc_allreduce(comm, s16, s16, 3, ZC_INT16, ZC_SUM));
    EXPECT_EQ("int16 sum wraps", s16[0], (int16_t)(uint16_t)(32767u * (unsigned)n));
    EXPECT_EQ("int16 sum", s16[1], -(n * (n - 1) / 2));
    uint16_t u16[2] = {(uint16_t)(65535 - rank), (uint16_t)rank};
    CHECK_OK(zc_allreduce(comm, u16, u16, 2, ZC_UINT16, ZC_MAX));
    EXPECT_EQ("uint16 max", u16[0], 65535);
    EXPECT_EQ("uint16 max", u16[1], n - 1);
    /* true as 2 and 0x80 on some ranks: the results are still 0 or 1 */
    uint8_t flags[3] = {(uint8_t)(rank == 0 ? 2 : 0), 0x80, 0}, any[3], all[3];
    CHECK_OK(zc_allreduce(comm, flags, any, 3, ZC_BOOL, ZC_SUM));
    CHECK_OK(zc_allreduce(comm, flags, all, 3, ZC_BOOL, ZC_PROD));
    EXPECT_EQ("bool or", any[0], 1);
    EXPECT_EQ("bool or", any[1], 1);
    EXPECT_EQ("bool or", any[2], 0);
    EXPECT_EQ("bool and", all[0], n == 1 ? 1 : 0);
    EXPECT_EQ("bool and", all[1], 1);
    EXPECT_EQ("bool and", all[2], 0);
    st = zc_allreduce(comm, flags, any, 3, ZC_BOOL, ZC_AVG);
    EXPECT_EQ("bool avg refused", st, ZC_ERR_INVALID_ARG);
    if (!strstr(zc_last_error(comm), "bool")) {
      fprintf(stderr, "rank %d: bool avg message: %s\n", rank, zc_last_error(comm));
      return 1;
    }
  }
  free(a);
  free(b);
  CHECK_OK(zc_finalize(comm));
  if (rank == 0) printf("c_abi_program: %d ranks OK\n", n);
  return 0;
}
