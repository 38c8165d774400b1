// The program of the zcrun --elastic tests (test_zcrun_elastic.cpp): a loop
// of verified allreduces that survives lost ranks (shrink) and grows when
// joiners wait, until the job has ELASTIC_TARGET ranks and ELASTIC_STEPS
// iterations are done.
//   ELASTIC_DIE=R:I      rank R of the starting job dies (SIGKILL) in iteration I
//   ELASTIC_TRIGGER=F    rank 0 creates file F in iteration 3 (a discovery
//                        script's cue to list more, or fewer, slots)
//   ELASTIC_UNTIL_SIZE=N after ELASTIC_STEPS, go on with verified iterations
//                        (10 ms apart) until the job has shrunk to N ranks
// Prints "tag T pid P" first (the job's segment tag: the test checks that
// nothing is left) and "done: rank R of S" at the end.
#include <signal.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

int EnvInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v ? atoi(v) : dflt;
}

int64_t Value(int rank, int it, size_t i) { return (rank + 1) * 1000003LL + it * 31LL + static_cast<int64_t>(i); }

// An allreduce of an odd, iteration-dependent size, checked exactly.
zc_status Step(zc_comm* comm, int it) {
  const int rank = zc_rank(comm), size = zc_size(comm);
  const size_t count = 1 + (static_cast<size_t>(it) * 7919) % 257;
  std::vector<int64_t> in(count), out(count);
  for (size_t i = 0; i < count; ++i) in[i] = Value(rank, it, i);
  zc_status s = zc_allreduce(comm, in.data(), out.data(), count, ZC_INT64, ZC_SUM);
  if (s != ZC_OK) return s;
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int r = 0; r < size; ++r) want += Value(r, it, i);
    if (out[i] != want) {
      fprintf(stderr, "rank %d of %d: iteration %d: [%zu] = %lld, want %lld\n", rank, size, it, i,
              static_cast<long long>(out[i]), static_cast<long long>(want));
      exit(3);
    }
  }
  return ZC_OK;
}

#define CHECK_OK(call, comm)                                                                               \
  do {                                                                                                     \
    zc_status s_ = (call);                                                                                 \
    if (s_ != ZC_OK) {                                                                                     \
      fprintf(stderr, "%s: %s: %s\n", #call, zc_status_string(s_), zc_last_error(comm));                   \
      exit(2);                                                                                             \
    }                                                                                                      \
  } while (0)

// The fewest joiners any rank sees waiting (the same on every rank).
int AgreedPending(zc_comm* comm) {
  int mine = 0, fewest = 0;
  CHECK_OK(zc_comm_join_pending(comm, &mine), comm);
  CHECK_OK(zc_allreduce(comm, &mine, &fewest, 1, ZC_INT32, ZC_MIN), comm);
  return fewest;
}

// Grows comm (finalizing the old one) and sends the state to the newcomers.
zc_comm* GrowAndSync(zc_comm* comm, int* it) {
  zc_comm* grown = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_OK(zc_comm_grow(comm, &grown), comm);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK_OK(zc_finalize(comm), nullptr);
  CHECK_OK(zc_broadcast(grown, it, 1, ZC_INT32, 0), grown);
  fprintf(stderr, "grew to %d ranks at iteration %d in %.1f ms\n", zc_size(grown), *it, ms);
  return grown;
}

}  // namespace

int main() {
  const int steps = EnvInt("ELASTIC_STEPS", 30), target = EnvInt("ELASTIC_TARGET", 0);
  const int until_size = EnvInt("ELASTIC_UNTIL_SIZE", 0);
  int die_rank = -1, die_it = -1;
  if (const char* d = getenv("ELASTIC_DIE")) sscanf(d, "%d:%d", &die_rank, &die_it);
  const char* trigger = getenv("ELASTIC_TRIGGER");
  const char* key = getenv("ZC_JOB_KEY");
  printf("tag %.16s pid %d\n", key ? key : "", static_cast<int>(getpid()));
  fflush(stdout);

  int joining = 0;
  CHECK_OK(zc_is_joiner(&joining), nullptr);
  zc_comm* comm = nullptr;
  int it = 0;
  if (joining) {
    CHECK_OK(zc_comm_join(&comm), nullptr);
    CHECK_OK(zc_broadcast(comm, &it, 1, ZC_INT32, 0), comm);
    fprintf(stderr, "joined as rank %d of %d at iteration %d\n", zc_rank(comm), zc_size(comm), it);
  } else {
    CHECK_OK(zc_init(&comm), nullptr);
  }
  const int start_rank = joining ? -1 : zc_rank(comm);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    // Iterations go on past steps while the job is to shrink (a host to go).
    const bool stepping = it < steps || (until_size > 0 && zc_size(comm) > until_size);
    if (!stepping && zc_size(comm) >= target) break;
    if (start_rank == die_rank && it == die_it) raise(SIGKILL);
    if (trigger && zc_rank(comm) == 0 && it == 3) fclose(fopen(trigger, "w"));
    zc_status s = stepping ? Step(comm, it) : ZC_OK;
    if (s != ZC_OK) {
      if (s != ZC_ERR_PEER_LOST && s != ZC_ERR_ABORTED) CHECK_OK(s, comm);
      zc_comm* shrunk = nullptr;
      CHECK_OK(zc_comm_shrink(comm, &shrunk), comm);
      CHECK_OK(zc_finalize(comm), nullptr);
      comm = shrunk;
      int resume = 0;
      CHECK_OK(zc_allreduce(comm, &it, &resume, 1, ZC_INT32, ZC_MIN), comm);
      it = resume;
      fprintf(stderr, "shrank to %d ranks, resuming at iteration %d\n", zc_size(comm), it);
      continue;
    }
    if (zc_size(comm) < target && AgreedPending(comm) > 0) {
      comm = GrowAndSync(comm, &it);
      continue;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      fprintf(stderr, "rank %d: the job never reached %d ranks (%d now)\n", zc_rank(comm),
              until_size > 0 ? until_size : target, zc_size(comm));
      return 4;
    }
    if (stepping) {
      ++it;
      if (it > steps) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // zcrun to act
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // joiners to come
  }
  printf("done: rank %d of %d\n", zc_rank(comm), zc_size(comm));
  fflush(stdout);
  CHECK_OK(zc_finalize(comm), nullptr);
  return 0;
}
