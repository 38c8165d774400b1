#include "common/trace_clock.h"

#include <pthread.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "common/log.h"

namespace zc::trace {
namespace {

// CPUID 0x80000007 EDX bit 8: the counter ticks at one rate on every core,
// whatever the power state.
bool InvariantTsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007) return false;
  if (!__get_cpuid(0x80000007, &a, &b, &c, &d)) return false;
  return (d >> 8) & 1;
#else
  return false;
#endif
}

const bool g_tsc = InvariantTsc();

}  // namespace

bool TicksAreTsc() { return g_tsc; }

uint64_t PreciseTicks() {
#if defined(__x86_64__)
  if (g_tsc) return __rdtsc();
#endif
  return static_cast<uint64_t>(NowNs());
}

alignas(64) std::atomic<uint64_t> CoarseClock::ticks_{0};

// The thread behind CoarseClock and what it shares with the callers, all
// under mu_. One per process, never destroyed: the thread is detached and
// may still run while the process exits.
class CoarseTicker {
 public:
  static CoarseTicker& Get() {
    static CoarseTicker* t = new CoarseTicker;
    return *t;
  }

  void Watch(const std::atomic<uint64_t>* records) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back(records);
  }
  void Unwatch(const std::atomic<uint64_t>* records) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.erase(std::remove(watched_.begin(), watched_.end(), records), watched_.end());
  }

  // The word is 0: start the thread, or wake it. The first record after a
  // start or a park is stamped with the counter read here.
  uint64_t Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t now = PreciseTicks();
    if (parked_) {
      parked_ = false;
      cv_.notify_one();
    } else if (!running_ && (start_failed_ || !Start())) {
      return now;  // no thread: the word stays 0 and every record reads the counter
    }
    CoarseClock::ticks_.store(now, std::memory_order_relaxed);
    return now;
  }

 private:
  CoarseTicker() {
    // A fork copies the word but not the thread: the child's records would
    // keep the parent's last time. The child starts its own thread on its
    // first record. mu_ is held across the fork so that the child gets
    // it (and watched_) in a consistent state.
    pthread_atfork([] { Get().mu_.lock(); }, [] { Get().mu_.unlock(); }, [] { Get().AfterForkInChild(); });
  }

  void AfterForkInChild() {
    new (&cv_) std::condition_variable;  // its waiter, the thread, is not in the child
    running_ = false;
    parked_ = false;
    CoarseClock::ticks_.store(0, std::memory_order_relaxed);
    mu_.unlock();
  }

  // Under mu_. Tried once: after a failure every record would try again
  // (and warn again) while the word stays 0.
  bool Start() {
    try {
      std::thread([this] { Loop(); }).detach();
    } catch (const std::system_error& e) {
      ZC_WARN(kCommon, "flight recorder: cannot start the clock thread (%s): records read the clock", e.what());
      start_failed_ = true;
      return false;
    }
    running_ = true;
    return true;
  }

  // Under mu_.
  uint64_t Records() const {
    uint64_t n = 0;
    for (const std::atomic<uint64_t>* w : watched_) n += w->load(std::memory_order_relaxed);
    return n;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seen = Records();
    int idle = 0;
    for (;;) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(CoarseClock::kPeriodUs));
      lock.lock();
      // Stored under mu_, as Wake does: the word never goes back in time.
      const uint64_t records = Records();
      idle = records == seen ? idle + 1 : 0;
      seen = records;
      if (idle < CoarseClock::kIdleTicks) {
        CoarseClock::ticks_.store(PreciseTicks(), std::memory_order_relaxed);
        continue;
      }
      CoarseClock::ticks_.store(0, std::memory_order_relaxed);
      parked_ = true;
      cv_.wait(lock, [this] { return !parked_; });
      seen = Records();
      idle = 0;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;  // a thread exists in this process
  bool parked_ = false;   // it waits on cv_ for Wake
  bool start_failed_ = false;  // the thread could not be made: records read the counter
  std::vector<const std::atomic<uint64_t>*> watched_;
};

uint64_t CoarseClock::Wake() { return CoarseTicker::Get().Wake(); }
void CoarseClock::Watch(const std::atomic<uint64_t>* records) { CoarseTicker::Get().Watch(records); }
void CoarseClock::Unwatch(const std::atomic<uint64_t>* records) { CoarseTicker::Get().Unwatch(records); }

}  // namespace zc::trace
