// Instance: one parameter-server instance (what a zc_ps holds). Made
// collectively over a communicator's ranks, each a worker, a server or
// both (the paper's co-located setting: the server runs on threads of the
// worker's process). It owns the Shared state, the Server and Worker halves
// present on this rank, and an operation thread that drives the worker's
// engine (Worker::Pass) while operations are in flight; a blocking call
// drives it itself until its operation is done.
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
  // A queued push's watch says when its caller waits for it (wait_watch.h).
  Status Push(uint64_t key, const void* buf, DoneFn done, std::shared_ptr<WaitWatch> watch = nullptr);
  Status Pull(uint64_t key, void* buf, DoneFn done);
  // Server-only ranks: until every worker has freed its instance.
  Status Serve();
  // Workers say goodbye; servers serve until every worker did. Then the
  // threads stop (memory is freed by the destructor, after the caller's
  // barrier).
  Status Shutdown();
  // Whether Shutdown ended with a barrier of its own (LeaveBarrier:
  // asynchronous mode, where a worker's loss is tolerated); else the
  // caller's barrier over the communicator follows.
  bool left_together() const { return sh_->options.async; }
  // Group ranks of the workers this rank knows lost, in increasing order:
  // its server's dropped workers and the workers it finds lost itself.
  std::vector<int> LostWorkers() const;

 private:
  explicit Instance(std::unique_ptr<Shared> sh) : sh_(std::move(sh)) {}
  // Drives the engine until *done (or, with done == nullptr, until no
  // operation is in flight).
  void Drive(const std::atomic<int>* done);
  // Queues a push or pull (api_mu_ held: call order); blocking when done
  // is empty.
  Status Start(bool push, Worker::Key* k, void* buf, uint64_t round, DoneFn done,
               std::shared_ptr<WaitWatch> watch, std::lock_guard<std::mutex>* api_lock);
  // Runs fn with no operation in flight and the engine held.
  Status Quiet(const std::function<Status()>& fn);
  void OpLoop();

  std::unique_ptr<Shared> sh_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Server> server_;
  std::mutex api_mu_;  // declarations and order checks

  std::mutex engine_mu_;  // one thread runs Worker::Pass at a time
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  bool stopping_ = false;
  std::thread op_thread_;
};

}  // namespace zc::ps
