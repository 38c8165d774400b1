// The memory zcomm.torch.empty's tensors live in: zc_mem_alloc on a
// communicator of this rank alone, split from a process group's when the
// group is made. Communicators made by zc_comm_split share their parent's
// registered pool, so the group's collectives find these tensors in it and
// take the zero-copy paths (on shared memory, the allreduce's zero-copy
// round). Every tensor holds this object: the group's own communicator is
// finalized when the group goes (its barrier with the peers), this one
// when the last tensor goes, and the pool with it. A communicator of one
// rank finalizes without a barrier, so a tensor may go at any time, on any
// thread.
#pragma once

#include <ATen/ATen.h>
#include <zcomm/zcomm.h>

#include <memory>

namespace zcomm_torch {

class RegisteredMemory : public std::enable_shared_from_this<RegisteredMemory> {
 public:
  // Collective over group_comm's ranks (zc_comm_split); throws on failure.
  static std::shared_ptr<RegisteredMemory> Split(zc_comm* group_comm, int rank);
  ~RegisteredMemory();
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;

  // A new contiguous CPU tensor of sizes and dtype, uninitialized; an empty
  // one is an ordinary tensor. Throws std::runtime_error naming the rank.
  at::Tensor Empty(at::IntArrayRef sizes, at::ScalarType dtype);

 private:
  RegisteredMemory(zc_comm* comm, int rank) : comm_(comm), rank_(rank) {}
  zc_comm* comm_;
  int rank_;
};

}  // namespace zcomm_torch
