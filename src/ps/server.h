// Server: the server half of a zc_ps. A control thread takes declarations
// (allocating, per worker, the registered slots that worker's pushes land
// in and answering with their descriptors) and goodbyes, and watches every
// member's health; ZC_PS_SERVER_THREADS data threads own the pieces
// (piece i -> thread i mod T) and poll their slots' flags: in synchronous
// mode, once every worker's push of a piece is in, the piece is reduced
// with the collectives' vectorized kernels (ReduceN: each input read once)
// into the key's results region, SGD applied if asked, and each worker is
// answered at once, while later pieces are still arriving: a worker that
// maps this server's memory (this rank, a shared-memory peer) gets a
// header only and copies the value from the results region itself
// (kReplyRef), a worker over tcp whose push named its pull's tensor gets
// the value written there (kReplyInto), any other into its reply slot. The
// piece's results are overwritten by the next round only once every
// worker has handed its reply slot back. In asynchronous mode each push is
// applied on arrival and each pull request answered at once with the
// current value. When every peer is on shared memory a co-located
// worker's engine steps the pieces itself between its own transfers
// (Assist); the data threads then stand back.
//
// A lost member or a broken write fails the server: every worker is told
// through its alert word, so nothing waits for a reply that will not come.
// Asynchronous mode drops a lost worker-only rank instead (Shared::Tolerated):
// its pushes that had arrived whole are applied, nothing of it afterwards,
// and the other workers' operations go on.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ps/chunk_slots.h"
#include "ps/protocol.h"
#include "ps/shared.h"

namespace zc::ps {

class Server {
 public:
  explicit Server(Shared* shared);
  ~Server();  // stops the threads and frees every region
  void Start();
  // Until every worker has said goodbye (OK) or the server failed (its
  // cause). No deadline: training lasts as long as it lasts; a lost member
  // ends it.
  Status WaitDone();
  // Until every worker has said goodbye or dl; then stops the threads.
  Status Finish(const Deadline& dl);
  // One pass over every piece from a co-located worker's thread (between
  // its pushes and pulls, so that the reduction runs beside its own
  // transfers instead of in threads that compete for the cores). True
  // when something moved. While assisted, the data threads stand back.
  bool Assist();
  // A co-located worker takes back its piece `slot` of key `key`, sent by
  // reference (kPushRef) and not consumed yet: its bytes are copied into
  // the slot, which the server reduces from instead. Returns once the
  // worker's tensor is no longer read.
  void Reclaim(uint64_t key, uint32_t slot, int wi, const void* src, uint64_t bytes);
  // A co-located worker's pull of round `round` of `key` into dst (whole
  // tensor), queued: pieces of that round reduced from now on go straight
  // into dst (kReplyDirect) when no other worker reads the results region
  // (synchronous sums; the other workers are answered with copies: tcp).
  // One caller thread at a time (the worker's calls are in order).
  void OfferPull(uint64_t key, uint64_t round, char* dst);
  // Group ranks of the workers this server dropped (asynchronous failover).
  std::vector<int> DroppedWorkers() const;

 private:
  struct Chunk;
  struct PerWorker {
    MemRegion* push_slots = nullptr;     // the worker writes its pushes here
    MemRegion* reply_credits = nullptr;  // the worker returns reply slots here
    ChunkSlotReader push;
    ChunkSlotWriter reply;
    bool by_ref = false;  // answered with kReplyRef (maps our results region)
  };
  struct Key {
    DeclareHead decl{};
    int init_from = -1;  // the worker index whose initial value comes, or -1
    size_t es = 0;
    ChunkSlotLayout layout;
    std::vector<PerWorker> w;
    // Per piece (ResultOffset): synchronous sums: the round's sum;
    // sgd or asynchronous: the variable.
    MemRegion* results = nullptr;
    std::vector<Chunk*> by_slot;  // this server's pieces of the key
    // OfferPull: the co-located worker's pull (a sequence: round 0 while
    // dst changes), and whether the key may be reduced into it.
    int local = -1;  // the co-located worker's index
    // offer_ok: the co-located worker's pull may take the round's sum
    // straight into its tensor (only there when no worker of another
    // process reads the results region, else into both).
    bool offer_ok = false;
    // Workers of other processes read the round's sums in the results
    // region (kReplyRef): sums are written out around the caches.
    bool mapped_readers = false;
    std::atomic<uint64_t> offer_round{0};
    std::atomic<char*> offer_dst{nullptr};
  };
  // One piece (the unit of transfer, see Placement::Pieces).
  struct Chunk {
    Key* key = nullptr;
    uint32_t slot = 0;
    uint64_t offset = 0;  // first element in the key
    uint64_t elems = 0, bytes = 0;
    char* value = nullptr;  // sgd or async: the variable (in key->results)
    char* accum = nullptr;  // synchronous sums: the round's sum (in key->results)
    uint64_t round = 0;     // rounds completed (synchronous)
    std::vector<uint8_t> arrived;
    std::vector<const void*> srcs;
    // Per worker: where its pull of the round takes the piece (from its
    // push's header; tcp), or none.
    std::vector<PullTarget> targets;
    int narrived = 0;
    bool init_pending = false;
    std::atomic<bool> busy{false};  // a data thread or the assisting worker steps it
  };

  void ControlLoop();
  void DataLoop(int tid);
  // Declarations that every worker has sent, in order.
  Status CompleteDeclarations();
  // The worker index whose initial value a declaration's pieces start
  // from (msgs: one per worker, empty for one dropped before it declared), or -1.
  int InitSource(const std::vector<std::string>& msgs) const;
  Status Declare(uint64_t index, const std::vector<std::string>& msgs, std::string* error_text,
                 zc_status* code, std::unique_ptr<Key>* key, std::vector<std::unique_ptr<Chunk>>* chunks);
  // Steps c unless another thread does (busy). Fails the server on error.
  // *pending: c has a message in (or is busy elsewhere).
  void TryStep(Chunk* c, bool* progress, bool* pending);
  // Where a scanner of a list of pieces is: pieces complete mostly in
  // order (every worker pushes in call order), so a scan steps a window
  // of pieces from the first one with something pending, and only every
  // kFullScan-th scan the whole list (any order, asynchronous pulls).
  struct ScanState {
    size_t cursor = 0;
    uint64_t scans = 0;
  };
  // max_skip: pieces with nothing pending a scan passes at most.
  bool Scan(const std::vector<Chunk*>& list, ScanState* s, size_t max_skip);
  Status Step(Chunk* c, bool* progress, int* culprit);
  // Writes the reply into worker wi's slot (its credit is there: checked
  // by the caller). by_ref: the header only; the worker named a pull
  // target: the payload into it, the header into the slot (kReplyInto).
  Status Reply(Chunk* c, int wi, const void* data, uint64_t round, int* culprit, bool direct = false);
  // The round's sum into outs[0..nouts) (stream: around the caches).
  static void SumInto(zc_dtype dtype, char* const* outs, int nouts, const void* const* srcs, int n, size_t elems,
                      bool stream);
  void Fail(const Status& st, int culprit);
  // st names culprit: drops it when it is a tolerated worker that is lost
  // (or whose slots broke), else fails the server.
  void FailOrDrop(const Status& st, int culprit);
  // Stops serving worker wi (its loss is tolerated): logged, and its
  // alert word written in case it lives on (a broken write).
  void DropWorker(int wi, const Status& why);
  bool dropped(int wi) const { return dropped_[wi].load(std::memory_order_acquire); }
  // Every worker said goodbye or was dropped.
  bool AllGone() const;
  void FreeKey(Key* k);

  Shared* sh_;
  int W_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};

  std::mutex mu_;  // keys_, chunks_, failure
  std::vector<std::unique_ptr<Key>> keys_;
  std::map<uint64_t, Key*> key_by_id_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::atomic<uint64_t> generation_{0};
  // Assist(): its own snapshot of chunks_, and when it last ran (steady
  // clock, ns), so the data threads stand back while a worker assists.
  std::mutex assist_mu_;
  std::vector<Chunk*> assist_chunks_;
  ScanState assist_scan_;
  uint64_t assist_seen_ = ~uint64_t{0};
  std::atomic<int64_t> assisted_ns_{0};
  Status failed_;
  std::atomic<bool> failed_flag_{false};

  // Control thread only.
  std::map<uint64_t, std::vector<std::string>> pending_;  // declaration -> message per worker
  uint64_t next_index_ = 0;
  Declared declared_;  // the keys declared so far (where placement goes on)
  std::vector<uint8_t> bye_;
  std::unique_ptr<std::atomic<bool>[]> dropped_;  // per worker index
  std::atomic<bool> done_{false};
};

}  // namespace zc::ps
