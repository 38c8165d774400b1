// The Horovod-style API of zcomm.torch (zcomm/torch/mpi_ops.py) on the engine
// of include/zcomm/zcomm_engine.h: one process-wide communicator and engine,
// made by Init() from the environment (zcrun, PMIx under mpirun, or a single
// process), and Handles that wrap zc_engine_handle around torch tensors.
//
// The tensors handed to the engine are dense, contiguous CPU tensors (the
// Python layer stages anything else); a Handle keeps them alive until it is
// freed, so the engine never sees a freed buffer. Results the engine owns
// (allgather, alltoall, reducescatter) are copied into new tensors.
#pragma once

#include <ATen/ATen.h>
#include <zcomm/zcomm_engine.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace zcomm_torch {
namespace hvd {

// Raised (as zcomm.torch.HorovodInternalError, a RuntimeError) for failures
// of the engine: a lost peer, a mismatch, a shut-down engine, a timeout.
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void Init();
void Shutdown();
bool IsInitialized();
int Rank();
int Size();
int LocalRank();
int LocalSize();
int CrossRank();
int CrossSize();

class Handle {
 public:
  Handle(std::string what, std::string name, std::vector<at::Tensor> keep, at::ScalarType dtype,
         zc_engine_handle* h);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // True once done; raises EngineError if it failed.
  bool Poll();
  // Waits (the caller lets go of the GIL); raises EngineError if it failed.
  void Wait();
  // allgather, alltoall, reducescatter: the result, copied into a new tensor.
  at::Tensor Output();
  // alltoall: rows received from each rank.
  std::vector<int64_t> ReceivedSplits();
  // join: the last rank to join.
  int JoinResult();
  const std::string& name() const { return name_; }

 private:
  [[noreturn]] void Raise(zc_status st) const;

  std::string what_;
  std::string name_;
  std::vector<at::Tensor> keep_;
  at::ScalarType dtype_;
  zc_engine_handle* h_;
};

// output may be input (in place). op is a zc_op.
std::shared_ptr<Handle> Allreduce(const at::Tensor& input, const at::Tensor& output,
                                  const std::string& name, int op, double prescale,
                                  double postscale);
std::shared_ptr<Handle> Broadcast(const at::Tensor& tensor, const std::string& name, int root);
std::shared_ptr<Handle> Allgather(const at::Tensor& input, const std::string& name);
// splits empty: even.
std::shared_ptr<Handle> Alltoall(const at::Tensor& input, const std::vector<int64_t>& splits,
                                 const std::string& name);
std::shared_ptr<Handle> Reducescatter(const at::Tensor& input, const std::string& name, int op,
                                      double prescale, double postscale);
std::shared_ptr<Handle> Barrier();
std::shared_ptr<Handle> Join();

// zc_engine_get_stats as (name, value) pairs.
std::vector<std::pair<std::string, uint64_t>> Stats();
// "" while the engine runs (or is not made), else the error that shut it down.
std::string EngineErrorString();

}  // namespace hvd
}  // namespace zcomm_torch
