// The Horovod-style API of zcomm.torch (zcomm/torch/mpi_ops.py) on the engine
// of include/zcomm/zcomm_engine.h: operations on a process set (process_sets.hpp;
// set 0 is every rank) return Handles that wrap zc_engine_handle around torch
// tensors.
//
// The tensors handed to the engine are dense, contiguous CPU tensors (the
// Python layer stages anything else); a Handle keeps them alive until it is
// freed, so the engine never sees a freed buffer. Results the engine owns
// (allgather, alltoall, reducescatter) are copied into new tensors.
//
// Errors: InvalidArgument (ValueError) for a mistake found on this rank
// before anything is queued, EngineError (HorovodInternalError) for
// everything the engine reports, as Horovod raises them.
#pragma once

#include <ATen/ATen.h>
#include <zcomm/zcomm_engine.h>

#include <memory>
#include <string>
#include <vector>

#include "process_sets.hpp"

namespace zcomm_torch {
namespace hvd {

class Handle {
 public:
  Handle(std::string what, std::string name, std::vector<at::Tensor> keep, at::ScalarType dtype,
         int set_size, zc_engine_handle* h);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // True once done; raises EngineError if it failed.
  bool Poll();
  // Waits (the caller lets go of the GIL); raises EngineError if it failed.
  void Wait();
  // allgather, alltoall, reducescatter: the result, copied into a new tensor.
  at::Tensor Output();
  // alltoall: rows received from each rank of the set.
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
  int set_size_;
  zc_engine_handle* h_;
};

// output may be input (in place). op is a zc_op.
std::shared_ptr<Handle> Allreduce(const at::Tensor& input, const at::Tensor& output,
                                  const std::string& name, int op, double prescale,
                                  double postscale, int32_t set);
// root is a global rank (as in Horovod), a member of the set.
std::shared_ptr<Handle> Broadcast(const at::Tensor& tensor, const std::string& name, int root,
                                  int32_t set);
std::shared_ptr<Handle> Allgather(const at::Tensor& input, const std::string& name, int32_t set);
// splits empty: even.
std::shared_ptr<Handle> Alltoall(const at::Tensor& input, const std::vector<int64_t>& splits,
                                 const std::string& name, int32_t set);
std::shared_ptr<Handle> Reducescatter(const at::Tensor& input, const std::string& name, int op,
                                      double prescale, double postscale, int32_t set);
std::shared_ptr<Handle> Barrier(int32_t set);
std::shared_ptr<Handle> Join();

// zc_engine_get_stats of the global set as (name, value) pairs.
std::vector<std::pair<std::string, uint64_t>> Stats();
// "" while the global engine runs (or is not made), else the error that
// shut it down.
std::string EngineErrorString();
// Frees the handles that were dropped while pending and are done now, or
// all of them once every engine is gone (shutdown).
void ReapOrphans(bool all);

}  // namespace hvd
}  // namespace zcomm_torch
