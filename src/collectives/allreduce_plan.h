// AllreducePlan: a persistent allreduce (init once, start/wait many times),
// made by Collectives::PlanAllreduce. It runs each start on a thread of its
// own, so that Start returns at once and Wait blocks.
#pragma once

#include <zcomm/zcomm.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "collectives/algo_select.h"
#include "common/status.h"

namespace zc {

class Collectives;

// A persistent allreduce (init once, start/wait many times). Plan init makes
// every link and shared-memory descriptor the algorithm needs, so a Start is
// only one-sided writes and flags. Every rank must create its plans and
// start them in the same order as its other collectives.
class AllreducePlan {
 public:
  ~AllreducePlan();
  // Begins the allreduce of send into recv (count elements of the plan's
  // dtype; send == recv: in place) on the plan's progress thread. The
  // buffers must stay untouched until Wait returns.
  Status Start(const void* send, void* recv);
  // Waits for the started operation; its status. OK when none was started.
  Status Wait();
  const char* algorithm() const;
  size_t count() const { return count_; }
  zc_dtype dtype() const { return dtype_; }

 private:
  friend class Collectives;
  AllreducePlan() = default;
  void Loop();

  Collectives* coll_ = nullptr;
  size_t count_ = 0;
  zc_dtype dtype_ = ZC_FLOAT32;
  zc_op op_ = ZC_SUM;
  coll::Algo algo_ = coll::Algo::kNone;

  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false, running_ = false, stop_ = false;
  const void* send_ = nullptr;
  void* recv_ = nullptr;
  Status result_;
  std::thread thread_;
};

}  // namespace zc
