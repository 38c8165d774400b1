// trace_record_cost: what one flight-recorder record costs the calling
// thread (common/flight_recorder.h), BeginCollective + End: the record of
// an 8-byte allreduce as the collectives make it,
// in CPU time of this thread (other processes on a loaded machine do not
// count), as the best of ROUNDS rounds:
//   back-to-back   records with nothing between them: the throughput
//                  bound; with the precise clock every record waits
//                  for the previous one's time-stamp-counter reads)
//   in a call      the extra time of a stand-in for an 8 B call, about
//                  300 ns of dependent work (what a small collective's
//                  wait on a peer's flag looks like to the core), with a
//                  record around each call against the same calls without
//                  one, alternated round by round
// each without and with a thread label, with either clock
// (common/trace_clock.h: coarse, the default, and precise).
//   trace_record_cost [ROUNDS]
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "common/flight_recorder.h"

namespace {

using zc::trace::FlightRecorder;

double ThreadCpuNs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// A chain of dependent multiply-adds: each step waits for the previous one,
// as a call waits for a flag; about 300 ns on a 2.6 GHz core.
__attribute__((noinline)) uint64_t StandInCall(uint64_t x) {
  for (int k = 0; k < 260; ++k) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

// ns per call of n calls, with a record around each when r is given.
double Calls(FlightRecorder* r, int n, bool work, uint64_t* sink) {
  const uint64_t shape = FlightRecorder::CollectiveShape(ZC_FLOAT32, ZC_SUM, -1);
  uint64_t x = *sink;
  const double t0 = ThreadCpuNs();
  for (int i = 0; i < n; ++i) {
    const uint64_t id = r ? r->BeginCollective("allreduce", "shm", static_cast<uint64_t>(i) + 1, 2, shape) : 0;
    if (work) x = StandInCall(x);
    if (r) r->End(id, zc::Status::Ok());
  }
  *sink = x;
  return (ThreadCpuNs() - t0) / n;
}

void Measure(FlightRecorder* r, int rounds, const char* label) {
  const char* clock = zc::trace::ClockName(r->clock());
  zc::trace::SetThreadLabel(label);
  uint64_t sink = 1;
  double b2b = 1e30, with = 1e30, without = 1e30;
  for (int k = 0; k < rounds; ++k) {
    const double ns = Calls(r, 5000000, false, &sink);
    if (ns < b2b) b2b = ns;
  }
  for (int k = 0; k < rounds; ++k) {
    const double off = Calls(nullptr, 1000000, true, &sink);
    const double on = Calls(r, 1000000, true, &sink);
    if (off < without) without = off;
    if (on < with) with = on;
  }
  printf("%-7s clock, %-9s back-to-back: %5.1f ns per record | in a %.0f ns call: %5.1f ns per record (%.2f%%)%s\n",
         clock, label ? "labelled" : "no label", b2b, without, with - without, 100.0 * (with - without) / without,
         sink == 42 ? " " : "");
  zc::trace::SetThreadLabel(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 7;
  for (zc::trace::Clock clock : {zc::trace::Clock::kCoarse, zc::trace::Clock::kPrecise}) {
    FlightRecorder r(2000, zc::trace::Identity{}, "", clock);
    Measure(&r, rounds, nullptr);
    Measure(&r, rounds, "step");
  }
  return 0;
}
