// AllocSites: the allocation-site hook of Xue et al. §3.4. A framework
// allocates its tensors through an id of the allocation site (the op or
// line that creates them). During the first iteration they come from plain
// memory; when one of them is exposed to a peer (it ends up being sent), the
// site is marked, and from then on the site's allocations come from the
// registered pool, so the sender needs neither a registration nor a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "common/status.h"

namespace zc {

class LocalRegions;

class AllocSites {
 public:
  // Marked sites allocate from pool, the pool of the regions that own this.
  explicit AllocSites(LocalRegions* pool) : pool_(pool) {}
  // bytes > 0. Pool memory when the site is marked, else malloc'd.
  Status Alloc(uint64_t site, size_t bytes, void** out);
  // ptr must come from Alloc; ZC_ERR_INVALID_ARG otherwise.
  Status Free(void* ptr);
  // LocalRegions exposes [ptr, ptr+bytes) outside the pool to a peer: if it
  // lies in an allocation of a site, mark the site. Cheap when no site
  // allocation is live.
  void NoteExposed(const void* ptr, size_t bytes);
  bool marked(uint64_t site) const;

 private:
  struct Live {
    uint64_t site;
    size_t bytes;
    bool pooled;
  };
  LocalRegions* const pool_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Live> live_;  // by base address
  std::set<uint64_t> marked_;
};

}  // namespace zc
