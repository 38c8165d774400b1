#include "binding.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "zc_build_config.h"

#if ZC_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

namespace zc::launcher {
namespace {

std::string MaskToHex(const cpu_set_t& mask) {
  // Most significant word first, 32 bits per word as hwloc prints it.
  int top = CPU_SETSIZE - 1;
  while (top > 0 && !CPU_ISSET(top, &mask)) --top;
  int words = top / 32 + 1;
  std::string s = "0x";
  for (int w = words - 1; w >= 0; --w) {
    unsigned v = 0;
    for (int b = 0; b < 32; ++b)
      if (CPU_ISSET(w * 32 + b, &mask)) v |= 1u << b;
    char buf[16];
    snprintf(buf, sizeof(buf), "%08x", v);
    s += buf;
    if (w > 0) s += ',';
  }
  return s;
}

[[maybe_unused]] int ReadSysInt(int cpu, const char* what) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/%s",
           cpu, what);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  int v = -1;
  if (fscanf(f, "%d", &v) != 1) v = -1;
  fclose(f);
  return v;
}

// Cores without hwloc: the CPUs we may run on, grouped by (package, core id)
// from sysfs; a CPU without topology files is a core of its own.
[[maybe_unused]] std::vector<BindTarget> CoresFromSysfs() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<BindTarget> cores;
  std::map<std::pair<int, int>, size_t> index;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    int pkg = ReadSysInt(cpu, "physical_package_id");
    int core = ReadSysInt(cpu, "core_id");
    std::pair<int, int> key = core >= 0 ? std::make_pair(pkg, core)
                                        : std::make_pair(-1, -1 - cpu);
    auto it = index.find(key);
    if (it == index.end()) {
      BindTarget t;
      t.bound = true;
      t.unit = "core";
      t.index = static_cast<int>(cores.size());
      t.count = 1;
      CPU_ZERO(&t.mask);
      index[key] = cores.size();
      cores.push_back(t);
      it = index.find(key);
    }
    CPU_SET(cpu, &cores[it->second].mask);
  }
  for (BindTarget& t : cores) t.cpuset_hex = MaskToHex(t.mask);
  return cores;
}

}  // namespace

Status Binder::Create(BindPolicy requested, int local_ranks,
                      std::unique_ptr<Binder>* out) {
  std::unique_ptr<Binder> b(new Binder());
  CPU_ZERO(&b->unbound_.mask);
  if (requested == BindPolicy::kNone || local_ranks == 0) {
    b->policy_ = BindPolicy::kNone;
    *out = std::move(b);
    return Status::Ok();
  }

#if ZC_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0)
    return SystemError(errno, "hwloc: cannot load the topology");
  b->topology_ = topo;
  // Disallowed PUs (cgroups) are already left out of the topology.
  int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  BindPolicy policy = requested;
  if (policy == BindPolicy::kDefault)
    policy = (ncores > 0 && local_ranks <= ncores) ? BindPolicy::kShare
                                                   : BindPolicy::kNone;
  if (policy == BindPolicy::kNone) {
    b->policy_ = policy;
    *out = std::move(b);
    return Status::Ok();
  }
  if (policy == BindPolicy::kNuma) type = HWLOC_OBJ_NUMANODE;
  int n = hwloc_get_nbobjs_by_type(topo, type);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(i));
    if (!obj || !obj->cpuset || hwloc_bitmap_iszero(obj->cpuset)) continue;
    BindTarget t;
    t.bound = true;
    t.unit = policy == BindPolicy::kNuma ? "numa node" : "core";
    t.count = 1;
    t.index = static_cast<int>(obj->logical_index);
    hwloc_bitmap_t set = hwloc_bitmap_dup(obj->cpuset);
    CPU_ZERO(&t.mask);
    hwloc_cpuset_to_glibc_sched_affinity(topo, set, &t.mask, sizeof(t.mask));
    char* text = nullptr;
    if (hwloc_bitmap_asprintf(&text, set) >= 0 && text) {
      t.cpuset_hex = text;
      free(text);
    } else {
      t.cpuset_hex = MaskToHex(t.mask);
    }
    b->hwloc_sets_.push_back(set);
    b->targets_.push_back(std::move(t));
  }
#else
  BindPolicy policy = requested;
  if (policy == BindPolicy::kNuma)
    return Error(ZC_ERR_UNSUPPORTED,
                 "--bind-to numa needs hwloc, and zcrun was built without it "
                 "(use --bind-to core or none)");
  b->targets_ = CoresFromSysfs();
  if (policy == BindPolicy::kDefault)
    policy = (!b->targets_.empty() &&
              local_ranks <= static_cast<int>(b->targets_.size()))
                 ? BindPolicy::kShare
                 : BindPolicy::kNone;
  if (policy == BindPolicy::kNone) b->targets_.clear();
#endif
  b->policy_ = policy;
  if (policy != BindPolicy::kNone && b->targets_.empty())
    return Error(ZC_ERR_SYSTEM, "--bind-to %s: no %s found on this machine",
                 BindPolicyName(policy),
                 policy == BindPolicy::kNuma ? "NUMA node with CPUs" : "core");
  if (policy == BindPolicy::kShare) b->ShareCores(local_ranks);
  // Sharing a NUMA node is the point of numa binding; sharing a core is not.
  if ((policy == BindPolicy::kCore || policy == BindPolicy::kShare) &&
      local_ranks > static_cast<int>(b->targets_.size()))
    b->note_ = Format("%d local ranks on %zu cores: several ranks share one",
                      local_ranks, b->targets_.size());
  *out = std::move(b);
  return Status::Ok();
}

// Cores [first, first + count) of targets_ as one target.
BindTarget Binder::Merged(size_t first, size_t count) const {
  BindTarget t = targets_[first];
  t.count = static_cast<int>(count);
  t.unit = count == 1 ? "core" : "cores";
  for (size_t k = first + 1; k < first + count; ++k)
    CPU_OR(&t.mask, &t.mask, &targets_[k].mask);
  t.cpuset_hex = MaskToHex(t.mask);
  return t;
}

void Binder::ShareCores(int local_ranks) {
  const size_t cores = targets_.size(), ranks = static_cast<size_t>(local_ranks);
  if (ranks == 0 || ranks >= cores) return;  // one core each (or shared: note_)
  std::vector<BindTarget> shares;
  std::vector<void*> sets;
  size_t first = 0;
  for (size_t i = 0; i < ranks; ++i) {
    const size_t count = cores / ranks + (i < cores % ranks ? 1 : 0);
    shares.push_back(Merged(first, count));
#if ZC_HAVE_HWLOC
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (size_t k = first; k < first + count; ++k)
      hwloc_bitmap_or(set, set, static_cast<hwloc_bitmap_t>(hwloc_sets_[k]));
    char* text = nullptr;
    if (hwloc_bitmap_asprintf(&text, set) >= 0 && text) {
      shares.back().cpuset_hex = text;
      free(text);
    }
    sets.push_back(set);
#endif
    first += count;
  }
#if ZC_HAVE_HWLOC
  for (void* s : hwloc_sets_) hwloc_bitmap_free(static_cast<hwloc_bitmap_t>(s));
  hwloc_sets_ = std::move(sets);
#endif
  targets_ = std::move(shares);
}

std::string Binder::Describe(int local_rank) const {
  const BindTarget& t = TargetFor(local_rank);
  if (!t.bound) return "not bound";
  if (t.count > 1)
    return Format("bound to cores %d-%d (cpuset %s)", t.index, t.index + t.count - 1, t.cpuset_hex.c_str());
  return Format("bound to %s %d (cpuset %s)", t.unit, t.index, t.cpuset_hex.c_str());
}

Binder::~Binder() {
#if ZC_HAVE_HWLOC
  for (void* s : hwloc_sets_) hwloc_bitmap_free(static_cast<hwloc_bitmap_t>(s));
  if (topology_) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topology_));
#endif
}

const BindTarget& Binder::TargetFor(int local_rank) const {
  if (targets_.empty() || local_rank < 0) return unbound_;
  return targets_[static_cast<size_t>(local_rank) % targets_.size()];
}

int Binder::ApplyInChild(int local_rank) const {
  if (targets_.empty() || local_rank < 0) return 0;
  size_t i = static_cast<size_t>(local_rank) % targets_.size();
#if ZC_HAVE_HWLOC
  // The child is single-threaded here, so binding "this process" is the
  // thread that is about to exec.
  if (hwloc_set_cpubind(static_cast<hwloc_topology_t>(topology_),
                        static_cast<hwloc_bitmap_t>(hwloc_sets_[i]),
                        HWLOC_CPUBIND_PROCESS) == 0)
    return 0;
  // Fall through to the plain system call with the same set.
#endif
  if (sched_setaffinity(0, sizeof(cpu_set_t), &targets_[i].mask) != 0)
    return errno;
  return 0;
}

}  // namespace zc::launcher
