// WarnLimiter: keeps a flood of one kind of warning (refused connections
// from a port scanner or a hostile client) from filling the log. The first
// `burst` occurrences of each interval are logged in full; the others are
// only counted, and the count is logged once the interval is over, so a
// burst of 10,000 refusals costs a handful of lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace zc {

class WarnLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WarnLimiter(int burst = 5, double interval_s = 10)
      : burst_(burst), interval_(std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(interval_s))) {}

  // One occurrence at `now`: true when it should be logged in full.
  bool Admit(Clock::time_point now = Clock::now()) {
    std::lock_guard<std::mutex> lock(mu_);
    RollLocked(now);
    ++total_;
    if (in_window_ < burst_) {
      ++in_window_;
      return true;
    }
    ++suppressed_;
    return false;
  }

  // The number of occurrences not logged in a finished interval (or, with
  // force, so far), to be logged as one summary line; 0 when none.
  uint64_t TakeSuppressed(bool force = false, Clock::time_point now = Clock::now()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (force || now - window_start_ >= interval_) {
      uint64_t n = suppressed_;
      suppressed_ = 0;
      return n;
    }
    return 0;
  }

  // When the pending count is due to be summarised (a timer for poll loops).
  bool HasPending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return suppressed_ > 0;
  }
  Clock::time_point window_end() const {
    std::lock_guard<std::mutex> lock(mu_);
    return window_start_ + interval_;
  }
  uint64_t total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  double interval_s() const { return std::chrono::duration<double>(interval_).count(); }

 private:
  // A new interval starts at the first occurrence after the last one ended;
  // the suppressed count of the old one stays until it is taken.
  void RollLocked(Clock::time_point now) {
    if (total_ == 0 || now - window_start_ >= interval_) {
      if (suppressed_ == 0 || total_ == 0) {
        window_start_ = now;
        in_window_ = 0;
      }
    }
  }

  mutable std::mutex mu_;
  int burst_;
  Clock::duration interval_;
  Clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t total_ = 0;
};

}  // namespace zc
