// FakeCuda: a stream-faithful fake of the CUDA driver for tests that run
// without a GPU (tests only; one per process, used in forked ranks).
//
// What it models:
//  - Device memory: each allocation is a memfd mapped twice, PROT_NONE at
//    the "device address" handed out and read-write at a shadow address
//    only the fake uses. Host code that reads or writes device memory
//    dies of SIGSEGV; copies and kernels work on the shadow.
//  - Streams: in-order queues, each run by a host thread of its own
//    (cuStreamCreate; the NULL stream is one more such queue, without the
//    legacy stream's implicit synchronisation). Events (record, query,
//    synchronize, cuStreamWaitEvent), cuLaunchHostFunc, cuStreamWaitValue32
//    on pinned host memory, async copies that run on their stream, and
//    kernels (Launch) that a test enqueues to write or read device buffers.
//  - Synchronous copies (cuMemcpyHtoD & co.) run on the calling host
//    thread at once and do not wait for any stream. cuMemcpyAsync copies
//    device to device on its stream.
//  - CUDA IPC across processes: an allocation's memfd stays open, the
//    handle (cuIpcGetMemHandle) names the exporter's process and file, and
//    cuIpcOpenMemHandle in another process opens /proc/PID/fd/FD and maps
//    it twice as above (PROT_NONE at the address handed out): the peer's
//    "device memory" is the exporter's own pages. As in CUDA: a handle is
//    opened once per process (a second open is CUDA_ERROR_ALREADY_MAPPED),
//    only an allocation's base can be exported, the exporter must be alive
//    at the open, cuIpcCloseMemHandle unmaps.
//
// Checks that catch misuse, by happens-before, not by timing: every
// actor (the host, each stream) has a vector clock; a stream's op carries
// the clock of its stream at enqueue joined with what the host knew then;
// cuStreamWaitEvent joins the event's clock into the stream's;
// cuStreamSynchronize, cuEventSynchronize and a successful cuEventQuery
// join it into the host's. Each allocation records its last writer and
// its readers since; an access (copy, kernel, synchronous copy) that is
// not ordered after a conflicting access of another actor is a
// violation: a missing wait, or a copy issued on a stream that was not
// made to wait for the writer (the wrong stream). cuStreamWaitValue32
// orders nothing in this model (as the CUDA documentation warns: the
// order it makes is invisible to CUDA), so code that relies on it alone
// to order device accesses across streams is reported. Tracking is per
// allocation; all host threads share one host clock (lenient). Ordering
// across processes (a peer's mapping of our memory) is not tracked: the
// clocks are per process; only the data shows it.
// Violations are kept (violations()) and printed to stderr.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_driver.h"

namespace zc::gpu::testing {

class FakeCuda {
 public:
  static FakeCuda& Get();

  // The driver table: FakeDriver's pointer attributes plus streams,
  // events, copies and pinned memory. Use it in a forked child only.
  const DriverTable* table() const { return &table_; }

  // Device memory of `bytes` (registered with FakeDriver, so pointer
  // caches classify it). Never freed before the process exits unless Free.
  void* Alloc(size_t bytes);
  void Free(void* dev);
  // A new stream (cuStreamCreate, non-blocking).
  CuStream NewStream();

  // A kernel: fn(views) runs on the stream's thread, in order, with
  // views[i] the shadow of accesses[i] (checked like copies).
  struct Access {
    const void* dev;
    size_t bytes;
    bool write;
  };
  void Launch(CuStream s, std::vector<Access> accesses,
              std::function<void(const std::vector<void*>& views)> fn);

  // Host access through synchronous copies (tracked as host accesses).
  void Upload(void* dev, const void* src, size_t n);
  void Download(void* dst, const void* dev, size_t n);

  std::vector<std::string> violations() const;
  void ClearViolations();
  uint64_t async_copies() const { return async_copies_.load(); }
  uint64_t sync_copies() const { return sync_copies_.load(); }
  uint64_t host_funcs() const { return host_funcs_.load(); }
  uint64_t value_waits() const { return value_waits_.load(); }
  uint64_t ipc_opens() const { return ipc_opens_.load(); }
  // Peers' allocations mapped in this process now.
  size_t ipc_mappings() const;
  // Fault injection: the async copy (cuMemcpyDtoHAsync/HtoDAsync) that
  // runs after `skip` more of them fails with r: it copies nothing, and its
  // stream keeps the error (sticky, as CUDA's): querying or synchronising
  // an event recorded on that stream after the copy, or the stream, returns
  // r once the stream has got there (its later work still runs, so that a
  // caller that frees memory after the error sees no work still using it).
  // r = 0 turns it off.
  void FailAsyncCopy(uint64_t skip, CuResult r);
  // Makes cuStreamWaitValue32 unavailable (nullptr in table()) so that
  // callers take their fallback.
  void DisableWaitValue(bool disabled);

 private:
  static constexpr int kMaxActors = 64;  // actor 0 is the host
  using VClock = std::array<uint64_t, kMaxActors>;

  struct Op {
    std::function<void(const Op&)> run;
    VClock clock{};
    int actor = 0;
    uint64_t seq = 0;
  };
  struct Stream {
    int id = 0;
    std::deque<Op> queue;
    uint64_t enq_seq = 0;   // last op enqueued
    uint64_t done_seq = 0;  // last op finished
    VClock enq_clock{};
    CuResult error = 0;      // sticky: an op failed (FailAsyncCopy)
    uint64_t error_seq = 0;  // ... that op
    std::thread thread;
    std::condition_variable cv;
  };
  struct Event {
    Stream* stream = nullptr;  // null: never recorded
    uint64_t seq = 0;
    VClock clock{};
  };
  struct Alloc_ {
    void* shadow = nullptr;
    size_t size = 0, map_len = 0;
    // Last write (actor, seq) and reads since (actor -> seq).
    int writer = -1;
    uint64_t write_seq = 0;
    std::map<int, uint64_t> readers;
    int fd = -1;          // the memfd, open for export (-1: imported)
    uint64_t ipc_key = 0;  // imported: the exporter's file (inode), else 0
  };

  FakeCuda();
  void BuildTable();
  Stream* StreamOf(CuStream s);  // NULL -> the default stream (mu_ held)
  Stream* NewStreamLocked();
  void RunStream(Stream* s);
  void Enqueue(Stream* s, std::function<void(const Op&)> run);  // mu_ held
  // Checks and records an access; returns the shadow address (null: not
  // device memory of this fake). mu_ held.
  void* Touch(const void* dev, size_t n, bool write, int actor, uint64_t seq, const VClock& clock,
              const char* what);
  Alloc_* FindLocked(uintptr_t p, uintptr_t* base);
  void Violation(const std::string& s);  // mu_ held
  static void Join(VClock& a, const VClock& b);
  uint64_t HostTick();  // mu_ held: the host's next seq (its clock's entry)
  // An async copy about to run on s (op): whether FailAsyncCopy makes it
  // fail (then s keeps the error). mu_ held.
  bool CopyFails(Stream* s, const Op& op);
  // The sticky error an event (or stream) at seq on s sees, 0 if none.
  static CuResult StickyError(const Stream* s, uint64_t seq) {
    return s->error != 0 && seq >= s->error_seq && s->done_seq >= s->error_seq ? s->error : 0;
  }

  // Driver entry points.
  static CuResult StreamCreate(CuStream* s, unsigned flags);
  static CuResult StreamDestroy(CuStream s);
  static CuResult StreamQuery(CuStream s);
  static CuResult StreamSynchronize(CuStream s);
  static CuResult StreamWaitEvent(CuStream s, CuEvent e, unsigned flags);
  static CuResult StreamWaitValue32(CuStream s, CuDevicePtr addr, uint32_t v, unsigned flags);
  static CuResult LaunchHostFunc(CuStream s, CuHostFn fn, void* user);
  static CuResult EventCreate(CuEvent* e, unsigned flags);
  static CuResult EventDestroy(CuEvent e);
  static CuResult EventRecord(CuEvent e, CuStream s);
  static CuResult EventQuery(CuEvent e);
  static CuResult EventSynchronize(CuEvent e);
  static CuResult MemcpyHtoDAsync(CuDevicePtr dst, const void* src, size_t n, CuStream s);
  static CuResult MemcpyDtoHAsync(void* dst, CuDevicePtr src, size_t n, CuStream s);
  static CuResult MemcpyHtoD(CuDevicePtr dst, const void* src, size_t n);
  static CuResult MemcpyDtoH(void* dst, CuDevicePtr src, size_t n);
  static CuResult MemcpyDtoD(CuDevicePtr dst, CuDevicePtr src, size_t n);
  static CuResult MemAlloc(CuDevicePtr* p, size_t n);
  static CuResult MemFree(CuDevicePtr p);
  static CuResult MemHostGetDevicePointer(CuDevicePtr* d, void* p, unsigned flags);
  static CuResult CtxSynchronize();
  static CuResult MemcpyAsync(CuDevicePtr dst, CuDevicePtr src, size_t n, CuStream s);
  static CuResult IpcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p);
  static CuResult IpcOpenMemHandle(CuDevicePtr* p, CuIpcMemHandle h, unsigned flags);
  static CuResult IpcCloseMemHandle(CuDevicePtr p);
  // Maps fd (len bytes, size usable) as device memory; the device address.
  void* MapLocked(int fd, size_t size, size_t len, uint64_t ipc_key);

  DriverTable table_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;  // a stream finished an op
  std::vector<std::unique_ptr<Stream>> streams_;
  Stream* default_stream_ = nullptr;
  VClock host_clock_{};
  std::map<uintptr_t, Alloc_> allocs_;
  std::vector<std::string> violations_;
  bool stopping_ = false;
  CuResult fail_result_ = 0;  // FailAsyncCopy (mu_)
  uint64_t fail_skip_ = 0;
  std::atomic<uint64_t> async_copies_{0}, sync_copies_{0}, host_funcs_{0}, value_waits_{0}, ipc_opens_{0};
};

}  // namespace zc::gpu::testing
