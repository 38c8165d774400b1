#include "pool_memory.h"

#include <cstdint>

#include "failure.h"

namespace zcpy {

std::shared_ptr<PoolMemory> PoolMemory::Allocate(const std::shared_ptr<CommHandle>& comm,
                                                 size_t bytes) {
  if (bytes == 0) BadArg(Format("rank %d: mem_alloc: 0 bytes", comm->rank()));
  void* data = comm->MemAlloc(bytes);
  return std::shared_ptr<PoolMemory>(new PoolMemory(comm, data, bytes));
}

PoolMemory::~PoolMemory() { comm_->MemFree(data_); }

py::buffer_info PoolMemory::Info() const {
  return py::buffer_info(data_, 1, py::format_descriptor<uint8_t>::format(), 1,
                         {static_cast<py::ssize_t>(bytes_)}, {1}, /*readonly=*/false);
}

}  // namespace zcpy
