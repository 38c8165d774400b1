// Collectives: allreduce (ring, recursive halving-doubling, direct shared
// memory, hierarchical across hosts), broadcast, reduce, allgather, reduce-scatter, alltoall, barrier,
// the vector collectives allgatherv and alltoallv, gather, scatter, and
// persistent allreduce plans (allreduce_plan.h), all built on the p2p layer
// (SlotStreams, one-sided writes and reads, flags) through a Group and never
// on a transport directly.
// docs/algorithms.md describes every algorithm, its messages and bytes moved.
//
// Threading: one collective at a time per instance (the C API holds a lock);
// a plan's Start/Wait must not overlap other collectives on the same instance.
// Errors: bad arguments are refused before anything is sent (the C API checks
// them) and leave the communicator usable; a collective that fails once it
// has started (timeout, peer lost, mismatch) aborts the device, so the peers'
// waits fail too and nobody hangs; the communicator is unusable after that.
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algo_select.h"
#include "collectives/signature.h"
#include "common/status.h"

namespace zc {

class Group;
namespace trace {
class FlightRecorder;
}

namespace coll {
class Links;
class ShmDirect;
class OpCtx;
}  // namespace coll

class AllreducePlan;

namespace coll {
// Where a communicator's ranks are, for the hierarchical allreduce: hosts in
// order of their first rank, each host's ranks ascending. The same on every
// rank (built from the host ids the bootstrap gathered).
struct HierShape {
  int hosts = 1;
  int per_host = 0;        // ranks on every host; 0: hosts hold different counts
  int host = 0;            // my host's position
  int local = 0;           // my position among my host's ranks
  std::vector<int> local_ring;  // my host's ranks
  std::vector<int> cross_ring;  // rank `local` of every host (uniform only)
  std::string layout;      // "2 host(s) x 3 rank(s)", "2 hosts with 3, 1 ranks"
  bool uniform() const { return per_host > 0; }
};
// host_of[r]: any id that is equal exactly for ranks on the same host.
HierShape MakeHierShape(const std::vector<int>& host_of, int rank);
}  // namespace coll

class Collectives {
 public:
  // Collective over all ranks of group: links with the ring neighbours and the
  // halving-doubling partners, and the shared-memory workspace when every
  // peer is on this host.
  static Status Create(Group* group, std::unique_ptr<Collectives>* out);
  ~Collectives();

  Status Allreduce(const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op);

  // The first step of an allreduce that runs outside the host algorithms
  // (the CUDA IPC path): an allgather of `bytes` per rank (mine -> all, which
  // holds size x bytes) that travels as the caller's allreduce(count, dtype,
  // op) with memory path `mem`, over the algorithm a host allreduce of that
  // call takes. A rank running the host allreduce and one running this meet
  // on the same channel, and the signature check fails both with
  // ZC_ERR_MISMATCH instead of leaving them waiting on different channels.
  Status AllreduceExchange(size_t count, zc_dtype dtype, zc_op op, coll::MemPath mem,
                           const void* mine, void* all, size_t bytes);
  // The same for the CUDA IPC broadcast, allgather, reduce-scatter and
  // alltoall (kind): travels as that call (count, dtype, op, root as the
  // host call's) with memory path kCudaIpc and the host call's algorithm,
  // along the host call's links: broadcast sends `all` (bytes, the root's
  // record) down the host broadcast's tree or chain, in place (`mine` is
  // unused); the others allgather `mine` into `all` around the ring, whose
  // neighbours the host allgather, reduce-scatter and pairwise alltoall
  // receive from first. Where a rank running the host call and one running
  // this are linked, the first message between them fails both with
  // ZC_ERR_MISMATCH (a host broadcast root, which only sends, may return
  // before its children fail).
  Status IpcExchange(coll::Kind kind, size_t count, zc_dtype dtype, zc_op op, int root,
                     const void* mine, void* all, size_t bytes);
  // The first step of a broadcast or reduce on device memory staged in
  // parts (gpu/pipelined_staging.h): one byte that travels as the caller's
  // call (kind, count, dtype, op, root) with memory path kStagedParts over
  // the host call's tree or chain, so that a rank making the host call and
  // one making this fail together with ZC_ERR_MISMATCH where they are
  // linked. *failed (0 or 1): in, this rank's; out, broadcast: the root's;
  // reduce: at the root, whether any rank's was set (elsewhere unchanged).
  Status PartsExchange(coll::Kind kind, size_t count, zc_dtype dtype, zc_op op, int root, uint8_t* failed);
  Status Broadcast(void* buf, size_t count, zc_dtype dtype, int root);
  Status Reduce(const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op, int root);
  Status Allgather(const void* send, void* recv, size_t sendcount, zc_dtype dtype);
  // As Allgather, rank k's block into recvs[k] (size pointers, separate
  // buffers); the same collective on the wire as Allgather.
  Status AllgatherList(const void* send, void* const* recvs, size_t sendcount, zc_dtype dtype);
  Status ReduceScatter(const void* send, void* recv, size_t recvcount, zc_dtype dtype, zc_op op);
  Status Alltoall(const void* send, void* recv, size_t count, zc_dtype dtype);
  Status Barrier();
  // Counts and displacements in elements, one per rank (as the C ABI).
  // recvcounts[rank] == sendcount (allgatherv) and sendcounts[rank] ==
  // recvcounts[rank] (alltoallv) are the caller's to check. Not in place:
  // send and receive buffers must not overlap.
  Status Allgatherv(const void* send, size_t sendcount, void* recv, const size_t* recvcounts,
                    const size_t* displs, zc_dtype dtype);
  Status Alltoallv(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                   const size_t* recvcounts, const size_t* rdispls, zc_dtype dtype);
  // recv (gather) and send (scatter) hold size x count elements and are used
  // at the root only.
  Status Gather(const void* send, void* recv, size_t count, zc_dtype dtype, int root);
  Status Scatter(const void* send, void* recv, size_t count, zc_dtype dtype, int root);

  // After the last collective (a barrier, so every peer has received all
  // our messages): waits for the peers' last credits, so that none lands in
  // link memory once it is freed and reused while the Device lives on.
  Status Quiesce();

  // Collective (every rank, same arguments, same order as other calls).
  Status PlanAllreduce(size_t count, zc_dtype dtype, zc_op op, std::unique_ptr<AllreducePlan>* out);

  // Algorithm of the last collective: "ring", "hd", "shm", "hier", "tree", "chain",
  // "pairwise", "dissemination", "direct", "local".
  const char* last_algorithm() const { return coll::AlgoName(last_algo_); }

  // The allreduce algorithm auto-selection (or ZC_ALGO) picks for this size.
  coll::Algo ChooseAllreduce(size_t count, zc_dtype dtype) const;
  // Largest vector the automatic choice gives to halving-doubling; above,
  // the ring, or the hierarchical allreduce on several hosts.
  static constexpr size_t kHdMaxBytes = 256 * 1024;
  // The algorithm ZC_ALGO forces on collective k; Algo::kNone: automatic.
  coll::Algo ForcedAlgo(coll::Kind k) const { return algo_sel_.forced(k); }

  Group* group() const { return group_; }

  // Records every collective from now on (once per call, in RunAs); the
  // recorder outlives this object (both belong to the communicator).
  void set_recorder(trace::FlightRecorder* recorder) { recorder_ = recorder; }
  // The transports of this communicator's peers: "shm", "tcp", "verbs",
  // "mixed", or "self" (one rank). A static string.
  const char* transport_summary() const { return transport_; }

 private:
  friend class AllreducePlan;
  explicit Collectives(Group* group);
  Status Init();
  // Refuses a forced algorithm that cannot run on this communicator.
  Status CheckForcedApplies() const;
  // The hierarchical allreduce is forced, or may be chosen: ranks on
  // several hosts, the same number (> 1) on each.
  bool HierMayRun() const;

  // Runs one collective: signature, sequence number, error handling (a
  // failure aborts the device so that no peer hangs).
  template <typename Fn>
  Status Run(coll::Kind kind, size_t count, zc_dtype dtype, zc_op op, int root, coll::Algo algo,
             Fn&& fn);
  // Run with the whole signature given (its seq is assigned here) and the
  // element size the algorithm's data has.
  template <typename Fn>
  Status RunAs(coll::Signature sig, size_t elem_size, Fn&& fn);
  // st, after aborting the job when it is a failure (see AbortOnFailure).
  Status Fail(Status st) {
    if (!st.ok()) AbortOnFailure(st);
    return st;
  }
  void AbortOnFailure(const Status& st);
  // The flight-recorder record of a collective about to run (its id).
  uint64_t Record(const coll::Signature& sig);
  const char* SummarizeTransports() const;

  Status AllreduceWith(coll::Algo algo, const void* send, void* recv, size_t count, zc_dtype dtype,
                       zc_op op);
  // The allreduce algorithm `algo` on data (send, recv, count, dtype, op)
  // under c's signature.
  Status AllreduceAlgo(coll::OpCtx& c, coll::Algo algo, const void* send, void* recv, size_t count,
                       zc_dtype dtype, zc_op op);
  // Broadcast and reduce: forced (ZC_ALGO), or tree / chain by size.
  coll::Algo ChooseTree(coll::Kind kind, size_t bytes) const;
  // Peers each algorithm talks to (links made at Create / plan init).
  std::vector<int> AllreducePeers(coll::Algo algo) const;

  Group* group_;
  int rank_ = 0, size_ = 1;
  size_t chunk_bytes_ = 1 << 20;
  std::unique_ptr<coll::Links> links_;
  std::unique_ptr<coll::ShmDirect> shm_;  // null unless every peer is local
  bool shm_direct_ = false;  // shm_, and every peer over the shm transport
  coll::HierShape hier_;                  // hosts of the ranks
  coll::AlgoSelect algo_sel_;             // ZC_ALGO
  uint64_t seq_ = 0;
  coll::Algo last_algo_ = coll::Algo::kNone;
  std::vector<char> scratch_;
  trace::FlightRecorder* recorder_ = nullptr;
  const char* transport_ = "self";  // transport_summary()
};

namespace coll {
// The algorithms (one file each). All take an OpCtx whose signature names
// the call; count > 0 and size > 1 unless stated.
Status AllreduceRing(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op);
Status AllreduceHalvingDoubling(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype,
                                zc_op op);
// Hierarchical: needs h.uniform(); any count (segments may be empty).
Status AllreduceHier(OpCtx& c, const HierShape& h, const void* send, void* recv, size_t count,
                     zc_dtype dtype, zc_op op);
// The halves of the ring allreduce over ring[0..m) (group ranks; this rank
// is ring[me]), for [0, count) of the buffers, steps numbered from step0.
// ReduceScatter leaves segment (me+1) mod m of recv reduced over the ring
// (not divided for ZC_AVG); send == recv is allowed; m = 1 copies.
// AllgatherSegments sends segment (me+1) mod m of buf and fills the others.
Status RingReduceScatter(OpCtx& c, const std::vector<int>& ring, int me, const void* send,
                         void* recv, size_t count, zc_dtype dtype, zc_op op, uint32_t step0);
// direct (allreduce_ring.cpp): which of the two links write straight into
// the receive buffers, and where; nullptr: both go through the slots.
struct DirectRing;
Status RingAllgatherSegments(OpCtx& c, const std::vector<int>& ring, int me, void* buf,
                             size_t count, uint32_t step0, DirectRing* direct = nullptr);
Status BroadcastTree(OpCtx& c, void* buf, size_t count, int root, bool chain);
Status ReduceTree(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op,
                  int root, bool chain, std::vector<char>* scratch);
Status AllgatherRing(OpCtx& c, const void* send, void* recv, size_t sendcount);
// recvs[k]: rank k's block (size pointers); send may be recvs[rank].
Status AllgatherRingList(OpCtx& c, const void* send, void* const* recvs, size_t sendcount);
Status ReduceScatterRing(OpCtx& c, const void* send, void* recv, size_t recvcount, zc_dtype dtype,
                         zc_op op, std::vector<char>* scratch);
Status AlltoallPairwise(OpCtx& c, const void* send, void* recv, size_t count,
                        std::vector<char>* scratch);
Status BarrierDissemination(OpCtx& c);
Status AllgathervRing(OpCtx& c, const void* send, void* recv, const size_t* recvcounts,
                      const size_t* displs);
Status AlltoallvPairwise(OpCtx& c, const void* send, const size_t* sendcounts,
                         const size_t* sdispls, void* recv, const size_t* recvcounts,
                         const size_t* rdispls);
Status GatherDirect(OpCtx& c, const void* send, void* recv, size_t count, int root);
Status ScatterDirect(OpCtx& c, const void* send, void* recv, size_t count, int root);

// Peer sets (for link setup).
std::vector<int> RingPeers(int rank, int size);
std::vector<int> HalvingDoublingPeers(int rank, int size);
std::vector<int> TreePeers(int rank, int size, int root, bool chain);
std::vector<int> DisseminationPeers(int rank, int size);
std::vector<int> HierPeers(const HierShape& h);
}  // namespace coll

}  // namespace zc
