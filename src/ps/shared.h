// What the server and the worker halves of one zc_ps share: the PS's own
// Group (a context of its own over the communicator's ranks), the roles,
// the options, the placement and the alert words.
#pragma once

#include <zcomm/zcomm.h>

#include <vector>

#include "p2p/group.h"
#include "ps/mailbox.h"
#include "ps/placement.h"

namespace zc::ps {

struct Options {
  bool async = false;
  double sgd_lr = 0;        // 0: sums
  int server_threads = 1;   // ZC_PS_SERVER_THREADS
  int lend_ms = 1000;       // ZC_PS_LEND_MS (Worker::SettleRefs)
};

struct Shared {
  Shared(Group* g, const Options& o, const Placement& p) : group(g), mailbox(g), options(o), placement(p) {}
  Group* group;
  Device* dev() const { return group->device(); }
  Mailbox mailbox;
  Options options;
  Placement placement;
  std::vector<int> workers;  // group ranks, in worker-index order
  std::vector<int> servers;  // group ranks, in server-index order
  int worker_index = -1;     // mine, or -1
  int server_index = -1;
  // Every rank's peers are on shared memory: a server's replies are stores
  // (no socket), so a co-located worker's engine steps its server's pieces
  // (Server::Assist) instead of data threads that would compete with it
  // for the cores. Over sockets the data threads send replies while the
  // engine sends pushes.
  bool all_shm = false;
  // Per worker: its alert region (one word per server index, 64 bytes apart).
  std::vector<RemoteRegion> alerts;
  MemRegion* my_alerts = nullptr;  // workers: the region itself

  // Asynchronous mode survives the loss of a worker-only rank (docs/ps.md,
  // "Failover"): every push is applied on its own, so the others' pushes
  // and pulls need nothing from it. A server (ZC_PS_SERVER or ZC_PS_BOTH)
  // holds part of every key: its loss fails the PS.
  bool IsServer(int r) const {
    for (int s : servers)
      if (s == r) return true;
    return false;
  }
  bool Tolerated(int r) const {
    if (!options.async || IsServer(r)) return false;
    for (int w : workers)
      if (w == r) return true;
    return false;
  }
};

}  // namespace zc::ps
