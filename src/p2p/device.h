// Device: one per process (the paper's Table 1 "device"). It owns the
// transports, the registered memory pool, the registration cache for user
// memory, the per-peer channels, and the health of every peer. Everything
// above p2p (send/recv, collectives) asks the Device for memory and channels
// and never talks to a transport directly.
#pragma once

#include <atomic>
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
#include "p2p/channel.h"
#include "p2p/alloc_sites.h"
#include "p2p/mem_region.h"
#include "p2p/pool.h"
#include "p2p/reg_cache.h"
#include "p2p/region_hold.h"
#include "p2p/transport.h"
#include "p2p/transport_registry.h"

namespace zc {

class ControlPlane;

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
  // Out-of-band exchange through the bootstrap (setup, control plane):
  // every rank calls it with the same key.
  Status AllGather(const std::string& key, const std::string& mine, std::vector<std::string>* all);

  // ---- TransportHost ----
  void OnPeerLost(int peer, const Status& why) override;
  Status Health(int peer) const override;
  MemRegion* FindLocalRegion(uint64_t id) override;
  bool RegionRetired(uint64_t id) const override;
  std::shared_mutex& region_use() override { return region_use_mu_; }
  Status HoldLocalRegion(const void* ptr, size_t bytes, RegionHold* out) override;
  void ReleaseRegion(uint64_t id) override;
  // The region that holds [ptr, ptr+bytes) (HoldLocalRegion without a hold).
  Status LocalRegionFor(const void* ptr, size_t bytes, MemRegion** out);
  // Health without the liveness probe of local peers (no clock read): an
  // abort, a peer's alert, or a peer already known lost. For the write side
  // of mapped memory, where a dead reader cannot block the writer; waits use
  // Health().
  Status KnownHealth(int peer) const { return KnownHealthy(peer) ? Status::Ok() : Health(peer); }
  // KnownHealth's test alone, inline: three loads on the small-message path.
  bool KnownHealthy(int peer) const {
    return !aborted_.load(std::memory_order_acquire) &&
           !(alert_word_ && alert_word_->load(std::memory_order_acquire)) &&
           !(peer >= 0 && peer < size_ && lost_flag_[peer].load(std::memory_order_acquire));
  }

  // ---- memory ----
  // Zero-copy memory from the registered pool. Peers reach it through
  // region->remote(). Freed with Free(region->data()).
  Status Allocate(size_t bytes, MemRegion** out);
  Status Free(void* ptr);
  // The pool region that starts at ptr (what zc_mem_alloc returned), or null.
  MemRegion* FindAllocation(const void* ptr);
  // [ptr, ptr + bytes) is pool memory (zc_mem_alloc): host memory. Lock-free.
  bool IsPoolMemory(const void* ptr, size_t bytes) const;
  // Exposes user memory through the registration cache (reg_cache.h): the
  // page-aligned region returned contains [ptr, ptr+bytes) and stays
  // exposed until Deregister or shutdown, or until a wider registration
  // replaces it and no hold remains.
  Status Register(void* ptr, size_t bytes, MemRegion** out);
  // How many regions the cache has exposed so far (tests, logs).
  size_t registrations() const { return registrations_.load(std::memory_order_relaxed); }
  // The allocation-site hook (§3.4): see alloc_sites.h.
  AllocSites& alloc_sites() { return alloc_sites_; }
  // Drops every cached registration overlapping [ptr, ptr+bytes) (memory
  // about to be freed: a verbs registration would otherwise keep pointing at
  // the old pages). Returns how many were dropped.
  size_t Deregister(const void* ptr, size_t bytes);

  // ---- channels ----
  TransportKind transport_to(int peer) const { return peer_kind_[peer]; }
  bool is_local(int peer) const { return local_[peer]; }
  // Which host rank r is on: the position of its host id among the job's
  // hosts in order of first appearance (rank 0's host is 0). The same on
  // every rank, so hierarchical collectives agree on the topology.
  int host_of(int r) const { return host_index_[r]; }
  // Connection `index` (mod connections per peer) to peer.
  Channel& channel(int peer, int index = 0);

  // True when what peer writes into our memory is stored by a thread of
  // this process that calls Wakeup::Notify() (tcp, verbs), so waits on it
  // may sleep until notified; false for shared memory written by the peer.
  bool FlagsNotified(int peer) const {
    return peer >= 0 && peer < size_ && peer_kind_[peer] != TransportKind::kShm;
  }
  // The transport's WaitDriver for waits on peer's flags, or nullptr.
  WaitDriver* DriverFor(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < peer_driver_.size() ? peer_driver_[peer] : nullptr;
  }
  // Waits until *flag >= value. Spins, yields, then sleeps; fails with the
  // peer's health (lost, aborted) or ZC_ERR_TIMEOUT naming `what`.
  Status WaitFlag(const std::atomic<uint64_t>* flag, uint64_t value, int peer,
                  const Deadline& deadline, const char* what) const;

  // ---- control messages (descriptors; never tensor data) ----
  Status SendControl(int peer, uint64_t tag, const std::string& msg, const Deadline& dl);
  Status RecvControl(int peer, uint64_t tag, std::string* msg, const Deadline& dl);
  ControlPlane* control() { return control_.get(); }

  // Fails every pending and later wait with ZC_ERR_ABORTED (cause kept) and
  // tells the peers (best effort). `lost`: the peer whose loss is the cause
  // (the peers' errors name it), or -1.
  void Abort(const Status& why, int lost = -1);
  // An operation (send, receive, collective) failed with st; returns st.
  // When a lost peer is the cause, every other pending and later operation
  // of the job fails too: this rank aborts with the loss as the cause and
  // alerts every live peer (ranks waiting on a survivor that has failed
  // learn it at once; nobody waits for the dead until ZC_TIMEOUT). A mere
  // query of health (zc_comm_get_async_error) aborts nothing.
  Status OperationFailed(Status st) {
    NoteFailure(st);
    return st;
  }
  // OperationFailed without the copy: for `Status st = ...; NoteFailure(st);
  // return st;` on the small-message path.
  void NoteFailure(const Status& st) {
    if (st.code() == ZC_ERR_PEER_LOST) AbortForLostPeer();
  }
  // OperationFailed's work when a peer was lost: the abort with the loss as
  // its cause (nothing when aborted already or no peer is known lost).
  void AbortForLostPeer();
  // The lowest-numbered peer known lost, or -1.
  int LostPeer() const;
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  double timeout_s() const { return config_.timeout_s; }
  Deadline NewDeadline() const { return Deadline(config_.timeout_s); }
  uint64_t NewRegionId() { return next_region_id_.fetch_add(1); }
  Transport* transport(TransportKind k);
  // True when transports (or flags) told us `peer` is gone.
  bool peer_lost(int peer) const;
  const std::string& job_tag() const { return job_tag_; }

 private:
  // Writes the alert word `value` into every live peer.
  void AlertPeers(uint64_t value);
  // At teardown of a failed job: repeats the alert to every live peer.
  void Farewell();
  Device() = default;
  // Init's steps, in order.
  Status Init(Bootstrap* bootstrap, const Config& config);
  void InitPeerState(Bootstrap* bootstrap, const Config& config);
  // Publishes this rank's PeerInfo and reads every rank's; sets the job key.
  Status ExchangePeerInfo(const std::string& host_id, std::vector<PeerInfo>* all);
  Status ChooseTransports(const std::vector<PeerInfo>& all, TransportPlan* plan);
  void NoteOversubscription();
  Status CreateTransports(const TransportPlan& plan);
  void CreatePool();
  Status ConnectTransports(const TransportPlan& plan, const std::vector<PeerInfo>& all);
  void CreateChannels();
  void RememberRegion(MemRegion* r);
  void ForgetRegion(uint64_t id);
  // A pool region or a cached registration holding [ptr, ptr+bytes);
  // *held: a hold was taken (ReleaseRegion gives it back).
  Status FindOrRegister(const void* ptr, size_t bytes, bool hold, MemRegion** out, bool* held);
  Status RegisterCached(const void* ptr, size_t bytes, bool hold, MemRegion** out);
  // Drops the retired registrations nobody holds (takes region use
  // exclusively: call without regions_mu_).
  void DropUnusedRegistrations();
  // Unexposes r and forgets its id; regions_mu_ held.
  void DropRegistration(MemRegion* r);

  Config config_;
  Bootstrap* bootstrap_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::string job_key_;  // authenticates data connections
  std::string job_tag_;  // first 16 hex chars of the job key (segment names)
  std::vector<TransportKind> peer_kind_;
  std::vector<WaitDriver*> peer_driver_;  // per peer, set with the channels
  std::vector<bool> local_;
  std::vector<int> host_index_;  // see host_of
  std::vector<int> peer_pid_;
  std::map<TransportKind, std::unique_ptr<Transport>> transports_;
  std::vector<std::vector<std::unique_ptr<Channel>>> channels_;

  std::unique_ptr<Pool> pool_;

  mutable std::mutex regions_mu_;
  std::map<uint64_t, MemRegion*> regions_by_id_;           // every local region
  RegCache reg_cache_;  // user memory; guarded by regions_mu_
  std::atomic<size_t> registrations_{0};
  AllocSites alloc_sites_;
  std::shared_mutex region_use_mu_;  // see TransportHost::region_use

  std::atomic<bool> aborted_{false};
  // The alert word this rank's Abort wrote into its peers (0: none).
  std::atomic<uint64_t> own_alert_{0};
  mutable std::mutex health_mu_;
  Status abort_status_;
  std::vector<Status> lost_;  // per peer; ok() = alive
  std::unique_ptr<std::atomic<bool>[]> lost_flag_;
  mutable std::unique_ptr<std::atomic<int64_t>[]> last_pid_check_ns_;
  std::atomic<uint64_t> next_region_id_{1};

  std::unique_ptr<ControlPlane> control_;
  std::atomic<uint64_t>* alert_word_ = nullptr;  // control_'s, for KnownHealthy
  int allgather_seq_ = 0;
  std::mutex allgather_mu_;
};

}  // namespace zc
