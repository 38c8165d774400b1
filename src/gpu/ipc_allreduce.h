// IpcAllreduce: allreduce of device buffers between processes on one host,
// GPU to GPU through CUDA IPC (Awan et al. §V.A, direct reduce-scatter then
// allgather, reductions on the GPU). No host copy of the data:
//
//  1. every rank exports its sendbuf and recvbuf (IpcCache: handles cached
//     and validated by buffer id) and the descriptors are allgathered over
//     the host collectives, with each rank's export status;
//  2. each rank maps its peers' buffers (opened once per allocation) and,
//     after all ranks agree that every step so far succeeded (an allgather
//     of status codes, which is also the barrier), reduces its shard
//     [lo, hi) reading every peer's sendbuf directly:
//     recv = op(send_r, send_r+1), recv = op(recv, ...) (starting with its
//     own, so in place works), then divides for AVG;
//  3. after a second status agreement, each rank copies the other shards
//     from their owners' recvbufs into its own; a last barrier keeps peers
//     from reading a recvbuf the caller has got back.
// Synchronisation is host-side only: flags stay in host memory (§3.5).
//
// The steps shared with the other IPC collectives (export, exchange, map,
// agree) are ipc_exchange.h's.
//
// Every rank must take this path together: the communicator's DevicePath
// chooses it when all ranks are on this host and this rank's buffers are
// device memory, so all ranks must pass device buffers. The first exchange
// travels as the caller's allreduce marked "device memory over CUDA IPC"
// (HostGroup::exchange, Collectives::IpcExchange), on the channel a host allreduce of the same call
// uses: a rank that passed host buffers meets it there and both fail with
// ZC_ERR_MISMATCH. A failure on one rank before that exchange (no driver,
// no context, an export) is carried in it, so no peer waits for it.
// ZC_GPU_IPC=0 forces host staging instead, ZC_GPU_IPC=1 this path at every
// size.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>

#include "common/status.h"
#include "gpu/ipc_exchange.h"

namespace zc::gpu {

class IpcAllreduce {
 public:
  // drv nullptr: the process driver. ipc: the communicator's IPC cache
  // (one per process and peer: a handle may be opened once). reducer:
  // the GPU reductions (KernelReducer(), or a test's fake kernels).
  IpcAllreduce(const DriverTable* drv, IpcCache* ipc, const DeviceReducer* reducer);

  Status Run(const HostGroup& g, const void* send, void* recv, size_t count, zc_dtype dtype,
             zc_op op, int device);

 private:
  const DriverTable* drv_;
  IpcCache* ipc_;
  const DeviceReducer* reducer_;
};

}  // namespace zc::gpu
