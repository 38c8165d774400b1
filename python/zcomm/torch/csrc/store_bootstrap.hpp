// A zcomm communicator from torch's c10d::Store: rank 0 makes a unique id and
// sets it in the store; the others wait for it. The store is the PrefixStore
// torch gives each group, so every group gets a communicator of its own.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <zcomm/zcomm.h>

namespace zcomm_torch {

// Throws c10::Error naming the rank and zcomm's cause on failure.
zc_comm* CommFromStore(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

}  // namespace zcomm_torch
