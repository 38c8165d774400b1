// StallInspector: names that some ranks submitted and others did not, as
// Horovod's stall_inspector.cc. Every rank holds the same MessageTable, so
// every rank finds the same stalls; rank 0 warns (the others log at INFO),
// and a stall past ZC_STALL_SHUTDOWN asks the engine to stop every rank at
// the next cycle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "engine/message_table.h"

namespace zc::engine {

class StallInspector {
 public:
  // warning_s, shutdown_s: ZC_STALL_WARNING, ZC_STALL_SHUTDOWN (0: off).
  StallInspector(double warning_s, double shutdown_s, int rank)
      : warning_s_(warning_s), shutdown_s_(shutdown_s), rank_(rank) {}

  // Reports the stalls older than the warning time, each at most once per
  // warning period; true when it reported. Sets shutdown_requested() once
  // a stall is older than the shutdown time.
  bool Inspect(MessageTable& table, const std::vector<uint8_t>& joined, Clock::time_point now);
  bool shutdown_requested() const { return shutdown_requested_; }
  // The error every rank returns when the ranks agreed to stop for a stall.
  Status ShutdownError(MessageTable& table, const std::vector<uint8_t>& joined, Clock::time_point now) const;
  // How long a cached name may wait for the other ranks before it is sent
  // through the request exchange too, where the inspector sees it (-1:
  // never; no stall reporting is on).
  double route_after_s() const;

 private:
  double warning_s_, shutdown_s_;
  int rank_;
  bool shutdown_requested_ = false;
};

}  // namespace zc::engine
