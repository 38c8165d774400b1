// The flight recorder's clock: what a record stores as its times.
//
// Times are ticks: the time stamp counter where it is invariant (one rate
// on every core, whatever the power state), else CLOCK_MONOTONIC
// nanoseconds; a dump converts them to nanoseconds.
//
// Reading the counter is one instruction, but a slow one: rdtsc is
// microcoded, 10-13 ns on this project's AMD EPYC VM, and an 8-byte call's
// path is too short to hide it: two reads per record cost about 10% of an
// 8-byte allreduce (docs/debugging.md). So by default a record reads no
// clock at all: CoarseClock keeps the counter in one word, which a thread
// of the process refreshes every kPeriodUs, and a record copies that word.
// Its times are then at most one period early (more while the host holds
// that thread back), never late, and in order. PreciseTicks() is the
// counter itself, for ZC_TRACE_CLOCK=precise and for a failed call's end.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/deadline.h"  // NowNs

namespace zc::trace {

// Whether ticks are time stamp counter values (else nanoseconds).
bool TicksAreTsc();
// The counter (or the monotonic clock) read now.
uint64_t PreciseTicks();

// The process's coarse clock. Its thread starts with the first Now() and
// parks after kIdleTicks periods in which no watched recorder made a
// record (an idle process is not woken every millisecond); the next Now()
// wakes it, and reads the counter itself for its own record.
class CoarseClock {
 public:
  static constexpr int kPeriodUs = 1000;
  static constexpr int kIdleTicks = 100;

  // The latest refreshed ticks: one load, except the first call after a
  // start, a park or a fork.
  static uint64_t Now() {
    const uint64_t t = ticks_.load(std::memory_order_relaxed);
    return __builtin_expect(t != 0, 1) ? t : Wake();
  }
  // A recorder's count of records made: while any of them moves, the
  // thread keeps ticking. Unwatch before the counter is destroyed.
  static void Watch(const std::atomic<uint64_t>* records);
  static void Unwatch(const std::atomic<uint64_t>* records);
  // The latest refreshed ticks, or 0 when Now() would have to wake the thread.
  static uint64_t Peek() { return ticks_.load(std::memory_order_relaxed); }
  // Whether the thread is parked or not started (for tests).
  static bool Idle() { return Peek() == 0; }

 private:
  friend class CoarseTicker;
  // Starts or wakes the thread; returns the counter read now.
  __attribute__((noinline)) static uint64_t Wake();
  // 0: no thread is refreshing it (not started, parked, or lost in a fork).
  // A cache line of its own: only the thread writes it, once a period.
  alignas(64) static std::atomic<uint64_t> ticks_;
};

}  // namespace zc::trace
