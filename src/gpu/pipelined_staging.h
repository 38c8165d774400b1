// PipelinedStaging: how a blocking call (zc_allreduce, zc_broadcast,
// zc_reduce, and their nonblocking forms, which run the blocking code on
// the communicator's worker thread) runs its host collective on device
// buffers larger than one pipeline part (ZC_GPU_CHUNK_BYTES): the
// device-to-host copy, the host collective and the host-to-device copy
// overlap, part by part, instead of adding up.
//
// It is the stream-ordered machinery (stream_ordered.h) on the legacy
// default stream, with the host part run by the calling thread:
//   1. Begin() enqueues every part's input copy and ready event, then every
//      part's gate and output copy, then `done`. The legacy stream starts
//      after the work the caller queued on blocking streams, as the
//      synchronous copies of whole-buffer staging did.
//   2. The exchange: one small collective that travels as the caller's
//      call with memory path "device memory staged in parts", carrying
//      whether this rank could stage its buffers. A rank that passed host
//      buffers makes the whole call at once; it meets the exchange on the
//      same channel and both fail with ZC_ERR_MISMATCH (never a hang).
//   3. Per part: wait for its ready event (deadline), run the host
//      collective on the part, open its gate: the output copy of part k
//      runs while the host collective of part k+1 does.
//   4. Wait for `done` (deadline): recvbuf holds the result on return.
// Failures: one before the parts (Begin) travels in the exchange; one
// during the parts (a copy that fails on the stream, a stream that never
// gets there) aborts the communicator so that the peers, waiting in the
// same part's collective, fail at once instead of at their deadline (as a
// host collective that fails once started does). Every gate is opened
// before return, so the stream never stays held.
//
// Only collectives whose parts are themselves a smaller call of the same
// collective are pipelined (elementwise: allreduce, broadcast, reduce).
// For allgather, reduce-scatter, alltoall and the vector collectives a
// part of every rank's block is a strided piece of the buffers, which the
// host collectives (contiguous blocks) do not take: they stay whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/host_staging.h"

namespace zc::gpu {

class PinnedPool;
class PointerCache;
class StreamOrdered;
struct StreamOp;

class PipelinedStaging {
 public:
  // What the exchange told this rank.
  struct Told {
    bool any = false;       // some rank (this one included) failed to stage
    int who = -1;           // the failed rank it names (-1: none)
    bool everyone = false;  // every rank was told the same (else the ranks
                            // that know abort the communicator)
  };
  // What the caller's collective contributes.
  struct Hooks {
    // The exchange (step 2) of whether this rank failed to stage (mine).
    // Allreduce: an allgather, every rank learns every failure; broadcast:
    // the root's goes down the tree; reduce: the root learns any rank's.
    std::function<Status(bool mine, Told* told)> exchange;
    // The host collective on bytes [offset, offset + bytes) of each host
    // buffer (host[i] stands for the StageArg i).
    std::function<Status(void* const* host, size_t offset, size_t bytes)> part;
    // Aborts the communicator with the failure (peers fail at once).
    std::function<void(const Status&)> abort;
    const char* what = "";  // "allreduce", for messages
  };

  // drv: the driver (never null); cache and pool as HostStaging's;
  // timeout_s bounds every wait (ZC_TIMEOUT).
  PipelinedStaging(const DriverTable* drv, PointerCache* cache, PinnedPool* pool, double timeout_s);
  ~PipelinedStaging();
  PipelinedStaging(const PipelinedStaging&) = delete;
  PipelinedStaging& operator=(const PipelinedStaging&) = delete;

  // True when the driver has what the pipeline needs (events, async
  // copies, a gate); else callers stage whole buffers. The same on every
  // rank of a job (one driver version).
  static bool Supported(const DriverTable* drv);

  // Runs the call in parts of chunk_bytes (a whole number of elements;
  // every buffer of the call the same size, or empty).
  Status Run(const StageArg* args, size_t n, size_t chunk_bytes, const Hooks& hooks);

  // Waits (deadline) for anything still on the stream and frees it
  // (zc_finalize).
  void Close();

 private:
  // Per part: ready, host collective, gate. Stops at the first failure.
  // inputs: the staged inputs' names, for messages.
  Status RunParts(StreamOp* op, void* const* host, const std::string& inputs, const Hooks& hooks);

  std::unique_ptr<StreamOrdered> stream_;
};

}  // namespace zc::gpu
