// Worker: the worker half of a zc_ps. Declaring a key sends every server
// the key and the descriptors of this worker's reply slots and push credits
// (registered memory, allocated here once per key and server), and receives
// the descriptors of its push slots on the servers. From then on a push is,
// per piece (Placement::Pieces), one one-sided write of the piece into its
// slot on its server plus the flag; a pull waits for the server's reply in
// the reply slot (synchronous mode: the server answers each piece as soon
// as every worker's piece is in; asynchronous: after a one-word request)
// and copies it out, from the reply slot or, for kReplyRef, straight from
// the server's results region; over tcp a push names where its round's
// queued pull takes each piece, and the server writes the reply there
// (kReplyInto: nothing to copy).
//
// Pushes and pulls are operations run by an engine (Pass), piece by piece:
// every push whose key has no earlier push pending moves at once, and so
// does every pull with no earlier pull of its key: a pull takes a piece as
// soon as its reply is in, while later pieces of the same key are still
// being pushed (the reply's flag orders it after the push; a next round's
// push waits for its slot's credit and the server for every reply slot to
// be handed back); a push whose tensor overlaps an earlier pull's waits
// for it (it pushes what the pull writes). Asynchronous mode keeps each
// key's operations in call order (a pull request must follow the push
// before it). A push never waits for a server (a piece goes as soon as its
// slot's credit is there), and its caller never waits for another worker
// (pieces lent to this rank's server are taken back once the caller has
// waited kReclaim; wait_watch.h). When every peer is on
// shared memory the engine steps the co-located server between its pieces
// (Server::Assist). Waits are the engine's passes; a stalled operation
// fails with a server's alert, a lost member or its deadline (ZC_TIMEOUT
// without progress).
//
// Order rules are checked by Admit*() in the calling thread, before any
// transfer, so that a bad call fails at once on the calling rank.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "p2p/region_hold.h"
#include "ps/chunk_slots.h"
#include "ps/protocol.h"
#include "ps/shared.h"
#include "ps/wait_watch.h"

namespace zc::ps {

class Server;

class Worker {
 public:
  struct Key;
  using DoneFn = std::function<void(const Status&)>;
  explicit Worker(Shared* shared, Server* colocated);
  ~Worker();  // frees every region

  Status Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init);
  // Checks the order rules and advances the key's state; *k and *round are
  // what DoPush / DoPull need.
  Status AdmitPush(uint64_t key, Key** k, uint64_t* round);
  Status AdmitPull(uint64_t key, Key** k, uint64_t* round);
  // Queues an operation (thread-safe); done(status) runs in the thread
  // that completes it, inside Pass. A push's watch tells when its caller
  // waits for it (null: from the start, a blocking push).
  void EnqueuePush(Key* k, const void* buf, uint64_t round, DoneFn done, std::shared_ptr<WaitWatch> watch);
  void EnqueuePull(Key* k, void* buf, uint64_t round, DoneFn done);
  // Operations queued or running (thread-safe).
  int in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  // While one lives, a thread waits for every queued push (a declaration
  // or zc_ps_free waiting for the engine to be quiet): as if each push's
  // caller waited for it.
  class Draining {
   public:
    explicit Draining(Worker* w) : w_(w) { w_->draining_.fetch_add(1, std::memory_order_acq_rel); }
    ~Draining() { w_->draining_.fetch_sub(1, std::memory_order_acq_rel); }
    Draining(const Draining&) = delete;
    Draining& operator=(const Draining&) = delete;

   private:
    Worker* w_;
  };
  // One pass of the engine over every operation (one thread at a time: the
  // caller holds the instance's engine lock). True when something moved.
  bool Pass();
  // Whether the engine's waits may sleep on notifications (every server is
  // a thread of this process or notifies: tcp).
  bool notified() const { return notified_; }
  // Waits until the servers have taken every push, then says goodbye
  // (no operation in flight).
  Status Bye();
  size_t bytes_of(const Key* k) const;
  // The bytes of a declared key's tensor (ZC_ERR_INVALID_ARG if undeclared).
  Status KeyBytes(uint64_t key, size_t* bytes) const;

  struct PerServer {
    bool used = false;
    ChunkSlotLayout layout;
    MemRegion* reply_slots = nullptr;   // servers write replies here
    MemRegion* push_credits = nullptr;  // servers return push slots here
    ChunkSlotWriter push;
    ChunkSlotReader reply;
    const char* results = nullptr;  // the server's results region mapped here (kReplyRef), or null
    bool send_init = false;  // this server takes the key's initial value from this worker
    // Synchronous mode over tcp: pushes name where the pull of their round
    // takes each piece, so that the reply lands in the tensor (kReplyInto).
    bool pull_into = false;
  };
  struct Key {
    uint64_t key = 0, count = 0;
    zc_dtype dtype = ZC_FLOAT32;
    size_t es = 0;
    std::vector<ChunkPlace> chunks;  // the pieces
    std::vector<ChunkPlace> placed;  // the placement's chunks (Declared::Add once declared)
    std::vector<PerServer> s;  // by server index
    // Order state (calling thread): rounds admitted, and whether this
    // round's push has been admitted (synchronous mode).
    uint64_t pushes = 0, pulls = 0;
    bool pushed = false;
    // Engine: the pass that found this key's first push and first pull
    // (asynchronous mode: first operation, in head_push).
    uint64_t head_push = 0, head_pull = 0;
    const char* pull_dst = nullptr;  // the first pull of this pass's key (push_after checks)
    uint64_t pull_round = 0;         // its round
    const MemRegion* pull_region = nullptr;  // its tensor exposed to the servers, or null
    bool pull_into = false;          // some server takes pull targets (PerServer::pull_into)
    bool sends_init = false;         // some server takes the initial value from this worker
  };

 private:
  struct Op {
    bool push = false;
    Key* k = nullptr;
    const char* src = nullptr;  // push
    char* dst = nullptr;        // pull
    uint64_t round = 0;
    size_t next = 0;      // pieces written (push) or taken (pull)
    size_t requests = 0;  // asynchronous pull: requests written
    // Push: pieces sent by reference to this rank's server (kPushRef) that
    // it has not handed back yet, and since when the push waits for them.
    std::vector<size_t> refs;
    Clock::time_point refs_since{};
    std::shared_ptr<WaitWatch> watch;  // null: its caller waits from the start
    // Pull: the tensor exposed to the servers while replies may be written
    // into it (kReplyInto), or empty; and why it must fail without taking
    // another piece (another pull's failure dropped the registration its
    // replies land in).
    RegionHold hold;
    Status doomed;
    DoneFn done;
    Deadline dl;
    int wait_server = -1;        // what it waits for (stall messages)
    const char* what = nullptr;
    explicit Op(const Deadline& d) : dl(d) {}
  };
  // Moves op as far as it can without waiting; *budget: pieces a push may
  // still write in this pass. OK with op->next == pieces when done.
  Status StepPush(Op* op, int* budget, bool* progress);
  Status StepPull(Op* op, bool* progress);
  // Where the pull of op's round (a push) takes piece c, when a pull is
  // queued that a server can write into: its region and offset.
  PullTarget TargetFor(const Op* op, const ChunkPlace& c) const;
  // A pull that ends (why) before every reply is in: its tensor is no
  // longer exposed, so that a late reply is dropped instead of written
  // into it. The registrations dropped may hold other pulls' tensors
  // (neighbours in one allocation): those pulls fail too, since their
  // replies would be dropped as well.
  void Unexpose(Op* op, const Status& why);
  // A push whose pieces are all written: drops the references the server
  // has consumed; once its caller has waited kReclaim for them (or
  // ZC_PS_LEND_MS have passed) takes the others back (a copy into their
  // slots), so that a push's caller never waits for another worker. True
  // when no reference is left.
  bool SettleRefs(Op* op, bool* progress);
  // A pass without progress: alerts, members' health and the deadlines of
  // the waiting operations (whose status is set in *failed).
  void CheckStalls(std::vector<std::pair<Op*, Status>>* failed);
  void Enqueue(std::unique_ptr<Op> op);
  // Declare's steps: the key cut into chunks over the servers; the slots
  // the servers reply into; the declaration sent to every server; every
  // server's answer (a refusal in *verdict); the first worker's initial
  // value written into every chunk.
  std::unique_ptr<Key> CutKey(uint64_t key, size_t count, zc_dtype dtype) const;
  Status AllocateReplySlots(Key* k);
  Status Announce(const Key& k, bool has_init, const Deadline& dl);
  Status AwaitAnswer(int server, uint64_t key, const Deadline& dl, std::string* msg);
  Status AwaitAnswers(Key* k, const Deadline& dl, Status* verdict);
  Status SendInitialValue(Key& k, const void* init, const Deadline& dl);
  // Waits until *word >= value, failing with a server's alert, a lost
  // member or the deadline.
  Status Wait(const std::atomic<uint64_t>* word, uint64_t value, int server, const char* what,
              const Deadline& dl);
  Status Alert() const;
  void FreeKey(Key* k);

  Shared* sh_;
  Server* colocated_;  // this rank's server, or null
  bool notified_ = false;
  std::mutex q_mu_;
  std::deque<std::unique_ptr<Op>> incoming_;
  std::deque<std::unique_ptr<Op>> active_;  // engine only
  std::atomic<int> in_flight_{0};
  std::atomic<int> draining_{0};  // Draining objects alive
  uint64_t pass_ = 0;
  uint64_t assist_calls_ = 0;
  Clock::time_point last_check_{};
  std::map<uint64_t, std::unique_ptr<Key>> keys_;
  uint64_t declarations_ = 0;
  Declared declared_;  // the keys declared so far (where placement goes on)
  Status broken_;  // a failed declaration leaves servers out of step
};

}  // namespace zc::ps
