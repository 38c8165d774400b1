#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <thread>

namespace zcomm_torch {

WorkZcomm::WorkZcomm(int rank, c10d::OpType type, CallId call,
                     std::vector<at::Tensor> outputs, std::chrono::milliseconds deadline,
                     std::function<void(const std::string&)> on_deadline)
    : c10d::Work(rank, type),
      call_(std::move(call)),
      outputs_(std::move(outputs)),
      deadline_(deadline),
      on_deadline_(std::move(on_deadline)) {}

void WorkZcomm::Complete(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(future_mu_);
    error_ = error;
    completed_once_ = true;
    future = future_;  // null: getFuture() completes it when it makes it
  }
  finish(error);  // wakes wait()
  done_.store(true, std::memory_order_release);
  if (future) CompleteFuture(future);
}

void WorkZcomm::CompleteFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future) {
  // Runs the future's callbacks (DDP's hooks) on this thread.
  if (error_)
    future->setError(error_);
  else
    future->markCompleted(c10::IValue(outputs_));
}

void WorkZcomm::SetRequest(zc_request* req, bool run_in_wait) {
  request_ = req;
  run_in_wait_ = run_in_wait;
  request_owner_.store(kUnclaimed, std::memory_order_release);
}

bool WorkZcomm::ReleaseRequest() {
  int expected = kUnclaimed;
  return request_owner_.compare_exchange_strong(expected, kCompletion, std::memory_order_acq_rel);
}

bool WorkZcomm::wait(std::chrono::milliseconds timeout) {
  // A caller's timeout only ends this wait; the group's deadline also aborts
  // the communicator, since an operation that late is stuck for good.
  const bool own = timeout == kNoTimeout;
  const auto limit = own ? deadline_ : timeout;
  int expected = kUnclaimed;
  if (own && run_in_wait_ &&
      request_owner_.compare_exchange_strong(expected, kWaiter, std::memory_order_acq_rel)) {
    // Runs the collective here unless the progress thread has taken it;
    // returns once Complete has run (the outcome is in exception_), and
    // frees the request.
    zc_wait(request_);
  }
  // A small collective completes within microseconds: look for it a little
  // before sleeping, which would cost a futex wake-up (tens of microseconds
  // on a loaded machine) on every call.
  // (A wait that ran its collective finds it done: no clock read at all.)
  if (!done_.load(std::memory_order_acquire)) {
    const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_end) {
      if (try_complete_ && try_complete_(this)) break;
      std::this_thread::yield();
    }
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!completed_ && !cv_.wait_for(lock, limit, [&] { return completed_; })) {
      lock.unlock();
      // "Timed out" between spaces, as gloo says it (torch's tests match it).
      const std::string msg = "zcomm " + call_.str() + ": not completed within " +
                              std::to_string(limit.count()) + " ms: Timed out " +
                              (own ? "(the process group's timeout); communicator aborted"
                                   : "(the caller's timeout)");
      if (own && on_deadline_) on_deadline_(msg);
      TORCH_CHECK(false, msg);
    }
    if (exception_) std::rethrow_exception(exception_);
  }
  return true;
}

std::vector<at::Tensor> WorkZcomm::result() {
  TORCH_CHECK(isCompleted(), "zcomm ", call_, ": result() before the work completed");
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkZcomm::getFuture() {
  // Made on first use: most blocking calls never ask for it, and making and
  // completing one costs a lock, an allocation and a list of the outputs.
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool complete_now = false;
  {
    std::lock_guard<std::mutex> lock(future_mu_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    future = future_;
    complete_now = completed_once_;
  }
  if (complete_now) CompleteFuture(future);
  return future;
}

int WorkZcomm::sourceRank() const {
  if (opType_ != c10d::OpType::RECV && opType_ != c10d::OpType::RECVANYSOURCE)
    return c10d::Work::sourceRank();  // torch's error: not a receive
  return source_.load(std::memory_order_acquire);
}

}  // namespace zcomm_torch
