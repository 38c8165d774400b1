// The Work a ProcessGroupZcomm call returns: completed by the thread that ran
// it (for collectives the communicator's progress thread or a thread in
// wait(), for send/recv the group's p2p thread); wait() and the future carry
// the outputs or the error (a RuntimeError naming rank, op and cause).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <zcomm/zcomm.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "types.hpp"

namespace zcomm_torch {

class WorkZcomm : public c10d::Work {
 public:
  // outputs: what result() and the future give. deadline: how long a wait()
  // without a timeout waits (the group's timeout); on_deadline is called when
  // it expires (the group aborts its communicator, so nothing stays stuck).
  WorkZcomm(int rank, c10d::OpType type, CallId call, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds deadline, std::function<void(const std::string&)> on_deadline);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  void synchronize() override {}
  // A receive's sender (Python: work._source_rank()), as gloo's: the peer of
  // recv(src), the matched sender of recv() from any source once it
  // completed (-1 before). Other operations have none (torch's error).
  int sourceRank() const override;
  void SetSource(int rank) { source_.store(rank, std::memory_order_release); }

  // Called once by the thread that ran the operation.
  void Complete(std::exception_ptr error);

  // A collective queued on the communicator (zc_comm_enqueue), before its
  // completion callback is set. With run_in_wait, wait() without a caller's
  // timeout runs it itself through zc_wait (the queued collectives before it
  // too, unless the progress thread has started them): a blocking
  // dist.all_reduce then costs no thread hop. run_in_wait only where zcomm's
  // own deadline is no longer than the group's, since a collective running
  // on the waiter ends by that deadline.
  void SetRequest(zc_request* req, bool run_in_wait);
  // From the completion callback, after Complete: true if the caller is to
  // free the request (no wait() took it, and none will).
  bool ReleaseRequest();
  const CallId& call() const { return call_; }
  // A point-to-point operation's completion, which wait() tries itself
  // while it spins (the group's p2p thread tries it too): try_complete(this)
  // completes the Work if its request is done; true once it is complete.
  // Set before the Work is handed out.
  void SetTryComplete(std::function<bool(WorkZcomm*)> try_complete) {
    try_complete_ = std::move(try_complete);
  }

 private:
  const CallId call_;  // "rank 1/4: allreduce #7", for timeout messages
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds deadline_;
  std::function<void(const std::string&)> on_deadline_;
  void CompleteFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future);
  // The future, made by the first getFuture(); Complete and getFuture decide
  // under future_mu_ which of them completes it.
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool completed_once_ = false;
  std::exception_ptr error_;
  std::atomic<int> source_{-1};
  std::atomic<bool> done_{false};  // Complete ran; read by wait()'s spin

  // Who frees request_ (with zc_wait): the first of wait() and the
  // completion callback to claim it.
  enum RequestOwner : int { kNoRequest, kUnclaimed, kWaiter, kCompletion };
  zc_request* request_ = nullptr;
  bool run_in_wait_ = false;
  std::atomic<int> request_owner_{kNoRequest};
  std::function<bool(WorkZcomm*)> try_complete_;
};

}  // namespace zcomm_torch
