// CPU binding of the ranks started on this machine: --bind-to share gives
// local rank i the i-th of local_ranks groups of side-by-side cores (cores /
// local ranks each; one core each when there are as many ranks as cores),
// core puts local rank i on core i, numa on NUMA node i (core and numa wrap
// around), none leaves the scheduler alone. The default is share when the
// ranks fit on the cores: a rank runs more than one busy thread (zcomm's
// progress and nonblocking-collective threads beside the application's own,
// a framework's data loaders), and on a single core those threads take
// turns in scheduler slices of milliseconds; a collective whose steps need
// the threads of two ranks at once then waits a slice per step (a 2-rank
// 16 MiB allreduce_on_stream, the caller spinning in cuStreamSynchronize,
// took 127 ms with one core per rank and 7.6 ms with eight; docs/gpu.md).
// With hwloc (ZC_HAVE_HWLOC) the topology comes from hwloc; without it
// cores come from sysfs and numa is refused.
#pragma once

#include <sched.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "options.h"

namespace zc::launcher {

struct BindTarget {
  bool bound = false;
  const char* unit = "";   // "core", "cores" or "numa node"
  int index = -1;          // logical index of the (first) core or node
  int count = 0;           // cores in it (share: several)
  std::string cpuset_hex;  // "0x00000003"
  cpu_set_t mask;          // for sched_setaffinity
};

class Binder {
 public:
  // `local_ranks`: how many ranks run on this machine. kDefault becomes share
  // when they fit on the cores, none when oversubscribed.
  static Status Create(BindPolicy requested, int local_ranks,
                       std::unique_ptr<Binder>* out);
  ~Binder();

  BindPolicy policy() const { return policy_; }
  int units() const { return static_cast<int>(targets_.size()); }
  // Computed in the parent, before fork.
  const BindTarget& TargetFor(int local_rank) const;
  // In the child between fork and exec. Returns 0 or an errno value.
  int ApplyInChild(int local_rank) const;
  // "bound to core 3 (cpuset 0x...)", "bound to cores 0-7 (...)", "not bound".
  std::string Describe(int local_rank) const;
  // Non-empty when the binding chosen needs saying (a warning).
  const std::string& note() const { return note_; }

 private:
  Binder() = default;
  // share: targets_ (one per core) become local_ranks groups of cores.
  void ShareCores(int local_ranks);
  BindTarget Merged(size_t first, size_t count) const;
  BindPolicy policy_ = BindPolicy::kNone;
  std::vector<BindTarget> targets_;  // one per core or node
  BindTarget unbound_;
  std::string note_;
  void* topology_ = nullptr;             // hwloc_topology_t when built with it
  std::vector<void*> hwloc_sets_;        // hwloc_bitmap_t per target
};

}  // namespace zc::launcher
