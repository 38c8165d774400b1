// Mailbox: the PS's control messages by group rank, including to this very
// rank (a worker declaring to its co-located server), which the control
// plane does not carry: those go through an in-process queue.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "p2p/group.h"

namespace zc::ps {

class Mailbox {
 public:
  explicit Mailbox(Group* group) : group_(group) {}
  Status Send(int to, uint64_t tag, const std::string& msg, const Deadline& dl);
  // Non-blocking: true when a message with this tag from `from` was taken
  // (or *st tells why the stream failed).
  bool TryRecv(int from, uint64_t tag, std::string* msg, Status* st);

 private:
  Group* group_;
  std::mutex mu_;
  std::map<uint64_t, std::deque<std::string>> self_;  // by tag
};

}  // namespace zc::ps
