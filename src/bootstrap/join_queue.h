// JoinQueue: the store's record of processes waiting to join a running job
// and of the job's membership generations (api/grow_c.cpp). Keys, all under
// "zc.elastic/":
//   waiting          counter: tickets handed out (a joiner's ticket is its value)
//   claimed          counter: tickets admitted by a grow or withdrawn by their joiner
//   scanned          counter: tickets a grow has looked at (the next grow starts above)
//   generation       counter: membership generations begun (a grow takes the next)
//   ticket/<t>/claim counter: 1 for whoever claims ticket t first (a grow or its joiner)
//   ticket/<t>/pid   the joiner's "<pid> <host id>", written right after it queued
//   ticket/<t>       the joiner's admission: "<generation> <rank> <size>", or
//                    "abort <why>" when the grow that claimed it failed
// A ticket is claimed once, atomically, so a joiner that gives up and a grow
// that admits it never both win. Each generation's rendezvous lives under
// its own prefix (GrowBootstrap), so a late process of an older generation
// cannot reach a newer one; a grow writes "zc.grow<g>/ticket/<rank>" = t
// for each newcomer, so that its participants can watch the newcomer's
// process before it has published anything itself (GrowBootstrap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store_client.h"
#include "common/deadline.h"
#include "common/status.h"

namespace zc {

struct Admission {
  int generation = 0;
  int rank = 0;
  int size = 0;
};

class JoinQueue {
 public:
  explicit JoinQueue(StoreClient* store) : store_(store) {}

  // Joiner: takes a ticket (the joiner is then pending) and says which
  // process holds it (pid_host: "<pid> <host id>").
  Status Enqueue(const std::string& pid_host, int64_t* ticket);
  // The key of ticket t's "<pid> <host id>", and of the ticket of rank
  // `rank` of generation g.
  static std::string PidKey(int64_t ticket);
  static std::string GenerationTicketKey(int generation, int rank);
  // Joiner: waits until a grow admits ticket; ZC_ERR_TIMEOUT at dl (then the
  // ticket is withdrawn unless a grow claimed it meanwhile: then its answer
  // is awaited a little longer).
  Status AwaitAdmission(int64_t ticket, const Deadline& dl, Admission* out);

  // Anyone: tickets handed out and not yet claimed.
  Status Pending(int* count);

  // A grow's leader: the next generation, and the tickets it admits (every
  // waiting ticket not withdrawn), in ticket order.
  Status BeginGeneration(int* generation, std::vector<int64_t>* admitted);
  // A grow's leader: tells each admitted ticket its rank in the grown
  // communicator (the old ranks come first: old_size + index).
  Status Admit(int generation, int old_size, const std::vector<int64_t>& admitted);
  // A grow's leader, when the grow failed before Admit: the claimed
  // tickets' joiners fail with why instead of waiting.
  void Refuse(const std::vector<int64_t>& admitted, const std::string& why);

 private:
  Status Claim(int64_t ticket, bool* won);
  StoreClient* store_;
};

}  // namespace zc
