// A zc_request owned by Python: it keeps the arrays (and the communicator)
// the operation uses alive until the operation is complete, since zcomm may
// read or write them until then, and it completes the request exactly once
// (zc_wait frees it) even when several threads test or wait.
#pragma once

#include <pybind11/pybind11.h>
#include <zcomm/zcomm.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zcpy {

namespace py = pybind11;

class RequestHandle {
 public:
  RequestHandle(zc_request* req, std::vector<py::object> keep);
  // An unfinished request is waited for: its arrays may not go away before.
  ~RequestHandle();
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;

  // True once complete; raises the operation's error when it failed.
  bool Test();
  // Blocks until complete (the operation's own deadlines bound it); raises
  // the operation's error when it failed.
  void Wait();
  bool done() const;
  // A receive's sender once complete (zc_irecv_source writes it); -1 before,
  // and for requests that are not receives.
  int source() const;
  void set_source(std::shared_ptr<int> source) { source_ = std::move(source); }
  // Blocks until complete without raising (call it without the GIL); the
  // outcome stays recorded for Test/Wait.
  void Settle();

 private:
  // With mu_ held: frees req_ (zc_wait) and records how it ended.
  void Complete();
  // Raises the recorded error, if any, and lets the arrays go.
  void Finish();

  mutable std::mutex mu_;
  zc_request* req_;
  zc_status status_ = ZC_OK;
  std::string error_;
  std::vector<py::object> keep_;
  std::shared_ptr<int> source_;  // written by zcomm when the request completes
};

}  // namespace zcpy
