// CollectiveQueue: a communicator's one progress path for collectives that
// complete later (zc_i*, and through them every framework binding). Tasks
// are internal calls returning Status; they run one at a time, in
// submission order.
//
// Two kinds of thread run them:
//  - the queue's own worker, so that work submitted and not waited for
//    progresses in the background (DDP's bucket allreduces overlap the
//    rest of backward);
//  - a caller that waits: while its task is not done and the task at the
//    head of the queue has not started, the waiter takes that task and runs
//    it itself. A wait right after a submission (every blocking framework
//    call) so runs the collective on the caller's thread, with no hop to
//    the worker and back.
// The worker leaves a task that has just been submitted alone for a grace
// period (kGrace), so that a caller about to wait gets it: were the worker
// to take it, the caller would wait for another thread, and on a host with
// more threads than cores that thread may not even be running. A task
// submitted behind others gets no grace: it starts as soon as they end.
// Only while waiters come for new tasks: once the worker had to take one
// after its grace period (work nobody waits for with Wait, as DDP's
// buckets, whose futures the framework waits on), new tasks start at once
// until a waiter takes one again.
// A submission does not wake a worker that sleeps until a grace period
// ends (it looks at the queue then). While callers keep submitting and
// taking their own tasks, the worker finding the queue empty sleeps one
// more grace period instead of until woken, so a submit-and-wait loop
// costs one wake-up of the worker per grace period, not two for each
// task the worker looks at.
// A waiter does not sleep at once: it spins briefly (a futex wake-up costs
// tens of microseconds on a loaded machine) before it blocks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/status.h"

namespace zc::api {

class CollectiveQueue {
 public:
  // One submitted call. Done once `done` is set; `status` is final then.
  struct Task {
    std::function<Status()> run;
    // Submitted to an idle queue: the worker leaves it alone until `due`,
    // kGrace after it first saw it (set then, off the caller's path: a
    // clock read costs tens of nanoseconds in a VM).
    bool grace = false;
    Clock::time_point due;
    std::atomic<bool> done{false};
    Status status;
    // Called once, by the thread that completes the task, once status is
    // final and before done is set (zc_request_notify): a waiter returns
    // only after it has returned.
    std::function<void(const Status&)> on_done;
    bool finished = false;    // status is final (notify_mu)
    bool notify_set = false;  // Notify was called (once per task)
    std::mutex notify_mu;  // orders on_done's registration against completion
  };

  CollectiveQueue();
  ~CollectiveQueue();  // Stop()
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  std::shared_ptr<Task> Submit(std::function<Status()> run);
  // Waits until task is done (running queued tasks up to it on this
  // thread); its status.
  Status Wait(Task* task);
  // Sets fn to be called at completion, or calls it now if done; false if
  // a function was set before.
  bool Notify(Task* task, std::function<void(const Status&)> fn);
  // Tasks submitted and not done.
  int pending() const { return pending_.load(std::memory_order_acquire); }
  // Submissions that had to wake the worker: in a loop of submissions each
  // waited for, only the first after an idle grace period does.
  uint64_t submit_wakes() const { return submit_wakes_.load(std::memory_order_relaxed); }
  // The queue whose task the calling thread is running (null if none): a
  // task may call its communicator's blocking collectives.
  static const CollectiveQueue* Running();
  // Runs what is queued, then stops the worker (zc_finalize).
  void Stop();

 private:
  void WorkerLoop();
  // Takes the head task if none runs; null otherwise. mu_ held.
  std::shared_ptr<Task> TakeHeadLocked();
  // The worker's next task, once it is due (the grace period); null once
  // stopped with nothing queued.
  std::shared_ptr<Task> NextForWorker();
  // The worker sleeps until woken, or until *until (then a submission need
  // not wake it: worker_timed_). mu_ held (by lock).
  void WorkerSleep(std::unique_lock<std::mutex>& lock, const Clock::time_point* until);
  void RunAndComplete(const std::shared_ptr<Task>& t);
  // Sets t done and wakes its waiters; release_queue: t's thread still
  // holds the queue (running_), which it gives up here.
  void MarkDone(Task* t, bool release_queue);
  // The running task's thread gives up the queue: the head may start.
  void ReleaseQueue();
  // Spins a little while pred() is false; true if it became true.
  template <typename Pred>
  static bool SpinFor(Pred pred);

  std::mutex mu_;
  std::condition_variable cv_;         // waiters: a task done, the running one ended, stop
  std::condition_variable worker_cv_;  // the worker: a task queued, the running one ended, stop
  // The worker sleeps until a grace period ends and looks at the queue
  // then: a submission need not wake it (a blocking framework call, whose
  // waiter runs the task, then costs no wake-up at all).
  bool worker_timed_ = false;
  // A task was submitted since the worker last found the queue empty: it
  // looks again after a grace period instead of sleeping until woken.
  bool submitted_since_look_ = false;
  // A submission woke the worker, which has not run since.
  bool worker_woken_ = false;
  // Whether a waiter took the last task it waited for before the worker
  // did: new tasks get a grace period only while waiters come for them.
  bool waiters_take_new_ = true;
  std::deque<std::shared_ptr<Task>> queue_;
  bool running_ = false;  // a task is running (worker or a waiter)
  bool stop_ = false;
  std::atomic<int> pending_{0};
  std::atomic<int> queued_{0};  // queue_.size(), read without the lock by a spinning waiter
  std::atomic<uint64_t> submit_wakes_{0};
  std::thread worker_;
};

}  // namespace zc::api
