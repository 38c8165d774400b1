// A zc_ps (the parameter server, docs/ps.md) owned by Python. Calls are
// serialized by a mutex held without the GIL; buffers are checked against
// the key's declared size (buffers.h) before any pointer reaches the C ABI.
// The handle keeps its communicator alive and marks it in use, so the
// communicator cannot be finalized under it; requests keep the handle (and
// their arrays) alive, and free() completes the ones still pending first.
#pragma once

#include <pybind11/pybind11.h>
#include <zcomm/zcomm.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "comm_handle.h"
#include "request_handle.h"

namespace zcpy {

namespace py = pybind11;

class PsHandle : public std::enable_shared_from_this<PsHandle> {
 public:
  PsHandle(std::shared_ptr<CommHandle> comm, zc_ps* ps, int role);
  // A parameter server dropped unfreed is freed here (collective).
  ~PsHandle();
  PsHandle(const PsHandle&) = delete;
  PsHandle& operator=(const PsHandle&) = delete;

  // zc_ps_create: collective over comm's ranks.
  static std::shared_ptr<PsHandle> Create(const std::shared_ptr<CommHandle>& comm, int role,
                                          int async, double sgd_lr);

  int num_workers() const { return workers_; }
  int num_servers() const { return servers_; }
  int rank() const { return rank_; }
  int role() const { return role_; }
  bool freed() const { return freed_; }  // never waits for a call in flight

  void Declare(uint64_t key, size_t count, int dtype, const py::object& init);
  void Push(uint64_t key, const py::object& buf);
  void Pull(uint64_t key, const py::object& buf);
  using Req = std::shared_ptr<RequestHandle>;
  Req Ipush(uint64_t key, const py::object& buf);
  Req Ipull(uint64_t key, const py::object& buf);
  void Serve();
  // zc_ps_free (collective); pending requests are completed first. Twice is harmless.
  void Free();

 private:
  // The bytes of a declared key; refuses an undeclared key or a freed ps.
  size_t KeyBytes(uint64_t key, const char* op);
  void* Buf(const py::object& obj, size_t bytes, bool writable, const char* op) const;
  void ReleaseComm();  // once: the communicator may be finalized
  template <class F>
  void Run(const char* op, F&& f);  // f(zc_ps*) without the GIL, under mu_
  template <class F>
  Req Start(const char* op, const py::object& buf, F&& f);

  mutable std::mutex mu_;
  std::shared_ptr<CommHandle> comm_;
  zc_ps* ps_;
  int role_, rank_, workers_, servers_;
  bool holds_comm_ = true;
  std::atomic<bool> freed_{false};
  std::unordered_map<uint64_t, size_t> key_bytes_;  // declared keys (with the GIL)
  std::vector<std::weak_ptr<RequestHandle>> requests_;  // with the GIL
};

}  // namespace zcpy
