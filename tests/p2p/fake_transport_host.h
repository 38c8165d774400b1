// A TransportHost for tests of the tcp transport's parts without a Device:
// no regions, no holds, and peers alive until the test loses one or all.
#pragma once

#include <atomic>
#include <shared_mutex>

#include "common/status.h"
#include "p2p/transport.h"

namespace zc::testing_fakes {

class FakeTransportHost : public TransportHost {
 public:
  static constexpr int kEveryPeer = -2;
  static constexpr int kNone = -1;

  explicit FakeTransportHost(int lost = kNone) : lost_(lost) {}
  void OnPeerLost(int, const Status&) override {}
  MemRegion* FindLocalRegion(uint64_t) override { return nullptr; }
  std::shared_mutex& region_use() override { return use_; }
  Status HoldLocalRegion(const void*, size_t, RegionHold*) override {
    return Error(ZC_ERR_UNSUPPORTED, "fake host");
  }
  Status Health(int peer) const override {
    const int lost = lost_.load();
    if (lost == kEveryPeer || (lost >= 0 && lost == peer))
      return Error(ZC_ERR_PEER_LOST, "peer %d lost (test)", peer);
    return Status::Ok();
  }
  // From now on every peer (kEveryPeer) or one peer is lost.
  void Lose(int peer = kEveryPeer) { lost_.store(peer); }

 private:
  std::shared_mutex use_;
  std::atomic<int> lost_;
};

}  // namespace zc::testing_fakes
