// FlightRecorder: the last N operations of one communicator, kept so that a
// hung or failed job can say which rank was doing what (docs/debugging.md).
//
// A ring of fixed-size records, two cache lines each. The calling thread
// writes its own record: one atomic increment reserves the next slot, then
// plain stores (relaxed atomics: a mov each) fill the words the call has
// (a null algorithm, transport or label is not stored); the end of the
// call writes one word of the same slot. Nothing on the hot path takes a
// lock, allocates, formats or converts: a record holds the caller's static
// name pointers, the packed small fields, the label only when the thread
// has one, and ticks from the recorder's clock (common/trace_clock.h: by
// default a word that a thread refreshes every millisecond, so that a
// record reads no clock); bytes, nanoseconds and names are worked out when
// a dump reads the ring. Each slot's version word is a
// seqlock that also names the record it holds (id * 8 + phase, odd while
// being written); a reader copies the slot and keeps it only when the
// version was even and unchanged, so a dump taken while operations run
// never shows a half-written record.
//
// Records are made once per call (at the C ABI or the collective's entry),
// never per chunk or message. A record whose slot was reused before its
// call finished (more than N newer operations) is simply lost: its later
// updates see another id in the slot and leave it alone.
//
// Dumps are JSON, one file per communicator and rank (format in
// docs/debugging.md, "The dump format"); python/zcomm/trace reads them.
#pragma once

#include <zcomm/zcomm.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/trace_clock.h"

namespace zc::trace {

// The dump format's version (the "version" field). Readers refuse others.
constexpr int kFormatVersion = 1;

enum class State : uint8_t { kPosted = 1, kStarted = 2, kCompleted = 3, kFailed = 4 };
const char* StateName(State s);

// What a call is, given when its record is made. Strings are static
// (literals or names with program lifetime): the record keeps the pointer.
struct OpInfo {
  const char* op = "";            // "allreduce", "send", "irecv", ...
  const char* algo = nullptr;     // "ring", "shm", ... (collectives)
  const char* transport = nullptr;  // "shm", "tcp", "mixed", ...; null with a peer: the peer's (SetPeerTransports)
  bool comm_transport = false;      // the communicator's (Identity::transport), not stored: collectives
  int dtype = -1;                 // zc_dtype, -1: none (send/recv of bytes)
  int redop = -1;                 // zc_op, -1: none
  uint64_t count = 0;             // elements of dtype, or bytes when there is no dtype
  int root = -1;                  // rooted collectives
  int peer = -1;                  // p2p: the peer (ZC_ANY_SOURCE: any)
  int tag = -1;                   // p2p tag
  uint64_t seq = 0;               // collectives: their sequence number on the communicator
  bool has_key = false;           // parameter-server calls: the key (never with a seq)
  uint64_t key = 0;
};

// One record as a reader sees it (a consistent copy of a slot).
struct Entry {
  uint64_t id = 0;  // 1, 2, ...: order of the calls on this communicator and rank
  OpInfo info;
  uint64_t bytes = 0;  // count times the dtype's size (count when there is no dtype)
  State state = State::kPosted;
  zc_status status = ZC_OK;
  char label[48] = {};
  int64_t t_posted_ns = 0, t_started_ns = 0, t_done_ns = 0;  // CLOCK_MONOTONIC; 0: not yet
};

// Who the recorder belongs to: written into every dump.
struct Identity {
  std::string job;         // a short hash of the job key: equal for every rank of a job
  uint32_t context = 0;    // the communicator's context id (0: the world's)
  int rank = 0, size = 1;  // in the communicator
  int world_rank = 0;      // in its World (the process's rank in the job)
  std::string transport;   // "shm", "tcp", "mixed", "verbs", "self"
};

// The calling thread's label for the operations it starts from now on
// (a torch op, an engine tensor, a PS key); "" or nullptr clears it.
// Truncated to 47 bytes.
void SetThreadLabel(const char* label);
const char* ThreadLabel();

// Where a record's times come from (ZC_TRACE_CLOCK).
enum class Clock : uint8_t {
  kCoarse,   // CoarseClock: one load per time, at most about a millisecond early
  kPrecise,  // the time stamp counter (or the monotonic clock) read for every time
};
const char* ClockName(Clock c);

class FlightRecorder {
 public:
  // capacity 0: records nothing (every call below is a no-op). With a
  // dump folder, the recorder is dumped on SIGUSR2 (common/trace_signal.h)
  // while it lives. A failed call's end time is always precise.
  FlightRecorder(size_t capacity, Identity id, std::string dump_dir, Clock clock = Clock::kCoarse);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ != 0; }
  Clock clock() const { return clock_; }
  size_t capacity() const { return capacity_; }
  const Identity& identity() const { return id_; }
  const std::string& dump_dir() const { return dump_dir_; }

  // A new record in state `s` (kPosted or kStarted), labelled with the
  // thread's label. Returns its id (0 when the recorder is off).
  uint64_t Begin(const OpInfo& info, State s = State::kStarted);
  // Begin for a send or receive of bytes with peer and tag (no dtype, no
  // transport: see SetPeerTransports): the caller builds no OpInfo.
  uint64_t BeginPeer(const char* op, uint64_t bytes, int peer, int tag, State s);
  // A send or receive that was over at once (it never waited), recorded
  // once it is done: started at `start` (Start(), read before the call; 0:
  // now), completed now. A ping-pong's peer then waits for none of the
  // record: the message went out first.
  uint64_t DonePeer(const char* op, uint64_t bytes, int peer, int tag, uint64_t start);
  // The time for DonePeer's start: one load with the coarse clock (0 when
  // its thread sleeps: DonePeer then reads the clock), the counter with the
  // precise one; 0 when the recorder is off.
  uint64_t Start() const {
    if (!capacity_) return 0;
    return clock_ == Clock::kCoarse ? CoarseClock::Peek() : PreciseStart();
  }
  // Begin for a collective (started) on the communicator's transport, its
  // fields as OpInfo's; shape: CollectiveShape(dtype, redop, root), so that
  // every argument travels in a register.
  uint64_t BeginCollective(const char* op, const char* algo, uint64_t seq, uint64_t count, uint64_t shape);
  static uint64_t CollectiveShape(int dtype, int redop, int root);
  // Completed (status ZC_OK) or failed. A failure keeps the first failure's
  // message for the dump. A posted record's start is its end (a request
  // runs when it is waited for or progressed).
  void End(uint64_t id, const Status& st);
  // Sets the algorithm once the callee has chosen it.
  void SetAlgo(uint64_t id, const char* algo);
  // The transport to each peer (static names, indexed by rank): what a
  // reader reports for a record made with a peer and no transport, so
  // that a send or receive does not look its transport up on every call.
  void SetPeerTransports(std::vector<const char*> names);

  // The records still in the ring, oldest first (torn ones skipped).
  std::vector<Entry> Snapshot(size_t* torn = nullptr) const;
  // The dump as JSON text; reason: "timeout", "signal", "request", ...
  std::string ToJson(const char* reason) const;
  // Writes the dump to path (through a temporary file and a rename).
  Status DumpTo(const std::string& path, const char* reason) const;
  // The file name this recorder dumps to inside a folder:
  // "zctrace-<job>-c<context>-r<rank>-p<pid>.json".
  std::string FileName() const;
  // Writes the dump into dump_dir() (nothing when it is empty or the
  // recorder is off). Returns the path written, or "".
  std::string DumpToDir(const char* reason) const;
  // After a failed call: one automatic dump per recorder (the first
  // failure is the one that explains the others); later requests and
  // signals still dump.
  void DumpOnFailure(const Status& st);

 private:
  struct Slot;
  Slot* SlotOf(uint64_t id) const;
  void Fail(uint64_t id, const Status& st);
  void EndFailed(uint64_t id, const Status& st);
  uint64_t Write(OpInfo info, State s, uint64_t now, const char* label);
  __attribute__((noinline)) uint64_t BeginOutOfLine(OpInfo info, State s);
  // The record with the clock read and the thread's label (the out-of-line paths).
  uint64_t WriteNow(OpInfo info, State s);
  __attribute__((noinline)) uint64_t BeginPeerOutOfLine(const char* op, uint64_t bytes, int peer, int tag, State s);
  __attribute__((noinline)) uint64_t BeginCollectiveOutOfLine(const char* op, const char* algo, uint64_t seq,
                                                              uint64_t count, uint64_t shape);
  // A record's time when it needs no call, else 0 (see Begin).
  uint64_t FastTicks() const;
  __attribute__((noinline)) void EndOutOfLine(uint64_t id);
  __attribute__((noinline)) uint64_t PreciseStart() const;
  // Record id's end at `ticks` (when the record is still in its slot).
  void Stamp(uint64_t id, uint64_t ticks);
  // How many times the ring had gone round when record id was made (mod 16).
  uint64_t Lap(uint64_t id) const;
  // Record id's end word for an end at `ticks`, and the ticks back from a
  // slot's end word (0: not record id's end, the call has not ended).
  uint64_t DoneWord(uint64_t id, uint64_t ticks) const;
  uint64_t DoneTicks(uint64_t id, uint64_t word) const;
  std::vector<const char*> PeerTransports() const;
  // A record's time in ticks (common/trace_clock.h), from clock_.
  uint64_t Ticks() const;
  struct TickScale {
    uint64_t tick0;
    int64_t mono0;
    double ns_per_tick;
    int64_t ToNs(uint64_t ticks) const;
  };
  TickScale Scale() const;

  size_t capacity_;
  Identity id_;
  std::string dump_dir_;
  Clock clock_;
  bool tsc_;
  uint64_t tick0_ = 0;
  int64_t mono0_ = 0;
  static constexpr uint64_t kTickMargin = uint64_t{1} << 40;
  uint64_t tick_base_ = 0;  // end words count ticks from here
  size_t slot_mask_ = 0;  // slots - 1: a power of two of slots, at least capacity_
  int slot_shift_ = 0;    // log2(slots)
  std::unique_ptr<Slot[]> slots_;
  // Its own cache line: the writers' counter must not share one with the
  // fields that the hot path only reads.
  alignas(64) std::atomic<uint64_t> next_{0};
  std::atomic<bool> failure_dumped_{false};
  mutable std::mutex failure_mu_;  // failure path, peer_transports_ (never the hot path)
  std::vector<const char*> peer_transports_;
  uint64_t failure_id_ = 0;
  zc_status failure_code_ = ZC_OK;
  std::string failure_message_;
};

}  // namespace zc::trace
