// MessageTable: the requests of names not every rank has submitted yet,
// filled from the request exchange. Every rank receives the same requests
// in the same order, so every rank's table is the same and every rank finds
// the same names ready (and the same mismatches) without a coordinator's
// broadcast. Times are local: only the stall report uses them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "engine/request.h"

namespace zc::engine {

class MessageTable {
 public:
  explicit MessageTable(int size) : size_(size) {}

  void Add(int rank, const Request& req, Clock::time_point now);
  void Drop(const std::string& name) { entries_.erase(name); }
  bool empty() const { return entries_.empty(); }
  // Names that every rank has requested (a joined rank counts for one that
  // has not), in the order they first appeared; removed from the table.
  std::vector<Response> TakeReady(const std::vector<uint8_t>& joined);
  // Names whose operation is not an allreduce, however many ranks asked,
  // in the order they first appeared; removed from the table. While a rank
  // has joined they cannot run (as in Horovod, they fail at once on the
  // ranks that submitted them).
  std::vector<Response> TakeAllButAllreduces();

  struct Stall {
    std::string name;
    std::vector<int> missing;
    double age_s;
  };
  // Names some ranks requested and others not, waiting longer than after_s
  // (counted from the first rank's submit). repeat: only those not reported
  // in the last after_s seconds, and marks them reported.
  std::vector<Stall> Stalled(Clock::time_point now, double after_s, const std::vector<uint8_t>& joined,
                             bool repeat);

 private:
  struct Entry {
    uint64_t order = 0;
    Response resp;
    Clock::time_point since;  // the first submit, as far as this rank knows
    Clock::time_point reported{};
  };
  int size_;
  uint64_t next_order_ = 0;
  std::map<std::string, Entry> entries_;
};

// "'name' (missing ranks 1, 3; waiting 61.0 s)", joined by "; ".
std::string DescribeStalls(const std::vector<MessageTable::Stall>& stalls, bool with_age);

}  // namespace zc::engine
