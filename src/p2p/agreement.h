// Agreement: a fault-tolerant consensus among the live members of a group,
// the step behind zc_comm_agree and zc_comm_shrink (MPI ULFM's
// MPIX_Comm_agree). Every member that stays alive decides the same value,
// also when members die before or during it, and also on a group whose
// epoch is aborted (revoked): it runs in a fault-tolerant HealthScope, where
// only the loss of a peer ends a wait.
//
// The algorithm is flooding consensus with a perfect failure detector
// (Cachin, Guerraoui, Rodrigues, "Introduction to Reliable and Secure
// Distributed Programming", 2nd ed., algorithm 5.1), which fits zcomm's
// detector: a member is lost when its process exits (same host) or its
// connections break, and a process never comes back. In round r each member
// sends what it knows (the merge of the proposals it has seen) to every
// member it believes alive and waits for the round-r message of each of
// them (or its loss). A member that heard from the same members in two
// rounds in a row has seen every proposal anyone could still hold: it
// decides and sends DECIDED, and whoever receives it decides the same and
// relays it (a decider may die half way through telling the others).
// Messages are control messages tagged with the group's context and the
// agreement's number, so two agreements never mix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace zc {

class Group;

// What the members agree on, merged member-wise: flags by bitwise AND,
// `max` by maximum, `failed` and `contributed` (one bit per group rank) by
// OR. Each member proposes the members it knows lost as `failed` and itself
// as `contributed`; once decided, the members that contributed nothing
// (they died before their proposal reached anyone) count as failed too, so
// a member that dies early in the agreement is reported by it, uniformly.
struct AgreedValue {
  uint64_t flags = ~uint64_t{0};
  uint64_t max = 0;
  std::vector<uint64_t> failed;       // (size + 63) / 64 words
  std::vector<uint64_t> contributed;  // as failed

  void Merge(const AgreedValue& o);
  bool IsFailed(int r) const { return Bit(failed, r); }
  void SetFailed(int r) { failed[static_cast<size_t>(r) / 64] |= uint64_t{1} << (r % 64); }
  int CountFailed() const;
  static bool Bit(const std::vector<uint64_t>& v, int r) { return (v[static_cast<size_t>(r) / 64] >> (r % 64)) & 1; }
};

// Runs agreement number `instance` of group g (every live member calls it
// with the same instance and its proposal in *value, which holds the
// decision on return). Fails only when this rank's own wait for a live
// member reaches dl (ZC_ERR_TIMEOUT, naming it) or a message is malformed.
// Members found lost meanwhile are reported to the Device's PeerHealth.
Status Agree(Group* g, uint32_t instance, AgreedValue* value, const Deadline& dl);

// A proposal of group g: no flag cleared, max 0, failed = the members this
// process knows to be lost.
AgreedValue ProposalOf(const Group* g);

}  // namespace zc
