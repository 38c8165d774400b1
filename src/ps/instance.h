// Instance: one parameter-server instance (what a zc_ps holds). Made
// collectively over a communicator's ranks, each a worker, a server or
// both (the paper's co-located setting: the server runs on threads of the
// worker's process). It owns the Shared state, the Server and Worker halves
// present on this rank, and an operation thread that runs nonblocking
// pushes and pulls in call order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "ps/server.h"
#include "ps/worker.h"

namespace zc::ps {

enum class Role { kWorker = 0, kServer = 1, kBoth = 2 };

class Instance {
 public:
  // Gathers `bytes` from every group rank into out (rank order).
  using AllgatherFn = std::function<Status(const void* mine, void* out, size_t bytes)>;
  using DoneFn = std::function<void(const Status&)>;

  static Status Create(Group* group, Role role, const Options& options, uint64_t partition_bytes,
                       PlacementPolicy policy, const AllgatherFn& allgather,
                       std::unique_ptr<Instance>* out);
  ~Instance();

  int num_workers() const { return static_cast<int>(sh_->workers.size()); }
  int num_servers() const { return static_cast<int>(sh_->servers.size()); }
  bool is_worker() const { return worker_ != nullptr; }
  bool is_server() const { return server_ != nullptr; }
  const Options& options() const { return sh_->options; }

  Status Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init);
  // The bytes of a declared key's tensor, what a push reads and a pull writes.
  Status KeyBytes(uint64_t key, size_t* bytes);
  // Order checks happen here, in the caller's thread. done == nullptr:
  // blocking (the call's status); else queued, done(status) when finished.
  Status Push(uint64_t key, const void* buf, DoneFn done);
  Status Pull(uint64_t key, void* buf, DoneFn done);
  // Server-only ranks: until every worker has freed its instance.
  Status Serve();
  // Workers say goodbye; servers serve until every worker did. Then the
  // threads stop (memory is freed by the destructor, after the caller's
  // barrier).
  Status Shutdown();

 private:
  explicit Instance(std::unique_ptr<Shared> sh) : sh_(std::move(sh)) {}
  Status Run(std::function<Status()> op, DoneFn done);
  void OpLoop();

  std::unique_ptr<Shared> sh_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Server> server_;
  std::mutex api_mu_;  // declarations and order checks

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<std::function<void()>> queue_;
  int busy_ = 0;  // queued or running
  bool stopping_ = false;
  std::thread op_thread_;
  std::mutex exec_mu_;  // one transfer at a time (inline or queued)
};

}  // namespace zc::ps
