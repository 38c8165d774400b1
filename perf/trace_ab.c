/* trace_ab: the flight recorder's cost on an 8-byte call between ranks,
 * recorder on against off inside one job, alternated block by block.
 *
 * Whole jobs alternated in pairs (farm-bench --vs) see this VM's speed
 * phases and its neighbours: an 8-byte allreduce takes 0.14 us in one run
 * and 0.35 in the next, far more than the few nanoseconds in question.
 * Here every rank holds two communicators of the same ranks and transport,
 * the job's own (recorder as ZC_TRACE_BUFFER_SIZE says, 2000 by default)
 * and a second one made with zc_comm_init_rank after setting
 * ZC_TRACE_BUFFER_SIZE=0, and times BLOCK calls on each in turn, ROUNDS
 * times, the first of each pair alternating. A pair's two blocks are a few
 * milliseconds apart, so both see one phase; the ratio on / off is taken
 * pair by pair and printed as min / median / max with each side's median.
 *
 *   zcrun -np 2 build/perf/trace_ab [allreduce|varied|p2p] [ROUNDS [BLOCK]]
 *     (defaults: allreduce 400 2000)
 * allreduce: zc_allreduce of 2 floats (max), per-call time of rank 0's block.
 * varied: the same with max and min in turn (no two calls in a row alike).
 * p2p: a ping-pong of 8 bytes between ranks 0 and 1 (zc_send/zc_recv),
 * one-way latency = round trip / 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zcomm/zcomm.h>

#include "common/bench_util.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    zc_status s_ = (call);                                                           \
    if (s_ != ZC_OK) {                                                               \
      fprintf(stderr, "trace_ab: %s: %s (%s)\n", #call, zc_status_string(s_), zc_last_error(NULL)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

/* ns per call of one block on comm (rank 0's clock; other ranks return 0). */
enum mode { ALLREDUCE, VARIED, P2P };

static double block(zc_comm* comm, enum mode mode, int calls, int rank) {
  const int p2p = mode == P2P;
  float buf[2] = {1.0f, (float)rank};
  CHECK(zc_barrier(comm));
  double t0 = bu_now_us();
  for (int i = 0; i < calls; ++i) {
    if (!p2p) {
      const zc_op op = mode == VARIED && (i & 1) ? ZC_MIN : ZC_MAX;
      CHECK(zc_allreduce(comm, buf, buf, 2, ZC_FLOAT32, op));
    } else if (rank == 0) {
      CHECK(zc_send(comm, buf, 8, 1, 7));
      CHECK(zc_recv(comm, buf, 8, 1, 7));
    } else if (rank == 1) {
      CHECK(zc_recv(comm, buf, 8, 0, 7));
      CHECK(zc_send(comm, buf, 8, 0, 7));
    }
  }
  double per = (bu_now_us() - t0) * 1e3 / calls;
  return p2p ? per / 2 : per;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "allreduce";
  const enum mode mode = strcmp(name, "p2p") == 0 ? P2P : strcmp(name, "varied") == 0 ? VARIED : ALLREDUCE;
  const int p2p = mode == P2P;
  if (mode == ALLREDUCE && strcmp(name, "allreduce") != 0) {
    fprintf(stderr, "trace_ab: unknown mode '%s' (allreduce, varied or p2p)\n", name);
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 400;
  int calls = argc > 3 ? atoi(argv[3]) : 2000;
  if (rounds < 2 || calls < 1) {
    fprintf(stderr, "usage: trace_ab [allreduce|varied|p2p] [ROUNDS>=2 [BLOCK>=1]]\n");
    return 2;
  }
  zc_comm* on = NULL;
  zc_comm* off = NULL;
  CHECK(zc_init(&on));
  const int rank = zc_rank(on), size = zc_size(on);
  if (p2p && size < 2) {
    fprintf(stderr, "trace_ab: p2p needs 2 ranks\n");
    return 2;
  }
  zc_unique_id id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) CHECK(zc_get_unique_id(&id));
  CHECK(zc_broadcast(on, &id, sizeof(id), ZC_UINT8, 0));
  setenv("ZC_TRACE_BUFFER_SIZE", "0", 1);
  CHECK(zc_comm_init_rank(&off, size, &id, rank));

  double* ratio = malloc(sizeof(double) * (size_t)rounds);
  double* t_on = malloc(sizeof(double) * (size_t)rounds);
  double* t_off = malloc(sizeof(double) * (size_t)rounds);
  block(on, mode, calls, rank);  /* warm-up: connections, caches */
  block(off, mode, calls, rank);
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      t_on[r] = block(on, mode, calls, rank);
      t_off[r] = block(off, mode, calls, rank);
    } else {
      t_off[r] = block(off, mode, calls, rank);
      t_on[r] = block(on, mode, calls, rank);
    }
    ratio[r] = t_on[r] / t_off[r];
  }
  if (rank == 0) {
    double lo, m_on, m_off, m, hi;
    bu_min_med_max(t_on, rounds, &lo, &m_on, &hi);
    bu_min_med_max(t_off, rounds, &lo, &m_off, &hi);
    bu_min_med_max(ratio, rounds, &lo, &m, &hi);
    printf("%s 8 B, %d ranks, %d pairs of %d calls: recorder on %.1f ns, off %.1f ns (medians); "
           "on/off per pair min %.3f median %.3f max %.3f\n",
           p2p ? "send/recv one-way" : mode == VARIED ? "allreduce (max, min in turn)" : "allreduce", size, rounds, calls, m_on, m_off, lo, m, hi);
  }
  free(ratio);
  free(t_on);
  free(t_off);
  CHECK(zc_finalize(off));
  CHECK(zc_finalize(on));
  return 0;
}
