#include "engine/stall_inspector.h"

#include "common/log.h"

namespace zc::engine {

bool StallInspector::Inspect(MessageTable& table, const std::vector<uint8_t>& joined, Clock::time_point now) {
  bool reported = false;
  if (warning_s_ > 0) {
    auto stalls = table.Stalled(now, warning_s_, joined, true);
    if (!stalls.empty()) {
      reported = true;
      std::string what = DescribeStalls(stalls, true);
      if (rank_ == 0)
        ZC_WARN(kEngine, "stall: operations submitted by some ranks and not by others for more than %g s "
                "(ZC_STALL_WARNING): %s. What each rank is doing: its flight recorder (SIGUSR2 with "
                "ZC_TRACE_DIR set, then python3 -m zcomm.trace DIR; docs/debugging.md)", warning_s_,
                what.c_str());
      else
        ZC_INFO(kEngine, "stall: %s", what.c_str());
    }
  }
  if (shutdown_s_ > 0 && !table.Stalled(now, shutdown_s_, joined, false).empty()) shutdown_requested_ = true;
  return reported;
}

Status StallInspector::ShutdownError(MessageTable& table, const std::vector<uint8_t>& joined,
                                     Clock::time_point now) const {
  return Error(ZC_ERR_TIMEOUT, "stall shutdown (ZC_STALL_SHUTDOWN %g s): %s (the ranks' flight recorders "
               "say what each was doing: docs/debugging.md)", shutdown_s_,
               DescribeStalls(table.Stalled(now, 0, joined, false), false).c_str());
}

double StallInspector::route_after_s() const {
  if (warning_s_ > 0) return warning_s_ / 2;
  if (shutdown_s_ > 0) return shutdown_s_ / 2;
  return -1;
}

}  // namespace zc::engine
