// C ABI: point to point. zc_send/zc_recv and zc_isend/zc_irecv all go
// through the communicator's messenger (p2p/messenger.h), so blocking and
// nonblocking calls share one matching order and tags are scoped by the
// communicator. The communicator's DevicePath stages device buffers (CUDA
// builds) through pinned host memory: a send's copy is made when it is
// posted, a receive's copied back when it completes.
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/comm.h"
#include "api/run_collective.h"
#include "common/deadline.h"
#include "common/flight_recorder.h"
#include "p2p/mem_region.h"

using namespace zc::api;

namespace {

std::string Context(const zc_comm* comm, const char* op, bool send, int peer, int tag,
                    size_t bytes) {
  if (!send && peer == ZC_ANY_SOURCE)
    return zc::Format("rank %d: %s from any source (tag %d, %zu bytes)", comm->rank, op, tag, bytes);
  return zc::Format("rank %d: %s %s %d (tag %d, %zu bytes)", comm->rank, op, send ? "to" : "from",
                    peer, tag, bytes);
}

// The flight-recorder record of a send or receive (0: recorder off).
uint64_t Record(zc_comm* comm, const char* op, size_t bytes, int peer, int tag, zc::trace::State state) {
  return comm->trace ? comm->trace->BeginPeer(op, bytes, peer, tag, state) : 0;
}

// A failed call: its record ends with the failure (with its context), the
// recorder is dumped (ZC_TRACE_DIR), and the failure returned.
zc_status FailRecord(zc_comm* comm, uint64_t record, const zc::Status& st, const std::string& context) {
  zc::Status full = st.with_context(context);
  if (record) comm->trace->End(record, full);
  if (comm->trace) comm->trace->DumpOnFailure(full);
  return Fail(full);
}

// Posts one request. Device buffers (CUDA builds) go through a pinned copy
// owned by the request until it completes.
zc_status Post(zc_comm* comm, const char* op, bool send, void* buf, size_t bytes, int peer, int tag,
               zc_request** req, int* source = nullptr) {
  auto r = std::make_unique<zc_request>();
  r->context = Context(comm, op, send, peer, tag, bytes);
  r->source = source;
  void* host = buf;
  zc::Status staged = comm->gpu->StageRequest(buf, bytes, send, &host, &r->on_complete);
  if (!staged.ok()) return Fail(staged.with_context(r->context));
  const uint64_t record = Record(comm, op, bytes, peer, tag, zc::trace::State::kPosted);
  zc::Status st = send ? comm->p2p->Isend(host, bytes, peer, tag, &r->p2p)
                       : comm->p2p->Irecv(host, bytes, peer, tag, &r->p2p);
  if (!st.ok()) return FailRecord(comm, record, st, r->context);
  if (record) {
    r->trace = comm->trace;
    r->trace_id = record;
  }
  *req = r.release();
  return ZC_OK;
}

// The request has completed with st: runs what completion still owes once
// (the sender's rank for zc_irecv_source, a staged receive's copy).
zc::Status Finish(zc_request* r, zc::Status st) {
  if (r->source) *r->source = r->p2p->source();
  if (r->on_complete) {
    zc::Status c = r->on_complete();
    r->on_complete = nullptr;
    if (st.ok()) st = c;
  }
  if (!st.ok()) st = st.with_context(r->context);
  if (r->trace_id) {
    r->trace->End(r->trace_id, st);
    if (!st.ok()) r->trace->DumpOnFailure(st);
  }
  return st;
}

}  // namespace

namespace zc::api {

zc_status CheckPeerArgs(zc_comm* comm, const char* op, bool send, const void* buf, size_t bytes,
                        int peer, int tag) {
  ZC_TRY(CheckBuf(comm, op, buf, "buf", bytes));
  if (!send && peer == ZC_ANY_SOURCE) {
    if (comm->size < 2)
      return BadArg(comm, op, "receive from any source: rank %d is alone in its communicator "
                    "(no peer could send)", comm->rank);
  } else if (peer < 0 || peer >= comm->size)
    return BadArg(comm, op, "peer %d is out of range [0, %d)", peer, comm->size);
  if (peer == comm->rank)
    return BadArg(comm, op, "%s self (rank %d) would never complete",
                  send ? "send to" : "receive from", peer);
  if (tag < 0) return BadArg(comm, op, "tag %d: tags are >= 0", tag);
  return ZC_OK;
}

// zc_test/zc_wait for point-to-point requests (nonblocking_c.cpp).
zc_status TestP2p(zc_request* r, int* done) {
  if (r->done.load(std::memory_order_acquire)) {
    *done = 1;
    return r->status.ok() ? ZC_OK : Fail(r->status);
  }
  zc::Status st;
  if (!r->p2p->Test(&st)) {
    *done = 0;
    return ZC_OK;
  }
  r->status = Finish(r, st);
  r->done.store(1, std::memory_order_release);
  *done = 1;
  return r->status.ok() ? ZC_OK : Fail(r->status);
}

zc_status WaitP2p(zc_request* r) {
  zc::Status st = r->done.load(std::memory_order_acquire) ? r->status
                                                          : Finish(r, r->p2p->Wait(zc::Deadline::Never()));
  delete r;
  return st.ok() ? ZC_OK : Fail(st);
}

}  // namespace zc::api

extern "C" {

zc_status zc_isend(zc_comm* comm, const void* buf, size_t bytes, int peer, int tag, zc_request** req) {
  ZC_CHECK_COMM(comm, "zc_isend");
  if (!req) return BadArg(comm, "zc_isend", "req is NULL");
  *req = nullptr;
  ZC_TRY(CheckPeerArgs(comm, "zc_isend", true, buf, bytes, peer, tag));
  return Post(comm, "isend", true, const_cast<void*>(buf), bytes, peer, tag, req);
}

zc_status zc_irecv(zc_comm* comm, void* buf, size_t bytes, int peer, int tag, zc_request** req) {
  ZC_CHECK_COMM(comm, "zc_irecv");
  if (!req) return BadArg(comm, "zc_irecv", "req is NULL");
  *req = nullptr;
  ZC_TRY(CheckPeerArgs(comm, "zc_irecv", false, buf, bytes, peer, tag));
  return Post(comm, "irecv", false, buf, bytes, peer, tag, req);
}

zc_status zc_send(zc_comm* comm, const void* buf, size_t bytes, int peer, int tag) {
  ZC_CHECK_COMM(comm, "zc_send");
  ZC_TRY(CheckPeerArgs(comm, "zc_send", true, buf, bytes, peer, tag));
  const uint64_t start = comm->trace ? comm->trace->Start() : 0;
  uint64_t record = 0;
  zc::Status st = Staged(comm, {Buf{buf, bytes, true, false, "buf"}}, [&](void** h) {
    // A message that goes out at once is recorded after it has (DonePeer):
    // the peer of a ping-pong waits for none of its record. A send that
    // has to wait is recorded before it does, as every call that may hang.
    if (comm->p2p->TrySendNow(h[0], bytes, peer, tag)) return zc::Status::Ok();
    record = Record(comm, "send", bytes, peer, tag, zc::trace::State::kStarted);
    return comm->p2p->Send(h[0], bytes, peer, tag);
  });
  if (st.ok()) {
    if (record) comm->trace->End(record, st);
    else if (comm->trace) comm->trace->DonePeer("send", bytes, peer, tag, start);
    return ZC_OK;
  }
  // Staging a device buffer failed before the send began: its record too.
  if (!record) record = Record(comm, "send", bytes, peer, tag, zc::trace::State::kStarted);
  return FailRecord(comm, record, st, Context(comm, "send", true, peer, tag, bytes));
}

zc_status zc_recv(zc_comm* comm, void* buf, size_t bytes, int peer, int tag) {
  return zc_recv_source(comm, buf, bytes, peer, tag, nullptr);
}

zc_status zc_recv_source(zc_comm* comm, void* buf, size_t bytes, int peer, int tag, int* source) {
  const char* op = source ? "zc_recv_source" : "zc_recv";
  ZC_CHECK_COMM(comm, op);
  if (source) *source = ZC_ANY_SOURCE;
  ZC_TRY(CheckPeerArgs(comm, op, false, buf, bytes, peer, tag));
  int from = ZC_ANY_SOURCE;
  const uint64_t record = Record(comm, "recv", bytes, peer, tag, zc::trace::State::kStarted);
  zc::Status st = Staged(comm, {Buf{buf, bytes, false, true, "buf"}}, [&](void** h) {
    return comm->p2p->Recv(h[0], bytes, peer, tag, &from);
  });
  if (source) *source = from;
  if (st.ok() && record) comm->trace->End(record, st);
  return st.ok() ? ZC_OK : FailRecord(comm, record, st, Context(comm, "recv", false, peer, tag, bytes));
}

zc_status zc_irecv_source(zc_comm* comm, void* buf, size_t bytes, int peer, int tag, int* source,
                          zc_request** req) {
  ZC_CHECK_COMM(comm, "zc_irecv_source");
  if (!req) return BadArg(comm, "zc_irecv_source", "req is NULL");
  *req = nullptr;
  if (source) *source = ZC_ANY_SOURCE;
  ZC_TRY(CheckPeerArgs(comm, "zc_irecv_source", false, buf, bytes, peer, tag));
  return Post(comm, "irecv", false, buf, bytes, peer, tag, req, source);
}

}  // extern "C"
