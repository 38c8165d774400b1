#include "fake_cuda.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/status.h"
#include "gpu_fake_driver.h"

namespace zc::gpu::testing {
namespace {

// How long a fake wait (an event, a stream, a value) may take before the
// fake reports it instead of hanging the test.
constexpr auto kWaitLimit = std::chrono::seconds(120);
constexpr CuResult kErrorLaunchTimeout = 702;  // CUDA_ERROR_LAUNCH_TIMEOUT

std::string ActorName(int actor) { return actor == 0 ? "the host" : Format("stream %d", actor); }

}  // namespace

FakeCuda& FakeCuda::Get() {
  static FakeCuda* f = new FakeCuda();  // never destroyed: its threads run to exit
  return *f;
}

FakeCuda::FakeCuda() { BuildTable(); }

void FakeCuda::BuildTable() {
  table_ = FakeDriver::Get().StagingTable();
  table_.CtxSynchronize = &CtxSynchronize;
  table_.StreamSynchronize = &StreamSynchronize;
  table_.StreamCreate = &StreamCreate;
  table_.StreamDestroy = &StreamDestroy;
  table_.StreamQuery = &StreamQuery;
  table_.StreamWaitEvent = &StreamWaitEvent;
  table_.StreamWaitValue32 = &StreamWaitValue32;
  table_.LaunchHostFunc = &LaunchHostFunc;
  table_.EventCreate = &EventCreate;
  table_.EventDestroy = &EventDestroy;
  table_.EventRecord = &EventRecord;
  table_.EventQuery = &EventQuery;
  table_.EventSynchronize = &EventSynchronize;
  table_.MemcpyHtoDAsync = &MemcpyHtoDAsync;
  table_.MemcpyDtoHAsync = &MemcpyDtoHAsync;
  table_.MemcpyHtoD = &MemcpyHtoD;
  table_.MemcpyDtoH = &MemcpyDtoH;
  table_.MemcpyDtoD = &MemcpyDtoD;
  table_.MemAlloc = &MemAlloc;
  table_.MemFree = &MemFree;
  table_.MemHostGetDevicePointer = &MemHostGetDevicePointer;
  table_.MemcpyAsync = &MemcpyAsync;
  table_.IpcGetMemHandle = &IpcGetMemHandle;
  table_.IpcOpenMemHandle = &IpcOpenMemHandle;
  table_.IpcCloseMemHandle = &IpcCloseMemHandle;
}

void FakeCuda::DisableWaitValue(bool disabled) {
  table_.StreamWaitValue32 = disabled ? nullptr : &StreamWaitValue32;
}

// ---- memory ----

void* FakeCuda::MapLocked(int fd, size_t size, size_t len, uint64_t ipc_key) {
  void* dev = mmap(nullptr, len, PROT_NONE, MAP_SHARED, fd, 0);
  void* shadow = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED || shadow == MAP_FAILED) abort();
  FakeDriver::Get().Alloc(reinterpret_cast<uintptr_t>(dev), size, cu::kMemoryTypeDevice, false, 0);
  Alloc_& a = allocs_[reinterpret_cast<uintptr_t>(dev)];
  a.shadow = shadow;
  a.size = size;
  a.map_len = len;
  a.ipc_key = ipc_key;
  return dev;
}

void* FakeCuda::Alloc(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) / page * page + page;  // a guard page's worth
  const int fd = memfd_create("zc-fake-gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) abort();
  std::lock_guard<std::mutex> lock(mu_);
  void* dev = MapLocked(fd, bytes, len, 0);
  allocs_[reinterpret_cast<uintptr_t>(dev)].fd = fd;  // kept for cuIpcGetMemHandle
  return dev;
}

void FakeCuda::Free(void* dev) {
  FakeDriver::Get().Free(reinterpret_cast<uintptr_t>(dev));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(dev));
  if (it == allocs_.end()) return;
  munmap(dev, it->second.map_len);
  munmap(it->second.shadow, it->second.map_len);
  if (it->second.fd >= 0) close(it->second.fd);
  allocs_.erase(it);
}

size_t FakeCuda::ipc_mappings() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [base, a] : allocs_) n += a.ipc_key != 0;
  return n;
}

// ---- CUDA IPC across processes ----

namespace {
// What the fake's CUipcMemHandle holds (64 bytes).
struct FakeIpcHandle {
  char magic[8];  // "zcfkipc"
  int32_t pid, fd;
  uint64_t size, map_len, inode;
};
static_assert(sizeof(FakeIpcHandle) <= sizeof(CuIpcMemHandle), "handle size");
constexpr char kIpcMagic[8] = "zcfkipc";
}  // namespace

CuResult FakeCuda::IpcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  auto it = f.allocs_.find(static_cast<uintptr_t>(p));
  if (it == f.allocs_.end() || it->second.fd < 0) return cu::kErrorInvalidValue;  // not a base we own
  struct stat st;
  if (fstat(it->second.fd, &st) != 0) return cu::kErrorInvalidValue;
  FakeIpcHandle fh{};
  std::memcpy(fh.magic, kIpcMagic, sizeof fh.magic);
  fh.pid = static_cast<int32_t>(getpid());
  fh.fd = it->second.fd;
  fh.size = it->second.size;
  fh.map_len = it->second.map_len;
  fh.inode = static_cast<uint64_t>(st.st_ino);
  std::memset(h, 0, sizeof *h);
  std::memcpy(h->reserved, &fh, sizeof fh);
  return cu::kSuccess;
}

CuResult FakeCuda::IpcOpenMemHandle(CuDevicePtr* p, CuIpcMemHandle h, unsigned) {
  FakeCuda& f = Get();
  FakeIpcHandle fh;
  std::memcpy(&fh, h.reserved, sizeof fh);
  if (std::memcmp(fh.magic, kIpcMagic, sizeof fh.magic) != 0 || fh.inode == 0) return cu::kErrorInvalidValue;
  if (fh.pid == getpid()) return cu::kErrorInvalidContext;  // CUDA: not in the exporting process
  std::lock_guard<std::mutex> lock(f.mu_);
  for (const auto& [base, a] : f.allocs_)
    if (a.ipc_key == fh.inode) return cu::kErrorAlreadyMapped;
  const std::string path = Format("/proc/%d/fd/%d", fh.pid, fh.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return cu::kErrorInvalidValue;  // the exporter is gone
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != fh.inode) {
    close(fd);
    return cu::kErrorInvalidValue;  // freed, the descriptor reused
  }
  void* dev = f.MapLocked(fd, fh.size, fh.map_len, fh.inode);
  close(fd);
  ++f.ipc_opens_;
  *p = reinterpret_cast<CuDevicePtr>(dev);
  return cu::kSuccess;
}

CuResult FakeCuda::IpcCloseMemHandle(CuDevicePtr p) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  auto it = f.allocs_.find(static_cast<uintptr_t>(p));
  if (it == f.allocs_.end() || it->second.ipc_key == 0) return cu::kErrorInvalidValue;
  FakeDriver::Get().Free(static_cast<uintptr_t>(p));
  munmap(reinterpret_cast<void*>(p), it->second.map_len);
  munmap(it->second.shadow, it->second.map_len);
  f.allocs_.erase(it);
  return cu::kSuccess;
}

FakeCuda::Alloc_* FakeCuda::FindLocked(uintptr_t p, uintptr_t* base) {
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return nullptr;
  --it;
  if (p >= it->first + it->second.size) return nullptr;
  *base = it->first;
  return &it->second;
}

void FakeCuda::Violation(const std::string& s) {
  std::fprintf(stderr, "fake CUDA: VIOLATION: %s\n", s.c_str());
  violations_.push_back(s);
}

std::vector<std::string> FakeCuda::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

void FakeCuda::ClearViolations() {
  std::lock_guard<std::mutex> lock(mu_);
  violations_.clear();
}

void FakeCuda::Join(VClock& a, const VClock& b) {
  for (int i = 0; i < kMaxActors; ++i) a[i] = std::max(a[i], b[i]);
}

uint64_t FakeCuda::HostTick() { return ++host_clock_[0]; }

void* FakeCuda::Touch(const void* dev, size_t n, bool write, int actor, uint64_t seq,
                      const VClock& clock, const char* what) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(dev);
  uintptr_t base = 0;
  Alloc_* a = FindLocked(p, &base);
  if (a == nullptr) return nullptr;
  if (p + n > base + a->size) {
    Violation(Format("%s by %s: %zu bytes at +%zu run past the %zu-byte allocation", what,
                     ActorName(actor).c_str(), n, static_cast<size_t>(p - base), a->size));
    return nullptr;
  }
  if (a->writer >= 0 && a->writer != actor && clock[a->writer] < a->write_seq) {
    Violation(Format("%s by %s (%s of %zu bytes at %p) is not ordered after the write by %s "
                     "(its op %llu): a missing wait",
                     what, ActorName(actor).c_str(), write ? "write" : "read", n, dev,
                     ActorName(a->writer).c_str(), static_cast<unsigned long long>(a->write_seq)));
  }
  if (write) {
    for (const auto& [reader, rseq] : a->readers) {
      if (reader != actor && clock[reader] < rseq) {
        Violation(Format("%s by %s (write of %zu bytes at %p) is not ordered after the read by %s "
                         "(its op %llu): a missing wait",
                         what, ActorName(actor).c_str(), n, dev, ActorName(reader).c_str(),
                         static_cast<unsigned long long>(rseq)));
      }
    }
    a->writer = actor;
    a->write_seq = seq;
    a->readers.clear();
  } else {
    uint64_t& r = a->readers[actor];
    r = std::max(r, seq);
  }
  return static_cast<char*>(a->shadow) + (p - base);
}

// ---- streams ----

FakeCuda::Stream* FakeCuda::NewStreamLocked() {
  if (static_cast<int>(streams_.size()) + 1 >= kMaxActors) abort();
  streams_.push_back(std::make_unique<Stream>());
  Stream* s = streams_.back().get();
  s->id = static_cast<int>(streams_.size());
  s->thread = std::thread([this, s] { RunStream(s); });
  return s;
}

FakeCuda::Stream* FakeCuda::StreamOf(CuStream s) {
  if (s != nullptr) return reinterpret_cast<Stream*>(s);
  if (default_stream_ == nullptr) default_stream_ = NewStreamLocked();
  return default_stream_;
}

CuStream FakeCuda::NewStream() {
  CuStream s = nullptr;
  StreamCreate(&s, cu::kStreamNonBlocking);
  return s;
}

void FakeCuda::FailAsyncCopy(uint64_t skip, CuResult r) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_skip_ = skip;
  fail_result_ = r;
}

bool FakeCuda::CopyFails(Stream* s, const Op& op) {
  if (fail_result_ == 0) return false;
  if (fail_skip_ > 0) {
    --fail_skip_;
    return false;
  }
  if (s->error == 0) {
    s->error = fail_result_;
    s->error_seq = op.seq;
  }
  fail_result_ = 0;
  return true;
}

void FakeCuda::RunStream(Stream* s) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    s->cv.wait(lock, [&] { return stopping_ || !s->queue.empty(); });
    if (s->queue.empty()) return;
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    op.run(op);
    lock.lock();
    s->done_seq = op.seq;
    done_cv_.notify_all();
  }
}

void FakeCuda::Enqueue(Stream* s, std::function<void(const Op&)> run) {
  Op op;
  op.clock = s->enq_clock;
  Join(op.clock, host_clock_);  // after everything the host did or knew
  op.actor = s->id;
  op.seq = ++s->enq_seq;
  op.clock[s->id] = op.seq;
  s->enq_clock = op.clock;
  op.run = std::move(run);
  s->queue.push_back(std::move(op));
  s->cv.notify_one();
}

void FakeCuda::Launch(CuStream stream, std::vector<Access> accesses,
                      std::function<void(const std::vector<void*>&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Enqueue(StreamOf(stream), [this, accesses = std::move(accesses), fn = std::move(fn)](const Op& op) {
    std::vector<void*> views;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (const Access& a : accesses) {
        void* v = Touch(a.dev, a.bytes, a.write, op.actor, op.seq, op.clock, "a kernel");
        if (v == nullptr) Violation(Format("a kernel on stream %d: %p is not device memory", op.actor, a.dev));
        views.push_back(v);
      }
    }
    fn(views);
  });
}

CuResult FakeCuda::StreamCreate(CuStream* s, unsigned) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  *s = reinterpret_cast<CuStream>(f.NewStreamLocked());
  return cu::kSuccess;
}

// Work already queued still runs (as in CUDA); the thread stays.
CuResult FakeCuda::StreamDestroy(CuStream) { return cu::kSuccess; }

CuResult FakeCuda::StreamQuery(CuStream s) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  Stream* st = f.StreamOf(s);
  if (st->done_seq < st->enq_seq) return cu::kErrorNotReady;
  if (CuResult r = StickyError(st, st->enq_seq)) return r;
  Join(f.host_clock_, st->enq_clock);
  return cu::kSuccess;
}

CuResult FakeCuda::StreamSynchronize(CuStream s) {
  FakeCuda& f = Get();
  std::unique_lock<std::mutex> lock(f.mu_);
  Stream* st = f.StreamOf(s);
  const uint64_t target = st->enq_seq;
  const VClock clock = st->enq_clock;
  if (!f.done_cv_.wait_for(lock, kWaitLimit, [&] { return st->done_seq >= target; })) {
    f.Violation(Format("cuStreamSynchronize(stream %d) did not finish in 120 s", st->id));
    return kErrorLaunchTimeout;
  }
  if (CuResult r = StickyError(st, target)) return r;
  Join(f.host_clock_, clock);
  return cu::kSuccess;
}

CuResult FakeCuda::CtxSynchronize() {
  FakeCuda& f = Get();
  std::vector<Stream*> all;
  {
    std::lock_guard<std::mutex> lock(f.mu_);
    for (auto& s : f.streams_) all.push_back(s.get());
  }
  for (Stream* s : all) {
    CuResult r = StreamSynchronize(reinterpret_cast<CuStream>(s));
    if (r != cu::kSuccess) return r;
  }
  return cu::kSuccess;
}

CuResult FakeCuda::StreamWaitEvent(CuStream s, CuEvent e, unsigned) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  Stream* st = f.StreamOf(s);
  const Event* ev = reinterpret_cast<const Event*>(e);
  if (ev->stream == nullptr) return cu::kSuccess;  // never recorded: nothing to wait for
  Stream* es = ev->stream;
  const uint64_t seq = ev->seq;
  Join(st->enq_clock, ev->clock);
  f.Enqueue(st, [&f, es, seq, id = st->id](const Op&) {
    std::unique_lock<std::mutex> l(f.mu_);
    if (!f.done_cv_.wait_for(l, kWaitLimit, [&] { return es->done_seq >= seq; }))
      f.Violation(Format("stream %d waited 120 s for an event of stream %d", id, es->id));
  });
  return cu::kSuccess;
}

CuResult FakeCuda::StreamWaitValue32(CuStream s, CuDevicePtr addr, uint32_t value, unsigned flags) {
  if (flags != cu::kStreamWaitValueGeq) return cu::kErrorInvalidValue;  // the only one modelled
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.Enqueue(f.StreamOf(s), [&f, addr, value](const Op& op) {
    ++f.value_waits_;
    const auto* word = reinterpret_cast<const std::atomic<uint32_t>*>(addr);
    const auto until = std::chrono::steady_clock::now() + kWaitLimit;
    while (static_cast<int32_t>(word->load(std::memory_order_acquire) - value) < 0) {
      if (std::chrono::steady_clock::now() > until) {
        std::lock_guard<std::mutex> l(f.mu_);
        f.Violation(Format("cuStreamWaitValue32 on stream %d: %p never reached %u in 120 s", op.actor,
                           reinterpret_cast<void*>(addr), value));
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  return cu::kSuccess;
}

CuResult FakeCuda::LaunchHostFunc(CuStream s, CuHostFn fn, void* user) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.Enqueue(f.StreamOf(s), [&f, fn, user](const Op&) {
    ++f.host_funcs_;
    fn(user);
  });
  return cu::kSuccess;
}

// ---- events ----

CuResult FakeCuda::EventCreate(CuEvent* e, unsigned) {
  *e = reinterpret_cast<CuEvent>(new Event());
  return cu::kSuccess;
}

CuResult FakeCuda::EventDestroy(CuEvent e) {
  delete reinterpret_cast<Event*>(e);
  return cu::kSuccess;
}

CuResult FakeCuda::EventRecord(CuEvent e, CuStream s) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  Stream* st = f.StreamOf(s);
  f.Enqueue(st, [](const Op&) {});
  Event* ev = reinterpret_cast<Event*>(e);
  ev->stream = st;
  ev->seq = st->enq_seq;
  ev->clock = st->enq_clock;
  return cu::kSuccess;
}

CuResult FakeCuda::EventQuery(CuEvent e) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  const Event* ev = reinterpret_cast<const Event*>(e);
  if (ev->stream == nullptr) return cu::kSuccess;
  if (ev->stream->done_seq < ev->seq) return cu::kErrorNotReady;
  if (CuResult r = StickyError(ev->stream, ev->seq)) return r;
  Join(f.host_clock_, ev->clock);
  return cu::kSuccess;
}

CuResult FakeCuda::EventSynchronize(CuEvent e) {
  FakeCuda& f = Get();
  std::unique_lock<std::mutex> lock(f.mu_);
  const Event* ev = reinterpret_cast<const Event*>(e);
  if (ev->stream == nullptr) return cu::kSuccess;
  if (!f.done_cv_.wait_for(lock, kWaitLimit, [&] { return ev->stream->done_seq >= ev->seq; })) {
    f.Violation(Format("cuEventSynchronize (stream %d) did not finish in 120 s", ev->stream->id));
    return kErrorLaunchTimeout;
  }
  if (CuResult r = StickyError(ev->stream, ev->seq)) return r;
  Join(f.host_clock_, ev->clock);
  return cu::kSuccess;
}

// ---- copies ----

CuResult FakeCuda::MemcpyHtoDAsync(CuDevicePtr dst, const void* src, size_t n, CuStream s) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  uintptr_t base = 0;
  if (n > 0 && f.FindLocked(dst, &base) == nullptr) return cu::kErrorInvalidValue;
  Stream* st = f.StreamOf(s);
  f.Enqueue(st, [&f, st, dst, src, n](const Op& op) {
    ++f.async_copies_;
    std::lock_guard<std::mutex> l(f.mu_);
    if (f.CopyFails(st, op)) return;
    void* d = f.Touch(reinterpret_cast<void*>(dst), n, true, op.actor, op.seq, op.clock, "cuMemcpyHtoDAsync");
    if (d != nullptr && n > 0) std::memcpy(d, src, n);
  });
  return cu::kSuccess;
}

CuResult FakeCuda::MemcpyDtoHAsync(void* dst, CuDevicePtr src, size_t n, CuStream s) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  uintptr_t base = 0;
  if (n > 0 && f.FindLocked(src, &base) == nullptr) return cu::kErrorInvalidValue;
  Stream* st = f.StreamOf(s);
  f.Enqueue(st, [&f, st, dst, src, n](const Op& op) {
    ++f.async_copies_;
    std::lock_guard<std::mutex> l(f.mu_);
    if (f.CopyFails(st, op)) return;
    void* d = f.Touch(reinterpret_cast<void*>(src), n, false, op.actor, op.seq, op.clock, "cuMemcpyDtoHAsync");
    if (d != nullptr && n > 0) std::memcpy(dst, d, n);
  });
  return cu::kSuccess;
}

CuResult FakeCuda::MemcpyAsync(CuDevicePtr dst, CuDevicePtr src, size_t n, CuStream s) {
  FakeCuda& f = Get();
  std::lock_guard<std::mutex> lock(f.mu_);
  uintptr_t base = 0;
  if (n > 0 && (f.FindLocked(dst, &base) == nullptr || f.FindLocked(src, &base) == nullptr))
    return cu::kErrorInvalidValue;  // device to device only in this fake
  f.Enqueue(f.StreamOf(s), [&f, dst, src, n](const Op& op) {
    ++f.async_copies_;
    std::lock_guard<std::mutex> l(f.mu_);
    void* sp = f.Touch(reinterpret_cast<void*>(src), n, false, op.actor, op.seq, op.clock, "cuMemcpyAsync");
    void* dp = f.Touch(reinterpret_cast<void*>(dst), n, true, op.actor, op.seq, op.clock, "cuMemcpyAsync");
    if (sp != nullptr && dp != nullptr && n > 0) std::memmove(dp, sp, n);
  });
  return cu::kSuccess;
}

CuResult FakeCuda::MemcpyHtoD(CuDevicePtr dst, const void* src, size_t n) {
  FakeCuda& f = Get();
  ++f.sync_copies_;
  std::lock_guard<std::mutex> lock(f.mu_);
  const uint64_t seq = f.HostTick();
  void* d = f.Touch(reinterpret_cast<void*>(dst), n, true, 0, seq, f.host_clock_, "cuMemcpyHtoD");
  if (d == nullptr) return cu::kErrorInvalidValue;
  std::memcpy(d, src, n);
  return cu::kSuccess;
}

CuResult FakeCuda::MemcpyDtoH(void* dst, CuDevicePtr src, size_t n) {
  FakeCuda& f = Get();
  ++f.sync_copies_;
  std::lock_guard<std::mutex> lock(f.mu_);
  const uint64_t seq = f.HostTick();
  void* d = f.Touch(reinterpret_cast<void*>(src), n, false, 0, seq, f.host_clock_, "cuMemcpyDtoH");
  if (d == nullptr) return cu::kErrorInvalidValue;
  std::memcpy(dst, d, n);
  return cu::kSuccess;
}

CuResult FakeCuda::MemcpyDtoD(CuDevicePtr dst, CuDevicePtr src, size_t n) {
  FakeCuda& f = Get();
  ++f.sync_copies_;
  std::lock_guard<std::mutex> lock(f.mu_);
  const uint64_t seq = f.HostTick();
  void* s = f.Touch(reinterpret_cast<void*>(src), n, false, 0, seq, f.host_clock_, "cuMemcpyDtoD");
  void* d = f.Touch(reinterpret_cast<void*>(dst), n, true, 0, seq, f.host_clock_, "cuMemcpyDtoD");
  if (s == nullptr || d == nullptr) return cu::kErrorInvalidValue;
  std::memmove(d, s, n);
  return cu::kSuccess;
}

void FakeCuda::Upload(void* dev, const void* src, size_t n) {
  if (n > 0 && MemcpyHtoD(reinterpret_cast<CuDevicePtr>(dev), src, n) != cu::kSuccess) abort();
}

void FakeCuda::Download(void* dst, const void* dev, size_t n) {
  if (n > 0 && MemcpyDtoH(dst, reinterpret_cast<CuDevicePtr>(dev), n) != cu::kSuccess) abort();
}

CuResult FakeCuda::MemAlloc(CuDevicePtr* p, size_t n) {
  *p = reinterpret_cast<CuDevicePtr>(Get().Alloc(n));
  return cu::kSuccess;
}

CuResult FakeCuda::MemFree(CuDevicePtr p) {
  Get().Free(reinterpret_cast<void*>(p));
  return cu::kSuccess;
}

// Pinned host memory is mapped at the same address (unified addressing).
CuResult FakeCuda::MemHostGetDevicePointer(CuDevicePtr* d, void* p, unsigned) {
  *d = reinterpret_cast<CuDevicePtr>(p);
  return cu::kSuccess;
}

}  // namespace zc::gpu::testing
