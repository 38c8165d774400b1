// Registered memory (zc_mem_alloc) owned by Python: a buffer that numpy
// arrays view (Communicator.empty/zeros, communicator.py). Collectives on it
// take the zero-copy paths (on shared memory, the allreduce's zero-copy
// round: owners reduce straight from every rank's input into every rank's
// output, docs/algorithms.md). It keeps its communicator alive and marks it
// in use, so the communicator cannot be finalized while an array views the
// memory; the last reference frees it (zc_mem_free).
#pragma once

#include <pybind11/pybind11.h>
#include <zcomm/zcomm.h>

#include <cstddef>
#include <memory>

#include "comm_handle.h"

namespace zcpy {

namespace py = pybind11;

class PoolMemory {
 public:
  // zc_mem_alloc of bytes (at least 1) on comm.
  static std::shared_ptr<PoolMemory> Allocate(const std::shared_ptr<CommHandle>& comm, size_t bytes);
  ~PoolMemory();
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  // One writable byte per element, for the buffer protocol.
  py::buffer_info Info() const;

 private:
  PoolMemory(std::shared_ptr<CommHandle> comm, void* data, size_t bytes)
      : comm_(std::move(comm)), data_(data), bytes_(bytes) {}

  std::shared_ptr<CommHandle> comm_;
  void* data_;
  size_t bytes_;
};

}  // namespace zcpy
