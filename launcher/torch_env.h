// What torch.distributed's env:// rendezvous and torchrun-style scripts read,
// exported by zcrun next to ZC_*: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. So `zcrun -np 4 python3
// train.py` works with init_process_group(init_method="env://").
#pragma once

#include <string>

#include "common/status.h"
#include "hosts.h"
#include "remote_command.h"

namespace zc::launcher {

struct TorchMaster {
  std::string addr;
  std::string port;
};

// MASTER_ADDR: loopback when every rank runs here; rank 0's address
// otherwise (`local_ip`, the address remote ranks reach this machine by, when
// rank 0 runs here; else rank 0's host name). MASTER_PORT: a TCP port free on
// this machine (where rank 0 is remote, a best guess that it is free there
// too). MASTER_ADDR and MASTER_PORT already in zcrun's environment win.
Status ChooseTorchMaster(const Placement& placement, const std::string& local_ip,
                         TorchMaster* out);

// Appends the six variables for one rank.
void AddTorchEnv(const TorchMaster& master, const RankPlace& place, int size, EnvList* env);

}  // namespace zc::launcher
