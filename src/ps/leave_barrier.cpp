#include "ps/leave_barrier.h"

#include <string>
#include <vector>

#include "common/log.h"
#include "p2p/device.h"
#include "ps/protocol.h"

namespace zc::ps {

Status LeaveBarrier(Shared* sh, const Deadline& dl) {
  Group* g = sh->group;
  const int n = g->size(), me = g->rank();
  HealthScope scope = HealthScope::FaultTolerant(&sh->dev()->health());
  for (int r = 0; r < n; ++r) {
    if (r == me || !g->Health(r).ok()) continue;
    Status st = sh->mailbox.Send(r, kLeaveTag, std::string(), dl);
    if (!st.ok() && g->Health(r).ok()) return st.with_context(Format("leaving the ps: to rank %d", r));
  }
  std::vector<uint8_t> done(static_cast<size_t>(n), 0);
  done[me] = 1;
  Backoff bo = sh->dev()->health().NewBackoff();
  for (;;) {
    int missing = -1;
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      std::string msg;
      Status st;
      if (sh->mailbox.TryRecv(r, kLeaveTag, &msg, &st) || !st.ok() || !g->Health(r).ok()) {
        if (!st.ok() || !g->Health(r).ok())
          ZC_TRACE(kPs, "leaving the ps: rank %d is gone (%s)", r, (st.ok() ? g->Health(r) : st).message().c_str());
        done[r] = 1;
        continue;
      }
      if (missing < 0) missing = r;
    }
    if (missing < 0) return Status::Ok();
    if (dl.expired())
      return Error(ZC_ERR_TIMEOUT, "waited %.1f s for rank %d to free its zc_ps (ZC_TIMEOUT=%g s)", dl.elapsed_s(),
                   missing, g->config().timeout_s);
    bo.Pause();
  }
}

}  // namespace zc::ps
