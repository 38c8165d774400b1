#include "ps/mailbox.h"

#include "p2p/control_plane.h"

namespace zc::ps {

Status Mailbox::Send(int to, uint64_t tag, const std::string& msg, const Deadline& dl) {
  if (to == group_->rank()) {
    std::lock_guard<std::mutex> lock(mu_);
    self_[tag].push_back(msg);
    return Status::Ok();
  }
  return group_->SendControl(to, tag, msg, dl);
}

bool Mailbox::TryRecv(int from, uint64_t tag, std::string* msg, Status* st) {
  *st = Status::Ok();
  if (from == group_->rank()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = self_.find(tag);
    if (it == self_.end() || it->second.empty()) return false;
    *msg = std::move(it->second.front());
    it->second.pop_front();
    return true;
  }
  return group_->control()->TryRecv(group_->device_rank(from), group_->Scoped(tag), msg, st);
}

}  // namespace zc::ps
