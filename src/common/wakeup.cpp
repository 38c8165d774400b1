#include "common/wakeup.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>

namespace zc {
namespace {
// A cache line of their own: every sleep and Notify writes them, and the
// words the hot paths read (the flight recorder's clock) must not share it.
alignas(64) std::atomic<uint32_t> g_epoch{0};
alignas(64) std::atomic<int> g_sleepers{0};

long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}
}  // namespace

uint32_t Wakeup::Epoch() { return g_epoch.load(std::memory_order_seq_cst); }

void Wakeup::Sleep(uint32_t epoch, int timeout_us) {
  timespec ts{timeout_us / 1000000, static_cast<long>(timeout_us % 1000000) * 1000};
  // The sleeper is counted before the kernel compares the epoch: a Notify
  // after that comparison sees it and wakes; one before changes the epoch.
  g_sleepers.fetch_add(1, std::memory_order_seq_cst);
  Futex(&g_epoch, FUTEX_WAIT_PRIVATE, epoch, &ts);
  g_sleepers.fetch_sub(1, std::memory_order_relaxed);
}

void Wakeup::Notify() {
  g_epoch.fetch_add(1, std::memory_order_seq_cst);
  if (g_sleepers.load(std::memory_order_seq_cst) > 0) Futex(&g_epoch, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

}  // namespace zc
