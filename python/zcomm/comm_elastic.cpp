// CommHandle's fault tolerance (zcomm.h "Fault tolerance"): revoke, agree,
// shrink and the failed ranks, for Communicator.revoke/agree/shrink; and
// elastic membership (zcomm.h "Elastic membership"), for
// Communicator.join_pending/grow and zcomm.join.
#include <vector>

#include "comm_handle.h"
#include "failure.h"

namespace zcpy {

void CommHandle::Revoke() {
  Call("revoke", [](zc_comm* c) { return zc_comm_revoke(c); });
}

bool CommHandle::IsRevoked() {
  int revoked = 0;
  Call("is_revoked", [&](zc_comm* c) { return zc_comm_is_revoked(c, &revoked); });
  return revoked != 0;
}

std::vector<int> CommHandle::FailedRanks() {
  std::vector<int> ranks(static_cast<size_t>(size_));
  int n = 0;
  Call("failed_ranks", [&](zc_comm* c) { return zc_comm_failed_ranks(c, ranks.data(), &n); });
  ranks.resize(static_cast<size_t>(n));
  return ranks;
}

std::pair<int, std::vector<int>> CommHandle::Agree(int flag) {
  // ZC_ERR_PEER_LOST is an answer here (the agreed failed ranks), not an
  // error: the flag is agreed all the same.
  bool lost = false;
  Call("agree", [&](zc_comm* c) -> zc_status {
    zc_status st = zc_comm_agree(c, &flag);
    lost = st == ZC_ERR_PEER_LOST;
    return lost ? ZC_OK : st;
  });
  return {flag, lost ? FailedRanks() : std::vector<int>()};
}

std::shared_ptr<CommHandle> CommHandle::Shrink() {
  zc_comm* c = nullptr;
  Call("shrink", [&](zc_comm* comm) -> zc_status { return zc_comm_shrink(comm, &c); });
  return std::make_shared<CommHandle>(c);
}

int CommHandle::JoinPending() {
  int count = 0;
  Call("join_pending", [&](zc_comm* c) { return zc_comm_join_pending(c, &count); });
  return count;
}

std::shared_ptr<CommHandle> CommHandle::Grow() {
  zc_comm* c = nullptr;
  Call("grow", [&](zc_comm* comm) -> zc_status { return zc_comm_grow(comm, &c); });
  return std::make_shared<CommHandle>(c);
}

std::shared_ptr<CommHandle> CommHandle::Join() {
  zc_comm* c = nullptr;
  {
    py::gil_scoped_release nogil;
    Check(zc_comm_join(&c), nullptr);
  }
  return std::make_shared<CommHandle>(c);
}

}  // namespace zcpy
