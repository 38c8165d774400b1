// Backoff (every wait's spin, yield, sleep): a waiter whose flag is set by a
// thread that shares its only core hands the core over once its spin time
// is up, not after the whole pause count; Reset starts a full spin phase
// again; the short spin phases (oversubscribed, notified) stay as they are;
// a wait whose flag's setter last waited on this very CPU yields from its
// kCpuCheckSpins-th pause on, and publishes the CPU it runs on.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <thread>

#include "common/deadline.h"

namespace zc {
namespace {

// Binds the calling thread to one CPU; false where that is not allowed.
bool BindTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Binds the calling thread to the CPU it runs on, for the object's life,
// and gives the thread its former CPUs back at the end. cpu() < 0: not bound.
class BoundHere {
 public:
  BoundHere() {
    if (sched_getaffinity(0, sizeof(original_), &original_) != 0) return;
    const int cpu = sched_getcpu();
    if (cpu >= 0 && BindTo(cpu)) cpu_ = cpu;
  }
  ~BoundHere() {
    if (cpu_ >= 0) sched_setaffinity(0, sizeof(original_), &original_);
  }
  BoundHere(const BoundHere&) = delete;
  BoundHere& operator=(const BoundHere&) = delete;
  int cpu() const { return cpu_; }

 private:
  cpu_set_t original_;
  int cpu_ = -1;
};

// Pauses a waiter spends before it sees a flag that another thread, bound
// to the same CPU and runnable all along, sets as soon as it runs.
uint64_t PausesUntilCoreMateSets(int cpu) {
  std::atomic<bool> flag{false}, started{false}, armed{false};
  std::thread setter([&] {
    BindTo(cpu);
    started.store(true);
    while (!armed.load()) std::this_thread::yield();
    flag.store(true, std::memory_order_release);
  });
  while (!started.load()) std::this_thread::yield();
  armed.store(true);
  // From here the setter is runnable on this core and runs only when the
  // waiter yields (or a timer tick preempts it, which only shortens this).
  Backoff backoff;
  while (!flag.load(std::memory_order_acquire)) backoff.Pause();
  setter.join();
  return backoff.count();
}

TEST(Backoff, HandsTheOnlyCoreToTheSetterAfterTheSpinTime) {
  BoundHere bound;
  const int cpu = bound.cpu();
  if (cpu < 0) GTEST_SKIP() << "cannot bind threads to one CPU here";
  // With the spin phase counted in pauses alone, every trial spins all
  // kSpins pauses (49 us on an AMD EPYC VM, ~100 us on recent Intel CPUs)
  // before the setter can run; kSpinTime ends it far earlier on any CPU
  // whose 2000 pauses take longer than ~4 us.
  for (int trial = 0; trial < 5; ++trial) {
    const uint64_t pauses = PausesUntilCoreMateSets(cpu);
    EXPECT_LT(pauses, Backoff::kSpins) << "trial " << trial;
  }
}

TEST(Backoff, ResetStartsAFullSpinPhase) {
  Backoff backoff;
  while (backoff.spinning()) backoff.Pause();
  const uint64_t first = backoff.count();
  EXPECT_GE(first, Backoff::kClockSpins);
  EXPECT_LT(first, Backoff::kSpins + 1);
  backoff.Pause();  // yields: past the spin phase
  EXPECT_TRUE(backoff.Due());
  backoff.Reset();
  EXPECT_EQ(backoff.count(), 0u);
  EXPECT_TRUE(backoff.spinning());
  while (backoff.spinning()) backoff.Pause();
  EXPECT_GE(backoff.count(), Backoff::kClockSpins);
}

TEST(Backoff, ShortSpinPhasesAreKept) {
  Backoff crowded(/*notified=*/false, nullptr, Backoff::kOversubscribedSpins);
  crowded.Pause();
  EXPECT_FALSE(crowded.spinning());
  Backoff notified(/*notified=*/true);
  uint64_t spins = 0;
  while (notified.spinning()) {
    notified.Pause();
    ++spins;
  }
  EXPECT_LT(spins, Backoff::kClockSpins);  // no clock read: the phase ends before one
}

// Pauses a wait spends spinning when its setter's CPU word says setter_cpu
// (+1; 0: unknown), the caller bound to one CPU; *mine: the waiter's word after.
uint64_t SpinsWithSetterOn(uint64_t setter_word, uint64_t* mine) {
  std::atomic<uint64_t> my_word{0}, setter{setter_word};
  Backoff backoff;
  backoff.WatchSetter(&my_word, &setter);
  while (backoff.spinning()) backoff.Pause();
  *mine = my_word.load();
  return backoff.count();
}

TEST(Backoff, YieldsAtOnceWhenTheSetterLastWaitedOnThisCpu) {
  BoundHere bound;
  const int cpu = bound.cpu();
  if (cpu < 0) GTEST_SKIP() << "cannot bind threads to one CPU here";
  const uint64_t here = static_cast<uint64_t>(cpu) + 1;
  uint64_t mine = 0;
  // The setter waits on this CPU: the spin phase ends at the check.
  EXPECT_EQ(SpinsWithSetterOn(here, &mine), Backoff::kCpuCheckSpins);
  EXPECT_EQ(mine, here) << "the waiter publishes the CPU it waits on";
  // Elsewhere, or not known yet: the whole spin phase, as without a watch
  // (it ends by its clock, at or after the first clock read).
  EXPECT_GE(SpinsWithSetterOn(here + 1, &mine), Backoff::kClockSpins);
  EXPECT_EQ(mine, here);
  EXPECT_GE(SpinsWithSetterOn(0, &mine), Backoff::kClockSpins);
}

// Counts the sleeps a wait hands to its driver.
struct CountingDriver final : WaitDriver {
  void Sleep(uint32_t, int, bool) override { ++sleeps; }
  int sleeps = 0;
};

TEST(Backoff, ADrivenWaitDrivesAtOnce) {
  CountingDriver driver;
  Backoff driven(/*notified=*/true, &driver);
  uint64_t spins = 0;
  while (driven.spinning()) {
    driven.Pause();
    ++spins;
  }
  EXPECT_LE(spins, Backoff::kDrivenSpins);
  EXPECT_EQ(driver.sleeps, 0);
  driven.Pause();
  driven.Pause();
  EXPECT_EQ(driver.sleeps, 2) << "every pause past the spins drives";
}

TEST(Backoff, AWaitShorterThanTheCheckReadsNoCpu) {
  std::atomic<uint64_t> my_word{0}, setter{1};
  Backoff backoff;
  backoff.WatchSetter(&my_word, &setter);
  for (uint64_t i = 1; i < Backoff::kCpuCheckSpins; ++i) backoff.Pause();
  EXPECT_TRUE(backoff.spinning());
  EXPECT_EQ(my_word.load(), 0u);
}

}  // namespace
}  // namespace zc
