// Fusion: the registered fusion buffer that ready small allreduces of one
// dtype, op and scale factors are packed into (from the Device's pool, so
// the collective writes it to peers with no copy and no registration), the
// scaled copies in and out of it, and the persistent plans that a fused set
// of a size seen before runs through (every rank makes the same sets in the
// same order, so plans are made collectively at the same point).
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "collectives/allreduce_plan.h"
#include "collectives/collectives.h"
#include "common/status.h"

namespace zc {
class Group;
}

namespace zc::engine {

// dst[i] = src[i] * factor for count elements, with Horovod's numerics:
// float32 multiplies by (float)factor in float32, float64 in double;
// float16 and bfloat16 widen to float32, multiply by (float)factor and round
// back (nearest even); integer dtypes multiply in double and truncate toward
// zero, saturating at the type's bounds. Factor 1 (and bool, which is never
// scaled): a plain copy. src == dst: in place; other overlaps are not allowed.
void ScaledCopy(zc_dtype dtype, const void* src, void* dst, size_t count, double factor);

class FusionBuffer {
 public:
  explicit FusionBuffer(Group* group) : group_(group) {}
  ~FusionBuffer();
  // At least bytes of registered memory (grows by powers of two).
  Status Reserve(size_t bytes, char** out);

 private:
  Group* group_;
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

// Persistent allreduce plans by (count, dtype, op): the second fused set of
// a size makes a plan, later ones reuse it.
class PlanCache {
 public:
  explicit PlanCache(Collectives* coll) : coll_(coll) {}
  // Allreduces buf in place; *reused = true when through an existing plan.
  Status Allreduce(char* buf, size_t count, zc_dtype dtype, zc_op op, bool* reused);

 private:
  static constexpr size_t kMaxPlans = 8;     // each plan has a progress thread
  static constexpr size_t kMaxSeen = 1024;
  using Key = std::tuple<size_t, int, int>;
  Collectives* coll_;
  std::map<Key, int> seen_;
  std::map<Key, std::unique_ptr<AllreducePlan>> plans_;
};

}  // namespace zc::engine
