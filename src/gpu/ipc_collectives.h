// IpcCollectives: broadcast, allgather, reduce-scatter and alltoall of
// device buffers between processes on one host, GPU to GPU through CUDA IPC
// (the allreduce is ipc_allreduce.h). Each rank reads its peers' device
// buffers directly: no host copy of the data, no transport.
//
// Every call: make the buffers' device context current and wait for the
// work already queued on it (the caller's writes of the inputs); export
// the buffer peers read, exchange and map (ipc_exchange.h); copy (or, for
// reduce-scatter, reduce with the GPU kernels) what this rank needs from
// the peers' mappings into its own output on the NULL stream and wait for
// it; agree with every rank that all steps succeeded, which is also the
// barrier that keeps a peer from reading a buffer its owner got back.
//
//  broadcast       the root exports buf; the others copy it.
//  allgather       each rank exports sendbuf; copies every peer's into its
//                  block of recvbuf.
//  reduce-scatter  each rank exports sendbuf; reduces block `rank` of every
//                  rank's sendbuf into recvbuf (starting with its own, so
//                  recvbuf may be its own block of sendbuf).
//  alltoall        each rank exports sendbuf; copies block `rank` of every
//                  rank's sendbuf into its block of recvbuf.
// In place: when recvbuf overlaps the part of sendbuf that peers read
// (alltoall with sendbuf == recvbuf, any other overlap but allgather's
// sendbuf = own block of recvbuf and reduce-scatter's recvbuf = own block
// of sendbuf), sendbuf is first copied into a device scratch buffer that
// this object owns (cuMemAlloc, grown in powers of two from 1 MiB, kept
// until the communicator is finalized), and peers read that.
//
// All ranks must take this path together (the communicator's DevicePath
// decides from the call's size and the rank's own buffers; a rank that
// passed host buffers meets the first exchange on its host collective's
// channel and both fail with ZC_ERR_MISMATCH). A CUDA failure on one rank
// fails the call on every rank, without a timeout.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>

#include "common/status.h"
#include "gpu/ipc_exchange.h"

namespace zc::gpu {

class IpcCollectives {
 public:
  // As IpcAllreduce: drv nullptr = the process driver; ipc the
  // communicator's cache; reducer the GPU reductions.
  IpcCollectives(const DriverTable* drv, IpcCache* ipc, const DeviceReducer* reducer);
  ~IpcCollectives();  // frees the scratch buffer
  IpcCollectives(const IpcCollectives&) = delete;
  IpcCollectives& operator=(const IpcCollectives&) = delete;

  Status Broadcast(const HostGroup& g, void* buf, size_t bytes, int root, int device);
  // block: sendcount x element size.
  Status Allgather(const HostGroup& g, const void* send, void* recv, size_t block, int device);
  Status ReduceScatter(const HostGroup& g, const void* send, void* recv, size_t recvcount,
                       zc_dtype dtype, zc_op op, int device);
  // block: count x element size (to and from each rank).
  Status Alltoall(const HostGroup& g, const void* send, void* recv, size_t block, int device);

  // Bytes of the scratch buffer (0: none made yet). For tests.
  size_t scratch_bytes() const { return scratch_bytes_; }

 private:
  // PrepareDevice, then (when `snapshot`) send copied into the scratch
  // buffer, *src the buffer peers are to read (send or the scratch).
  Status Begin(int device, const char* what, const void* send, size_t bytes, bool snapshot,
               const void** src);
  // dst <- src, n bytes, on the NULL stream (asynchronous).
  Status Copy(void* dst, const void* src, size_t n, const char* what);
  // Waits for the copies and reductions, then agrees with every rank.
  Status Finish(const HostGroup& g, Status st, const char* what);

  const DriverTable* fixed_drv_;
  const DriverTable* drv_ = nullptr;  // set by Begin
  IpcCache* ipc_;
  const DeviceReducer* reducer_;
  CuDevicePtr scratch_ = 0;
  size_t scratch_bytes_ = 0;
};

}  // namespace zc::gpu
