#include "p2p/group.h"

#include <algorithm>

namespace zc {

Group::Group(Device* dev, std::vector<int> members, uint32_t context)
    : dev_(dev), members_(std::move(members)), context_(context), epoch_(dev->health().epoch()) {
  auto it = std::find(members_.begin(), members_.end(), dev->rank());
  rank_ = it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

std::vector<int> Group::AllRanks(const Device* dev) {
  std::vector<int> all(static_cast<size_t>(dev->size()));
  for (int r = 0; r < dev->size(); ++r) all[r] = r;
  return all;
}

Status Group::AsyncError() const {
  HealthScope scope = Scope();
  ZC_RETURN_IF_ERROR(dev_->health().Health(-1));
  for (int r = 0; r < size(); ++r) {
    if (r == rank_) continue;
    Status st = dev_->health().Health(members_[r]);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status Group::NameLoss(Status st, int r, const char* role) const {
  if (st.ok() || !Lost(r)) return st;
  return st.with_context(Format("%s rank %d lost", role, r));
}

}  // namespace zc
