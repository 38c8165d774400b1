#include "ps_handle.h"

#include "buffers.h"
#include "failure.h"
#include "gil.h"

namespace zcpy {

PsHandle::PsHandle(std::shared_ptr<CommHandle> comm, zc_ps* ps, int role)
    : comm_(std::move(comm)),
      ps_(ps),
      role_(role),
      rank_(comm_->rank()),
      workers_(zc_ps_num_workers(ps)),
      servers_(zc_ps_num_servers(ps)) {
  comm_->AddUser(1);
}

PsHandle::~PsHandle() {
  // No request is pending here: each one keeps this handle alive.
  if (ps_ != nullptr) {
    auto finish = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      zc_ps_free(ps_);  // collective; its waits have ZC_TIMEOUT deadlines
      ps_ = nullptr;
      freed_ = true;
    };
    WithoutGil(finish);
  }
  ReleaseComm();
}

void PsHandle::ReleaseComm() {
  if (holds_comm_) comm_->AddUser(-1);
  holds_comm_ = false;
}

std::shared_ptr<PsHandle> PsHandle::Create(const std::shared_ptr<CommHandle>& comm, int role,
                                           int async, double sgd_lr) {
  zc_ps* ps = nullptr;
  zc_ps_options o{async, sgd_lr};
  comm->Call("ps_create", [&](zc_comm* c) {
    return zc_ps_create(c, static_cast<zc_ps_role>(role), &o, &ps);
  });
  return std::make_shared<PsHandle>(comm, ps, role);
}

template <class F>
void PsHandle::Run(const char* op, F&& f) {
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(mu_);
  if (ps_ == nullptr) BadArg(Format("rank %d: %s: the parameter server is freed", rank_, op));
  Check(f(ps_), nullptr);
}

size_t PsHandle::KeyBytes(uint64_t key, const char* op) {
  if (freed()) BadArg(Format("rank %d: %s: the parameter server is freed", rank_, op));
  if (role_ == ZC_PS_SERVER)
    BadArg(Format("rank %d: %s: this rank is not a worker (role 'server': it calls serve())",
                  rank_, op));
  auto it = key_bytes_.find(key);
  if (it == key_bytes_.end())
    BadArg(Format("rank %d: %s: key %llu is not declared", rank_, op,
                  static_cast<unsigned long long>(key)));
  return it->second;
}

void* PsHandle::Buf(const py::object& obj, size_t bytes, bool writable, const char* op) const {
  return BufferPointer(obj, bytes, writable, false, rank_, op, "the array");
}

void PsHandle::Declare(uint64_t key, size_t count, int dtype, const py::object& init) {
  const char* op = "ps_declare";
  // count 0 or a bad dtype: the library's own refusal (ByteSize only guards
  // the init buffer's size).
  size_t bytes = zc_dtype_size(static_cast<zc_dtype>(dtype)) == 0 || count == 0
                     ? 0
                     : ByteSize(count, dtype, 1, rank_, op);
  const void* p = init.is_none() ? nullptr : Buf(init, bytes, false, op);
  Run(op, [&](zc_ps* ps) { return zc_ps_declare(ps, key, count, static_cast<zc_dtype>(dtype), p); });
  key_bytes_[key] = bytes;
}

void PsHandle::Push(uint64_t key, const py::object& buf) {
  const char* op = "ps_push";
  const void* p = Buf(buf, KeyBytes(key, op), false, op);
  Run(op, [&](zc_ps* ps) { return zc_ps_push(ps, key, p); });
}

void PsHandle::Pull(uint64_t key, const py::object& buf) {
  const char* op = "ps_pull";
  void* p = Buf(buf, KeyBytes(key, op), true, op);
  Run(op, [&](zc_ps* ps) { return zc_ps_pull(ps, key, p); });
}

template <class F>
PsHandle::Req PsHandle::Start(const char* op, const py::object& buf, F&& f) {
  zc_request* req = nullptr;
  Run(op, [&](zc_ps* ps) { return f(ps, &req); });
  auto r = std::make_shared<RequestHandle>(
      req, std::vector<py::object>{buf, py::cast(shared_from_this())});
  // Forget finished requests, remember this one (for Free).
  std::vector<std::weak_ptr<RequestHandle>> live;
  for (auto& w : requests_)
    if (!w.expired()) live.push_back(w);
  live.push_back(r);
  requests_.swap(live);
  return r;
}

PsHandle::Req PsHandle::Ipush(uint64_t key, const py::object& buf) {
  const char* op = "ps_ipush";
  const void* p = Buf(buf, KeyBytes(key, op), false, op);
  return Start(op, buf, [&](zc_ps* ps, zc_request** q) { return zc_ps_ipush(ps, key, p, q); });
}

PsHandle::Req PsHandle::Ipull(uint64_t key, const py::object& buf) {
  const char* op = "ps_ipull";
  void* p = Buf(buf, KeyBytes(key, op), true, op);
  return Start(op, buf, [&](zc_ps* ps, zc_request** q) { return zc_ps_ipull(ps, key, p, q); });
}

void PsHandle::Serve() {
  Run("ps_serve", [](zc_ps* ps) { return zc_ps_serve(ps); });
}

void PsHandle::Free() {
  // The requests still pending, held with the GIL (dropping the last
  // reference to one releases Python objects).
  std::vector<Req> pending;
  for (auto& w : requests_)
    if (auto r = w.lock()) pending.push_back(std::move(r));
  requests_.clear();
  zc_status st = ZC_OK;
  std::string error;
  bool was_freed = false;
  {
    py::gil_scoped_release nogil;
    // Their outcome stays with them (wait()/test() report it).
    for (auto& r : pending) r->Settle();
    std::lock_guard<std::mutex> lock(mu_);
    if (ps_ == nullptr) {
      was_freed = true;
    } else {
      st = zc_ps_free(ps_);  // frees it even when it fails
      ps_ = nullptr;
      freed_ = true;
      if (st != ZC_OK) {
        const char* t = zc_last_error(nullptr);
        error = t && *t ? t : zc_status_string(st);
      }
    }
  }
  pending.clear();  // with the GIL
  if (was_freed) return;
  ReleaseComm();
  key_bytes_.clear();
  if (st != ZC_OK) throw Failure(st, error);
}

}  // namespace zcpy
