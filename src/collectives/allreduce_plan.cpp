#include "collectives/allreduce_plan.h"

#include "collectives/collectives.h"

namespace zc {

AllreducePlan::~AllreducePlan() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !pending_ && !running_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const char* AllreducePlan::algorithm() const { return coll::AlgoName(algo_); }

Status AllreducePlan::Start(const void* send, void* recv) {
  if (!send || !recv) return Error(ZC_ERR_INVALID_ARG, "allreduce plan start with a NULL buffer");
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ || running_) return Error(ZC_ERR_INVALID_ARG, "allreduce plan started twice without a wait");
  send_ = send;
  recv_ = recv;
  pending_ = true;
  result_ = Status::Ok();
  cv_.notify_all();
  return Status::Ok();
}

Status AllreducePlan::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !pending_ && !running_; });
  return result_;
}

void AllreducePlan::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || pending_; });
    if (stop_ && !pending_) return;
    pending_ = false;
    running_ = true;
    const void* send = send_;
    void* recv = recv_;
    lock.unlock();
    Status st = coll_->AllreduceWith(algo_, send, recv, count_, dtype_, op_);
    lock.lock();
    result_ = st;
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace zc
