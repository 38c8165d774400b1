#include "registered_memory.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace zcomm_torch {

std::shared_ptr<RegisteredMemory> RegisteredMemory::Split(zc_comm* group_comm, int rank) {
  zc_comm* own = nullptr;
  // Color: this rank alone.
  zc_status st = zc_comm_split(group_comm, rank, 0, &own);
  if (st != ZC_OK)
    throw std::runtime_error("zcomm: rank " + std::to_string(rank) +
                             ": the communicator for registered tensors: " +
                             zc_status_string(st) + ": " + zc_last_error(group_comm));
  return std::shared_ptr<RegisteredMemory>(new RegisteredMemory(own, rank));
}

RegisteredMemory::~RegisteredMemory() {
  if (zc_finalize(comm_) != ZC_OK)
    std::fprintf(stderr, "zcomm: rank %d: finalizing the communicator of registered tensors: %s\n",
                 rank_, zc_last_error(nullptr));
}

at::Tensor RegisteredMemory::Empty(at::IntArrayRef sizes, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  int64_t numel = 1;
  for (int64_t n : sizes) {
    if (n < 0)
      throw std::runtime_error("zcomm: rank " + std::to_string(rank_) +
                               ": empty: negative dimension " + std::to_string(n));
    numel *= n;
  }
  const size_t bytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  if (bytes == 0) return at::empty(sizes, options);
  void* data = nullptr;
  zc_status st = zc_mem_alloc(comm_, bytes, &data);
  if (st != ZC_OK)
    throw std::runtime_error("zcomm: rank " + std::to_string(rank_) + ": empty: " +
                             zc_status_string(st) + ": " + zc_last_error(comm_));
  // The deleter keeps this object, and so the pool, until the storage goes.
  auto self = shared_from_this();
  return at::from_blob(
      data, sizes,
      [self](void* p) {
        if (zc_mem_free(self->comm_, p) != ZC_OK)
          std::fprintf(stderr, "zcomm: rank %d: freeing a registered tensor: %s\n", self->rank_,
                       zc_last_error(self->comm_));
      },
      options);
}

}  // namespace zcomm_torch
