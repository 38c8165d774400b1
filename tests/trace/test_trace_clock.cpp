// The flight recorder's clock (common/trace_clock.h): coarse times advance
// without any clock read by the recording thread, never run ahead of the
// clock, park while nothing is recorded and wake with a fresh time, start
// again in a forked child; precise times are read for every record. Every
// wait below is for an observable change, under a deadline.
#include "common/trace_clock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/flight_recorder.h"

namespace zc::trace {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);  // generous: the host may be loaded

OpInfo Barrier(uint64_t seq) {
  OpInfo i;
  i.op = "barrier";
  i.seq = seq;
  return i;
}

// The posted time of record id in one snapshot with that of record ref
// (one snapshot converts ticks to nanoseconds with one rate: equal ticks
// give equal times).
struct Pair {
  int64_t ref = -1, t = -1;
};
Pair TimesOf(const FlightRecorder& r, uint64_t ref, uint64_t id) {
  Pair p;
  for (const Entry& e : r.Snapshot()) {
    if (e.id == ref) p.ref = e.t_posted_ns;
    if (e.id == id) p.t = e.t_posted_ns;
  }
  return p;
}

uint64_t Record(FlightRecorder* r, uint64_t seq) {
  const uint64_t id = r->Begin(Barrier(seq));
  r->End(id, Status::Ok());
  return id;
}

int64_t RecordNow(FlightRecorder* r, uint64_t seq) {
  const uint64_t id = Record(r, seq);
  return TimesOf(*r, id, id).t;
}

// Waits until the coarse word moves (a fresh Now() also wakes a parked
// thread), then records: whether that record is stamped later than record
// ref (still in the ring) before the deadline.
bool RecordUntilLaterThan(FlightRecorder* r, uint64_t ref) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  for (uint64_t seq = 1; std::chrono::steady_clock::now() < end; ++seq) {
    const uint64_t w0 = CoarseClock::Now();
    while (CoarseClock::Now() == w0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    const Pair p = TimesOf(*r, ref, Record(r, seq));
    if (p.ref > 0 && p.t > p.ref) return true;
  }
  return false;
}

bool WaitUntilIdle() {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!CoarseClock::Idle()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(TraceClock, CoarseTimesAdvanceAndNeverRunAhead) {
  FlightRecorder r(64, Identity{}, "");
  ASSERT_EQ(r.clock(), Clock::kCoarse);
  const uint64_t first = Record(&r, 1);
  ASSERT_GT(TimesOf(r, first, first).t, 0);
  // The thread moves the word forward: later records get later times.
  ASSERT_TRUE(RecordUntilLaterThan(&r, first)) << "the coarse clock did not advance within the deadline";
  // A coarse time is the counter read before the record: never after now.
  // (The tick rate is estimated over the recorder's life: allow 1 ms.)
  const int64_t t = RecordNow(&r, 99);
  EXPECT_LE(t, NowNs() + 1000000);
  const std::string json = r.ToJson("request");
  EXPECT_NE(json.find("\"clock\":\"coarse\",\"clock_resolution_ns\":1000000,"), std::string::npos) << json;
}

TEST(TraceClock, ParksWhileIdleAndTheNextRecordReadsTheClock) {
  FlightRecorder r(64, Identity{}, "");
  RecordNow(&r, 1);
  // No record for kIdleTicks periods: the thread parks.
  ASSERT_TRUE(WaitUntilIdle()) << "the coarse clock thread never parked";
  // The first record after the park is stamped with a fresh reading, not
  // with the time the thread parked at.
  const int64_t before = NowNs();
  const uint64_t woken = Record(&r, 2);
  EXPECT_GE(TimesOf(r, woken, woken).t, before - 1000000);  // the tick-rate estimate's slack, as above
  EXPECT_FALSE(CoarseClock::Idle());
  EXPECT_TRUE(RecordUntilLaterThan(&r, woken)) << "the clock did not tick again after its wake-up";
}

TEST(TraceClock, AForkedChildStartsItsOwnClock) {
#if defined(__SANITIZE_THREAD__)
  // TSan refuses to start a thread in the child of a multi-threaded process.
  GTEST_SKIP() << "a thread started after fork is not supported under ThreadSanitizer";
#endif
  FlightRecorder r(64, Identity{}, "");
  Record(&r, 1);
  ASSERT_FALSE(CoarseClock::Idle());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Without a thread of its own the child's word would keep the parent's
    // last time for ever.
    _exit(RecordUntilLaterThan(&r, Record(&r, 2)) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's records kept one time";
}

TEST(TraceClock, PreciseTimesAreReadForEveryRecord) {
  FlightRecorder r(64, Identity{}, "", Clock::kPrecise);
  const uint64_t a = Record(&r, 1);
  // Once the monotonic clock has moved past a, the next record is later (a
  // coarse one could still carry a's time).
  const int64_t ta = RecordNow(&r, 1);
  while (NowNs() <= ta + 10000) std::this_thread::yield();
  const Pair p = TimesOf(r, a, Record(&r, 2));
  EXPECT_GT(p.t, p.ref);
  const std::string json = r.ToJson("request");
  EXPECT_NE(json.find("\"clock\":\"precise\",\"clock_resolution_ns\":1,"), std::string::npos) << json;
}

// Waits until the coarse word is at least 300 us old (just refreshed, then
// unchanged for 300 us): whether that happened before the deadline.
bool WaitForAStaleWord() {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < end) {
    const uint64_t w0 = CoarseClock::Now();
    while (CoarseClock::Now() == w0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    const uint64_t w1 = CoarseClock::Now();
    const int64_t refreshed = NowNs();
    while (NowNs() < refreshed + 300000) std::this_thread::yield();
    if (CoarseClock::Now() == w1) return true;
  }
  return false;
}

TEST(TraceClock, AFailedCallsEndIsReadNotCoarse) {
  FlightRecorder r(64, Identity{}, "");
  const uint64_t id = r.Begin(Barrier(1));
  ASSERT_TRUE(WaitForAStaleWord()) << "the coarse clock never ticked";
  // The word is 300 us or more behind now; the failure's end, read from
  // the counter, is not.
  const int64_t before = NowNs();
  r.End(id, Error(ZC_ERR_TIMEOUT, "rank 0: barrier: timed out"));
  const std::vector<Entry> snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].state, State::kFailed);
  EXPECT_GE(snap[0].t_done_ns, before - 100000);  // the tick-rate estimate's slack
}

}  // namespace
}  // namespace zc::trace
