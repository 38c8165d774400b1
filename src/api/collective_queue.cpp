#include "api/collective_queue.h"

#include <chrono>

#include "common/deadline.h"

namespace zc::api {
namespace {
inline void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiter polls before it blocks: longer than a small collective
// takes (a few microseconds), far shorter than a scheduler's time slice, so
// a spinner never keeps a peer rank that shares its core from running for
// long.
constexpr auto kSpin = std::chrono::microseconds(50);
// How long the worker leaves a new task to a caller about to wait for it:
// longer than a framework takes from its submission to its wait (a few
// microseconds), short against what overlapping work gains (a gradient
// bucket's allreduce takes milliseconds).
constexpr auto kGrace = std::chrono::microseconds(100);
}  // namespace

template <typename Pred>
bool CollectiveQueue::SpinFor(Pred pred) {
  const auto until = Clock::now() + kSpin;
  int n = 0;
  while (!pred()) {
    if ((++n & 63) == 0 && Clock::now() >= until) return false;
    Relax();
  }
  return true;
}

CollectiveQueue::CollectiveQueue() : worker_([this] { WorkerLoop(); }) {}

CollectiveQueue::~CollectiveQueue() { Stop(); }

std::shared_ptr<CollectiveQueue::Task> CollectiveQueue::Submit(std::function<Status()> run) {
  auto t = std::make_shared<Task>();
  t->run = std::move(run);
  pending_.fetch_add(1, std::memory_order_acq_rel);
  bool wake_worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Else due at once: behind others, or while nobody waits for what the
    // queue runs (the worker ran the last new task: DDP's buckets, whose
    // futures nobody waits on with zc_wait, must not sit out a grace period).
    t->grace = !running_ && queue_.empty() && waiters_take_new_;
    queue_.push_back(t);
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    submitted_since_look_ = true;
    // A worker already woken looks at the queue once it runs: a second
    // wake-up would only cost a system call (under load the woken worker
    // may wait for a core for milliseconds, while calls keep coming).
    wake_worker = !worker_timed_ && !worker_woken_;
    worker_woken_ = worker_woken_ || wake_worker;
  }
  // No waiter needs to hear of it: a waiter whose task is queued does not
  // sleep while the queue can start (cv_'s predicate in Wait).
  if (wake_worker) {
    submit_wakes_.fetch_add(1, std::memory_order_relaxed);
    worker_cv_.notify_one();
  }
  return t;
}

std::shared_ptr<CollectiveQueue::Task> CollectiveQueue::TakeHeadLocked() {
  if (running_ || queue_.empty()) return nullptr;
  auto t = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
  running_ = true;
  return t;
}

namespace {
thread_local const CollectiveQueue* t_running = nullptr;
}  // namespace

const CollectiveQueue* CollectiveQueue::Running() { return t_running; }

void CollectiveQueue::RunAndComplete(const std::shared_ptr<Task>& t) {
  const CollectiveQueue* outer = t_running;  // a task waiting on another queue's task
  t_running = this;
  Status st = t->run();
  t_running = outer;
  t->run = nullptr;  // what it captured goes now
  std::function<void(const Status&)> notify;
  {
    std::lock_guard<std::mutex> nlock(t->notify_mu);
    t->status = st;
    t->finished = true;  // a Notify from now on calls its function at once
    notify = std::move(t->on_done);
  }
  if (!notify) {
    MarkDone(t.get(), /*release_queue=*/true);
    return;
  }
  // The next task may start while fn runs; this one is done (for zc_test
  // and zc_wait) only once fn has returned, so that a waiter never frees
  // what fn uses while fn still runs.
  ReleaseQueue();
  notify(st);
  MarkDone(t.get(), /*release_queue=*/false);
}

void CollectiveQueue::ReleaseQueue() {
  bool wake_worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    wake_worker = !queue_.empty();  // the head may start now
  }
  cv_.notify_all();
  if (wake_worker) worker_cv_.notify_one();
}

void CollectiveQueue::MarkDone(Task* t, bool release_queue) {
  // Not pending any more before anyone can see it done.
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  t->done.store(true, std::memory_order_release);
  if (release_queue) {
    ReleaseQueue();
    return;
  }
  {
    // A waiter checks done under mu_: past this point it either saw done
    // or sleeps and hears the notification.
    std::lock_guard<std::mutex> lock(mu_);
  }
  cv_.notify_all();
}

std::shared_ptr<CollectiveQueue::Task> CollectiveQueue::NextForWorker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stop_) return nullptr;
      // While callers submit and take their own tasks, look again after a
      // grace period rather than be woken by the next submission: one
      // wake-up per period instead of two, however many calls it holds.
      // Once a period passes with no submission, sleep until woken.
      const bool look_again = submitted_since_look_ && waiters_take_new_;
      submitted_since_look_ = false;
      if (look_again) {
        const Clock::time_point until = Clock::now() + kGrace;
        WorkerSleep(lock, &until);
      } else {
        WorkerSleep(lock, nullptr);
      }
      continue;
    }
    if (running_) {  // the head starts once the running task ends
      WorkerSleep(lock, nullptr);
      continue;
    }
    Task& head = *queue_.front();
    if (stop_ || !head.grace) return TakeHeadLocked();
    const Clock::time_point now = Clock::now();
    if (head.due == Clock::time_point()) head.due = now + kGrace;  // first seen now
    if (now >= head.due) {
      waiters_take_new_ = false;  // nobody came for it
      return TakeHeadLocked();
    }
    // A waiter may take it meanwhile; whatever is queued then waits for
    // this wake-up (at most kGrace) unless the queue is released first.
    // wait_until reads its deadline again after waking, when a waiter may
    // have taken, run and freed head: wait on a copy.
    const Clock::time_point due = head.due;
    WorkerSleep(lock, &due);
  }
}

void CollectiveQueue::WorkerSleep(std::unique_lock<std::mutex>& lock,
                                  const Clock::time_point* until) {
  // It has looked at the queue (under mu_) since any earlier submission:
  // from now on a submission must wake it again, or its task could sit in
  // the queue while the worker sleeps.
  worker_woken_ = false;
  worker_timed_ = until != nullptr;
  if (until)
    worker_cv_.wait_until(lock, *until);
  else
    worker_cv_.wait(lock);
  worker_timed_ = false;
}

void CollectiveQueue::WorkerLoop() {
  while (std::shared_ptr<Task> t = NextForWorker()) RunAndComplete(t);
}

Status CollectiveQueue::Wait(Task* task) {
  if (!task->done.load(std::memory_order_acquire))
    SpinFor([&] { return task->done.load(std::memory_order_acquire) || queued_.load(std::memory_order_acquire) > 0; });
  while (!task->done.load(std::memory_order_acquire)) {
    std::shared_ptr<Task> t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (task->done.load(std::memory_order_acquire)) break;
      t = TakeHeadLocked();
      if (!t) {
        // Another thread runs the task before ours (or ours): wait for it.
        cv_.wait(lock, [&] { return task->done.load(std::memory_order_acquire) || (!running_ && !queue_.empty()); });
        continue;
      }
      waiters_take_new_ = true;
    }
    RunAndComplete(t);
  }
  // Final before done was set (release), which this thread has seen (acquire).
  return task->status;
}

bool CollectiveQueue::Notify(Task* task, std::function<void(const Status&)> fn) {
  Status st;
  {
    std::lock_guard<std::mutex> nlock(task->notify_mu);
    if (task->notify_set) return false;
    task->notify_set = true;
    if (!task->finished) {
      task->on_done = std::move(fn);
      return true;
    }
    st = task->status;
  }
  fn(st);
  return true;
}

void CollectiveQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace zc::api
