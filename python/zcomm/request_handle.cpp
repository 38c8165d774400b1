#include "request_handle.h"

#include "failure.h"
#include "gil.h"

namespace zcpy {

RequestHandle::RequestHandle(zc_request* req, std::vector<py::object> keep)
    : req_(req), keep_(std::move(keep)) {}

RequestHandle::~RequestHandle() {
  if (req_ == nullptr) return;
  // Called with the GIL held (pybind11 frees holders under it): let other
  // Python threads run while the request finishes.
  WithoutGil([this] {
    std::lock_guard<std::mutex> lock(mu_);
    Complete();
  });
}

void RequestHandle::Complete() {
  if (req_ == nullptr) return;
  status_ = zc_wait(req_);
  req_ = nullptr;
  if (status_ != ZC_OK) {
    const char* text = zc_last_error(nullptr);
    error_ = text && *text ? text : zc_status_string(status_);
  }
}

void RequestHandle::Finish() {
  keep_.clear();  // with the GIL: these are Python objects
  if (status_ != ZC_OK) throw Failure(status_, error_);
}

bool RequestHandle::Test() {
  bool done;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    if (req_ != nullptr) {
      int flag = 0;
      zc_status st = zc_test(req_, &flag);
      // A failed test of a request that is not done yet is an error of the
      // query itself (the request stays ours to wait for).
      if (st != ZC_OK && !flag) Check(st, nullptr);
      if (flag) Complete();
    }
    done = req_ == nullptr;
  }
  if (done) Finish();
  return done;
}

void RequestHandle::Wait() {
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    Complete();
  }
  Finish();
}

void RequestHandle::Settle() {
  std::lock_guard<std::mutex> lock(mu_);
  Complete();
}

bool RequestHandle::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return req_ == nullptr;
}

int RequestHandle::source() const {
  std::lock_guard<std::mutex> lock(mu_);
  return req_ == nullptr && source_ ? *source_ : -1;
}

}  // namespace zcpy
