// trace_record_cost: what one flight-recorder record costs the calling
// thread (common/flight_recorder.h): Begin + End of a collective's record,
// in CPU time of this thread (so that other processes on a loaded machine
// do not count), as the best of 7 rounds of 5,000,000 records.
//   trace_record_cost [ROUNDS]
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "common/flight_recorder.h"

namespace {

double ThreadCpuNs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zc::trace;
  const int rounds = argc > 1 ? atoi(argv[1]) : 7;
  const int n = 5000000;
  FlightRecorder r(2000, Identity{}, "");
  OpInfo info;
  info.op = "allreduce";
  info.algo = "shm";
  info.transport = "shm";
  info.dtype = ZC_FLOAT32;
  info.redop = ZC_SUM;
  info.count = 2;
  info.bytes = 8;
  SetThreadLabel("step");
  double best = 1e30;
  for (int k = 0; k < rounds; ++k) {
    const double t0 = ThreadCpuNs();
    for (int i = 0; i < n; ++i) {
      info.seq = static_cast<uint64_t>(i) + 1;
      r.End(r.Begin(info), zc::Status::Ok());
    }
    const double ns = (ThreadCpuNs() - t0) / n;
    if (ns < best) best = ns;
    printf("round %d: %.1f ns per record (Begin + End)\n", k + 1, ns);
  }
  printf("best: %.1f ns per record\n", best);
  return 0;
}
