// Group: a communicator's view of the process's Device. A communicator made
// by zc_init or zc_comm_init_rank is the identity view (context 0) of a
// Device of its own; zc_comm_split and zc_comm_dup make views of a subset of
// the same Device's ranks, with a context id of their own, so they share its
// connections, control mailboxes and registered pool instead of connecting
// again. Everything above p2p (collectives, the communicator's point to
// point) addresses peers by group rank and reaches the Device through here:
// ranks are translated, and control tags are scoped by the context id
// (p2p/control_tag.h) so that groups never take each other's messages.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "p2p/channel.h"
#include "p2p/control_tag.h"
#include "p2p/device.h"

namespace zc {

class Group {
 public:
  // members[r] is the Device rank of group rank r; the calling process must
  // be one of them. context must be agreed by every member (0: the world).
  // The group belongs to the Device's current epoch (PeerHealth): a shrink
  // later revokes it.
  Group(Device* dev, std::vector<int> members, uint32_t context);
  // Every rank of dev, in order, as context 0.
  static std::vector<int> AllRanks(const Device* dev);

  Device* device() const { return dev_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  uint32_t context() const { return context_; }
  int device_rank(int r) const { return members_[r]; }
  const std::vector<int>& members() const { return members_; }
  // The Device epoch this group was made in (PeerHealth::epoch).
  uint64_t epoch() const { return epoch_; }
  // For the thread that runs this group's operations: they belong to its
  // epoch, and fail as revoked once a shrink has started a newer one.
  HealthScope Scope() const { return HealthScope::ForEpoch(&dev_->health(), epoch_); }
  // A shrink has made a newer epoch: this group is revoked for good.
  bool stale() const { return epoch_ < dev_->health().epoch(); }

  // ---- the Device's services, by group rank ----
  Channel& channel(int r, int index = 0) { return dev_->channel(members_[r], index); }
  bool is_local(int r) const { return dev_->is_local(members_[r]); }
  // The Device's host index of group rank r (Device::host_of).
  int host_of(int r) const { return dev_->host_of(members_[r]); }
  TransportKind transport_to(int r) const { return dev_->transport_to(members_[r]); }
  // r = -1: the Device's own health (abort, a peer's alert) only.
  Status Health(int r) const { return dev_->health().Health(r < 0 ? -1 : members_[r]); }
  // Whether group rank r itself is known lost (not merely a job-wide alert
  // or abort, which Health answers for every rank).
  bool Lost(int r) const { return dev_->health().peer_lost(members_[r]); }
  // st (a failed Health(r)) named "<role> rank r lost: ..." only when it
  // is r's own loss: an alert or abort names its own cause, and naming r
  // there would blame a survivor.
  Status NameLoss(Status st, int r, const char* role) const;
  Status HealthNaming(int r, const char* role) const { return NameLoss(Health(r), r, role); }
  Status KnownHealth(int r) const { return dev_->health().KnownHealth(r < 0 ? -1 : members_[r]); }
  bool KnownHealthy(int r) const { return dev_->health().KnownHealthy(r < 0 ? -1 : members_[r]); }
  Status WaitFlag(const std::atomic<uint64_t>* flag, uint64_t value, int r, const Deadline& dl,
                  const char* what) const {
    return dev_->health().WaitFlag(flag, value, members_[r], dl, what);
  }
  // tag below 2^48 (ControlTag(0, class, value)); the context is added here.
  Status SendControl(int r, uint64_t tag, const std::string& msg, const Deadline& dl) {
    return dev_->SendControl(members_[r], Scoped(tag), msg, dl);
  }
  Status RecvControl(int r, uint64_t tag, std::string* msg, const Deadline& dl) {
    return dev_->RecvControl(members_[r], Scoped(tag), msg, dl);
  }
  uint64_t Scoped(uint64_t tag) const { return tag | (static_cast<uint64_t>(context_) << 48); }

  // Device-wide: memory, configuration, deadlines, abort.
  const Config& config() const { return dev_->config(); }
  Deadline NewDeadline() const { return dev_->NewDeadline(); }
  Status Allocate(size_t bytes, MemRegion** out) { return dev_->regions().Allocate(bytes, out); }
  Status Free(void* ptr) { return dev_->regions().Free(ptr); }
  // [ptr, ptr+bytes) lies in the registered pool (zc_mem_alloc). Lock-free.
  bool IsPoolMemory(const void* ptr, size_t bytes) const {
    return dev_->regions().IsPoolMemory(ptr, bytes);
  }
  // [ptr, ptr+bytes) exposed to peers until *out is released (LocalRegions::Hold).
  Status Hold(const void* ptr, size_t bytes, RegionHold* out) { return dev_->regions().Hold(ptr, bytes, out); }
  // Device ranks: `lost` is the job's lost peer that caused it (PeerHealth::LostPeer).
  void Abort(const Status& why, int lost = -1) { dev_->health().Abort(why, lost); }
  int LostPeer() const { return dev_->health().LostPeer(); }
  bool aborted() const { return dev_->health().aborted(); }
  // A peer's alert of the current epoch has come.
  bool alerted() const { return dev_->health().alerted(); }
  ControlPlane* control() { return dev_->control(); }
  // The pause for a wait loop of this group's (the Device's spin setting).
  Backoff NewBackoff() const { return dev_->health().NewBackoff(); }

  // What broke this group, without waiting: the Device's abort or a peer's
  // alert, else the first member known (or now found) to be lost; OK when
  // every member looks alive. For zc_comm_get_async_error.
  Status AsyncError() const;

 private:
  Device* dev_;
  std::vector<int> members_;
  int rank_ = -1;
  uint32_t context_;
  uint64_t epoch_;
};

}  // namespace zc
