// Op: one submitted operation and its completion, shared by the engine
// thread (which finishes it) and the caller's handle (which polls, waits and
// reads the result). A handle may be dropped while the op is pending.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/deadline.h"
#include "engine/request.h"

namespace zc::engine {

struct Op {
  Request req;
  // What the engine reads and writes: the caller's buffers, or their pinned
  // host copies when they are device memory (then copy_out puts the result
  // in the caller's output before the op is done).
  const void* input = nullptr;
  void* output = nullptr;
  void* caller_output = nullptr;  // allreduce, broadcast: what zc_engine_output returns
  std::function<Status()> copy_out;
  // req.device >= 0: an event recorded at submission on the legacy default
  // stream, which the engine's stream waits for before reading the input
  // (DeviceFusion::RecordReady).
  std::shared_ptr<void> ready;
  double wait_timeout_s = 300;  // ZC_TIMEOUT of the engine, for zc_engine_wait
  Clock::time_point submitted, drained;

  // Engine thread only, until done.
  bool sent = false;  // its request went out in the request exchange

  // Results, written before done is set.
  std::vector<char> result;  // allgather, alltoall, reducescatter
  std::vector<int64_t> out_shape;
  std::vector<int64_t> received_splits;
  int last_joined = -1;

  void Finish(const Status& st) {
    {
      std::lock_guard<std::mutex> lock(mu);
      status = st;
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
  // Waits up to timeout_s; false on timeout.
  bool Wait(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                       [&] { return done.load(std::memory_order_acquire); });
  }
  Status result_status() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }

  std::atomic<bool> done{false};

 private:
  std::mutex mu;
  std::condition_variable cv;
  Status status;
};

}  // namespace zc::engine
