#include "p2p/peer_health.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "p2p/transport.h"

namespace zc {
namespace {
// True when pid has exited: it no longer exists, or it is a zombie that its
// parent has not reaped yet (kill(pid, 0) still succeeds on a zombie).
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "re");
  if (!f) return false;  // no /proc: only kill() can tell
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* close_paren = strrchr(buf, ')');  // the name may contain spaces
  return close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

// The alert word a failing rank writes into every peer: the cause's code,
// who reports it and whose failure it is (the lost peer, or the reporter).
// The top bits carry the epoch (mod 4096) it belongs to: an alert of an
// epoch the survivors have left (a shrink) is stale, not a failure.
constexpr int kAlertRankBits = 24;
constexpr int kAlertEpochShift = 52;
constexpr uint64_t kAlertCodeMask = (uint64_t{1} << (kAlertEpochShift - 2 * kAlertRankBits)) - 1;
uint64_t AlertValue(zc_status code, int reporter, int subject, uint64_t epoch) {
  return (epoch << kAlertEpochShift) | (static_cast<uint64_t>(code) << (2 * kAlertRankBits)) |
         (static_cast<uint64_t>(reporter + 1) << kAlertRankBits) | static_cast<uint64_t>(subject + 1);
}
bool AlertOfEpoch(uint64_t alert, uint64_t epoch) {
  return alert != 0 && (alert >> kAlertEpochShift) == (epoch & ((uint64_t{1} << (64 - kAlertEpochShift)) - 1));
}

thread_local HealthScope::State t_scope;
}  // namespace

HealthScope::HealthScope(const PeerHealth* health, uint64_t epoch, bool fault_tolerant) : saved_(t_scope) {
  t_scope = State{health, epoch, fault_tolerant};
}

HealthScope::~HealthScope() {
  if (active_) t_scope = saved_;
}

const HealthScope::State* HealthScope::Current(const PeerHealth* health) {
  return t_scope.health == health ? &t_scope : nullptr;
}

PeerHealth::PeerHealth(int rank, int size, double timeout_s)
    : rank_(rank), size_(size), timeout_s_(timeout_s) {
  lost_.assign(size_, Status::Ok());
  lost_flag_.reset(new std::atomic<bool>[size_]);
  lost_epoch_.reset(new std::atomic<uint64_t>[size_]);
  last_pid_check_ns_.reset(new std::atomic<int64_t>[size_]);
  for (int i = 0; i < size_; ++i) {
    lost_flag_[i] = false;
    lost_epoch_[i] = 0;
    last_pid_check_ns_[i] = 0;
  }
}

void PeerHealth::WatchProcesses(std::vector<int> local_pids) { local_pid_ = std::move(local_pids); }

void PeerHealth::SetWaits(std::vector<bool> notified, std::vector<WaitDriver*> drivers) {
  notified_ = std::move(notified);
  driver_ = std::move(drivers);
}

void PeerHealth::AttachAlerts(std::atomic<uint64_t>* mine, std::vector<AlertTarget> peers) {
  alert_targets_ = std::move(peers);
  alert_word_ = mine;
}

void PeerHealth::DetachAlerts() {
  alert_word_ = nullptr;
  my_cpu_.store(nullptr, std::memory_order_release);
}

void PeerHealth::AttachCpuWords(std::atomic<uint64_t>* mine,
                                std::vector<const std::atomic<uint64_t>*> peers) {
  peer_cpu_ = std::move(peers);
  my_cpu_.store(mine, std::memory_order_release);
}

void PeerHealth::OnPeerLost(int peer, const Status& why) {
  if (peer < 0 || peer >= size_) return;
  std::lock_guard<std::mutex> lock(health_mu_);
  if (lost_flag_[peer].load()) return;
  lost_[peer] = Status(ZC_ERR_PEER_LOST, Format("peer %d lost: %s", peer, why.message().c_str()));
  lost_epoch_[peer].store(epoch_.load(), std::memory_order_relaxed);
  lost_flag_[peer].store(true, std::memory_order_release);
  Wakeup::Notify();  // sleeping waiters look at the peer's health now
  ZC_INFO(kP2p, "%s", lost_[peer].message().c_str());
}

bool PeerHealth::ScopeStale() const {
  const HealthScope::State* s = HealthScope::Current(this);
  return s && !s->fault_tolerant && s->epoch < epoch_.load(std::memory_order_acquire);
}

uint64_t PeerHealth::CurrentAlert() const {
  if (!alert_word_) return 0;
  uint64_t alert = alert_word_->load(std::memory_order_acquire);
  return AlertOfEpoch(alert, epoch_.load(std::memory_order_acquire)) ? alert : 0;
}

bool PeerHealth::alerted() const { return CurrentAlert() != 0; }

Status PeerHealth::Health(int peer) const {
  // Scopes matter only once something failed or a shrink happened.
  if (shrunk_.load(std::memory_order_relaxed) || aborted_.load(std::memory_order_relaxed) ||
      (alert_word_ && alert_word_->load(std::memory_order_relaxed))) {
    if (const HealthScope::State* s = HealthScope::Current(this)) {
      if (s->fault_tolerant) return LossOf(peer);
      if (s->epoch < epoch_.load(std::memory_order_acquire))
        return Error(ZC_ERR_ABORTED, "the communicator is revoked: the survivors shrank it to a new one");
    }
  }
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(health_mu_);
    return abort_status_;
  }
  if (alert_word_) {
    uint64_t alert = CurrentAlert();
    if (alert) {
      const uint64_t mask = (uint64_t{1} << kAlertRankBits) - 1;
      int subject = static_cast<int>(alert & mask) - 1;
      int reporter = static_cast<int>((alert >> kAlertRankBits) & mask) - 1;
      zc_status code = static_cast<zc_status>((alert >> (2 * kAlertRankBits)) & kAlertCodeMask);
      if (code == ZC_ERR_PEER_LOST && subject != reporter)
        return Status(code, Format("peer %d lost (rank %d saw it go and alerted the job)", subject, reporter));
      return Status(code == ZC_OK ? ZC_ERR_ABORTED : code,
                    Format("rank %d failed or aborted the job (%s)", reporter, zc_status_string(code)));
    }
  }
  return LossOf(peer);
}

Status PeerHealth::LossOf(int peer) const {
  if (peer < 0 || peer >= size_) return Status::Ok();
  bool lost = lost_flag_[peer].load(std::memory_order_acquire);
  if (!lost && static_cast<size_t>(peer) < local_pid_.size() && local_pid_[peer] > 0) {
    // Same host: a dead process has no connection to break, so look at it
    // (at most every 20 ms per peer; kill(pid, 0) costs a syscall).
    int64_t now = NowNs();
    int64_t last = last_pid_check_ns_[peer].load(std::memory_order_relaxed);
    if (now - last > 20'000'000) {
      last_pid_check_ns_[peer].store(now, std::memory_order_relaxed);
      if (ProcessGone(local_pid_[peer])) {
        const_cast<PeerHealth*>(this)->OnPeerLost(
            peer, Error(ZC_ERR_PEER_LOST, "process %d exited", local_pid_[peer]));
        lost = true;
      }
    }
  }
  if (!lost) return Status::Ok();
  std::lock_guard<std::mutex> lock(health_mu_);
  return lost_[peer];
}

int PeerHealth::LostPeer() const {
  const uint64_t now = epoch_.load(std::memory_order_acquire);
  int first = -1;
  for (int p = 0; p < size_; ++p) {
    if (!lost_flag_[p].load(std::memory_order_acquire)) continue;
    if (lost_epoch_[p].load(std::memory_order_relaxed) == now) return p;
    if (first < 0) first = p;
  }
  return first;
}

void PeerHealth::AbortForLostPeer() {
  if (aborted()) return;
  // Lost peers are known locally; a loss that came as a peer's alert is
  // already known to every rank.
  int lost = LostPeer();
  if (lost < 0) return;
  Status why;
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    why = lost_[lost];
  }
  Abort(why, lost);
}

Status PeerHealth::WaitFlag(const std::atomic<uint64_t>* flag, uint64_t value, int peer,
                            const Deadline& deadline, const char* what) const {
  if (flag->load(std::memory_order_acquire) >= value) return Status::Ok();
  Backoff backoff = BackoffFor(peer);
  for (;;) {
    backoff.Pause();
    if (flag->load(std::memory_order_acquire) >= value) return Status::Ok();
    if (backoff.Due()) {
      Status st = Health(peer);
      // The peer may have set the flag just before it went away.
      if (!st.ok()) return flag->load(std::memory_order_acquire) >= value ? Status::Ok() : st;
      if (deadline.expired())
        return Error(ZC_ERR_TIMEOUT, "waited %.1f s for %s from peer %d (ZC_TIMEOUT=%g s)",
                     deadline.elapsed_s(), what, peer, timeout_s_);
    }
  }
}

void PeerHealth::Abort(const Status& why, int lost) {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    if (aborted_.load()) return;
    abort_status_ = Status(why.ok() ? ZC_ERR_ABORTED : why.code(),
                           why.ok() ? Format("rank %d called zc_abort", rank_) : why.message());
    aborted_.store(true, std::memory_order_release);
  }
  Wakeup::Notify();
  if (!alert_word_) return;
  // A peer's alert is already known to every rank: no need to echo it now
  // (Farewell repeats it for those who might have missed it).
  if (CurrentAlert()) return;
  std::lock_guard<std::mutex> lock(alert_mu_);
  uint64_t value = AlertValue(why.ok() ? ZC_ERR_ABORTED : why.code(), rank_, lost >= 0 ? lost : rank_,
                              epoch_.load(std::memory_order_acquire));
  own_alert_.store(value, std::memory_order_release);
  AlertPeers(value);
}

void PeerHealth::Revoke(const Status& why) {
  Abort(why);
  if (!alert_word_) return;
  std::lock_guard<std::mutex> lock(alert_mu_);
  if (own_alert_.load(std::memory_order_acquire)) return;  // told them already
  uint64_t value = AlertValue(why.ok() ? ZC_ERR_ABORTED : why.code(), rank_, rank_,
                              epoch_.load(std::memory_order_acquire));
  own_alert_.store(value, std::memory_order_release);
  AlertPeers(value);
}

void PeerHealth::AdvanceEpoch() {
  std::lock_guard<std::mutex> alerts(alert_mu_);
  std::lock_guard<std::mutex> lock(health_mu_);
  const uint64_t old = epoch_.load();
  epoch_.store(old + 1, std::memory_order_release);
  shrunk_.store(true, std::memory_order_release);
  abort_status_ = Status::Ok();
  own_alert_.store(0, std::memory_order_release);
  // An alert of the new epoch may already have come from a survivor that got
  // there first: only older ones are cleared.
  if (alert_word_) {
    uint64_t alert = alert_word_->load(std::memory_order_acquire);
    if (alert && !AlertOfEpoch(alert, old + 1)) alert_word_->compare_exchange_strong(alert, 0);
  }
  aborted_.store(false, std::memory_order_release);
  ZC_INFO(kP2p, "rank %d: epoch %llu begins (a shrink)", rank_, static_cast<unsigned long long>(old + 1));
}

void PeerHealth::AlertPeers(uint64_t value) {
  // Every live peer (best effort, short deadline): their waits see the alert.
  for (int p = 0; p < static_cast<int>(alert_targets_.size()); ++p) {
    if (p == rank_ || lost_flag_[p].load()) continue;
    const AlertTarget& t = alert_targets_[p];
    if (!t.conn) continue;
    FlagWrite f{&t.word, 0, value};
    IgnoreError(t.conn->Write(nullptr, 0, t.word, 0, &f, Deadline(1.0)),
                "alert: best effort (a dead peer cannot be told)");
  }
}

void PeerHealth::Farewell() {
  // Leaving a failed job: a peer waiting on this rank must learn the cause
  // before it sees us go (a tcp goodbye or our exit would otherwise read as
  // a loss of this rank). On tcp and verbs the alert precedes the goodbye on
  // the same connection; on shm the store precedes our exit.
  std::lock_guard<std::mutex> lock(alert_mu_);
  uint64_t value = own_alert_.load(std::memory_order_acquire);
  if (!value) value = CurrentAlert();
  if (value) AlertPeers(value);
}

}  // namespace zc
