// A zc_comm owned by Python. Every call checks its buffers with the GIL
// held (buffers.h), then releases the GIL for the zc_* call. A shared lock
// keeps the handle valid during a call; finalize takes it exclusively, so a
// communicator is never freed under a call running on another thread.
#pragma once

#include <pybind11/pybind11.h>
#include <zcomm/zcomm.h>

#include <atomic>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "request_handle.h"

namespace zcpy {

namespace py = pybind11;
using Counts = std::vector<size_t>;

class CommHandle : public std::enable_shared_from_this<CommHandle> {
 public:
  explicit CommHandle(zc_comm* comm);
  // A communicator dropped unfinalized is finalized here (collective).
  ~CommHandle();
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  static std::shared_ptr<CommHandle> Init();
  static std::shared_ptr<CommHandle> InitRank(const py::bytes& uid, int nranks, int rank);
  std::shared_ptr<CommHandle> Split(int color, int key);  // nullptr: ZC_SPLIT_NONE
  std::shared_ptr<CommHandle> Dup();
  void Finalize();
  void Abort();
  // zc_comm_dump_trace; path "" for ZC_TRACE_DIR.
  void DumpTrace(const std::string& path);
  // Fault tolerance (comm_elastic.cpp).
  void Revoke();
  bool IsRevoked();
  std::vector<int> FailedRanks();
  // (the agreed flag, the ranks agreed failed: empty when none).
  std::pair<int, std::vector<int>> Agree(int flag);
  std::shared_ptr<CommHandle> Shrink();
  // Elastic membership (comm_elastic.cpp): zc_comm_join_pending,
  // zc_comm_grow, and in a joiner zc_comm_join.
  int JoinPending();
  std::shared_ptr<CommHandle> Grow();
  static std::shared_ptr<CommHandle> Join();
  // (status, message): (ZC_OK, "") while the communicator is healthy.
  std::pair<int, std::string> AsyncError();
  void Deregister(const py::object& buf);
  // For handles built on this communicator (ps_handle.cpp): runs f(comm) as
  // the calls here do (no GIL, shared lock), and counts users that need the
  // communicator unfinalized (finalize refuses while there are any).
  void Call(const char* op, const std::function<zc_status(zc_comm*)>& f);
  void AddUser(int delta) { users_ += delta; }
  // zc_mem_alloc and zc_mem_free for PoolMemory (pool_memory.h): while any
  // such memory is allocated, finalize refuses (arrays still view it).
  void* MemAlloc(size_t bytes);
  void MemFree(void* data) noexcept;  // with or without the GIL

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool finalized() const;

  void Allreduce(const py::object& send, const py::object& recv, size_t count, int dtype, int op);
  void Broadcast(const py::object& buf, size_t count, int dtype, int root);
  void Reduce(const py::object& send, const py::object& recv, size_t count, int dtype, int op,
              int root);
  void Allgather(const py::object& send, const py::object& recv, size_t count, int dtype);
  void ReduceScatter(const py::object& send, const py::object& recv, size_t count, int dtype,
                     int op);
  void Alltoall(const py::object& send, const py::object& recv, size_t count, int dtype);
  void Barrier();
  void Allgatherv(const py::object& send, size_t sendcount, const py::object& recv,
                  const Counts& recvcounts, const Counts& displs, int dtype);
  void Alltoallv(const py::object& send, const Counts& sendcounts, const Counts& sdispls,
                 const py::object& recv, const Counts& recvcounts, const Counts& rdispls,
                 int dtype);
  void Gather(const py::object& send, const py::object& recv, size_t count, int dtype, int root);
  void Scatter(const py::object& send, const py::object& recv, size_t count, int dtype, int root);
  void Send(const py::object& buf, int peer, int tag);
  // Returns the sender (peer may be ZC_ANY_SOURCE).
  int Recv(const py::object& buf, int peer, int tag);

  using Req = std::shared_ptr<RequestHandle>;
  Req Isend(const py::object& buf, int peer, int tag);
  Req Irecv(const py::object& buf, int peer, int tag);
  Req Iallreduce(const py::object& send, const py::object& recv, size_t count, int dtype, int op);
  Req Ibroadcast(const py::object& buf, size_t count, int dtype, int root);
  Req Ireduce(const py::object& send, const py::object& recv, size_t count, int dtype, int op,
              int root);
  Req Iallgather(const py::object& send, const py::object& recv, size_t count, int dtype);
  Req IreduceScatter(const py::object& send, const py::object& recv, size_t count, int dtype,
                     int op);
  Req Ialltoall(const py::object& send, const py::object& recv, size_t count, int dtype);
  Req Ibarrier();
  // Stream-ordered calls on raw pointers (objects with
  // __cuda_array_interface__, zcomm/cuda_arrays.py); `keep` stays alive
  // until the request completes. stream: the CUstream as an integer.
  Req AllreduceOnStream(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, uintptr_t stream,
                        py::object keep);
  Req BroadcastOnStream(uintptr_t buf, size_t count, int dtype, int root, uintptr_t stream, py::object keep);
  Req AllgatherOnStream(uintptr_t send, uintptr_t recv, size_t count, int dtype, uintptr_t stream,
                        py::object keep);

 private:
  // Runs f(comm) without the GIL under the shared lock; raises its failure.
  template <class F>
  void Run(const char* op, F&& f);
  // Run for a call that makes a request; the request keeps `keep` alive.
  template <class F>
  Req Start(const char* op, std::vector<py::object> keep, F&& f);
  void* Buf(const py::object& obj, size_t bytes, bool writable, const char* op,
            const char* name, bool optional = false) const;
  void CheckCounts(const Counts& c, const char* op, const char* name) const;
  // Elements spanned by blocks counts[i] at displs[i] (zcomm.h's rule).
  size_t Extent(const Counts& counts, const Counts& displs, const char* op) const;
  bool IsRoot(int root) const { return root == rank_; }

  mutable std::shared_mutex mu_;
  std::atomic<int> users_{0};
  std::atomic<int> pool_buffers_{0};
  zc_comm* comm_;
  int rank_, size_, local_rank_, local_size_;
};

}  // namespace zcpy
