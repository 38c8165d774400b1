// ChannelTable: the Device's connections, by peer. Every peer has the kind
// of transport chosen for it (the same on both ends of a pair) and one
// Channel per connection of that transport. Slot streams, the control
// plane and send/receive take their channels from here.
#pragma once

#include <memory>
#include <vector>

#include "p2p/channel.h"

namespace zc {

class ChannelTable {
 public:
  // kinds[p]: the transport chosen for peer p (kNone for this rank).
  explicit ChannelTable(std::vector<TransportKind> kinds)
      : kind_(std::move(kinds)), channels_(kind_.size()) {}
  ChannelTable(const ChannelTable&) = delete;
  ChannelTable& operator=(const ChannelTable&) = delete;

  // Peer's channels, one per connection of its transport (setup only).
  void Add(int peer, std::vector<std::unique_ptr<Channel>> channels) { channels_[peer] = std::move(channels); }

  int size() const { return static_cast<int>(kind_.size()); }
  TransportKind kind(int peer) const { return kind_[peer]; }
  // Connection `index` (mod connections per peer) to peer.
  Channel& at(int peer, int index = 0) {
    auto& v = channels_[peer];
    return *v[static_cast<size_t>(index) % v.size()];
  }

 private:
  const std::vector<TransportKind> kind_;
  std::vector<std::vector<std::unique_ptr<Channel>>> channels_;
};

}  // namespace zc
