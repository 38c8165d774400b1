// Horovod's process sets on zcomm: the global set (id 0, every rank of the
// job, made by Init() from the environment) and the sets added later, each a
// zc_comm_split of the global communicator with its own engine, so that each
// set negotiates its own names (as each Horovod process set has its own
// controller).
//
// The table is the one process-wide state of the Horovod API (Horovod's own
// horovod_global): hvd.init() makes it, hvd.shutdown() empties it. Adding
// and removing sets is collective over every rank of the job, in the same
// order everywhere; ids are handed out in that order, so a set has the same
// id on every rank.
#pragma once

#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace zcomm_torch {
namespace hvd {

// Raised (as zcomm.torch.HorovodInternalError, a RuntimeError) for failures
// of the engine: a lost peer, a mismatch, a shut-down engine, a timeout.
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller's mistake found on this rank before anything is queued (a name
// already pending, bad splits, a rank outside the set): ValueError in
// Python, as Horovod raises, and nothing else is affected.
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct ProcessSet {
  int32_t id = 0;
  std::vector<int> ranks;       // global ranks, ascending
  zc_comm* comm = nullptr;      // null where this rank is not a member
  zc_engine* engine = nullptr;  // null where this rank is not a member
  int rank = -1;                // this rank's place in the set (-1: not a member)

  int size() const { return static_cast<int>(ranks.size()); }
  bool member() const { return engine != nullptr; }
  // The set's rank of a global rank, -1 when that rank is not in the set.
  int SetRank(int global_rank) const;
};

// A set looked up for one operation: the set stays alive (and its engine
// usable) as long as this guard lives.
class SetRef {
 public:
  SetRef(std::shared_lock<std::shared_mutex> lock, const ProcessSet* set)
      : lock_(std::move(lock)), set_(set) {}
  const ProcessSet& operator*() const { return *set_; }
  const ProcessSet* operator->() const { return set_; }

 private:
  std::shared_lock<std::shared_mutex> lock_;
  const ProcessSet* set_;
};

class ProcessSetTable {
 public:
  // Makes the global set from the environment (zcrun, PMIx under mpirun, or
  // a single process; in a joiner of zcrun --elastic, by joining the running
  // job) and starts its engine, exactly when Running() is
  // false: before the first Init(), after Shutdown(), and after an operation
  // of this rank raised because the engine had stopped (then it frees what
  // is left first). Collective. True when it started an engine.
  bool Init();
  // Init() for ranks started without a launcher: the global set's
  // communicator from a zcomm unique id (zc_comm_init_rank).
  bool InitRank(const std::string& uid, int nranks, int rank);
  // Elastic recovery after a lost rank (docs/elastic.md): stops every
  // set's engine, shrinks the global communicator to the live ranks
  // (zc_comm_shrink, collective over them), frees the other sets and
  // starts the global set's engine on the survivors, renumbered in order.
  // EngineError when the shrink fails (this rank was agreed failed, a
  // timeout); then the table is empty, as after Shutdown().
  void Shrink();
  // Elastic growth (docs/elastic.md, "Grow"): how many newcomers wait to
  // join (this rank's view, not collective), and the grow itself: stops
  // every set's engine, grows the global communicator with the waiting
  // newcomers (zc_comm_grow, collective over the ranks and the newcomers,
  // whose Init() joins), frees the other sets and starts the engine on it.
  int JoinPending() const;
  void Grow();
  // Stops every set's engine (pending operations fail) and frees the sets.
  void Shutdown();
  // hvd.is_initialized(): this rank's own view, changed only by its own
  // calls. True from Init() until Shutdown(), or until an operation of this
  // rank raised because the engine had stopped (StopSeen). A peer's
  // shutdown() reaching the engine in between does not flip it by itself:
  // every rank running init(); is_initialized(); shutdown(); init() must see
  // True and start the next engine together, however fast the others get
  // to their shutdown() (as in Horovod, where only this rank's shutdown
  // resets it).
  bool Running() const;
  // An operation is raising an engine error: if the global engine has
  // stopped, is_initialized() is False from now on (and init() starts anew).
  void StopSeen();

  // Collective over every rank of the job: adds the set of these global
  // ranks and returns its id. InvalidArgument for ranks out of range or
  // repeated, or a set with these ranks that exists already; EngineError
  // when the ranks differ between callers or the split fails.
  int32_t Add(std::vector<int> ranks);
  // Collective over every rank of the job: false for id 0 or an unknown id.
  bool Remove(int32_t id);
  // The set of id for an operation: InvalidArgument for an unknown id, or
  // when this rank is not a member and member_needed.
  SetRef Get(int32_t id, const std::string& what, bool member_needed = true) const;
  // id -> global ranks, every set this rank knows.
  std::map<int32_t, std::vector<int>> List() const;

  // Where this rank is in the job; InvalidArgument (ValueError, as Horovod)
  // before init().
  struct JobLayout {
    int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  };
  JobLayout Layout(const char* what) const;
  // "zcomm.torch rank 1/4": the prefix of every message.
  std::string Who() const;

 private:
  void ThrowIfStopped(const char* what) const;
  // Whether an Init may start an engine now (frees a stopped one first).
  bool ReadyForInit();
  // Makes the global set of comm (owned from now on) and its engine.
  void Start(zc_comm* comm, const char* what);
  void FreeAll();  // exclusive lock held
  zc_comm* global_comm() const { return sets_.at(0)->comm; }

  mutable std::shared_mutex mu_;
  std::map<int32_t, std::unique_ptr<ProcessSet>> sets_;
  int32_t next_id_ = 1;
  JobLayout job_;
  std::atomic<bool> stop_seen_{false};
};

// The process-wide table of the Horovod API.
ProcessSetTable& Sets();

}  // namespace hvd
}  // namespace zcomm_torch
