// SpinLock: the lock of the small-message path (a control stream's sender
// and receiver). Uncontended, lock and unlock are one atomic exchange and one
// store, where std::mutex costs two library calls and some 55 instructions
// (callgrind, 8-byte ping-pong: a tenth of a send). Contended, the waiter
// backs off as every wait in zcomm does (spin, yield, sleep: common/
// deadline.h), so a holder that waits for a peer, or shares a core with the
// waiter, is never starved. Meets Lockable (std::lock_guard, unique_lock).
#pragma once

#include <atomic>

#include "common/deadline.h"

namespace zc {

class SpinLock {
 public:
  // How long a waiter spins before it yields (Backoff::kSpins): its owner's
  // setting, made before the lock is shared.
  void set_spins(uint64_t spins) { spins_ = spins; }
  void lock() {
    if (try_lock()) return;
    Backoff backoff(/*notified=*/false, nullptr, spins_);
    do {
      // Read before the exchange: waiters share the line, not fight for it.
      while (locked_.load(std::memory_order_relaxed)) backoff.Pause();
    } while (!try_lock());
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
  uint64_t spins_ = Backoff::kSpins;
};

}  // namespace zc
