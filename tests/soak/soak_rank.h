// One rank of the fault soak: joins the job through a unique id and runs
// random verified collectives and point-to-point exchanges until the driver
// asks it to stop or a call fails. Every rank draws the same sequence of
// operations, sizes and roots from the round's seed, so the job agrees on
// what to call without talking about it.
#pragma once

#include <cstdint>

#include <zcomm/zcomm.h>

#include "soak_status.h"

namespace zc::soak {

// Exit codes of a rank process (the driver reads them).
enum RankExit : int {
  kExitClean = 0,      // stopped when asked, every result right
  kExitFault = 1,      // a call failed; reported on the board, finalized
  kExitWrong = 3,      // a result was wrong
  kExitInitFailed = 4, // could not join the job
};

// Runs rank `rank` of `nranks` on the communicator made from `id`; returns
// the process's exit code.
int RunRank(int rank, int nranks, const zc_unique_id& id, uint64_t seed, Board* board);

}  // namespace zc::soak
