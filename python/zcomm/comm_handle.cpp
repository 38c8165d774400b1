#include "comm_handle.h"

#include <cstdio>
#include <cstring>
#include <mutex>

#include "buffers.h"
#include "failure.h"
#include "gil.h"

namespace zcpy {

CommHandle::CommHandle(zc_comm* comm)
    : comm_(comm),
      rank_(zc_rank(comm)),
      size_(zc_size(comm)),
      local_rank_(zc_local_rank(comm)),
      local_size_(zc_local_size(comm)) {}

CommHandle::~CommHandle() {
  if (comm_ == nullptr) return;
  // A broken communicator skips finalize's barrier once it is aborted, so
  // dropping it after an error never waits for peers that are gone.
  auto finish = [this] {
    zc_status err = ZC_OK;
    if (zc_comm_get_async_error(comm_, &err) == ZC_OK && err != ZC_OK) zc_abort(comm_);
    zc_finalize(comm_);
    comm_ = nullptr;
  };
  WithoutGil(finish);
}

template <class F>
void CommHandle::Run(const char* op, F&& f) {
  py::gil_scoped_release nogil;
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (comm_ == nullptr) BadArg(Format("rank %d: %s: the communicator is finalized", rank_, op));
  Check(f(comm_), comm_);
}

template <class F>
CommHandle::Req CommHandle::Start(const char* op, std::vector<py::object> keep, F&& f) {
  zc_request* req = nullptr;
  Run(op, [&](zc_comm* c) { return f(c, &req); });
  keep.push_back(py::cast(shared_from_this()));  // requests outlive no communicator
  return std::make_shared<RequestHandle>(req, std::move(keep));
}

void* CommHandle::Buf(const py::object& obj, size_t bytes, bool writable, const char* op,
                      const char* name, bool optional) const {
  return BufferPointer(obj, bytes, writable, optional, rank_, op, name);
}

void CommHandle::CheckCounts(const Counts& c, const char* op, const char* name) const {
  if (c.size() != static_cast<size_t>(size_))
    BadArg(Format("rank %d: %s: %s has %zu entries, the communicator has %d ranks", rank_, op,
                  name, c.size(), size_));
}

size_t CommHandle::Extent(const Counts& counts, const Counts& displs, const char* op) const {
  size_t e = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    size_t end;
    if (__builtin_add_overflow(displs[i], counts[i], &end))
      BadArg(Format("rank %d: %s: block %zu overflows", rank_, op, i));
    e = std::max(e, end);
  }
  return e;
}

// ---- lifetime ----------------------------------------------------------------

std::shared_ptr<CommHandle> CommHandle::Init() {
  zc_comm* c = nullptr;
  {
    py::gil_scoped_release nogil;
    Check(zc_init(&c), nullptr);
  }
  return std::make_shared<CommHandle>(c);
}

std::shared_ptr<CommHandle> CommHandle::InitRank(const py::bytes& uid, int nranks, int rank) {
  std::string raw = uid;
  zc_unique_id id;
  if (raw.size() != sizeof id.internal)
    BadArg(Format("rank %d: comm_init_rank: a unique id is %zu bytes, got %zu", rank,
                  sizeof id.internal, raw.size()));
  std::memcpy(id.internal, raw.data(), sizeof id.internal);
  zc_comm* c = nullptr;
  {
    py::gil_scoped_release nogil;
    Check(zc_comm_init_rank(&c, nranks, &id, rank), nullptr);
  }
  return std::make_shared<CommHandle>(c);
}

std::shared_ptr<CommHandle> CommHandle::Split(int color, int key) {
  zc_comm* c = nullptr;
  Run("comm_split", [&](zc_comm* comm) { return zc_comm_split(comm, color, key, &c); });
  return c ? std::make_shared<CommHandle>(c) : nullptr;
}

std::shared_ptr<CommHandle> CommHandle::Dup() {
  zc_comm* c = nullptr;
  Run("comm_dup", [&](zc_comm* comm) { return zc_comm_dup(comm, &c); });
  return std::make_shared<CommHandle>(c);
}

void CommHandle::Finalize() {
  py::gil_scoped_release nogil;
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (comm_ == nullptr) return;  // finalizing twice is harmless
  if (users_ > 0)
    BadArg(Format("rank %d: finalize: %d parameter server(s) still use the communicator: "
                  "free them first", rank_, users_.load()));
  if (pool_buffers_ > 0)
    BadArg(Format("rank %d: finalize: %d buffer(s) of the communicator's memory "
                  "(Communicator.empty/zeros) are still referenced: delete the arrays "
                  "that view them first", rank_, pool_buffers_.load()));
  zc_comm* c = comm_;
  comm_ = nullptr;  // zc_finalize frees it, even when it fails
  Check(zc_finalize(c), nullptr);
}

void CommHandle::Call(const char* op, const std::function<zc_status(zc_comm*)>& f) {
  Run(op, f);
}

void* CommHandle::MemAlloc(size_t bytes) {
  void* data = nullptr;
  Run("mem_alloc", [&](zc_comm* c) { return zc_mem_alloc(c, bytes, &data); });
  ++pool_buffers_;
  return data;
}

void CommHandle::MemFree(void* data) noexcept {
  WithoutGil([&] {
    std::shared_lock<std::shared_mutex> lock(mu_);
    // Finalize refuses while pool_buffers_ > 0, so comm_ is live here.
    if (comm_ && zc_mem_free(comm_, data) != ZC_OK)
      std::fprintf(stderr, "zcomm: rank %d: mem_free: %s\n", rank_, zc_last_error(comm_));
    --pool_buffers_;
  });
}

void CommHandle::Abort() {
  Run("abort", [](zc_comm* c) { return zc_abort(c); });
}

void CommHandle::DumpTrace(const std::string& path) {
  Run("dump_trace", [&](zc_comm* c) { return zc_comm_dump_trace(c, path.empty() ? nullptr : path.c_str()); });
}

std::pair<int, std::string> CommHandle::AsyncError() {
  zc_status err = ZC_OK;
  std::string text;
  Run("async_error", [&](zc_comm* c) {
    zc_status st = zc_comm_get_async_error(c, &err);
    if (st == ZC_OK && err != ZC_OK) {
      const char* t = zc_last_error(c);
      text = t && *t ? t : zc_status_string(err);
    }
    return st;
  });
  return {err, text};
}

void CommHandle::Deregister(const py::object& buf) {
  if (!py::isinstance<py::array>(buf)) BadArg(Format("rank %d: deregister: not a numpy array", rank_));
  auto a = py::reinterpret_borrow<py::array>(buf);
  const void* p = a.data();
  const size_t n = a.nbytes();
  Run("deregister", [&](zc_comm* c) { return zc_mem_deregister(c, p, n); });
}

bool CommHandle::finalized() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return comm_ == nullptr;
}

// ---- blocking collectives ----------------------------------------------------

void CommHandle::Allreduce(const py::object& send, const py::object& recv, size_t count,
                           int dtype, int op) {
  const char* name = "allreduce";
  const size_t b = ByteSize(count, dtype, 1, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = Buf(recv, b, true, name, "output");
  Run(name, [&](zc_comm* c) {
    return zc_allreduce(c, s, r, count, zc_dtype(dtype), zc_op(op));
  });
}

void CommHandle::Broadcast(const py::object& buf, size_t count, int dtype, int root) {
  const char* name = "broadcast";
  void* p = Buf(buf, ByteSize(count, dtype, 1, rank_, name), true, name, "buffer");
  Run(name, [&](zc_comm* c) { return zc_broadcast(c, p, count, zc_dtype(dtype), root); });
}

void CommHandle::Reduce(const py::object& send, const py::object& recv, size_t count, int dtype,
                        int op, int root) {
  const char* name = "reduce";
  const size_t b = ByteSize(count, dtype, 1, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = IsRoot(root) ? Buf(recv, b, true, name, "output") : nullptr;
  Run(name, [&](zc_comm* c) {
    return zc_reduce(c, s, r, count, zc_dtype(dtype), zc_op(op), root);
  });
}

void CommHandle::Allgather(const py::object& send, const py::object& recv, size_t count,
                           int dtype) {
  const char* name = "allgather";
  const void* s = Buf(send, ByteSize(count, dtype, 1, rank_, name), false, name, "input");
  void* r = Buf(recv, ByteSize(count, dtype, size_, rank_, name), true, name, "output");
  Run(name, [&](zc_comm* c) { return zc_allgather(c, s, r, count, zc_dtype(dtype)); });
}

void CommHandle::ReduceScatter(const py::object& send, const py::object& recv, size_t count,
                               int dtype, int op) {
  const char* name = "reduce_scatter";
  const void* s = Buf(send, ByteSize(count, dtype, size_, rank_, name), false, name, "input");
  void* r = Buf(recv, ByteSize(count, dtype, 1, rank_, name), true, name, "output");
  Run(name, [&](zc_comm* c) {
    return zc_reduce_scatter(c, s, r, count, zc_dtype(dtype), zc_op(op));
  });
}

void CommHandle::Alltoall(const py::object& send, const py::object& recv, size_t count,
                          int dtype) {
  const char* name = "alltoall";
  const size_t b = ByteSize(count, dtype, size_, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = Buf(recv, b, true, name, "output");
  Run(name, [&](zc_comm* c) { return zc_alltoall(c, s, r, count, zc_dtype(dtype)); });
}

void CommHandle::Barrier() {
  Run("barrier", [](zc_comm* c) { return zc_barrier(c); });
}

void CommHandle::Allgatherv(const py::object& send, size_t sendcount, const py::object& recv,
                            const Counts& recvcounts, const Counts& displs, int dtype) {
  const char* name = "allgatherv";
  CheckCounts(recvcounts, name, "counts");
  CheckCounts(displs, name, "displs");
  const void* s = Buf(send, ByteSize(sendcount, dtype, 1, rank_, name), false, name, "input");
  void* r = Buf(recv, ByteSize(Extent(recvcounts, displs, name), dtype, 1, rank_, name), true,
                name, "output");
  Run(name, [&](zc_comm* c) {
    return zc_allgatherv(c, s, sendcount, r, recvcounts.data(), displs.data(), zc_dtype(dtype));
  });
}

void CommHandle::Alltoallv(const py::object& send, const Counts& sendcounts,
                           const Counts& sdispls, const py::object& recv,
                           const Counts& recvcounts, const Counts& rdispls, int dtype) {
  const char* name = "alltoallv";
  CheckCounts(sendcounts, name, "sendcounts");
  CheckCounts(sdispls, name, "sdispls");
  CheckCounts(recvcounts, name, "recvcounts");
  CheckCounts(rdispls, name, "rdispls");
  const void* s = Buf(send, ByteSize(Extent(sendcounts, sdispls, name), dtype, 1, rank_, name),
                      false, name, "input");
  void* r = Buf(recv, ByteSize(Extent(recvcounts, rdispls, name), dtype, 1, rank_, name), true,
                name, "output");
  Run(name, [&](zc_comm* c) {
    return zc_alltoallv(c, s, sendcounts.data(), sdispls.data(), r, recvcounts.data(),
                        rdispls.data(), zc_dtype(dtype));
  });
}

void CommHandle::Gather(const py::object& send, const py::object& recv, size_t count, int dtype,
                        int root) {
  const char* name = "gather";
  const void* s = Buf(send, ByteSize(count, dtype, 1, rank_, name), false, name, "input");
  void* r = IsRoot(root)
                ? Buf(recv, ByteSize(count, dtype, size_, rank_, name), true, name, "output")
                : nullptr;
  Run(name, [&](zc_comm* c) { return zc_gather(c, s, r, count, zc_dtype(dtype), root); });
}

void CommHandle::Scatter(const py::object& send, const py::object& recv, size_t count, int dtype,
                         int root) {
  const char* name = "scatter";
  const void* s = IsRoot(root)
                      ? Buf(send, ByteSize(count, dtype, size_, rank_, name), false, name, "input")
                      : nullptr;
  void* r = Buf(recv, ByteSize(count, dtype, 1, rank_, name), true, name, "output");
  Run(name, [&](zc_comm* c) { return zc_scatter(c, s, r, count, zc_dtype(dtype), root); });
}

// ---- point to point ------------------------------------------------------------

namespace {
size_t Nbytes(const py::object& obj) {
  return py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj).nbytes() : 0;
}
}  // namespace

void CommHandle::Send(const py::object& buf, int peer, int tag) {
  const size_t n = Nbytes(buf);
  const void* p = Buf(buf, n, false, "send", "buffer");
  Run("send", [&](zc_comm* c) { return zc_send(c, p, n, peer, tag); });
}

int CommHandle::Recv(const py::object& buf, int peer, int tag) {
  const size_t n = Nbytes(buf);
  void* p = Buf(buf, n, true, "recv", "buffer");
  int source = peer;
  Run("recv", [&](zc_comm* c) { return zc_recv_source(c, p, n, peer, tag, &source); });
  return source;
}

CommHandle::Req CommHandle::Isend(const py::object& buf, int peer, int tag) {
  const size_t n = Nbytes(buf);
  const void* p = Buf(buf, n, false, "isend", "buffer");
  return Start("isend", {buf}, [&](zc_comm* c, zc_request** q) {
    return zc_isend(c, p, n, peer, tag, q);
  });
}

CommHandle::Req CommHandle::Irecv(const py::object& buf, int peer, int tag) {
  const size_t n = Nbytes(buf);
  void* p = Buf(buf, n, true, "irecv", "buffer");
  auto source = std::make_shared<int>(peer);
  Req req = Start("irecv", {buf}, [&](zc_comm* c, zc_request** q) {
    return zc_irecv_source(c, p, n, peer, tag, source.get(), q);
  });
  req->set_source(std::move(source));
  return req;
}

// ---- nonblocking collectives -----------------------------------------------------

CommHandle::Req CommHandle::Iallreduce(const py::object& send, const py::object& recv,
                                       size_t count, int dtype, int op) {
  const char* name = "iallreduce";
  const size_t b = ByteSize(count, dtype, 1, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = Buf(recv, b, true, name, "output");
  return Start(name, {send, recv}, [&](zc_comm* c, zc_request** q) {
    return zc_iallreduce(c, s, r, count, zc_dtype(dtype), zc_op(op), q);
  });
}

namespace {
void* Ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }
}  // namespace

CommHandle::Req CommHandle::AllreduceOnStream(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op,
                                              uintptr_t stream, py::object keep) {
  ByteSize(count, dtype, 1, rank_, "allreduce_on_stream");
  return Start("allreduce_on_stream", {std::move(keep)}, [&](zc_comm* c, zc_request** q) {
    return zc_allreduce_on_stream(c, Ptr(send), Ptr(recv), count, zc_dtype(dtype), zc_op(op), Ptr(stream), q);
  });
}

CommHandle::Req CommHandle::BroadcastOnStream(uintptr_t buf, size_t count, int dtype, int root, uintptr_t stream,
                                              py::object keep) {
  ByteSize(count, dtype, 1, rank_, "broadcast_on_stream");
  return Start("broadcast_on_stream", {std::move(keep)}, [&](zc_comm* c, zc_request** q) {
    return zc_broadcast_on_stream(c, Ptr(buf), count, zc_dtype(dtype), root, Ptr(stream), q);
  });
}

CommHandle::Req CommHandle::AllgatherOnStream(uintptr_t send, uintptr_t recv, size_t count, int dtype,
                                              uintptr_t stream, py::object keep) {
  ByteSize(count, dtype, size_, rank_, "allgather_on_stream");
  return Start("allgather_on_stream", {std::move(keep)}, [&](zc_comm* c, zc_request** q) {
    return zc_allgather_on_stream(c, Ptr(send), Ptr(recv), count, zc_dtype(dtype), Ptr(stream), q);
  });
}

CommHandle::Req CommHandle::Ibroadcast(const py::object& buf, size_t count, int dtype, int root) {
  const char* name = "ibroadcast";
  void* p = Buf(buf, ByteSize(count, dtype, 1, rank_, name), true, name, "buffer");
  return Start(name, {buf}, [&](zc_comm* c, zc_request** q) {
    return zc_ibroadcast(c, p, count, zc_dtype(dtype), root, q);
  });
}

CommHandle::Req CommHandle::Ireduce(const py::object& send, const py::object& recv, size_t count,
                                    int dtype, int op, int root) {
  const char* name = "ireduce";
  const size_t b = ByteSize(count, dtype, 1, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = IsRoot(root) ? Buf(recv, b, true, name, "output") : nullptr;
  return Start(name, {send, recv}, [&](zc_comm* c, zc_request** q) {
    return zc_ireduce(c, s, r, count, zc_dtype(dtype), zc_op(op), root, q);
  });
}

CommHandle::Req CommHandle::Iallgather(const py::object& send, const py::object& recv,
                                       size_t count, int dtype) {
  const char* name = "iallgather";
  const void* s = Buf(send, ByteSize(count, dtype, 1, rank_, name), false, name, "input");
  void* r = Buf(recv, ByteSize(count, dtype, size_, rank_, name), true, name, "output");
  return Start(name, {send, recv}, [&](zc_comm* c, zc_request** q) {
    return zc_iallgather(c, s, r, count, zc_dtype(dtype), q);
  });
}

CommHandle::Req CommHandle::IreduceScatter(const py::object& send, const py::object& recv,
                                           size_t count, int dtype, int op) {
  const char* name = "ireduce_scatter";
  const void* s = Buf(send, ByteSize(count, dtype, size_, rank_, name), false, name, "input");
  void* r = Buf(recv, ByteSize(count, dtype, 1, rank_, name), true, name, "output");
  return Start(name, {send, recv}, [&](zc_comm* c, zc_request** q) {
    return zc_ireduce_scatter(c, s, r, count, zc_dtype(dtype), zc_op(op), q);
  });
}

CommHandle::Req CommHandle::Ialltoall(const py::object& send, const py::object& recv,
                                      size_t count, int dtype) {
  const char* name = "ialltoall";
  const size_t b = ByteSize(count, dtype, size_, rank_, name);
  const void* s = Buf(send, b, false, name, "input");
  void* r = Buf(recv, b, true, name, "output");
  return Start(name, {send, recv}, [&](zc_comm* c, zc_request** q) {
    return zc_ialltoall(c, s, r, count, zc_dtype(dtype), q);
  });
}

CommHandle::Req CommHandle::Ibarrier() {
  return Start("ibarrier", {}, [](zc_comm* c, zc_request** q) { return zc_ibarrier(c, q); });
}

}  // namespace zcpy
