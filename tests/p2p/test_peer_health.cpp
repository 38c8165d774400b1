// PeerHealth's wait policy (no processes): each Device decides how long its
// waits spin before they yield, and one Device's setting leaves another's
// alone (issue 26: the spin count used to be process-wide).
#include <gtest/gtest.h>

#include "p2p/peer_health.h"

namespace zc {
namespace {

// True when a fresh backoff of h stops spinning after two pauses (Due()
// turns true once the spins are spent).
bool YieldsAtOnce(const PeerHealth& h) {
  Backoff b = h.NewBackoff();
  b.Pause();
  b.Pause();
  return b.Due();
}

TEST(PeerHealth, SpinSettingsOfTwoDevicesAreIndependent) {
  PeerHealth crowded(0, 2, 1.0), roomy(0, 2, 1.0);
  EXPECT_EQ(crowded.spins(), Backoff::kSpins);
  crowded.SetOversubscribed(true);
  EXPECT_EQ(crowded.spins(), Backoff::kOversubscribedSpins);
  EXPECT_EQ(roomy.spins(), Backoff::kSpins);
  EXPECT_TRUE(YieldsAtOnce(crowded));
  EXPECT_FALSE(YieldsAtOnce(roomy));
  // A wait on a peer's flag follows its Device too.
  Backoff on_peer = roomy.BackoffFor(1);
  on_peer.Pause();
  on_peer.Pause();
  EXPECT_FALSE(on_peer.Due());
  crowded.SetOversubscribed(false);
  EXPECT_FALSE(YieldsAtOnce(crowded));
}

}  // namespace
}  // namespace zc
