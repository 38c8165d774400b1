// The Work a ProcessGroupZcomm call returns: completed by the group's worker
// (collectives) or p2p thread, never by the caller; wait() and the future
// carry the outputs or the error (a RuntimeError naming rank, op and cause).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace zcomm_torch {

class WorkZcomm : public c10d::Work {
 public:
  // outputs: what result() and the future give. deadline: how long a wait()
  // without a timeout waits (the group's timeout); on_deadline is called when
  // it expires (the group aborts its communicator, so nothing stays stuck).
  WorkZcomm(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
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
  const std::string& what() const { return what_; }

 private:
  const std::string what_;  // "rank 1/4: allreduce #7", for timeout messages
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds deadline_;
  std::function<void(const std::string&)> on_deadline_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_{-1};
};

}  // namespace zcomm_torch
