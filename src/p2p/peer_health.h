// PeerHealth: whether the job goes on. It owns what the process knows about
// failure: the peers known lost (and why), this rank's abort, the alert words
// that tell every rank of another's failure, and the waits that watch all of
// it (WaitFlag: spin, yield, sleep, until a flag, a failure or the deadline).
// The Device sets it up (who is local and by which pid, how waits on each
// peer sleep, where the peers' alert words are) and hands it to the
// transports (OnPeerLost), the channels, the slot streams and the control
// plane, which ask it before and while they wait.
//
// Threading: every method may be called from any thread once setup is done;
// health_mu_ guards the statuses (abort_status_, lost_), the atomics carry the
// fast checks (KnownHealthy: three loads, four after a shrink).
//
// Epochs (fault tolerance, docs/elastic.md). An abort (zc_abort, a revoke, a
// lost peer) fails every operation of the current epoch on every rank. A
// shrink then starts a new epoch on the survivors (AdvanceEpoch): the abort
// and the alerts are cleared, lost peers stay lost, and the communicators
// made before it stay revoked. Which epoch an operation belongs to is the
// calling thread's HealthScope (set by the communicator it runs for); a
// thread without one runs in the current epoch. The agreement behind agree
// and shrink runs in a fault-tolerant scope, where only lost peers fail a
// wait (it must work on a revoked communicator).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "common/wakeup.h"
#include "p2p/mem_region.h"

namespace zc {

class Connection;
class PeerHealth;

// The calling thread's operations belong to epoch `epoch` of health (a
// communicator's; older than the current epoch: revoked), or, fault
// tolerant, ignore aborts and alerts and fail only on lost peers (the
// agreement of zc_comm_agree and zc_comm_shrink). Restores the previous
// scope when it ends; scopes nest.
class HealthScope {
 public:
  static HealthScope ForEpoch(const PeerHealth* health, uint64_t epoch) {
    return HealthScope(health, epoch, false);
  }
  static HealthScope FaultTolerant(const PeerHealth* health) { return HealthScope(health, 0, true); }
  HealthScope(HealthScope&& o) noexcept : saved_(o.saved_), active_(o.active_) { o.active_ = false; }
  HealthScope(const HealthScope&) = delete;
  HealthScope& operator=(const HealthScope&) = delete;
  ~HealthScope();

  struct State {
    const PeerHealth* health = nullptr;
    uint64_t epoch = 0;
    bool fault_tolerant = false;
  };
  // The calling thread's scope for health, or nullptr.
  static const State* Current(const PeerHealth* health);

 private:
  HealthScope(const PeerHealth* health, uint64_t epoch, bool fault_tolerant);
  State saved_;
  bool active_ = true;
};

class PeerHealth {
 public:
  PeerHealth(int rank, int size, double timeout_s);

  // ---- setup (Device::Init, before anything waits) ----
  // The pid of each peer on this host (0 for the others): a dead local
  // process has no connection to break, so Health() looks at the process.
  void WatchProcesses(std::vector<int> local_pids);
  // How waits on each peer's flags pause (Backoff): notified[p] when what p
  // writes into our memory is stored by a thread of this process that calls
  // Wakeup::Notify() (tcp, verbs); driver[p]: the transport's WaitDriver.
  void SetWaits(std::vector<bool> notified, std::vector<WaitDriver*> drivers);
  // Where aborts are told (the control plane's alert words): the word peers
  // write into here, and per peer the connection and the region of theirs.
  struct AlertTarget {
    Connection* conn = nullptr;  // null: no alert to that rank (this rank)
    RemoteRegion word;
  };
  void AttachAlerts(std::atomic<uint64_t>* mine, std::vector<AlertTarget> peers);
  // Teardown, before the alert words' memory goes: no alert is read or sent.
  void DetachAlerts();

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }
  Deadline NewDeadline() const { return Deadline(timeout_s_); }

  // ---- a peer's state ----
  // A connection broke or an error completion arrived: fail waits on peer.
  void OnPeerLost(int peer, const Status& why);
  // Non-OK once this rank aborted, a peer's alert came, or `peer` is lost
  // (found now for a local peer whose process exited). peer = -1: the job only.
  Status Health(int peer) const;
  // Health without the liveness probe of local peers (no clock read): an
  // abort, a peer's alert, or a peer already known lost. For the write side
  // of mapped memory, where a dead reader cannot block the writer; waits use
  // Health().
  Status KnownHealth(int peer) const { return KnownHealthy(peer) ? Status::Ok() : Health(peer); }
  // KnownHealth's test alone, inline: three loads on the small-message path.
  bool KnownHealthy(int peer) const {
    return !aborted_.load(std::memory_order_acquire) &&
           !(alert_word_ && alert_word_->load(std::memory_order_acquire)) &&
           !(peer >= 0 && peer < size_ && lost_flag_[peer].load(std::memory_order_acquire)) &&
           !(shrunk_.load(std::memory_order_relaxed) && ScopeStale());
  }
  // True when transports (or flags) told us `peer` is gone.
  bool peer_lost(int peer) const {
    return peer >= 0 && peer < size_ && lost_flag_[peer].load(std::memory_order_acquire);
  }
  // The lowest-numbered peer known lost, or -1; one lost in the current
  // epoch first (after a shrink, the peers it left out are lost too).
  int LostPeer() const;
  // This epoch is aborted, or the calling thread's scope is an older epoch.
  bool aborted() const {
    return aborted_.load(std::memory_order_acquire) || (shrunk_.load(std::memory_order_relaxed) && ScopeStale());
  }
  // A peer's alert of this epoch has come (its failure is known to every rank already).
  bool alerted() const;

  // ---- epochs (see the top of this file) ----
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Marks peer lost because the survivors' agreement says so (no local sign).
  void DeclareLost(int peer, const std::string& why) {
    OnPeerLost(peer, Status(ZC_ERR_PEER_LOST, why));
  }
  // Waits until no other thread of this process is writing an alert of the
  // current epoch (Abort's alerts precede what this thread sends next on
  // the same connections).
  void FlushAlerts() const { std::lock_guard<std::mutex> lock(alert_mu_); }
  // A shrink has been agreed: starts epoch epoch()+1 in which this rank is
  // healthy again (abort and alerts of older epochs cleared; lost peers stay
  // lost). Operations in scopes of older epochs fail as revoked.
  void AdvanceEpoch();

  // ---- waits ----
  // True when what peer writes into our memory is stored by a thread of
  // this process that calls Wakeup::Notify() (tcp, verbs), so waits on it
  // may sleep until notified; false for shared memory written by the peer.
  bool FlagsNotified(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < notified_.size() && notified_[peer];
  }
  // The transport's WaitDriver for waits on peer's flags, or nullptr.
  WaitDriver* DriverFor(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < driver_.size() ? driver_[peer] : nullptr;
  }
  // More ranks than cores on this host (the Device finds out at setup):
  // waits yield almost at once (Backoff::SpinsFor). This Device's waits
  // only: another Device of the process keeps its own setting.
  void SetOversubscribed(bool on) { spins_.store(Backoff::SpinsFor(on), std::memory_order_relaxed); }
  uint64_t spins() const { return spins_.load(std::memory_order_relaxed); }
  // The pause for a loop that waits on what peer writes (see Backoff); it
  // watches where peer last waited when that is known (AttachCpuWords).
  Backoff BackoffFor(int peer) const {
    Backoff b(FlagsNotified(peer), DriverFor(peer), spins());
    std::atomic<uint64_t>* mine = my_cpu_.load(std::memory_order_acquire);
    if (mine && peer >= 0 && static_cast<size_t>(peer) < peer_cpu_.size() && peer_cpu_[peer])
      b.WatchSetter(mine, peer_cpu_[peer]);
    return b;
  }
  // The words where this rank (mine) and each peer on this host (peers[p],
  // null for the others) publish the CPU their waits last ran on
  // (Backoff::WatchSetter). Set once, before any wait uses them; detached
  // with the alerts (the words' memory goes with the control plane).
  void AttachCpuWords(std::atomic<uint64_t>* mine, std::vector<const std::atomic<uint64_t>*> peers);
  // The pause for a loop that waits on something else of this Device's
  // (several peers, a thread of this process); notified: see Backoff.
  Backoff NewBackoff(bool notified = false) const { return Backoff(notified, nullptr, spins()); }
  // Waits until *flag >= value. Spins, yields, then sleeps; fails with the
  // peer's health (lost, aborted) or ZC_ERR_TIMEOUT naming `what`.
  Status WaitFlag(const std::atomic<uint64_t>* flag, uint64_t value, int peer,
                  const Deadline& deadline, const char* what) const;

  // ---- failing ----
  // Fails every pending and later wait with ZC_ERR_ABORTED (cause kept) and
  // tells the peers (best effort). `lost`: the peer whose loss is the cause
  // (the peers' errors name it), or -1.
  void Abort(const Status& why, int lost = -1);
  // Abort, and this rank's own alert to every live peer even when a peer's
  // alert came first (zc_comm_revoke, zc_comm_shrink): that peer may have
  // died half way through telling the others.
  void Revoke(const Status& why);
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
  // At teardown of a failed job: repeats the alert to every live peer, so
  // that a peer waiting on this rank learns the cause before it sees us go.
  void Farewell();

 private:
  // Writes the alert word `value` into every live peer.
  void AlertPeers(uint64_t value);
  // The calling thread's scope is of an epoch older than the current one.
  bool ScopeStale() const;
  // Health of a fault-tolerant scope: only peer's loss (probed as Health does).
  Status LossOf(int peer) const;
  // The alert word's value when it is an alert of the current epoch, else 0.
  uint64_t CurrentAlert() const;

  const int rank_, size_;
  const double timeout_s_;
  std::vector<int> local_pid_;  // see WatchProcesses
  std::vector<bool> notified_;  // see SetWaits
  std::vector<WaitDriver*> driver_;
  std::vector<const std::atomic<uint64_t>*> peer_cpu_;  // see AttachCpuWords
  std::atomic<std::atomic<uint64_t>*> my_cpu_{nullptr};

  std::atomic<uint64_t> spins_{Backoff::kSpins};  // see SetOversubscribed
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> epoch_{1};
  std::atomic<bool> shrunk_{false};  // epoch_ > 1: scopes are consulted
  mutable std::mutex alert_mu_;      // held while alerts are written (FlushAlerts)
  // The alert word this rank's Abort wrote into its peers (0: none).
  std::atomic<uint64_t> own_alert_{0};
  mutable std::mutex health_mu_;
  Status abort_status_;
  std::vector<Status> lost_;  // per peer; ok() = alive
  std::unique_ptr<std::atomic<bool>[]> lost_flag_;
  std::unique_ptr<std::atomic<uint64_t>[]> lost_epoch_;  // the epoch each loss was noted in
  mutable std::unique_ptr<std::atomic<int64_t>[]> last_pid_check_ns_;

  std::atomic<uint64_t>* alert_word_ = nullptr;  // see AttachAlerts
  std::vector<AlertTarget> alert_targets_;
};

}  // namespace zc
