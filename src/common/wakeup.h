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

}  // namespace zc
