// Device: one per process (the paper's Table 1 "device"). It sets the
// process up as a member of the job: it exchanges every rank's PeerInfo
// through the bootstrap, chooses and connects a transport per peer, and then
// owns what that setup made:
//   - the transports and the channel table (channel_table.h),
//   - this process's reachable memory: pool, registration cache, holds
//     (LocalRegions, local_regions.h),
//   - what it knows of the job's failures (PeerHealth, peer_health.h),
//   - the control plane (control_plane.h).
// Everything above p2p (send/recv, collectives) reaches those through here
// (or a Group) and never talks to a transport directly.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/deadline.h"
#include "common/status.h"
#include "p2p/channel_table.h"
#include "p2p/local_regions.h"
#include "p2p/offer_board.h"
#include "p2p/peer_health.h"
#include "p2p/transport.h"
#include "p2p/transport_registry.h"

namespace zc {

class ControlPlane;
class PostBook;

class Device : public TransportHost {
 public:
  // Collective over all ranks of `bootstrap`: chooses a transport per peer
  // through the registry (transport_registry.h: same host -> shm, else
  // verbs when viable, else tcp; ZC_TRANSPORT forces one), connects, and
  // sets up the control mailboxes.
  static Status Create(Bootstrap* bootstrap, const Config& config,
                       std::unique_ptr<Device>* out);
  ~Device() override;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }
  double timeout_s() const { return config_.timeout_s; }
  Deadline NewDeadline() const { return Deadline(config_.timeout_s); }
  const std::string& job_tag() const { return job_tag_; }
  // Out-of-band exchange through the bootstrap (setup, control plane):
  // every rank calls it with the same key.
  Status AllGather(const std::string& key, const std::string& mine, std::vector<std::string>* all);

  // ---- what the setup made ----
  PeerHealth& health() const { return *health_; }
  LocalRegions& regions() { return *regions_; }
  ChannelTable& channels() { return *channels_; }
  ControlPlane* control() { return control_.get(); }
  // The flag words of receives posted to their senders (p2p/recv_post.h).
  PostBook& posts() { return *posts_; }
  // The receives that a sender's offer may land in (p2p/offer_board.h).
  OfferBoard& offers() { return offers_; }
  // A receive from peer was armed for offers: the transport looks at an
  // offer from peer that waits for one (Transport::ServeOffers).
  void ServeOffers(int peer);

  // ---- peers ----
  TransportKind transport_to(int peer) const { return channels_->kind(peer); }
  bool is_local(int peer) const { return local_[peer]; }
  // Which host rank r is on: the position of its host id among the job's
  // hosts in order of first appearance (rank 0's host is 0). The same on
  // every rank, so hierarchical collectives agree on the topology.
  int host_of(int r) const { return host_index_[r]; }
  // Connection `index` (mod connections per peer) to peer.
  Channel& channel(int peer, int index = 0) { return channels_->at(peer, index); }

  // ---- control messages (descriptors; never tensor data) ----
  Status SendControl(int peer, uint64_t tag, const std::string& msg, const Deadline& dl);
  Status RecvControl(int peer, uint64_t tag, std::string* msg, const Deadline& dl);

  // ---- TransportHost: health_ and regions_, for the transports ----
  void OnPeerLost(int peer, const Status& why) override { health_->OnPeerLost(peer, why); }
  Status Health(int peer) const override { return health_->Health(peer); }
  MemRegion* FindLocalRegion(uint64_t id) override { return regions_->Find(id); }
  bool RegionRetired(uint64_t id) const override { return regions_->Retired(id); }
  std::shared_mutex& region_use() override { return regions_->region_use(); }
  Status HoldLocalRegion(const void* ptr, size_t bytes, RegionHold* out) override {
    return regions_->Hold(ptr, bytes, out);
  }
  OfferMatch MatchOffer(int peer, uint64_t key, uint64_t prev, uint64_t bytes, OfferTarget* out) override {
    return offers_.Match(peer, key, prev, bytes, out);
  }
  void OfferEnded(const OfferTarget& target, bool landed) override { offers_.Ended(target, landed); }
  void OfferRefused(int peer, uint64_t key) override { offers_.NoteRefused(peer, key); }

 private:
  Device() = default;
  // Init's steps, in order.
  Status Init(Bootstrap* bootstrap, const Config& config);
  // Publishes this rank's PeerInfo and reads every rank's; sets the job key.
  Status ExchangePeerInfo(const std::string& host_id, std::vector<PeerInfo>* all);
  Status ChooseTransports(const std::vector<PeerInfo>& all, TransportPlan* plan);
  // Which host each rank is on (host_of).
  void NumberHosts(const std::vector<PeerInfo>& all);
  // Sets oversubscribed_ and the waits' spin setting.
  void NoteOversubscription();
  Status CreateTransports(const TransportPlan& plan);
  void CreateRegions();
  Status ConnectTransports(const TransportPlan& plan, const std::vector<PeerInfo>& all);
  void CreateChannels();
  Status CreateControlPlane();
  Transport* transport(TransportKind k);

  Config config_;
  Bootstrap* bootstrap_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::string job_key_;  // authenticates data connections
  std::string job_tag_;  // first 16 hex chars of the job key (segment names)
  std::vector<bool> local_;
  bool oversubscribed_ = false;  // more ranks on this host than cores
  std::vector<int> host_index_;  // see host_of
  std::vector<int> peer_pid_;
  int allgather_seq_ = 0;
  std::mutex allgather_mu_;

  // Made by Init in this order and torn down in reverse by ~Device; the
  // transports reach health_ and regions_ through TransportHost, so both
  // outlive the transports' progress threads.
  std::unique_ptr<PeerHealth> health_;
  std::map<TransportKind, std::unique_ptr<Transport>> transports_;
  std::unique_ptr<LocalRegions> regions_;
  std::unique_ptr<PostBook> posts_;  // in regions_
  OfferBoard offers_;  // asked by the transports' threads, which ~Device stops first
  std::unique_ptr<ChannelTable> channels_;
  std::unique_ptr<ControlPlane> control_;
};

}  // namespace zc
