/* Shared helpers of the perf/ benchmarks: clock, option parsing, the
 * iteration schedule, the nccl-tests bus-bandwidth factors, rank- and
 * index-dependent test data with its checker, and the JSON result file.
 *
 * Header-only, C11 and C++ compatible (the Gloo and gRPC baselines include it
 * too), so every program reports the same columns in the same way. It does not
 * depend on any communication library. */
#ifndef ZC_PERF_BENCH_UTIL_H
#define ZC_PERF_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
#define BU_INLINE static inline
#else
#define BU_INLINE static inline
#endif

#define BU_KiB ((size_t)1 << 10)
#define BU_MiB ((size_t)1 << 20)
#define BU_GiB ((size_t)1 << 30)

/* ---- clock --------------------------------------------------------------- */

BU_INLINE double bu_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

BU_INLINE double bu_now_ms(void) { return bu_now_us() * 1e-3; }

/* qsort comparator for doubles (ascending). */
BU_INLINE int bu_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* ---- sizes --------------------------------------------------------------- */

/* "4", "4K", "256M", "1G" (binary multiples, case-insensitive, optional B)
 * -> bytes. Returns 0 on success. */
BU_INLINE int bu_parse_size(const char* text, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text) return -1;
  unsigned long long mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || text[0] == '-') return -1;
  if (v > (unsigned long long)SIZE_MAX / mul) return -1; /* overflows */
  *out = (size_t)(v * mul);
  return 0;
}

BU_INLINE size_t bu_size_arg(const char* opt, const char* text) {
  size_t v = 0;
  if (!text || bu_parse_size(text, &v) != 0) {
    fprintf(stderr, "error: bad size for %s: '%s'\n", opt, text ? text : "");
    exit(2);
  }
  return v;
}

BU_INLINE long bu_int_arg(const char* opt, const char* text) {
  char* end = NULL;
  if (!text) {
    fprintf(stderr, "error: %s needs a value\n", opt);
    exit(2);
  }
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0') {
    fprintf(stderr, "error: bad integer for %s: '%s'\n", opt, text);
    exit(2);
  }
  return v;
}

/* ---- command lines of zc_coll and zc_p2p --------------------------------- */

/* Under a launcher only the first rank prints usage errors and --help (every
 * rank parses the same arguments): zcrun sets ZC_RANK, Open MPI
 * OMPI_COMM_WORLD_RANK, PMIx PMIX_RANK. */
BU_INLINE int bu_first_rank(void) {
  static const char* const vars[] = {"ZC_RANK", "OMPI_COMM_WORLD_RANK",
                                     "PMIX_RANK"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char* v = getenv(vars[i]);
    if (v && v[0]) return strcmp(v, "0") == 0;
  }
  return 1;
}

/* "PROG: <message>" and a hint, on stderr; exit status 2 (a usage error).
 * Every rank prints it, in one write: the launcher stops the other ranks as
 * soon as the first exits, so a message left to one rank (or written in
 * pieces) could be cut off. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 2, 3)))
#endif
BU_INLINE void bu_usage_error(const char* prog, const char* fmt, ...) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s: ", prog);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < sizeof msg) n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, " (%s --help lists the flags)\n", prog);
  fputs(msg, stderr);
  fflush(stderr);
  exit(2);
}

/* The value of flag `opt`: a size ("4", "4K", "256M", "1G"). */
BU_INLINE size_t bu_arg_size(const char* prog, const char* opt,
                             const char* text) {
  size_t v = 0;
  if (!text) bu_usage_error(prog, "%s needs a value", opt);
  if (bu_parse_size(text, &v) != 0)
    bu_usage_error(prog, "bad value for %s: '%s' (a size in bytes: 4, 4K, "
                   "256M, 1G)", opt, text);
  return v;
}

/* The value of flag `opt`: an integer in [lo, hi]. */
BU_INLINE long bu_arg_int(const char* prog, const char* opt, const char* text,
                          long lo, long hi) {
  char* end = NULL;
  if (!text) bu_usage_error(prog, "%s needs a value", opt);
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    bu_usage_error(prog, "bad value for %s: '%s' (an integer from %ld to %ld)",
                   opt, text, lo, hi);
  return v;
}

/* The value of flag `opt` (exits when there is none). */
BU_INLINE const char* bu_arg_str(const char* prog, const char* opt,
                                 const char* text) {
  if (!text) bu_usage_error(prog, "%s needs a value", opt);
  return text;
}

/* The index of flag `opt`'s value in choices[0..n) (exits naming the
 * choices, "(a, b or c)", when it is none of them or missing). */
BU_INLINE int bu_choice_arg(const char* prog, const char* opt, const char* text,
                            const char* const* choices, int n) {
  char list[256] = "";
  int i;
  if (!text) bu_usage_error(prog, "%s needs a value", opt);
  for (i = 0; i < n; ++i)
    if (!strcmp(text, choices[i])) return i;
  for (i = 0; i < n; ++i) {
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
             choices[i]);
  }
  bu_usage_error(prog, "bad value for %s: '%s' (%s)", opt, text, list);
  return -1;
}

/* "1.0K"-style human size for tables. */
BU_INLINE const char* bu_human(size_t bytes, char* buf, size_t n) {
  if (bytes >= BU_GiB && bytes % BU_GiB == 0)
    snprintf(buf, n, "%zuG", bytes / BU_GiB);
  else if (bytes >= BU_MiB && bytes % BU_MiB == 0)
    snprintf(buf, n, "%zuM", bytes / BU_MiB);
  else if (bytes >= BU_KiB && bytes % BU_KiB == 0)
    snprintf(buf, n, "%zuK", bytes / BU_KiB);
  else
    snprintf(buf, n, "%zu", bytes);
  return buf;
}

/* ---- iteration schedule -------------------------------------------------- */

/* Every program uses the same schedule: `iters` up to `knee` bytes, then
 * scaled down in proportion to the size, never below `min_iters`.
 * Collectives use BU_COLL_KNEE, point-to-point latency BU_P2P_KNEE and
 * bandwidth windows BU_BW_KNEE.
 * (perf/peers/torch_allreduce.py mirrors this formula.) */
#define BU_COLL_KNEE ((size_t)1 << 20)
#define BU_P2P_KNEE ((size_t)64 << 10)
#define BU_BW_KNEE ((size_t)16 << 20) /* bytes of one bandwidth window */
BU_INLINE int bu_iters_for(size_t bytes, int iters, int min_iters,
                           size_t knee) {
  if (bytes <= knee) return iters;
  double scaled = (double)iters * (double)knee / (double)bytes;
  int n = (int)scaled;
  if (n < min_iters) n = min_iters;
  if (n > iters) n = iters;
  return n < 1 ? 1 : n;
}

/* Calls of well under a microsecond, timed `iters` times, time mostly the
 * clock and how far apart the ranks left the barrier before them (an
 * 8-byte allreduce of 0.2 us on 2 ranks, 20 times: 4 us against a skew of
 * 0.1-0.5 us). So every collective sweep program times its warm-up calls
 * after the first, takes the slowest rank's time per call, and times as
 * many calls as fill BU_FILL_US: at least `iters`, at most
 * BU_FILL_MAX_ITERS. Calls slower than BU_FILL_US / iters keep `iters`.
 * (perf/peers/torch_allreduce.py mirrors this formula.) */
#define BU_FILL_US 2000.0
#define BU_FILL_MAX_ITERS 100000
BU_INLINE int bu_iters_to_fill(int iters, double us_per_call) {
  if (!(us_per_call > 0)) return iters;
  double n = BU_FILL_US / us_per_call;
  if (n > BU_FILL_MAX_ITERS) n = BU_FILL_MAX_ITERS;
  return n > (double)iters ? (int)n : iters;
}

/* The largest size of the sweep min, min*factor, ... up to max (the size a
 * program warms up at before it, as nccl-tests does); 0 when min > max. */
BU_INLINE size_t bu_sweep_largest(size_t min, size_t max, size_t factor) {
  size_t largest = 0;
  for (size_t sz = min; sz <= max; sz *= factor) {
    largest = sz;
    if (sz > max / factor) break;
  }
  return largest;
}

/* ---- collectives: names and bus-bandwidth factors (nccl-tests) ------------ */

typedef enum {
  BU_ALLREDUCE = 0,
  BU_BROADCAST,
  BU_REDUCE,
  BU_ALLGATHER,
  BU_REDUCE_SCATTER,
  BU_ALLTOALL
} bu_coll;

static const char* const bu_coll_names[] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
    "alltoall"};

BU_INLINE int bu_coll_from_name(const char* s) {
  for (int i = 0; i < 6; i++)
    if (strcmp(s, bu_coll_names[i]) == 0) return i;
  return -1;
}

/* busbw = algbw * factor (nccl-tests doc/PERFORMANCE.md). */
BU_INLINE double bu_busbw_factor(int coll, int n) {
  if (n <= 1) return 1.0;
  switch (coll) {
    case BU_ALLREDUCE: return 2.0 * (n - 1) / n;
    case BU_ALLGATHER:
    case BU_REDUCE_SCATTER:
    case BU_ALLTOALL: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

/* ---- data types and ops (same order as zc_dtype / zc_op) ----------------- */

typedef enum {
  BU_INT8 = 0, BU_UINT8, BU_INT32, BU_UINT32, BU_INT64, BU_UINT64,
  BU_FLOAT16, BU_BFLOAT16, BU_FLOAT32, BU_FLOAT64, BU_INT16, BU_UINT16, BU_BOOL,
  BU_NDTYPES
} bu_dtype;

typedef enum { BU_SUM = 0, BU_PROD, BU_MIN, BU_MAX, BU_AVG } bu_op;

static const char* const bu_dtype_names[] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "int16", "uint16", "bool"};
static const size_t bu_dtype_sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
static const char* const bu_op_names[] = {"sum", "prod", "min", "max", "avg"};

BU_INLINE int bu_dtype_from_name(const char* s) {
  static const char* const aliases[][2] = {
      {"char", "int8"},     {"uchar", "uint8"},   {"int", "int32"},
      {"uint", "uint32"},   {"half", "float16"},  {"fp16", "float16"},
      {"bf16", "bfloat16"}, {"float", "float32"}, {"fp32", "float32"},
      {"double", "float64"}, {"fp64", "float64"}, {"short", "int16"},
      {"ushort", "uint16"}};
  for (size_t a = 0; a < sizeof(aliases) / sizeof(aliases[0]); a++)
    if (strcmp(s, aliases[a][0]) == 0) s = aliases[a][1];
  for (int i = 0; i < BU_NDTYPES; i++)
    if (strcmp(s, bu_dtype_names[i]) == 0) return i;
  return -1;
}

BU_INLINE int bu_op_from_name(const char* s) {
  for (int i = 0; i < 5; i++)
    if (strcmp(s, bu_op_names[i]) == 0) return i;
  return -1;
}

BU_INLINE int bu_dtype_is_float(int dt) {
  return dt == BU_FLOAT16 || dt == BU_BFLOAT16 || dt == BU_FLOAT32 ||
         dt == BU_FLOAT64;
}

/* float <-> IEEE half and bfloat16 (round to nearest even). */
BU_INLINE uint16_t bu_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)h;
}

BU_INLINE float bu_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) { mant <<= 1; exp--; }
      mant &= 0x3ffu;
      x = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

BU_INLINE uint16_t bu_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

BU_INLINE float bu_bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

BU_INLINE void bu_store(void* buf, size_t i, int dt, double v) {
  switch (dt) {
    case BU_INT8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case BU_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case BU_INT16: ((int16_t*)buf)[i] = (int16_t)v; break;
    case BU_UINT16: ((uint16_t*)buf)[i] = (uint16_t)v; break;
    case BU_BOOL: ((uint8_t*)buf)[i] = v != 0; break;
    case BU_INT32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case BU_UINT32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
    case BU_INT64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case BU_UINT64: ((uint64_t*)buf)[i] = (uint64_t)v; break;
    case BU_FLOAT16: ((uint16_t*)buf)[i] = bu_f32_to_f16((float)v); break;
    case BU_BFLOAT16: ((uint16_t*)buf)[i] = bu_f32_to_bf16((float)v); break;
    case BU_FLOAT32: ((float*)buf)[i] = (float)v; break;
    default: ((double*)buf)[i] = v; break;
  }
}

BU_INLINE double bu_load(const void* buf, size_t i, int dt) {
  switch (dt) {
    case BU_INT8: return ((const int8_t*)buf)[i];
    case BU_UINT8:
    case BU_BOOL: return ((const uint8_t*)buf)[i];
    case BU_INT16: return ((const int16_t*)buf)[i];
    case BU_UINT16: return ((const uint16_t*)buf)[i];
    case BU_INT32: return ((const int32_t*)buf)[i];
    case BU_UINT32: return ((const uint32_t*)buf)[i];
    case BU_INT64: return (double)((const int64_t*)buf)[i];
    case BU_UINT64: return (double)((const uint64_t*)buf)[i];
    case BU_FLOAT16: return bu_f16_to_f32(((const uint16_t*)buf)[i]);
    case BU_BFLOAT16: return bu_bf16_to_f32(((const uint16_t*)buf)[i]);
    case BU_FLOAT32: return ((const float*)buf)[i];
    default: return ((const double*)buf)[i];
  }
}

/* The input of `rank` at element `i`: small integers and products of 1 and 2,
 * so that reductions are exact in every type (sums stay below 128 for int8
 * up to 4 ranks, below 2048 for float16 up to 24 ranks). */
BU_INLINE double bu_value(int rank, size_t i, int op) {
  switch (op) {
    case BU_PROD: return (double)(1 + (int)((rank + i) % 2));
    case BU_MIN:
    case BU_MAX: return (double)(1 + (int)(((size_t)rank * 3 + i) % 11));
    default: return (double)((rank + 1) * (int)(1 + i % 7));
  }
}

/* The reduction over ranks 0..n-1 of bu_value(r, i, op). */
BU_INLINE double bu_expected(int n, size_t i, int op) {
  double acc = bu_value(0, i, op);
  for (int r = 1; r < n; r++) {
    double v = bu_value(r, i, op);
    switch (op) {
      case BU_PROD: acc *= v; break;
      case BU_MIN: acc = v < acc ? v : acc; break;
      case BU_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op == BU_AVG) acc /= n;
  return acc;
}

BU_INLINE int bu_close(double got, double want, int dt) {
  /* bool: logical reductions write exactly 0 or 1 (the inputs are true). */
  if (dt == BU_BOOL) return got == (want != 0 ? 1.0 : 0.0);
  double tol = 0;
  if (dt == BU_FLOAT16 || dt == BU_BFLOAT16) tol = 1e-2;
  else if (dt == BU_FLOAT32) tol = 1e-5;
  else if (dt == BU_FLOAT64) tol = 1e-12;
  double diff = fabs(got - want);
  return diff <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

/* Fills buf[0..count) with bu_value(rank, offset + i, op). */
BU_INLINE void bu_fill(void* buf, size_t count, int dt, int rank, size_t offset,
                       int op) {
  for (size_t i = 0; i < count; i++)
    bu_store(buf, i, dt, bu_value(rank, offset + i, op));
}

/* ---- collective layouts (nccl-tests conventions) -------------------------- */

/* For a "size" in bytes as nccl-tests reports it, the per-rank element count
 * passed to the call and the bytes of the send and receive buffers.
 *   allreduce, broadcast, reduce: size = count * dtype size
 *   allgather: size = total received = n * sendcount * dtype size
 *   reduce_scatter: size = total sent = n * recvcount * dtype size
 *   alltoall: size = total sent by one rank = n * count * dtype size */
BU_INLINE size_t bu_coll_count(int coll, size_t size, size_t ts, int n) {
  switch (coll) {
    case BU_ALLGATHER:
    case BU_REDUCE_SCATTER:
    case BU_ALLTOALL: return size / ((size_t)n * ts);
    default: return size / ts;
  }
}
BU_INLINE size_t bu_coll_send_elems(int coll, size_t count, int n) {
  return (coll == BU_REDUCE_SCATTER || coll == BU_ALLTOALL) ? (size_t)n * count
                                                           : count;
}
BU_INLINE size_t bu_coll_recv_elems(int coll, size_t count, int n) {
  return (coll == BU_ALLGATHER || coll == BU_ALLTOALL) ? (size_t)n * count
                                                       : count;
}
/* The size actually moved for `count` (rounded down from the asked size). */
BU_INLINE size_t bu_coll_size(int coll, size_t count, size_t ts, int n) {
  switch (coll) {
    case BU_ALLGATHER:
    case BU_REDUCE_SCATTER:
    case BU_ALLTOALL: return (size_t)n * count * ts;
    default: return count * ts;
  }
}

/* Fills the input of `rank` (for broadcast: the root's buffer; the other
 * ranks' buffers are zeroed). */
BU_INLINE void bu_coll_fill(int coll, void* send, size_t count, int dt, int op,
                            int rank, int n, int root) {
  if (coll == BU_BROADCAST) {
    if (rank == root) bu_fill(send, count, dt, root, 0, op);
    else memset(send, 0, count * bu_dtype_sizes[dt]);
    return;
  }
  bu_fill(send, bu_coll_send_elems(coll, count, n), dt, rank, 0, op);
}

/* Number of wrong elements in the result of `rank`. */
BU_INLINE long long bu_coll_check(int coll, const void* recv, size_t count,
                                  int dt, int op, int rank, int n, int root) {
  long long wrong = 0;
  switch (coll) {
    case BU_ALLREDUCE:
    case BU_REDUCE:
      if (coll == BU_REDUCE && rank != root) return 0;
      for (size_t i = 0; i < count; i++)
        wrong += !bu_close(bu_load(recv, i, dt), bu_expected(n, i, op), dt);
      break;
    case BU_BROADCAST:
      for (size_t i = 0; i < count; i++)
        wrong += !bu_close(bu_load(recv, i, dt), bu_value(root, i, op), dt);
      break;
    case BU_ALLGATHER:
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
          wrong += !bu_close(bu_load(recv, (size_t)r * count + i, dt),
                             bu_value(r, i, op), dt);
      break;
    case BU_REDUCE_SCATTER:
      for (size_t i = 0; i < count; i++)
        wrong += !bu_close(bu_load(recv, i, dt),
                           bu_expected(n, (size_t)rank * count + i, op), dt);
      break;
    case BU_ALLTOALL:
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++)
          wrong += !bu_close(bu_load(recv, (size_t)p * count + i, dt),
                             bu_value(p, (size_t)rank * count + i, op), dt);
      break;
    default: break;
  }
  return wrong;
}

/* ---- byte patterns for point-to-point ------------------------------------ */

BU_INLINE uint8_t bu_byte(size_t size, size_t i, int iter) {
  return (uint8_t)((i * 131u + size * 7u + (size_t)iter * 29u) & 0xffu);
}
BU_INLINE void bu_fill_bytes(void* buf, size_t size, int iter) {
  uint8_t* p = (uint8_t*)buf;
  for (size_t i = 0; i < size; i++) p[i] = bu_byte(size, i, iter);
}
BU_INLINE size_t bu_check_bytes(const void* buf, size_t size, int iter) {
  const uint8_t* p = (const uint8_t*)buf;
  size_t wrong = 0;
  for (size_t i = 0; i < size; i++) wrong += p[i] != bu_byte(size, i, iter);
  return wrong;
}

/* ---- results and the JSON file ------------------------------------------- */

typedef struct {
  size_t size;
  size_t count;
  int iters;
  double time_us;     /* collectives: time per op; p2p: one-way latency */
  double algbw;       /* GB/s (1e9) */
  double busbw;       /* GB/s (1e9) */
  double bw;          /* p2p: bandwidth test, GB/s */
  long long wrong;    /* -1: not checked */
  char algo[32];      /* algorithm the library reports, "" if unknown */
  char extra[640];    /* more JSON members of the row, "\"k\": v, ...", or "" */
} bu_row;

typedef struct {
  const char* path;     /* NULL: no file */
  char benchmark[32];   /* "allreduce", "p2p", "memcpy", ... */
  char library[32];     /* "zcomm", "mpi", "gloo", "torch-gloo", "grpc" */
  char variant[96];     /* "ring", "shm/zerocopy", ... */
  char dtype[16];
  char op[16];
  int ranks;
  int is_p2p;
  char error[1024];
  bu_row* rows;
  size_t nrows, cap;
  char extra[1024];     /* extra JSON members, "\"k\": v, ..." */
} bu_report;

BU_INLINE void bu_report_init(bu_report* r, const char* path, const char* bench,
                              const char* lib, const char* variant, int ranks) {
  memset(r, 0, sizeof(*r));
  r->path = path;
  snprintf(r->benchmark, sizeof r->benchmark, "%s", bench);
  snprintf(r->library, sizeof r->library, "%s", lib);
  snprintf(r->variant, sizeof r->variant, "%s", variant ? variant : "");
  r->ranks = ranks;
}

BU_INLINE void bu_json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

BU_INLINE void bu_json_num(FILE* f, double v) {
  if (isfinite(v)) fprintf(f, "%.6g", v);
  else fputs("null", f);
}

/* Appends "\"key\": v" (null when not finite) to a row's extra members. */
BU_INLINE void bu_extra_num(char* extra, size_t cap, const char* key,
                            double v) {
  size_t len = strlen(extra);
  if (len >= cap) return;
  if (isfinite(v))
    snprintf(extra + len, cap - len, "%s\"%s\": %.6g", len ? ", " : "", key, v);
  else
    snprintf(extra + len, cap - len, "%s\"%s\": null", len ? ", " : "", key);
}
BU_INLINE void bu_extra_str(char* extra, size_t cap, const char* key,
                            const char* v) {
  size_t len = strlen(extra);
  if (len < cap)
    snprintf(extra + len, cap - len, "%s\"%s\": \"%s\"", len ? ", " : "", key, v);
}

/* Decimals of a time column in us: 2 (nccl-tests' and OSU's), or 3 below
 * 10 us with --precise, so that a 2% difference of a 0.3 us latency shows.
 * The column keeps its width either way. */
BU_INLINE int bu_us_decimals(double us, int precise) {
  return precise && us < 10.0 ? 3 : 2;
}

/* (min, median, max) of v[0..n) (sorts v). */
BU_INLINE void bu_min_med_max(double* v, int n, double* mn, double* med,
                              double* mx) {
  qsort(v, (size_t)n, sizeof(double), bu_cmp_double);
  *mn = v[0];
  *mx = v[n - 1];
  *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Rewrites the whole file (called after every size, so a run that is killed
 * still leaves the sizes it finished). `complete` marks a finished run. */
BU_INLINE void bu_report_write(const bu_report* r, int complete) {
  if (!r->path) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", r->path, (int)getpid());
  FILE* f = fopen(tmp, "w");
  if (!f) {
    fprintf(stderr, "warning: cannot write %s: %s\n", tmp, strerror(errno));
    return;
  }
  fprintf(f, "{\n  \"benchmark\": ");
  bu_json_str(f, r->benchmark);
  fprintf(f, ",\n  \"library\": ");
  bu_json_str(f, r->library);
  fprintf(f, ",\n  \"variant\": ");
  bu_json_str(f, r->variant);
  fprintf(f, ",\n  \"ranks\": %d,\n  \"dtype\": ", r->ranks);
  bu_json_str(f, r->dtype);
  fprintf(f, ",\n  \"op\": ");
  bu_json_str(f, r->op);
  if (r->extra[0]) fprintf(f, ",\n  %s", r->extra);
  fprintf(f, ",\n  \"complete\": %s,\n  \"error\": ", complete ? "true" : "false");
  if (r->error[0]) bu_json_str(f, r->error);
  else fputs("null", f);
  fprintf(f, ",\n  \"results\": [");
  for (size_t i = 0; i < r->nrows; i++) {
    const bu_row* w = &r->rows[i];
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"iters\": %d, ",
            i ? "," : "", w->size, w->count, w->iters);
    if (r->is_p2p) {
      fputs("\"latency_us\": ", f);
      bu_json_num(f, w->time_us);
      fputs(", \"bw_GBps\": ", f);
      bu_json_num(f, w->bw);
    } else {
      fputs("\"time_us\": ", f);
      bu_json_num(f, w->time_us);
      fputs(", \"algbw_GBps\": ", f);
      bu_json_num(f, w->algbw);
      fputs(", \"busbw_GBps\": ", f);
      bu_json_num(f, w->busbw);
    }
    fprintf(f, ", \"wrong\": %lld", w->wrong);
    if (w->algo[0]) {
      fputs(", \"algo\": ", f);
      bu_json_str(f, w->algo);
    }
    if (w->extra[0]) fprintf(f, ", %s", w->extra);
    fputc('}', f);
  }
  fprintf(f, "\n  ]\n}\n");
  fclose(f);
  if (rename(tmp, r->path) != 0)
    fprintf(stderr, "warning: cannot rename %s: %s\n", tmp, strerror(errno));
}

BU_INLINE void bu_report_add(bu_report* r, const bu_row* row) {
  if (r->nrows == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->rows = (bu_row*)realloc(r->rows, r->cap * sizeof(bu_row));
    if (!r->rows) { fprintf(stderr, "error: out of memory\n"); exit(3); }
  }
  r->rows[r->nrows++] = *row;
  bu_report_write(r, 0);
}

BU_INLINE void bu_report_fail(bu_report* r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
  fprintf(stderr, "error: %s\n", r->error);
  bu_report_write(r, 0);
}

/* nccl-tests-like header and row. */
BU_INLINE void bu_print_coll_header(FILE* f) {
  fprintf(f, "#%11s %12s %8s %6s %12s %12s %12s %8s\n", "size", "count",
          "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}
BU_INLINE void bu_print_coll_row(FILE* f, const bu_row* w, const char* type,
                                 const char* op) {
  fprintf(f, "%12zu %12zu %8s %6s %12.2f %12.3f %12.3f %8lld\n", w->size,
          w->count, type, op, w->time_us, w->algbw, w->busbw, w->wrong);
  fflush(f);
}
BU_INLINE void bu_print_p2p_header(FILE* f) {
  fprintf(f, "#%11s %8s %14s %14s %8s\n", "size", "iters", "latency(us)",
          "bw(GB/s)", "#wrong");
}
BU_INLINE void bu_print_p2p_row(FILE* f, const bu_row* w) {
  fprintf(f, "%12zu %8d %14.2f %14.4f %8lld\n", w->size, w->iters, w->time_us,
          w->bw, w->wrong);
  fflush(f);
}

#endif /* ZC_PERF_BENCH_UTIL_H */
