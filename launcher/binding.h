// CPU binding of the ranks started on this machine: --bind-to core puts
// local rank i on core i, numa on NUMA node i (both wrap around), none
// leaves the scheduler alone. With hwloc (ZC_HAVE_HWLOC) the topology comes
// from hwloc; without it cores come from sysfs and numa is refused.
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
  const char* unit = "";   // "core" or "numa node"
  int index = -1;          // logical index of the core or node
  std::string cpuset_hex;  // "0x00000003"
  cpu_set_t mask;          // for sched_setaffinity
};

class Binder {
 public:
  // `local_ranks`: how many ranks run on this machine. kDefault becomes core
  // when they fit on the cores, none when oversubscribed (like mpirun).
  static Status Create(BindPolicy requested, int local_ranks,
                       std::unique_ptr<Binder>* out);
  ~Binder();

  BindPolicy policy() const { return policy_; }
  int units() const { return static_cast<int>(targets_.size()); }
  // Computed in the parent, before fork.
  const BindTarget& TargetFor(int local_rank) const;
  // In the child between fork and exec. Returns 0 or an errno value.
  int ApplyInChild(int local_rank) const;
  // Non-empty when the binding chosen needs saying (a warning).
  const std::string& note() const { return note_; }

 private:
  Binder() = default;
  BindPolicy policy_ = BindPolicy::kNone;
  std::vector<BindTarget> targets_;  // one per core or node
  BindTarget unbound_;
  std::string note_;
  void* topology_ = nullptr;             // hwloc_topology_t when built with it
  std::vector<void*> hwloc_sets_;        // hwloc_bitmap_t per target
};

}  // namespace zc::launcher
