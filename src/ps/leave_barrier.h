// LeaveBarrier: how the ranks of an asynchronous zc_ps agree that nobody
// writes into anybody's slots any more, so that the memory may go, when a
// worker may have been lost (failover, Shared::Tolerated): the
// communicator's barrier would wait for the dead rank (and its failure
// would abort every survivor's communicators). Every member sends each
// other member a control message, then waits for one from each, or for
// its loss: a lost member writes nothing any more either, whether it died
// or finalized before its message was read here (a failed operation has
// reported a lost server already). Aborts and alerts do not end it (a
// fault-tolerant HealthScope): a survivor that left before may have
// aborted the job since (its communicator's barrier met the lost worker).
#pragma once

#include "common/deadline.h"
#include "common/status.h"
#include "ps/shared.h"

namespace zc::ps {

Status LeaveBarrier(Shared* sh, const Deadline& dl);

}  // namespace zc::ps
