// WarnLimiter: a flood of 10,000 warnings becomes a few lines plus a count
// per interval (times are passed in, so nothing here sleeps).
#include <gtest/gtest.h>

#include "common/rate_limit.h"

namespace zc {
namespace {

using std::chrono::milliseconds;

TEST(WarnLimiter, BurstThenOneSummaryPerInterval) {
  WarnLimiter lim(5, 10);
  auto t = WarnLimiter::Clock::now();
  int logged = 0, summaries = 0;
  uint64_t summarised = 0;
  // 10,000 events over 25 s (one every 2.5 ms); the caller takes the
  // summary before each event, as the store and the tcp accept loop do.
  for (int i = 0; i < 10000; ++i) {
    auto now = t + std::chrono::microseconds(2500 * i);
    if (uint64_t n = lim.TakeSuppressed(false, now)) {
      ++summaries;
      summarised += n;
    }
    if (lim.Admit(now)) ++logged;
  }
  uint64_t rest = lim.TakeSuppressed(true, t + std::chrono::seconds(25));
  summarised += rest;
  if (rest) ++summaries;
  EXPECT_EQ(logged, 15);  // 5 in each of the three 10 s intervals
  EXPECT_EQ(summaries, 3);
  EXPECT_EQ(summarised + static_cast<uint64_t>(logged), 10000u);
  EXPECT_EQ(lim.total(), 10000u);
}

TEST(WarnLimiter, QuietAfterAFloodStartsAFreshBurst) {
  WarnLimiter lim(2, 1);
  auto t = WarnLimiter::Clock::now();
  EXPECT_TRUE(lim.Admit(t));
  EXPECT_TRUE(lim.Admit(t));
  EXPECT_FALSE(lim.Admit(t));
  EXPECT_TRUE(lim.HasPending());
  EXPECT_EQ(lim.TakeSuppressed(false, t + milliseconds(500)), 0u);  // interval not over
  EXPECT_EQ(lim.TakeSuppressed(false, t + milliseconds(1500)), 1u);
  EXPECT_FALSE(lim.HasPending());
  EXPECT_TRUE(lim.Admit(t + milliseconds(5000)));
}

}  // namespace
}  // namespace zc
