// WaitWatch: whether, and since when, a caller waits for a nonblocking push.
//
// A push lends its pieces for this rank's server by reference (kPushRef);
// the server normally consumes them once every worker's piece of the round
// is in. Taking them back early costs a copy into their slots, and is only
// needed for a caller that waits for the push: its completion must not hang
// on another worker. So zc_wait and zc_test mark the push's watch, and the
// engine takes the pieces back only after the caller has waited a while
// (Worker::SettleRefs); a push nobody waits for keeps them lent.
//
// Threading: Waiting from the caller's thread, WaitedFor from the engine's.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/deadline.h"

namespace zc::ps {

class WaitWatch {
 public:
  // A caller began to wait (or to test) for the push; later calls keep the
  // first time.
  void Waiting() {
    Clock::rep none = 0;
    since_.compare_exchange_strong(none, Clock::now().time_since_epoch().count(), std::memory_order_acq_rel);
  }
  // Some caller had waited for at least `span` at `now`.
  bool WaitedFor(Clock::duration span, Clock::time_point now) const {
    const Clock::rep since = since_.load(std::memory_order_acquire);
    return since != 0 && now - Clock::time_point(Clock::duration(since)) >= span;
  }

 private:
  std::atomic<Clock::rep> since_{0};  // Clock ticks since its epoch; 0: nobody waits yet
};

}  // namespace zc::ps
