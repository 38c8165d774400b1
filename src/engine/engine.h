// Engine: Horovod's background loop. Frameworks submit named operations from
// any thread; the engine thread, once per cycle (ZC_CYCLE_TIME):
//  1. takes the new submissions;
//  2. agrees with every rank, by one BAND allreduce of a bit vector, on the
//     cached names every rank has ready (ResponseCache), on invalidated
//     cache positions, and on status bits (someone has uncached requests,
//     wants to stop, wants a stall shutdown);
//  3. only when some rank has uncached requests: exchanges them (allgather
//     of lengths, allgatherv of the requests) into the MessageTable that
//     every rank holds identically, and takes the names now complete,
//     checking them for mismatches;
//  4. runs the agreed responses in the same order on every rank, fusing
//     allreduces into the registered fusion buffer up to
//     ZC_FUSION_THRESHOLD (tensors in device memory: into DeviceFusion's
//     device buffer, fused only with tensors placed alike on every rank);
//  5. completes joins and inspects stalls (StallInspector, ZC_STALL_WARNING).
// It runs on its own communicator (a zc_comm_dup of the caller's, made by the
// C API), so it never races the framework's own collectives. A caller's
// mistake that every rank sees in the agreed requests (a mismatch) fails
// that operation on every rank and the loop goes on; any other error (a
// lost peer, a failed collective, a stop) ends the loop on every rank and
// fails every pending op with it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "engine/device_fusion.h"
#include "engine/fusion.h"
#include "engine/message_table.h"
#include "engine/op.h"
#include "engine/response_cache.h"
#include "engine/stall_inspector.h"
#include "engine/timeline.h"

namespace zc {
class Collectives;
class Group;
}  // namespace zc
namespace zc::gpu {
class DevicePath;
}

namespace zc::engine {

// The counters (zc_engine_stats), published at the end of every cycle so
// that a reader always sees a whole number of cycles.
struct Stats {
  uint64_t cycles = 0, negotiation_collectives = 0, cache_hits = 0, cache_misses = 0, fused_sets = 0,
           fused_tensors = 0, data_collectives = 0, plan_reuses = 0, operations_done = 0, stall_warnings = 0,
           cache_entries = 0;
};

class Engine {
 public:
  // coll, group and gpu (its DevicePath; null: none) belong to the engine's
  // own communicator, which must outlive the engine. Starts the engine
  // thread.
  static Status Create(Collectives* coll, Group* group, gpu::DevicePath* gpu, const Config& config,
                       std::unique_ptr<Engine>* out);
  ~Engine();

  // The CUDA device an allreduce's input and output are memory of (-1:
  // anything else, which is staged at submission): such an operation is
  // submitted with req.device set and its buffers as they are.
  int DeviceOf(const void* input, const void* output, size_t bytes) const {
    return device_.DeviceOf(input, output, bytes);
  }
  // Checks the request (ZC_ERR_INVALID_ARG naming the cause; the engine
  // goes on) and queues it. After a failure: that failure.
  Status Submit(const std::shared_ptr<Op>& op);
  // Stops every rank's engine at the same cycle and joins the thread; the
  // error that had shut the engine down, if any.
  Status Shutdown();
  // OK while running.
  Status error() const;
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return published_;
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return config_.timeout_s; }

 private:
  Engine(Collectives* coll, Group* group, gpu::DevicePath* gpu, const Config& config);
  // What this rank proposes in a cycle's negotiation: the bit vector (the
  // status word, then the cache positions it has ready, then those still
  // valid for it) and the requests it must send in full.
  struct Proposal {
    std::vector<uint64_t> bits;
    size_t npos = 0, hits = 1, valid = 1;  // positions, and where their bit runs start
    std::vector<std::shared_ptr<Op>> to_send;
    std::vector<int> hit_pos;  // per pending_ op: its cache position, -1 if none
  };

  void Loop();
  // One negotiation cycle: drain, propose, agree, exchange, execute.
  Status Cycle();
  // Moves the new submissions to pending_; true once a stop is asked for.
  bool DrainSubmissions(Clock::time_point now);
  Proposal Propose(Clock::time_point now, bool stopping);
  // After the agreement: drops the positions some rank invalidated and
  // appends the cached responses every rank has ready; true if any
  // position was invalidated (then the request exchange runs).
  bool TakeAgreedCached(Proposal* p, std::vector<Response>* responses);
  // The request exchange: every rank's uncached requests to every rank,
  // into the MessageTable; appends the names now complete (mismatches fail
  // their operation), and lists the ranks that joined.
  Status ExchangeRequests(const std::vector<std::shared_ptr<Op>>& to_send, Clock::time_point now,
                          std::vector<Response>* responses, std::vector<int>* joined_now);
  // Completes this rank's join once every rank has joined.
  void CompleteJoin(const std::vector<int>& joined_now);
  Status Execute(std::vector<Response>& responses);
  Status RunAllreduce(const Response& resp);
  Status RunFused(const std::vector<const Response*>& set);
  // An allreduce set (one tensor or fused) whose tensors are this rank's
  // device memory: packed, reduced and unpacked on the device.
  Status RunOnDevice(const std::vector<const Response*>& set);
  Status RunOther(const Response& resp);
  Status RunAllgather(const Response& resp, Op* op);
  Status RunAlltoall(const Response& resp, Op* op);
  Status RunReducescatter(const Request& r, Op* op);
  // The local op of an agreed name (null: this rank has joined).
  std::shared_ptr<Op> TakeOp(const std::string& name);
  // A caller's mistake that every rank found in the same agreed response
  // (mismatched shapes, dtypes, roots; an operation a joined rank cannot
  // join): that operation fails on every rank and the engine goes on, as in
  // Horovod.
  void FailAgreed(const Response& resp, const Status& st);
  void Complete(const std::shared_ptr<Op>& op, const Status& st);
  void FailAll(const Status& st);
  // An error every rank finds by itself from the same agreed state (a
  // mismatch, a stop, a stall shutdown): the connections need not be
  // aborted for the others to learn of it.
  Status Agreed(const Status& st) {
    agreed_error_ = true;
    return st;
  }

  Collectives* coll_;
  Group* group_;
  Config config_;
  int rank_, size_;
  Stats stats_;  // engine thread's working copy

  // Submissions not yet taken by the engine thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Op>> queue_;
  std::map<std::string, std::shared_ptr<Op>> names_;  // pending, by name (queued or taken)
  bool stop_ = false;
  bool finished_ = false;
  Status error_;
  uint64_t barriers_ = 0;
  Stats published_;

  // Engine thread only.
  std::vector<std::shared_ptr<Op>> pending_;  // taken, in submission order
  std::shared_ptr<Op> join_op_;
  bool join_sent_ = false;
  bool agreed_error_ = false;
  ResponseCache cache_;
  MessageTable table_;
  std::vector<uint8_t> joined_;  // agreed: the ranks that have joined
  FusionBuffer fusion_;
  DeviceFusion device_;
  PlanCache plans_;
  Timeline timeline_;
  StallInspector stalls_;
  std::vector<char> zeros_;  // a joined rank's contribution
  std::thread thread_;
};

}  // namespace zc::engine
