// Wakeup: lets threads that wait for a flag sleep in the kernel instead of
// polling, when the flag is set by another thread of this process (the tcp
// progress threads, the verbs completion threads).
//
//   waiter:  e = Wakeup::Epoch(); if (!ready()) Wakeup::Sleep(e, timeout_us);
//   setter:  <release-store the flag>; Wakeup::Notify();
//
// Notify costs one atomic add when nobody sleeps, and a futex wake
// otherwise. Sleep returns at once if any Notify happened since the epoch
// was read, so a wakeup between the check and the sleep is never lost. Flags
// written from another process (shared memory) do not notify: waiters on
// those bound their sleep with the timeout.
#pragma once

#include <cstdint>

namespace zc {

class Wakeup {
 public:
  static uint32_t Epoch();
  static void Sleep(uint32_t epoch, int timeout_us);
  static void Notify();
};

// A transport whose waiters may receive for themselves (tcp): Sleep sleeps as
// Wakeup::Sleep does, but while it waits the calling thread may take the
// peer's next message off the socket itself (one thread wake-up per message
// instead of two: the progress thread's, then the waiter's).
//
// poll_first: the wait has just begun (Backoff's first sleep, a post's
// short wait): the driver may poll its sockets for a while before it
// sleeps (tcp_progress.h). Later sleeps of a long wait do not poll again.
class WaitDriver {
 public:
  virtual void Sleep(uint32_t epoch, int timeout_us, bool poll_first) = 0;

 protected:
  ~WaitDriver() = default;
};

}  // namespace zc
