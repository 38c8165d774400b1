// ProcessGroupZcomm: torch.distributed's ProcessGroup over one zcomm
// communicator. Collectives go on the communicator's own queue of
// nonblocking collectives (zc_comm_enqueue), in call order, the one progress
// path the C nonblocking calls use too: its progress thread runs them while
// the caller goes on (DDP's bucket allreduces overlap backward), and
// completes each Work through zc_request_notify. A Work::wait() that comes
// before the progress thread has started the collective runs it on the
// waiting thread instead (zc_wait), so that a blocking call costs no thread
// hop. send/recv are posted at once with zc_isend/zc_irecv and completed by
// whichever sees them done first: a Work::wait() spinning on its own request,
// or the group's p2p thread, which is also the watchdog
// (zc_comm_get_async_error). Only Work::wait waits on the network.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <zcomm/zcomm.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "registered_memory.hpp"
#include "work.hpp"

namespace zcomm_torch {

class ProcessGroupZcomm : public c10d::ProcessGroup {
 public:
  ProcessGroupZcomm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~ProcessGroupZcomm() override;

  // The creator torch.distributed calls: creator(store, rank, size, timeout).
  static c10::intrusive_ptr<c10d::ProcessGroup> Create(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      const std::chrono::duration<float>& timeout);

  const std::string getBackendName() const override { return "zcomm"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  // outputs[r][i] receives rank r's inputs[i]; one flat allgather per dtype.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // gloo's monitored barrier, over the group's store: rank 0 waits for every
  // other rank (opts.timeout, else the group's) and names the first rank
  // that did not come (or all of them with wait_all_ranks), then releases
  // them, or tells them that it failed. torch 1.13's dist.monitored_barrier
  // refuses every backend but gloo by name: call it on the group object
  // (group.monitored_barrier) or through zcomm.torch.monitored_barrier.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // zcomm.torch.empty: a new CPU tensor in the registered memory of this
  // group's ranks (registered_memory.hpp), which its collectives reach
  // without copies. The tensor may outlive the group.
  at::Tensor EmptyRegistered(at::IntArrayRef sizes, at::ScalarType dtype) {
    return registered_->Empty(sizes, dtype);
  }

 private:
  // Runs on the communicator's progress thread (or a thread in zc_wait);
  // reports a failure by throwing (Check).
  using Body = std::function<void(const CallId& call)>;
  struct Queued;  // one collective on the communicator's queue
  // One send or receive, shared by the p2p thread's list and its Work's
  // wait(): either side may complete it (TryFinishP2p), one at a time.
  struct P2pOp {
    ProcessGroupZcomm* group = nullptr;
    CallId call;
    zc_request* req = nullptr;
    at::Tensor buf;                    // what zcomm reads or writes
    at::Tensor target;                 // a non-contiguous recv's tensor, filled from buf
    std::chrono::steady_clock::time_point deadline;
    std::unique_ptr<int> source;       // a recv's sender, written by zcomm (zc_irecv_source)
    std::atomic<bool> busy{false};     // a side is testing req
    std::atomic<bool> finished{false};  // the Work is complete, req freed
  };
  struct P2p {
    std::shared_ptr<P2pOp> op;
    c10::intrusive_ptr<WorkZcomm> work;
  };
  // Completes op's Work if its request is done and the other side is not
  // testing it; true once op is finished (by either side). Touches the
  // group only while op is unfinished (the group finishes every op before
  // it goes away; a Work may outlive it).
  static bool TryFinishP2p(P2pOp& op, WorkZcomm* work);

  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, const char* name,
                                         std::vector<at::Tensor> outputs, Body body);
  c10::intrusive_ptr<c10d::Work> PostP2p(bool is_send, at::Tensor& t, int peer, int tag);
  c10::intrusive_ptr<c10d::Work> SparseAllreduce(at::Tensor& t, const c10d::AllreduceOptions& opts,
                                                 const CallPrefix& pre);
  // The next call of this group named `name`.
  CallId NextCall(std::string name);
  // Throws std::runtime_error "zcomm <call>: <status>: <zcomm's detail>".
  void Check(zc_status st, const CallId& call) const;
  void CheckRoot(int64_t root, const CallPrefix& prefix) const;
  // First cause wins; aborts the communicator so every pending call ends.
  void Abort(const std::string& why);
  // Records the first cause (under err_mu_).
  void SetBrokenLocked(std::string why);
  // The first cause, or "" while the communicator works. Every call asks:
  // the flag spares it the lock and the copy until something broke.
  std::string Broken() const;
  // zc_comm_enqueue's function and zc_request_notify's callback.
  static zc_status RunQueued(void* arg);
  static void QueuedDone(void* arg, zc_status status);
  // Frees the requests of completed collectives (zc_wait returns at once).
  void FreeDoneRequests();
  void P2pLoop();
  bool PollP2p(std::vector<P2p>& pending);

  zc_comm* comm_ = nullptr;
  std::shared_ptr<RegisteredMemory> registered_;  // shared with registered tensors
  const c10::intrusive_ptr<c10d::Store> store_;  // the group's (monitoredBarrier)
  const std::chrono::milliseconds timeout_;
  // A blocking call's wait() runs its collective itself (WorkZcomm::SetRequest).
  const bool run_in_wait_;
  uint64_t monitored_barriers_ = 0;
  std::atomic<uint64_t> seq_{0};

  std::mutex done_mu_;
  std::vector<zc_request*> done_requests_;  // completed, still to be freed
  std::atomic<bool> has_done_requests_{false};  // done_requests_ may hold some

  // allgather's receive buffer for gathers of up to kGatherScratchMax bytes
  // into plain outputs; only the group's collectives use it, and they run
  // one at a time on the communicator's queue.
  static constexpr size_t kGatherScratchMax = 64 * 1024;
  std::vector<char> gather_scratch_;

  std::mutex p2p_mu_;
  std::condition_variable p2p_cv_;
  std::vector<P2p> incoming_;
  bool p2p_stop_ = false;
  std::thread p2p_thread_;

  mutable std::mutex err_mu_;
  std::string broken_;
  std::atomic<bool> has_broken_{false};  // broken_ is set
};

}  // namespace zcomm_torch
