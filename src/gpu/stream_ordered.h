// StreamOrdered: how a communicator orders its work on a caller's CUDA
// stream (the zc_*_on_stream calls), without the caller's thread ever
// waiting for the stream or for the network.
//
// Begin() enqueues on the caller's stream, at once:
//   1. the device-to-host copies of the call's device inputs into pinned
//      memory (cuMemcpyDtoHAsync; they run after the work already there);
//   2. an event `ready`: once the stream has passed it, the inputs are on
//      the host;
//   3. the gate: cuStreamWaitValue32 on the operation's completion word,
//      a word of pinned, device-mapped host memory; work enqueued on the
//      stream later waits until the host part has written the
//      operation's number there;
//   4. the host-to-device copies of the device outputs;
//   5. an event `done`: the pinned copies are free again after it.
// The host part runs elsewhere (the communicator's queue of nonblocking
// collectives, in call order; or the stream p2p thread): WaitReady()
// polls `ready` with a deadline, the host collective runs on the pinned
// copies, and Complete() writes the word (also after a failure, so that
// the stream never hangs; the outputs are then undefined and the error is
// the request's and the communicator's async error).
//
// Why this shape (as NCCL, whose kernels wait on host-mapped flags that
// its proxy thread writes; torch's ProcessGroupNCCL orders its work with
// events on the caller's stream; Horovod polls a ready event recorded on
// the framework's stream before it touches a tensor):
//  - The caller's thread only enqueues. The progress side only polls an
//    event and writes host memory: it makes no CUDA call that can wait for
//    the device (cuMemFreeHost, synchronous copies), since a gate may be
//    waiting for it. Pinned copies go back to the pool on a caller's thread
//    (Reap(), at the next call, and Close()).
//  - No host function waits for network progress where the driver has
//    stream memory operations: CUDA runs host functions on its own
//    thread(s), and one that blocks delays the host functions of every
//    other stream, which can deadlock. Only a driver without
//    cuStreamWaitValue32 gets the fallback gate: a host function
//    (cuLaunchHostFunc) that waits for the word, bounded by the deadline.
//  - A gate that is not wanted (a send: its input is copied before the
//    stream goes on) is left out: later work on the stream does not wait
//    for the network.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/host_staging.h"

namespace zc::gpu {

class PinnedPool;
class PointerCache;

// One stream-ordered operation: what its host part and Reap need. A
// pipelined operation has several parts (chunks of its buffers), each with
// its own ready event and gate.
struct StreamOp {
  struct Part {
    size_t offset = 0, bytes = 0;  // the chunk, in bytes of each buffer
    CuEvent ready = nullptr;
    bool gated = false;                     // its gate is on the stream
    std::atomic<uint32_t>* word = nullptr;  // its completion word
    size_t slot = 0;
    uint32_t number = 0;
    bool completed = false;  // set by the host part's thread only
  };
  StreamOp(const DriverTable* drv, PointerCache* cache, PinnedPool* pool) : staging(drv, cache, pool) {}
  CuStream stream = nullptr;
  int device = 0;
  HostStaging staging;
  std::vector<Part> parts;
  CuEvent done = nullptr;
  std::atomic<bool> completed{false};  // every part is
};

class StreamOrdered {
 public:
  // drv: the driver (never null); cache and pool as HostStaging's.
  // timeout_s bounds every wait (ZC_TIMEOUT).
  StreamOrdered(const DriverTable* drv, PointerCache* cache, PinnedPool* pool, double timeout_s);
  ~StreamOrdered();  // Close()
  StreamOrdered(const StreamOrdered&) = delete;
  StreamOrdered& operator=(const StreamOrdered&) = delete;

  // Enqueues the operation on `stream` (steps above; `gate` false leaves
  // out steps 3 and 4); host[i] is what the host part runs on for args[i].
  // chunk_bytes > 0 (a multiple of the element size) pipelines it: every
  // buffer of the call has the same size (or none) and is cut into parts of
  // that many bytes; the stream gets every part's input copy and ready
  // event, then every part's gate and output copy, so the copies of one
  // part overlap the host collective of another. On an error nothing is
  // left waiting on the stream.
  Status Begin(CuStream stream, const StageArg* args, size_t n, bool gate, size_t chunk_bytes, void** host,
               std::shared_ptr<StreamOp>* op);
  // Host part: returns once the stream has passed the part's `ready`;
  // ZC_ERR_TIMEOUT after the deadline (the work queued before the call
  // never finished).
  Status WaitReady(StreamOp* op, size_t part);
  // The same without waiting: *ready once the stream has passed it.
  Status PollReady(StreamOp* op, size_t part, bool* ready);
  // Host part: the part is over with `st`; opens its gate.
  void Complete(StreamOp* op, size_t part, const Status& st);
  // Completes every part not completed yet with `st` (after a failure).
  void CompleteRest(StreamOp* op, const Status& st);

  // Returns once the stream has passed the operation's `done` (every
  // output copied back); ZC_ERR_TIMEOUT after the deadline, the driver's
  // error when the stream's work failed. For callers that wait for their
  // own operation (the blocking calls' pipelined staging); call it after
  // every part is completed.
  Status WaitDone(StreamOp* op);
  // Gives back what finished operations held (a caller's thread).
  void Reap();
  // Waits (deadline) for every operation's `done` and reaps them.
  void Close();

  // The first failure of a stream-ordered operation (ok if none).
  Status async_error() const;
  // Whether the gate is cuStreamWaitValue32 (else the host function).
  bool waits_on_value() const { return drv_->StreamWaitValue32 != nullptr; }

 private:
  struct SlotPage;
  Status TakeSlot(StreamOp::Part* part);  // mu_ held
  Status EnqueueGate(CuStream stream, StreamOp::Part* part);
  Status Enqueue(StreamOp* op, bool gate);
  void Abandon(const std::shared_ptr<StreamOp>& op);  // Begin failed part way
  bool Finished(StreamOp* op);                        // mu_ held

  const DriverTable* drv_;
  PointerCache* cache_;
  PinnedPool* pool_;
  double timeout_s_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<StreamOp>> inflight_;
  std::vector<std::unique_ptr<SlotPage>> pages_;
  std::vector<size_t> free_slots_;
  uint32_t next_number_ = 0;
  bool leak_pages_ = false;  // Close gave up: a stream may still read them
  Status async_error_;
};

}  // namespace zc::gpu
