// ZC_ALGO: which algorithm each collective runs.
//
//   auto                          every collective chooses by itself (default)
//   ring                          a bare name: every collective that has that
//                                 algorithm uses it (an error if none has it)
//   allreduce=ring,broadcast=chain
//                                 per collective; the others stay automatic
//
// Parse checks names only. Whether a forced algorithm can run here (shm
// needs every rank on this host, reached through the shm transport; hier
// the same number of ranks on every host) is
// checked by Collectives::Init, which refuses the communicator otherwise.
#pragma once

#include <string>
#include <vector>

#include "collectives/signature.h"
#include "common/status.h"

namespace zc::coll {

// The algorithms a collective can be forced to (its "local" one-rank copy
// is not among them).
const std::vector<Algo>& AlgosOf(Kind k);

class AlgoSelect {
 public:
  // ZC_ALGO's value (lower case). ZC_ERR_INVALID_ARG naming the value, the
  // part that is wrong and what is accepted.
  static Status Parse(const std::string& spec, AlgoSelect* out);

  // Algo::kNone: automatic.
  Algo forced(Kind k) const { return forced_[static_cast<int>(k)]; }
  // "auto", or "allreduce=ring, allgather=ring, ..." for the log.
  std::string Describe() const;

 private:
  Algo forced_[kNumKinds] = {};
};

}  // namespace zc::coll
