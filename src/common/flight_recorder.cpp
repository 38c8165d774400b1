#include "common/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/trace_signal.h"

namespace zc::trace {
namespace {

// Words of a slot, after its version. 15 words and the version: two cache
// lines per record. A record stores only the words its call has (the
// flags in kPacked say which): on this project's VM each store of a record
// costs an 8-byte call about 1% (docs/debugging.md, "Cost").
enum Word : int {
  kSeq,  // or the key of a parameter-server call (flag kKey)
  kOp,
  kAlgo,
  kTransport,  // a collective's is the communicator's (flag kCommTransport): not stored
  kPacked,     // see Pack()
  kCount,
  kRootPeer,  // root (low 32 bits) | peer << 32; flag kHasRanks (else both -1)
  kBegin,     // ticks when the record was made
  kDone,      // the end: DoneWord(); another record's until this call ends
  kLabel,     // 6 words, written only when the thread has a label
  kWords = kLabel + 6,
};
static_assert(sizeof(Entry::label) == 6 * sizeof(uint64_t), "label words");

// A version names its record and the write it is in: id * 8 + phase, the
// phase odd while a writer is inside (1: Begin, 5: SetAlgo).
constexpr uint64_t kPhases = 8;
constexpr uint64_t VersionOf(uint64_t id, uint64_t phase) { return id * kPhases + phase; }
constexpr uint64_t IdOf(uint64_t version) { return version / kPhases; }

// kPacked: dtype + 1 (5 bits) | redop + 1 (4) | failed (1) | flags (9) |
// status (8) | tag (32), or the root there when the call has a root and no
// tag or peer (rooted collectives: flag kRootInTag, no kRootPeer word).
// The flags say which optional words a record holds: a word whose flag is
// off was not written (it may hold an older record's value), so the hot
// path stores only what a call has. A record is made with failed and
// status 0; a failed end sets them, and a record's state comes from them
// and its end word (Snapshot).
constexpr uint64_t kHasLabel = 1, kBeganStarted = 2, kKey = 4, kHasSeq = 8, kHasAlgo = 16, kHasTransport = 32,
                   kCommTransport = 64, kHasRanks = 128, kRootInTag = 256;
constexpr int kRedopShift = 5, kFailedShift = 9, kFlagShift = 10, kStatusShift = 20, kTagShift = 32;
constexpr uint64_t kFlagMask = 0x1ff;

uint64_t Pack(const OpInfo& i, uint64_t flags) {
  const int32_t high = (flags & kRootInTag) ? i.root : i.tag;
  return (static_cast<uint64_t>(i.dtype + 1) & 0x1f) | (static_cast<uint64_t>(i.redop + 1) & 0xf) << kRedopShift |
         flags << kFlagShift | static_cast<uint64_t>(static_cast<uint32_t>(high)) << kTagShift;
}

uint64_t WithFailure(uint64_t packed, zc_status st) {
  return (packed & ~(0xffull << kStatusShift)) | uint64_t{1} << kFailedShift |
         (static_cast<uint64_t>(st) & 0xff) << kStatusShift;
}

// The end word: the end's ticks (counted from the recorder's tick base)
// above a set bit and the record's lap, the number of times the ring had
// gone round when it was made (mod 16). The end is one store, and the
// begin need not clear the word: a reader takes it for the record whose
// lap it names, and the slot's previous record, one lap older, names
// another. 59 bits of ticks last 4.5 years at 4 GHz.
constexpr int kLapBits = 4, kDoneShift = kLapBits + 1;
constexpr uint64_t kLapMask = (uint64_t{1} << kLapBits) - 1, kDoneSet = uint64_t{1} << kLapBits;

uint64_t PtrWord(const char* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }
const char* WordPtr(uint64_t w) { return reinterpret_cast<const char*>(static_cast<uintptr_t>(w)); }

thread_local char t_label[sizeof(Entry::label)] = {};
// Whether any thread has ever set a label: until one has, a record does not
// read t_label (a thread-local of a shared library costs a call to
// __tls_get_addr, as much as the rest of the record).
alignas(64) std::atomic<bool> g_labels_used{false};  // read on every record: not beside written words

const char* DtypeText(int d) {
  static const char* const names[] = {"int8",   "uint8",    "int32",   "uint32",  "int64",
                                      "uint64", "float16",  "bfloat16", "float32", "float64",
                                      "int16",  "uint16",   "bool"};
  return d >= 0 && d < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[d] : nullptr;
}

// Bytes per element of a zc_dtype (1 when there is none: count is bytes).
uint64_t DtypeBytes(int d) {
  static const uint8_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
  return d >= 0 && d < static_cast<int>(sizeof(sizes)) ? sizes[d] : 1;
}

const char* RedopText(int o) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};
  return o >= 0 && o < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[o] : nullptr;
}

const char* StatusText(zc_status s) {
  switch (s) {
    case ZC_OK: return "ZC_OK";
    case ZC_ERR_INVALID_ARG: return "ZC_ERR_INVALID_ARG";
    case ZC_ERR_MISMATCH: return "ZC_ERR_MISMATCH";
    case ZC_ERR_TIMEOUT: return "ZC_ERR_TIMEOUT";
    case ZC_ERR_PEER_LOST: return "ZC_ERR_PEER_LOST";
    case ZC_ERR_ABORTED: return "ZC_ERR_ABORTED";
    case ZC_ERR_NO_MEMORY: return "ZC_ERR_NO_MEMORY";
    case ZC_ERR_UNSUPPORTED: return "ZC_ERR_UNSUPPORTED";
    case ZC_ERR_SYSTEM: return "ZC_ERR_SYSTEM";
    case ZC_ERR_INTERNAL: return "ZC_ERR_INTERNAL";
  }
  return "ZC_ERR_UNKNOWN";
}

// JSON text of s (quoted, escaped).
void AppendString(std::string* out, const char* s) {
  out->push_back('"');
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : ""); *p; ++p) {
    switch (*p) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      case '\r': *out += "\\r"; break;
      default:
        if (*p < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", *p);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(*p));
        }
    }
  }
  out->push_back('"');
}

void AppendKey(std::string* out, const char* key) {
  AppendString(out, key);
  out->push_back(':');
}

void AppendField(std::string* out, const char* key, const char* s) {
  AppendKey(out, key);
  if (s) AppendString(out, s);
  else *out += "null";
  out->push_back(',');
}

void AppendField(std::string* out, const char* key, long long v) {
  AppendKey(out, key);
  *out += std::to_string(v);
  out->push_back(',');
}

void AppendEntry(std::string* out, const Entry& e) {
  *out += "{";
  AppendField(out, "id", static_cast<long long>(e.id));
  AppendField(out, "seq", static_cast<long long>(e.info.seq));
  AppendField(out, "op", e.info.op);
  AppendField(out, "dtype", DtypeText(e.info.dtype));
  AppendField(out, "redop", RedopText(e.info.redop));
  AppendField(out, "count", static_cast<long long>(e.info.count));
  AppendField(out, "bytes", static_cast<long long>(e.bytes));
  AppendField(out, "root", e.info.root);
  AppendField(out, "peer", e.info.peer);
  AppendField(out, "tag", e.info.tag);
  AppendKey(out, "key");
  *out += e.info.has_key ? std::to_string(e.info.key) : std::string("null");
  out->push_back(',');
  AppendField(out, "algo", e.info.algo);
  AppendField(out, "transport", e.info.transport);
  AppendField(out, "label", e.label);
  AppendField(out, "state", StateName(e.state));
  AppendField(out, "status", StatusText(e.status));
  AppendField(out, "t_posted_ns", static_cast<long long>(e.t_posted_ns));
  AppendField(out, "t_started_ns", static_cast<long long>(e.t_started_ns));
  AppendField(out, "t_done_ns", static_cast<long long>(e.t_done_ns));
  out->pop_back();
  *out += "}";
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

// A record: the version and its words, every one an atomic so that a
// reader racing a writer is well defined; relaxed loads and stores are
// plain moves.
struct alignas(64) FlightRecorder::Slot {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> w[kWords] = {};

  // Seqlock write side: the odd version, the words, the even version with
  // release (so that a reader who sees it sees the words). The fence orders
  // the odd version before the words (free on x86, where stores stay in
  // order).
  void Open(uint64_t odd) {
    version.store(odd, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void Close(uint64_t odd) { version.store(odd + 1, std::memory_order_release); }
  void Set(int word, uint64_t value) { w[word].store(value, std::memory_order_relaxed); }
  uint64_t Get(int word) const { return w[word].load(std::memory_order_relaxed); }
};
const char* StateName(State s) {
  switch (s) {
    case State::kPosted: return "posted";
    case State::kStarted: return "started";
    case State::kCompleted: return "completed";
    case State::kFailed: return "failed";
  }
  return "unknown";
}

void SetThreadLabel(const char* label) {
  if (label && *label && !g_labels_used.load(std::memory_order_relaxed))
    g_labels_used.store(true, std::memory_order_relaxed);
  memset(t_label, 0, sizeof(t_label));
  if (label) strncpy(t_label, label, sizeof(t_label) - 1);
}

const char* ThreadLabel() { return t_label; }

// What a record made now stores as its label: the thread's, or null when
// it has none (the thread-local is read only once some thread set one).
inline const char* LabelToStore() {
  return g_labels_used.load(std::memory_order_relaxed) && t_label[0] != 0 ? t_label : nullptr;
}

const char* ClockName(Clock c) { return c == Clock::kPrecise ? "precise" : "coarse"; }

// Inline: called on every Begin and End.
inline uint64_t FlightRecorder::Ticks() const {
  if (clock_ == Clock::kCoarse) return CoarseClock::Now();
#if defined(__x86_64__)
  if (tsc_) return __rdtsc();
#endif
  return PreciseTicks();
}

FlightRecorder::TickScale FlightRecorder::Scale() const {
  TickScale s{tick0_, mono0_, 1.0};
  if (!tsc_) {
    s.tick0 = 0;
    s.mono0 = 0;
    return s;
  }
  // Ticks per nanosecond from the interval since the recorder was made;
  // at least a millisecond of it, so that the two reads' skew is noise.
  if (NowNs() - mono0_ < 1000000) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const uint64_t t1 = PreciseTicks();
  const int64_t m1 = NowNs();
  if (t1 > tick0_) s.ns_per_tick = static_cast<double>(m1 - mono0_) / static_cast<double>(t1 - tick0_);
  return s;
}

int64_t FlightRecorder::TickScale::ToNs(uint64_t t) const {
  if (t == 0) return 0;
  return mono0 + static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(t - tick0)) * ns_per_tick);
}

FlightRecorder::FlightRecorder(size_t capacity, Identity id, std::string dump_dir, Clock clock)
    : capacity_(capacity),
      id_(std::move(id)),
      dump_dir_(std::move(dump_dir)),
      clock_(clock),
      tsc_(TicksAreTsc()) {
  static_assert(sizeof(Slot) == 128, "two cache lines per record");
  tick0_ = PreciseTicks();
  mono0_ = NowNs();
  // Coarse times may be a little older than the recorder: the base is well before it.
  tick_base_ = tick0_ > kTickMargin ? tick0_ - kTickMargin : 0;
  if (capacity_) {
    // A power of two of slots: the slot of a record is a mask of its id (a
    // division by the capacity costs several ns on every Begin and End).
    // Snapshot keeps the newest capacity_ of them.
    size_t slots = 1;
    while (slots < capacity_) slots <<= 1;
    slot_mask_ = slots - 1;
    slot_shift_ = __builtin_ctzll(slots);
    slots_.reset(new Slot[slots]);
  }
  if (capacity_ && !dump_dir_.empty()) RegisterForSignal(this);
  if (capacity_ && clock_ == Clock::kCoarse) CoarseClock::Watch(&next_);
}

void FlightRecorder::SetPeerTransports(std::vector<const char*> names) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  peer_transports_ = std::move(names);
}

std::vector<const char*> FlightRecorder::PeerTransports() const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return peer_transports_;
}

FlightRecorder::~FlightRecorder() {
  if (capacity_ && clock_ == Clock::kCoarse) CoarseClock::Unwatch(&next_);
  if (capacity_ && !dump_dir_.empty()) UnregisterForSignal(this);
}

FlightRecorder::Slot* FlightRecorder::SlotOf(uint64_t id) const {
  return &slots_[(id - 1) & slot_mask_];
}

// A send's or receive's OpInfo (a value: Write folds its constant fields).
inline OpInfo PeerInfo(const char* op, uint64_t bytes, int peer, int tag) {
  OpInfo info;
  info.op = op;
  info.count = bytes;
  info.peer = peer;
  info.tag = tag;
  return info;
}

// Stores only the words the call has (see kPacked's flags): every store is
// a share of the record's cost, which is measured against an 8-byte call,
// and so is every register a function saves on the stack. So the common
// path of each entry point calls nothing: its time is a load of the coarse
// clock's word and no thread has a label to copy; everything else (the
// clock's wake-up, the precise clock, the label) is a tail call to an
// out-of-line path that takes only registers. Each entry point repeats
// that choice rather than sharing a helper that takes the OpInfo: one
// OpInfo used by both branches is built on the stack, where each branch
// building its own folds into the stores.
inline uint64_t FlightRecorder::FastTicks() const {
  // The precise clock's counter read (rdtsc) would take two more registers
  // in the common path's frame, and costs more than the saves it forces.
  const bool fast = clock_ == Clock::kCoarse && !g_labels_used.load(std::memory_order_relaxed);
  return __builtin_expect(fast, 1) ? CoarseClock::Peek() : 0;
}

uint64_t FlightRecorder::Begin(const OpInfo& info, State s) {
  if (!capacity_) return 0;
  if (const uint64_t now = FastTicks()) return Write(info, s, now, nullptr);
  return BeginOutOfLine(info, s);
}

uint64_t FlightRecorder::BeginPeer(const char* op, uint64_t bytes, int peer, int tag, State s) {
  if (!capacity_) return 0;
  if (const uint64_t now = FastTicks()) return Write(PeerInfo(op, bytes, peer, tag), s, now, nullptr);
  return BeginPeerOutOfLine(op, bytes, peer, tag, s);
}

uint64_t FlightRecorder::BeginPeerOutOfLine(const char* op, uint64_t bytes, int peer, int tag, State s) {
  return WriteNow(PeerInfo(op, bytes, peer, tag), s);
}

// Off the hot path by design (the call is over): the label and the clock as WriteNow's.
uint64_t FlightRecorder::DonePeer(const char* op, uint64_t bytes, int peer, int tag, uint64_t start) {
  if (!capacity_) return 0;
  const uint64_t end = Ticks();
  const uint64_t id = Write(PeerInfo(op, bytes, peer, tag), State::kStarted, start ? start : end, LabelToStore());
  Stamp(id, end);
  return id;
}

uint64_t FlightRecorder::PreciseStart() const { return Ticks(); }

// A collective's OpInfo from BeginCollective's arguments.
inline OpInfo CollectiveInfo(const char* op, const char* algo, uint64_t seq, uint64_t count, uint64_t shape) {
  OpInfo info;
  info.op = op;
  info.algo = algo;
  info.comm_transport = true;
  info.seq = seq;
  info.count = count;
  info.dtype = static_cast<int8_t>(shape & 0xff);
  info.redop = static_cast<int8_t>((shape >> 8) & 0xff);
  info.root = static_cast<int32_t>(shape >> 32);
  return info;
}

uint64_t FlightRecorder::CollectiveShape(int dtype, int redop, int root) {
  return static_cast<uint64_t>(static_cast<uint8_t>(dtype)) | static_cast<uint64_t>(static_cast<uint8_t>(redop)) << 8 |
         static_cast<uint64_t>(static_cast<uint32_t>(root)) << 32;
}

uint64_t FlightRecorder::BeginCollective(const char* op, const char* algo, uint64_t seq, uint64_t count,
                                         uint64_t shape) {
  if (!capacity_) return 0;
  if (const uint64_t now = FastTicks())
    return Write(CollectiveInfo(op, algo, seq, count, shape), State::kStarted, now, nullptr);
  return BeginCollectiveOutOfLine(op, algo, seq, count, shape);
}

uint64_t FlightRecorder::BeginCollectiveOutOfLine(const char* op, const char* algo, uint64_t seq, uint64_t count,
                                                  uint64_t shape) {
  return WriteNow(CollectiveInfo(op, algo, seq, count, shape), State::kStarted);
}

// With the monotonic clock instead of the counter, or once some thread has a label
// (the thread-local is read through a call, which makes a function save
// registers: kept out of the common path).
uint64_t FlightRecorder::BeginOutOfLine(OpInfo info, State s) { return WriteNow(info, s); }

// Each out-of-line path inlines this, so that the OpInfo its arguments
// make folds into the stores as on the common path: the precise clock
// takes it on every record.
inline __attribute__((always_inline)) uint64_t FlightRecorder::WriteNow(OpInfo info, State s) {
  const uint64_t now = Ticks();
  return Write(info, s, now, LabelToStore());
}

// label: the thread's label (written with the record, inside its seqlock)
// or null.
inline __attribute__((always_inline)) uint64_t FlightRecorder::Write(OpInfo info, State s, uint64_t now,
                                                                     const char* label) {
  // The words first, the slot after: fewer values live across the
  // increment, so the common path needs no register saved on the stack.
  const bool has_seq = info.has_key || info.seq != 0;
  const bool has_transport = info.transport && !info.comm_transport;
  // -1 is all ones: (a & b) == -1 when both are -1. Written so, because
  // GCC compares two adjacent ints of the OpInfo as one 64-bit word through
  // the stack, and that load waits for both stores (no forwarding).
  const bool root_in_tag = info.root != -1 && (info.tag & info.peer) == -1;
  const bool has_ranks = !root_in_tag && (info.root & info.peer) != -1;
  const uint64_t flags = (s == State::kStarted ? kBeganStarted : 0) | (info.has_key ? kKey : 0) |
                         (has_seq ? kHasSeq : 0) | (info.algo ? kHasAlgo : 0) |
                         (has_transport ? kHasTransport : 0) | (info.comm_transport ? kCommTransport : 0) |
                         (has_ranks ? kHasRanks : 0) | (root_in_tag ? kRootInTag : 0) | (label ? kHasLabel : 0);
  const uint64_t packed = Pack(info, flags);
  const uint64_t seq = info.has_key ? info.key : info.seq;
  const uint64_t ranks =
      static_cast<uint32_t>(info.root) | static_cast<uint64_t>(static_cast<uint32_t>(info.peer)) << 32;
  const uint64_t id = next_.fetch_add(1, std::memory_order_relaxed) + 1;
  Slot* slot = SlotOf(id);
  const uint64_t odd = VersionOf(id, 1);
  slot->Open(odd);
  if (has_seq) slot->Set(kSeq, seq);
  slot->Set(kOp, PtrWord(info.op));
  if (info.algo) slot->Set(kAlgo, PtrWord(info.algo));
  if (has_transport) slot->Set(kTransport, PtrWord(info.transport));
  slot->Set(kPacked, packed);
  slot->Set(kCount, info.count);
  if (has_ranks) slot->Set(kRootPeer, ranks);
  slot->Set(kBegin, now);
  if (label) {
    uint64_t words[6];
    memcpy(words, label, sizeof(words));
    for (int i = 0; i < 6; ++i) slot->Set(kLabel + i, words[i]);
  }
  slot->Close(odd);
  return id;
}

void FlightRecorder::SetAlgo(uint64_t id, const char* algo) {
  if (!id || !algo) return;
  Slot* slot = SlotOf(id);
  if (IdOf(slot->version.load(std::memory_order_relaxed)) != id) return;  // overwritten by newer records
  const uint64_t odd = VersionOf(id, 5);
  const uint64_t packed = slot->Get(kPacked);
  slot->Open(odd);
  slot->Set(kAlgo, PtrWord(algo));
  slot->Set(kPacked, packed | kHasAlgo << kFlagShift);
  slot->Close(odd);
}

// One store and no version change: the end word, with release. A failed
// end first marks the record failed in kPacked; a reader that takes the
// end word (acquire) sees that mark.
// Like Begin's, the common path calls nothing (the clock's wake-up is out
// of line).
void FlightRecorder::End(uint64_t id, const Status& st) {
  if (!id) return;
  if (__builtin_expect(!st.ok(), 0)) return EndFailed(id, st);
  const uint64_t now = clock_ == Clock::kCoarse ? CoarseClock::Peek() : 0;
  if (__builtin_expect(now == 0, 0)) return EndOutOfLine(id);
  Stamp(id, now);
}

void FlightRecorder::EndOutOfLine(uint64_t id) { Stamp(id, Ticks()); }

inline void FlightRecorder::Stamp(uint64_t id, uint64_t ticks) {
  Slot* slot = SlotOf(id);
  if (IdOf(slot->version.load(std::memory_order_relaxed)) != id) return;  // overwritten by newer records
  slot->w[kDone].store(DoneWord(id, ticks), std::memory_order_release);
}

void FlightRecorder::EndFailed(uint64_t id, const Status& st) {
  Fail(id, st);
  Slot* slot = SlotOf(id);
  if (IdOf(slot->version.load(std::memory_order_relaxed)) != id) return;
  slot->Set(kPacked, WithFailure(slot->Get(kPacked), st.code()));
  // The precise time: the first failure is found by comparing ends across ranks.
  slot->w[kDone].store(DoneWord(id, PreciseTicks()), std::memory_order_release);
}

inline uint64_t FlightRecorder::Lap(uint64_t id) const { return ((id - 1) >> slot_shift_) & kLapMask; }

inline uint64_t FlightRecorder::DoneWord(uint64_t id, uint64_t ticks) const {
  const uint64_t since = ticks > tick_base_ ? ticks - tick_base_ : 0;
  return since << kDoneShift | kDoneSet | Lap(id);
}

uint64_t FlightRecorder::DoneTicks(uint64_t id, uint64_t word) const {
  if ((word & (kDoneSet | kLapMask)) != (kDoneSet | Lap(id))) return 0;  // another record's end
  return tick_base_ + (word >> kDoneShift);
}

// The first failure's message, kept for the dump (failures only: a lock is fine).
void FlightRecorder::Fail(uint64_t id, const Status& st) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (failure_id_) return;
  failure_id_ = id;
  failure_code_ = st.code();
  failure_message_ = st.message();
}

std::vector<Entry> FlightRecorder::Snapshot(size_t* torn) const {
  std::vector<Entry> out;
  size_t torn_count = 0;
  const TickScale scale = Scale();
  const std::vector<const char*> peer_transports = PeerTransports();
  auto peer_transport = [&](int peer) {
    return peer >= 0 && static_cast<size_t>(peer) < peer_transports.size() ? peer_transports[peer] : nullptr;
  };
  const uint64_t newest = next_.load(std::memory_order_acquire);
  const uint64_t oldest = newest > capacity_ ? newest - capacity_ + 1 : 1;
  for (size_t i = 0; capacity_ && i <= slot_mask_; ++i) {
    const Slot& s = slots_[i];
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 == 0) continue;  // never written
    // The end first (acquire: a failed end marks kPacked before it), then the rest.
    uint64_t w[kWords];
    w[kDone] = s.w[kDone].load(std::memory_order_acquire);
    for (int k = 0; k < kWords; ++k)
      if (k != kDone) w[k] = s.Get(k);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t v2 = s.version.load(std::memory_order_relaxed);
    if ((v1 & 1) || v1 != v2) {
      ++torn_count;
      continue;
    }
    const uint64_t packed = w[kPacked];
    const uint64_t flags = (packed >> kFlagShift) & kFlagMask;
    Entry e;
    e.id = IdOf(v1);
    if (e.id < oldest) continue;  // older than the last capacity_ records
    e.info.has_key = flags & kKey;
    if (flags & kHasSeq) (e.info.has_key ? e.info.key : e.info.seq) = w[kSeq];
    e.info.op = WordPtr(w[kOp]);
    e.info.algo = (flags & kHasAlgo) ? WordPtr(w[kAlgo]) : nullptr;
    e.info.dtype = static_cast<int>(packed & 0x1f) - 1;
    e.info.redop = static_cast<int>((packed >> kRedopShift) & 0xf) - 1;
    const uint64_t done = DoneTicks(e.id, w[kDone]);
    const bool failed = done && ((packed >> kFailedShift) & 1);
    e.state = failed ? State::kFailed : done ? State::kCompleted : (flags & kBeganStarted) ? State::kStarted : State::kPosted;
    e.status = failed ? static_cast<zc_status>(static_cast<int8_t>((packed >> kStatusShift) & 0xff)) : ZC_OK;
    const int32_t high = static_cast<int32_t>(packed >> kTagShift);
    e.info.tag = (flags & kRootInTag) ? -1 : high;
    e.info.count = w[kCount];
    e.bytes = e.info.count * DtypeBytes(e.info.dtype);
    const uint64_t ranks = (flags & kHasRanks) ? w[kRootPeer] : ~uint64_t{0};  // none: -1, -1
    e.info.root = (flags & kRootInTag) ? high : static_cast<int32_t>(ranks & 0xffffffffu);
    e.info.peer = static_cast<int32_t>(ranks >> 32);
    e.info.comm_transport = flags & kCommTransport;
    e.info.transport = (flags & kHasTransport)    ? WordPtr(w[kTransport])
                       : e.info.comm_transport ? id_.transport.c_str()
                                               : peer_transport(e.info.peer);
    // A record made started began running when it was made; a posted one
    // ran when its request was waited for or progressed: its end.
    e.t_posted_ns = scale.ToNs(w[kBegin]);
    e.t_done_ns = scale.ToNs(done);
    e.t_started_ns = (flags & kBeganStarted) ? e.t_posted_ns : e.t_done_ns;
    if (flags & kHasLabel) {
      memcpy(e.label, &w[kLabel], sizeof(e.label));
      e.label[sizeof(e.label) - 1] = 0;
    }
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.id < b.id; });
  if (torn) *torn = torn_count;
  return out;
}

std::string FlightRecorder::ToJson(const char* reason) const {
  size_t torn = 0;
  std::vector<Entry> entries = Snapshot(&torn);
  std::string out;
  out.reserve(512 + entries.size() * 400);
  out += "{";
  AppendField(&out, "format", "zcomm-flight-recorder");
  AppendField(&out, "version", kFormatVersion);
  AppendField(&out, "reason", reason);
  AppendField(&out, "job", id_.job.c_str());
  AppendKey(&out, "comm");
  out += "{";
  AppendField(&out, "context", static_cast<long long>(id_.context));
  AppendField(&out, "rank", id_.rank);
  AppendField(&out, "size", id_.size);
  AppendField(&out, "world_rank", id_.world_rank);
  AppendField(&out, "transport", id_.transport.c_str());
  out.pop_back();
  out += "},";
  AppendField(&out, "host", Hostname().c_str());
  AppendField(&out, "pid", static_cast<long long>(getpid()));
  AppendField(&out, "monotonic_ns", static_cast<long long>(NowNs()));
  AppendField(&out, "realtime_ns", static_cast<long long>(RealtimeNs()));
  AppendField(&out, "clock", ClockName(clock_));
  AppendField(&out, "clock_resolution_ns",
              clock_ == Clock::kCoarse ? static_cast<long long>(CoarseClock::kPeriodUs) * 1000 : 1LL);
  AppendField(&out, "capacity", static_cast<long long>(capacity_));
  AppendField(&out, "recorded", static_cast<long long>(next_.load(std::memory_order_relaxed)));
  AppendField(&out, "torn", static_cast<long long>(torn));
  AppendKey(&out, "failure");
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    if (failure_id_) {
      out += "{";
      AppendField(&out, "id", static_cast<long long>(failure_id_));
      AppendField(&out, "status", StatusText(failure_code_));
      AppendField(&out, "message", failure_message_.c_str());
      out.pop_back();
      out += "},";
    } else {
      out += "null,";
    }
  }
  AppendKey(&out, "entries");
  out += "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    out += i ? ",\n" : "\n";
    AppendEntry(&out, entries[i]);
  }
  out += "]}\n";
  return out;
}

Status FlightRecorder::DumpTo(const std::string& path, const char* reason) const {
  if (path.empty()) return Error(ZC_ERR_INVALID_ARG, "flight recorder dump: empty path");
  const std::string text = ToJson(reason);
  // One temporary file per writing thread: a failure's dump and a
  // signal's may run at once, and each must rename a whole file.
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(syscall(SYS_gettid)));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError(errno, "flight recorder dump: cannot create %s", tmp.c_str());
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return SystemError(err, "flight recorder dump: cannot write %s", tmp.c_str());
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return SystemError(err, "flight recorder dump: cannot rename %s to %s", tmp.c_str(), path.c_str());
  }
  return Status::Ok();
}

std::string FlightRecorder::FileName() const {
  return Format("zctrace-%s-c%u-r%d-p%ld.json", id_.job.empty() ? "local" : id_.job.c_str(), id_.context,
                id_.rank, static_cast<long>(getpid()));
}

std::string FlightRecorder::DumpToDir(const char* reason) const {
  if (!capacity_ || dump_dir_.empty()) return "";
  // The folder's last component is made when missing (zcrun names one and
  // leaves it to the first dump), readable by this user only.
  if (mkdir(dump_dir_.c_str(), 0700) != 0 && errno != EEXIST)
    ZC_INFO(kCommon, "flight recorder: cannot make %s: %s", dump_dir_.c_str(), strerror(errno));
  const std::string path = dump_dir_ + "/" + FileName();
  Status st = DumpTo(path, reason);
  if (!st.ok()) {
    ZC_WARN(kCommon, "%s", st.message().c_str());
    return "";
  }
  ZC_INFO(kCommon, "flight recorder of rank %d (context %u) dumped to %s (%s)", id_.rank, id_.context,
          path.c_str(), reason);
  return path;
}

void FlightRecorder::DumpOnFailure(const Status& st) {
  if (st.ok() || !capacity_ || dump_dir_.empty()) return;
  // A refused argument is the caller's mistake on this rank alone: nothing hangs.
  if (st.code() == ZC_ERR_INVALID_ARG || st.code() == ZC_ERR_UNSUPPORTED) return;
  if (failure_dumped_.exchange(true)) return;
  const char* reason = st.code() == ZC_ERR_TIMEOUT     ? "timeout"
                       : st.code() == ZC_ERR_PEER_LOST ? "peer_lost"
                       : st.code() == ZC_ERR_ABORTED   ? "aborted"
                       : st.code() == ZC_ERR_MISMATCH  ? "mismatch"
                                                       : "failure";
  DumpToDir(reason);
}

}  // namespace zc::trace
