// Deadline and Backoff: every wait in zcomm has a deadline, and waiting
// spins briefly, then yields, then sleeps (tests run more ranks than cores;
// a busy-polling rank must not starve the one that would set the flag).
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <algorithm>

#include "common/wakeup.h"

namespace zc {

using Clock = std::chrono::steady_clock;

// Clock's reading in nanoseconds: CLOCK_MONOTONIC, one clock for every
// process of a host (flight-recorder dumps compare it across ranks).
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

class Deadline {
 public:
  // seconds <= 0 or infinite means "never": only for tests.
  //
  // The clock is read when the deadline is first asked about (normally by
  // the first wait that does not end at once), not when it is made: a small
  // message whose slot and credit are ready never reads the clock, which
  // costs about as much as the rest of its send. The deadline thus counts
  // from the first wait of an operation; what runs before it without
  // waiting (a copy, a few checks) is not counted.
  explicit Deadline(double seconds)
      : span_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  Deadline(const Deadline& o)
      : span_(o.span_), start_(o.start_.load(std::memory_order_relaxed)) {}
  Deadline& operator=(const Deadline& o) {
    span_ = o.span_;
    start_.store(o.start_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
  static Deadline Never() { return Deadline(1e9); }
  bool expired() const { return Clock::now() >= at(); }
  double remaining_s() const {
    return std::chrono::duration<double>(at() - Clock::now()).count();
  }
  int remaining_ms() const {
    double r = remaining_s() * 1000.0;
    if (r <= 0) return 0;
    if (r > 1e9) return 1000000000;
    return static_cast<int>(r) + 1;
  }
  Clock::time_point at() const { return start() + span_; }
  // Seconds since the deadline started: what a timeout message reports (the
  // time actually waited, not the configured limit).
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start()).count(); }

 private:
  // The start, read from the clock on first use (by any thread: the first
  // reading wins).
  Clock::time_point start() const {
    int64_t s = start_.load(std::memory_order_relaxed);
    if (s == kUnset) {
      int64_t now = Clock::now().time_since_epoch().count();
      if (now == kUnset) ++now;
      s = start_.compare_exchange_strong(s, now, std::memory_order_relaxed) ? now : s;
    }
    return Clock::time_point(Clock::duration(s));
  }
  static constexpr int64_t kUnset = 0;
  Clock::duration span_;
  mutable std::atomic<int64_t> start_{kUnset};
};

// Call Pause() in every iteration of a polling loop: it spins briefly
// (at most 2000 pauses and about kSpinTime), then yields for about 1 ms,
// then sleeps. Sleeps grow from
// 20 us to 100 us, and to 1 ms once the wait has lasted about 20 ms
// (bounded latency while data flows, negligible CPU while idle).
//
// Notified mode (Backoff(true)), for flags that a thread of this process
// sets and then calls Wakeup::Notify() (tcp progress, verbs completions,
// peer loss): a few spins, then it sleeps on a futex at once (no yield
// phase: that thread needs the core); the sleeps end as soon as such a flag
// is set, so they may be long (up to 10 ms, which only bounds how late a
// deadline is noticed).
//
// Due() tells the loop when to look at its slow conditions (deadline, peers'
// health, alerts): by elapsed time, not by a count of pauses, whose length
// varies from nanoseconds to milliseconds. While spinning: every 256 pauses
// (no clock read on the fast path: the spin phase's own clock reads start
// at the kClockSpins-th pause); once yielding or sleeping: after every
// pause, so a peer loss or an abort (which notify) is seen at once and a
// deadline within one sleep (at most 10 ms).
// The epoch is read before the caller's next check, so a Notify between the
// check and the sleep is never lost.
class Backoff {
 public:
  // Pauses spent spinning before a wait yields: kSpins with a core to
  // spare, kOversubscribedSpins when more ranks than cores share the host.
  // Oversubscribed, the flag's setter often waits for this very core, so
  // every spin delays it; with 16 spins, 4 ranks on 2 cores ran an 8-byte
  // allreduce at 2.2-2.4 us in some runs and 4.4-6.4 us in others (the two
  // ranks of a core fell out of step), with 2 at 2.2-2.5 us in every run
  // (docs/PERFORMANCE.md, issue 14). Whoever knows the host decides (the
  // Device, for its waits: PeerHealth::spins), not the process: two
  // communicators may see different hosts.
  static constexpr uint64_t kSpins = 2000;
  static constexpr uint64_t kOversubscribedSpins = 2;
  // Notified waits (Backoff(true)): a few spins, then the futex.
  static constexpr uint64_t kNotifiedSpins = 64;
  // A wait with a driver (a tcp peer's flag): in a ping-pong no other
  // thread reads the peer's sockets (the progress threads stand aside,
  // tcp_progress.h), so the flag is set only once this thread drives, and
  // spinning first only leaves the message in the socket: 64 pauses (1.5
  // us here) were a sixth of a 2-rank 8-byte allreduce over tcp.
  static constexpr uint64_t kDrivenSpins = 2;
  // The spin phase also ends once it has lasted kSpinTime (counted from the
  // kClockSpins-th pause, so waits shorter than that never read the clock):
  // a pause costs 10 to 140 cycles depending on the CPU (24 ns on this
  // project's AMD EPYC VM, where 2000 pauses took 49 us). When the flag's
  // setter shares this core (the scheduler put two ranks on one core while
  // other work held the other, or a job pinned them there), it runs only
  // once the spinner yields, so every wait cost the whole spin phase: a
  // 2-rank 8-byte broadcast took 110-170 us with both ranks on one core
  // (docs/PERFORMANCE.md, issue 27). Spinning about as long as a switch to
  // another thread costs is the classic bound: it never loses more than
  // that switch, and a setter on another core still gets seen within it.
  static constexpr auto kSpinTime = std::chrono::microseconds(2);
  static constexpr uint64_t kClockSpins = 64;  // a power of two
  static constexpr uint64_t SpinsFor(bool oversubscribed) {
    return oversubscribed ? kOversubscribedSpins : kSpins;
  }

  // driver (notified waits only): who sleeps for us, see WaitDriver.
  // spins: see kSpins (notified waits spin kNotifiedSpins instead, or
  // kDrivenSpins with a driver).
  explicit Backoff(bool notified = false, WaitDriver* driver = nullptr, uint64_t spins = kSpins)
      : notified_(notified),
        driver_(driver),
        max_spins_(notified ? (driver ? kDrivenSpins : kNotifiedSpins) : spins),
        spins_(max_spins_) {
    if (notified_) epoch_ = Wakeup::Epoch();
  }
  void Pause() {
    ++n_;
    // Notified: the flag's setter is a thread of this process, usually
    // bound to the same core, so spinning or yielding only delays it.
    if (n_ < spins_) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
      if (n_ == kCpuCheckSpins && setter_cpu_) EndSpinningIfSetterSharesCpu();
      if ((n_ & (kClockSpins - 1)) == 0) EndSpinningAfterSpinTime();
    } else if (yielding_ && !notified_) {
      // Yield for about a millisecond: with more ranks than cores this hands
      // the core to the rank that will set the flag, at a fraction of a
      // sleep's wake-up latency; alone on a core it returns at once.
      std::this_thread::yield();
      if ((n_ & 15) == 0) {
        if (yield_start_ == Clock::time_point()) yield_start_ = Clock::now();
        else if (Clock::now() - yield_start_ > std::chrono::microseconds(kYieldUs)) yielding_ = false;
      }
    } else {
      const int cap = notified_ ? 10000 : slept_us_ < 20000 ? 100 : 1000;
      sleep_us_ = sleep_us_ ? std::min(sleep_us_ * 2, cap) : notified_ ? 2000 : 20;
      if (notified_ && driver_) {
        driver_->Sleep(epoch_, sleep_us_, /*poll_first=*/slept_us_ == 0);
      } else if (notified_) {
        Wakeup::Sleep(epoch_, sleep_us_);
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
      }
      slept_us_ += sleep_us_;
    }
    if (notified_) epoch_ = Wakeup::Epoch();
  }
  void Reset() {
    n_ = 0;
    spins_ = max_spins_;
    spin_start_ = Clock::time_point();
    sleep_us_ = 0;
    slept_us_ = 0;
    yielding_ = true;
    yield_start_ = Clock::time_point();
  }
  // Where this rank and the flag's setter last waited (PeerHealth::
  // AttachCpuWords): from the kCpuCheckSpins-th pause on, a wait whose setter
  // last waited on this very CPU yields instead of spinning. Two ranks on one
  // core (pinned there, or put there by the scheduler while other work holds
  // the other cores) hand the core to each other at every wait, and the spin
  // phase (about 4 us with its clock) only delays the setter: with both
  // ranks of a torch job on one core, the spins were a fifth of each small
  // call (docs/PERFORMANCE.md "Two ranks on one core").
  void WatchSetter(std::atomic<uint64_t>* mine, const std::atomic<uint64_t>* setter) {
    my_cpu_ = mine;
    setter_cpu_ = setter;
  }
  static constexpr uint64_t kCpuCheckSpins = 8;
  // How many iterations so far.
  uint64_t count() const { return n_; }
  // Whether the next Pause() still spins (rather than yields or sleeps).
  bool spinning() const { return n_ + 1 < spins_; }
  // Whether to check the deadline and peers' health now (see above).
  bool Due() const { return n_ >= spins_ || (n_ & (kCheckSpins - 1)) == 0; }

 private:
  // Every kClockSpins pauses of the spin phase: the first call starts the
  // spin time, a later one past kSpinTime ends the phase (the next Pause
  // yields or sleeps).
  void EndSpinningAfterSpinTime() {
    const Clock::time_point now = Clock::now();
    if (spin_start_ == Clock::time_point())
      spin_start_ = now;
    else if (now - spin_start_ >= kSpinTime)
      spins_ = n_ + 1;
  }

  // Publishes this thread's CPU (+1; 0: unknown) in my_cpu_, and ends the
  // spin phase when the setter's word names the same CPU.
  void EndSpinningIfSetterSharesCpu();

  static constexpr uint64_t kCheckSpins = 256;  // a power of two
  static constexpr int kYieldUs = 1000;
  bool notified_;
  WaitDriver* driver_;
  uint64_t max_spins_;  // the spin phase's length in pauses, at most
  uint64_t spins_;      // max_spins_, or fewer once kSpinTime has passed
  Clock::time_point spin_start_{};
  bool yielding_ = true;
  Clock::time_point yield_start_{};
  uint32_t epoch_ = 0;
  uint64_t n_ = 0;
  int sleep_us_ = 0;
  int64_t slept_us_ = 0;
  std::atomic<uint64_t>* my_cpu_ = nullptr;
  const std::atomic<uint64_t>* setter_cpu_ = nullptr;
};

inline void Backoff::EndSpinningIfSetterSharesCpu() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  const uint64_t word = static_cast<uint64_t>(cpu) + 1;
  // Stored only when it changed: the line stays shared in the peers' caches.
  if (my_cpu_->load(std::memory_order_relaxed) != word) my_cpu_->store(word, std::memory_order_relaxed);
  if (setter_cpu_->load(std::memory_order_relaxed) == word) spins_ = n_ + 1;
}

}  // namespace zc
