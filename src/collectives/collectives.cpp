#include "collectives/collectives.h"

#include <cstring>

#include "collectives/allreduce_plan.h"
#include "collectives/allreduce_shm_direct.h"
#include "collectives/dtype.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"
#include "common/flight_recorder.h"
#include "common/log.h"
#include "p2p/control_plane.h"
#include "p2p/mem_region.h"
#include "p2p/group.h"

namespace zc {

using coll::Algo;
using coll::Kind;

Collectives::Collectives(Group* group) : group_(group), rank_(group->rank()), size_(group->size()) {
  chunk_bytes_ = group->config().chunk_bytes;
  transport_ = SummarizeTransports();
}

Collectives::~Collectives() = default;

Status Collectives::Create(Group* group, std::unique_ptr<Collectives>* out) {
  auto c = std::unique_ptr<Collectives>(new Collectives(group));
  ZC_RETURN_IF_ERROR(c->Init());
  *out = std::move(c);
  return Status::Ok();
}

Status Collectives::Init() {
  const std::string& algo = group_->config().algo;
  ZC_RETURN_IF_ERROR(coll::AlgoSelect::Parse(algo, &algo_sel_));
  links_ = std::make_unique<coll::Links>(group_, chunk_bytes_);
  if (size_ < 2) {
    ZC_INFO(kColl, "collectives ready: 1 rank (every collective a local copy), ZC_ALGO=%s",
            algo_sel_.Describe().c_str());
    return Status::Ok();
  }
  std::vector<int> host_of(size_);
  for (int r = 0; r < size_; ++r) host_of[r] = group_->host_of(r);
  hier_ = coll::MakeHierShape(host_of, rank_);
  // Before any link is made: a refused ZC_ALGO fails on every rank alike
  // (same environment), so no rank waits for a peer that gave up.
  ZC_RETURN_IF_ERROR(CheckForcedApplies());
  Deadline dl = group_->NewDeadline();
  // The allreduce peers now (ring neighbours, halving-doubling partners, and
  // the hierarchical rings when that can be chosen), so that ranks whose
  // counts differ across a size threshold fail with a mismatch on a message
  // rather than waiting for a link; trees, alltoall and barrier partners on
  // first use.
  std::vector<int> peers = coll::RingPeers(rank_, size_);
  for (int p : coll::HalvingDoublingPeers(rank_, size_)) peers.push_back(p);
  if (HierMayRun())
    for (int p : coll::HierPeers(hier_)) peers.push_back(p);
  ZC_RETURN_IF_ERROR(links_->Ensure(peers, dl));
  bool all_local = true;
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && !group_->is_local(p)) all_local = false;
  if (all_local)
    ZC_RETURN_IF_ERROR(coll::ShmDirect::Create(
        group_, std::min(chunk_bytes_, coll::ShmDirect::kMaxShardBytes), dl, &shm_));
  // Every peer on this host: the direct algorithm when the data really
  // moves through shared memory (not ZC_TRANSPORT=tcp on one host).
  shm_direct_ = shm_ != nullptr;
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && group_->transport_to(p) != TransportKind::kShm) shm_direct_ = false;
  ZC_INFO(kColl, "collectives ready: %d ranks on %s, chunk %zu bytes, ZC_ALGO=%s (forced: %s)%s%s",
          size_, hier_.layout.c_str(), chunk_bytes_, algo.c_str(), algo_sel_.Describe().c_str(),
          shm_ ? ", shared-memory workspace" : "", HierMayRun() ? ", hierarchical allreduce" : "");
  return Status::Ok();
}

bool Collectives::HierMayRun() const {
  if (algo_sel_.forced(Kind::kAllreduce) == Algo::kHier) return true;  // checked: uniform
  return algo_sel_.forced(Kind::kAllreduce) == Algo::kNone && hier_.uniform() &&
         hier_.hosts > 1 && hier_.per_host > 1;
}

Status Collectives::CheckForcedApplies() const {
  // Only the direct shared-memory allreduce and the hierarchical one depend
  // on where the ranks are; every other algorithm runs on any links.
  const std::string& spec = group_->config().algo;
  if (algo_sel_.forced(Kind::kAllreduce) == Algo::kHier) {
    if (hier_.uniform()) return Status::Ok();
    return Error(ZC_ERR_INVALID_ARG,
                 "ZC_ALGO=%s: allreduce cannot use algorithm hier: the ranks are on %s (hier "
                 "needs the same number of ranks on every host)", spec.c_str(),
                 hier_.layout.c_str());
  }
  if (algo_sel_.forced(Kind::kAllreduce) != Algo::kShm) return Status::Ok();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (!group_->is_local(p))
      return Error(ZC_ERR_INVALID_ARG,
                   "ZC_ALGO=%s: allreduce cannot use algorithm shm: rank %d is on another host "
                   "(shm needs every rank on this host)", spec.c_str(), p);
    if (group_->transport_to(p) != TransportKind::kShm)
      return Error(ZC_ERR_INVALID_ARG,
                   "ZC_ALGO=%s: allreduce cannot use algorithm shm: rank %d is reached through "
                   "the %s transport, not shm (ZC_TRANSPORT=%s)", spec.c_str(), p,
                   TransportName(group_->transport_to(p)), group_->config().transport.c_str());
  }
  return Status::Ok();
}

Status Collectives::Quiesce() {
  return links_ ? links_->Quiesce(group_->NewDeadline()) : Status::Ok();
}

void Collectives::AbortOnFailure(const Status& st) {
  // A failed collective leaves the streams mid-message: abort so that every
  // peer's waits fail now instead of at their deadline. Not when the failure
  // is a peer's alert, which the peers already have.
  if (!group_->aborted() && !group_->alerted())
    group_->Abort(st, st.code() == ZC_ERR_PEER_LOST ? group_->LostPeer() : -1);
}

template <typename Fn>
Status Collectives::Run(Kind kind, size_t count, zc_dtype dtype, zc_op op, int root, Algo algo,
                        Fn&& fn) {
  coll::Signature sig;
  sig.kind = kind;
  sig.dtype = dtype;
  sig.op = op;
  sig.root = root;
  sig.algo = algo;
  sig.count = count;
  return RunAs(sig, kind == Kind::kBarrier ? 1 : DtypeSize(dtype), std::forward<Fn>(fn));
}

template <typename Fn>
Status Collectives::RunAs(coll::Signature sig, size_t elem_size, Fn&& fn) {
  sig.seq = ++seq_;
  last_algo_ = sig.algo;
  const uint64_t record = recorder_ ? Record(sig) : 0;
  HealthScope scope = group_->Scope();
  Status st = group_->aborted() ? group_->Health(-1) : Status::Ok();
  if (st.ok()) {
    coll::OpCtx c(group_, links_.get(), sig, elem_size);
    st = Fail(fn(c));
  }
  if (record) recorder_->End(record, st);
  return st;
}

uint64_t Collectives::Record(const coll::Signature& sig) {
  const bool has_dtype = sig.kind != Kind::kBarrier;
  const bool reduces = sig.kind == Kind::kAllreduce || sig.kind == Kind::kReduce || sig.kind == Kind::kReduceScatter;
  return recorder_->BeginCollective(
      coll::KindName(sig.kind), coll::AlgoName(sig.algo), sig.seq, sig.count,
      trace::FlightRecorder::CollectiveShape(has_dtype ? static_cast<int>(sig.dtype) : -1,
                                             reduces ? static_cast<int>(sig.op) : -1, sig.root));
}

const char* Collectives::SummarizeTransports() const {
  if (size_ < 2) return "self";
  const char* name = nullptr;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const char* t = TransportName(group_->transport_to(p));
    if (name && strcmp(name, t) != 0) return "mixed";
    name = t;
  }
  return name;
}

Algo Collectives::ChooseAllreduce(size_t count, zc_dtype dtype) const {
  if (size_ < 2) return Algo::kLocal;
  // Forced shm was checked at Init: every rank is on this host over shm.
  if (Algo want = algo_sel_.forced(Kind::kAllreduce); want != Algo::kNone) return want;
  size_t bytes = count * DtypeSize(dtype);
  if (shm_direct_) return Algo::kShm;
  // Halving-doubling has log2(n) latency steps, the ring 2(n-1); both move
  // about 2(n-1)/n of the vector per rank, but the ring streams large
  // vectors through one neighbour's slots.
  if (bytes <= kHdMaxBytes || count < static_cast<size_t>(size_)) return Algo::kHd;
  // Ranks on several hosts, as many on each: the hierarchical allreduce
  // sends 2(H-1)/H of the vector out of each host, spread over its ranks,
  // where the ring sends 2(n-1)/n through one rank per host. Measured on
  // throttled links (docs/PERFORMANCE.md, "Hierarchical allreduce"): ahead
  // of the ring from 256 KiB on; below, halving-doubling's fewer steps win
  // on 3 hosts.
  if (HierMayRun()) return Algo::kHier;
  return Algo::kRing;
}

Algo Collectives::ChooseTree(Kind kind, size_t bytes) const {
  if (size_ < 2) return Algo::kLocal;
  if (Algo want = algo_sel_.forced(kind); want != Algo::kNone) return want;
  // A message of one chunk: log2 n rounds of the binomial tree. Longer ones
  // stream down the chain, every rank sending the message once.
  return bytes > chunk_bytes_ ? Algo::kChain : Algo::kTree;
}

std::vector<int> Collectives::AllreducePeers(Algo algo) const {
  if (algo == Algo::kRing) return coll::RingPeers(rank_, size_);
  if (algo == Algo::kHd) return coll::HalvingDoublingPeers(rank_, size_);
  if (algo == Algo::kHier) return coll::HierPeers(hier_);
  return {};
}

Status Collectives::AllreduceWith(Algo algo, const void* send, void* recv, size_t count,
                                  zc_dtype dtype, zc_op op) {
  return Run(Kind::kAllreduce, count, dtype, op, -1, algo, [&](coll::OpCtx& c) -> Status {
    return AllreduceAlgo(c, algo, send, recv, count, dtype, op);
  });
}

Status Collectives::AllreduceAlgo(coll::OpCtx& c, Algo algo, const void* send, void* recv,
                                  size_t count, zc_dtype dtype, zc_op op) {
  switch (algo) {
    case Algo::kLocal:
      ReduceOne(dtype, recv, send, count);  // bool: 0 or 1, as with more ranks
      return Status::Ok();  // avg over one rank: nothing to divide
    case Algo::kShm:
      return shm_->Allreduce(c.sig(), send, recv, count, dtype, op);
    case Algo::kHier:
      ZC_RETURN_IF_ERROR(c.Ensure(coll::HierPeers(hier_)));
      return coll::AllreduceHier(c, hier_, send, recv, count, dtype, op);
    case Algo::kHd:
      ZC_RETURN_IF_ERROR(c.Ensure(coll::HalvingDoublingPeers(rank_, size_)));
      return coll::AllreduceHalvingDoubling(c, send, recv, count, dtype, op);
    case Algo::kRing:
    default:
      ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
      return coll::AllreduceRing(c, send, recv, count, dtype, op);
  }
}

Status Collectives::AllreduceExchange(size_t count, zc_dtype dtype, zc_op op, coll::MemPath mem,
                                      const void* mine, void* all, size_t bytes) {
  ZC_RETURN_IF_ERROR(CheckDtypeOp(dtype, op));
  coll::Signature sig;
  sig.kind = Kind::kAllreduce;
  sig.dtype = dtype;
  sig.op = op;
  sig.algo = ChooseAllreduce(count, dtype);
  sig.count = count;
  sig.mem = mem;
  // An allgather written as a bitwise-or allreduce of blocks that are zero
  // but for each rank's own: any allreduce algorithm carries it.
  std::vector<uint8_t> in(bytes * size_, 0);
  if (bytes) memcpy(in.data() + static_cast<size_t>(rank_) * bytes, mine, bytes);
  return RunAs(sig, 1, [&](coll::OpCtx& c) -> Status {
    return AllreduceAlgo(c, sig.algo, in.data(), all, in.size(), ZC_UINT8, ZC_BOR);
  });
}

Status Collectives::IpcExchange(Kind kind, size_t count, zc_dtype dtype, zc_op op, int root,
                                const void* mine, void* all, size_t bytes) {
  coll::Signature sig;
  sig.kind = kind;
  sig.dtype = dtype;
  sig.op = op;
  sig.root = root;
  sig.count = count;
  sig.mem = coll::MemPath::kCudaIpc;
  switch (kind) {
    case Kind::kBroadcast: sig.algo = ChooseTree(kind, count * DtypeSize(dtype)); break;
    case Kind::kAlltoall: sig.algo = size_ < 2 ? Algo::kLocal : Algo::kPairwise; break;
    case Kind::kAllgather:
    case Kind::kReduceScatter: sig.algo = size_ < 2 ? Algo::kLocal : Algo::kRing; break;
    default: return Error(ZC_ERR_INTERNAL, "CUDA IPC exchange for %s", coll::KindName(kind));
  }
  return RunAs(sig, 1, [&](coll::OpCtx& c) -> Status {
    if (kind == Kind::kBroadcast) {
      if (sig.algo == Algo::kLocal) return Status::Ok();
      return coll::BroadcastTree(c, all, bytes, root, sig.algo == Algo::kChain);
    }
    if (size_ < 2) {
      if (bytes) memcpy(all, mine, bytes);
      return Status::Ok();
    }
    ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
    return coll::AllgatherRing(c, mine, all, bytes);
  });
}

Status Collectives::PartsExchange(Kind kind, size_t count, zc_dtype dtype, zc_op op, int root,
                                  uint8_t* failed) {
  if (kind != Kind::kBroadcast && kind != Kind::kReduce)
    return Error(ZC_ERR_INTERNAL, "staged-parts exchange for %s", coll::KindName(kind));
  coll::Signature sig;
  sig.kind = kind;
  sig.dtype = dtype;
  sig.op = op;
  sig.root = root;
  sig.count = count;
  sig.mem = coll::MemPath::kStagedParts;
  sig.algo = ChooseTree(kind, count * DtypeSize(dtype));
  const bool chain = sig.algo == Algo::kChain;
  return RunAs(sig, 1, [&](coll::OpCtx& c) -> Status {
    if (sig.algo == Algo::kLocal) return Status::Ok();
    if (kind == Kind::kBroadcast) return coll::BroadcastTree(c, failed, 1, root, chain);
    const uint8_t mine = *failed;
    return coll::ReduceTree(c, &mine, failed, 1, ZC_UINT8, ZC_BOR, root, chain, &scratch_);
  });
}

Status Collectives::Allreduce(const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op) {
  ZC_RETURN_IF_ERROR(CheckDtypeOp(dtype, op));
  Algo algo = ChooseAllreduce(count, dtype);
  ZC_INFO(kColl, "allreduce(count=%zu, %s, %s): %s", count, DtypeName(dtype), OpName(op),
          coll::AlgoName(algo));
  return AllreduceWith(algo, send, recv, count, dtype, op);
}

Status Collectives::Broadcast(void* buf, size_t count, zc_dtype dtype, int root) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = ChooseTree(Kind::kBroadcast, count * DtypeSize(dtype));
  bool chain = algo == Algo::kChain;
  ZC_INFO(kColl, "broadcast(count=%zu, %s, root=%d): %s", count, DtypeName(dtype), root,
          coll::AlgoName(algo));
  return Run(Kind::kBroadcast, count, dtype, ZC_SUM, root, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) return Status::Ok();
    return coll::BroadcastTree(c, buf, count, root, chain);
  });
}

Status Collectives::Reduce(const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op,
                           int root) {
  ZC_RETURN_IF_ERROR(CheckDtypeOp(dtype, op));
  Algo algo = ChooseTree(Kind::kReduce, count * DtypeSize(dtype));
  bool chain = algo == Algo::kChain;
  ZC_INFO(kColl, "reduce(count=%zu, %s, %s, root=%d): %s", count, DtypeName(dtype), OpName(op), root,
          coll::AlgoName(algo));
  return Run(Kind::kReduce, count, dtype, op, root, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      ReduceOne(dtype, recv, send, count);
      return Status::Ok();
    }
    return coll::ReduceTree(c, send, recv, count, dtype, op, root, chain, &scratch_);
  });
}

Status Collectives::Allgather(const void* send, void* recv, size_t sendcount, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kRing;
  ZC_INFO(kColl, "allgather(count=%zu, %s): %s", sendcount, DtypeName(dtype), coll::AlgoName(algo));
  return Run(Kind::kAllgather, sendcount, dtype, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      if (send != recv) memmove(recv, send, sendcount * DtypeSize(dtype));
      return Status::Ok();
    }
    ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
    return coll::AllgatherRing(c, send, recv, sendcount);
  });
}

Status Collectives::AllgatherList(const void* send, void* const* recvs, size_t sendcount, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kRing;
  ZC_INFO(kColl, "allgather(count=%zu, %s) into %d buffers: %s", sendcount, DtypeName(dtype), size_,
          coll::AlgoName(algo));
  return Run(Kind::kAllgather, sendcount, dtype, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      if (send != recvs[0]) memmove(recvs[0], send, sendcount * DtypeSize(dtype));
      return Status::Ok();
    }
    ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
    return coll::AllgatherRingList(c, send, recvs, sendcount);
  });
}

Status Collectives::ReduceScatter(const void* send, void* recv, size_t recvcount, zc_dtype dtype,
                                  zc_op op) {
  ZC_RETURN_IF_ERROR(CheckDtypeOp(dtype, op));
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kRing;
  ZC_INFO(kColl, "reduce_scatter(count=%zu, %s, %s): %s", recvcount, DtypeName(dtype), OpName(op),
          coll::AlgoName(algo));
  return Run(Kind::kReduceScatter, recvcount, dtype, op, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      ReduceOne(dtype, recv, send, recvcount);
      return Status::Ok();
    }
    ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
    return coll::ReduceScatterRing(c, send, recv, recvcount, dtype, op, &scratch_);
  });
}

Status Collectives::Alltoall(const void* send, void* recv, size_t count, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kPairwise;
  ZC_INFO(kColl, "alltoall(count=%zu, %s): %s", count, DtypeName(dtype), coll::AlgoName(algo));
  return Run(Kind::kAlltoall, count, dtype, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      if (send != recv) memmove(recv, send, count * DtypeSize(dtype));
      return Status::Ok();
    }
    return coll::AlltoallPairwise(c, send, recv, count, &scratch_);
  });
}

Status Collectives::Barrier() {
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kDissemination;
  return Run(Kind::kBarrier, 0, ZC_UINT8, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) return Status::Ok();
    return coll::BarrierDissemination(c);
  });
}

// ---- vector collectives, gather, scatter ----

Status Collectives::Allgatherv(const void* send, size_t sendcount, void* recv,
                               const size_t* recvcounts, const size_t* displs, zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  size_t total = 0;
  for (int p = 0; p < size_; ++p) total += recvcounts[p];
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kRing;
  ZC_INFO(kColl, "allgatherv(total=%zu, %s): %s", total, DtypeName(dtype), coll::AlgoName(algo));
  return Run(Kind::kAllgatherv, total, dtype, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      char* dst = static_cast<char*>(recv) + displs[0] * c.es();
      if (sendcount && dst != send) memmove(dst, send, sendcount * c.es());
      return Status::Ok();
    }
    ZC_RETURN_IF_ERROR(c.Ensure(coll::RingPeers(rank_, size_)));
    return coll::AllgathervRing(c, send, recv, recvcounts, displs);
  });
}

Status Collectives::Alltoallv(const void* send, const size_t* sendcounts, const size_t* sdispls,
                              void* recv, const size_t* recvcounts, const size_t* rdispls,
                              zc_dtype dtype) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kPairwise;
  ZC_INFO(kColl, "alltoallv(%s): %s", DtypeName(dtype), coll::AlgoName(algo));
  return Run(Kind::kAlltoallv, 0, dtype, ZC_SUM, -1, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      const size_t es = c.es();
      if (sendcounts[0])
        memmove(static_cast<char*>(recv) + rdispls[0] * es,
                static_cast<const char*>(send) + sdispls[0] * es, sendcounts[0] * es);
      return Status::Ok();
    }
    return coll::AlltoallvPairwise(c, send, sendcounts, sdispls, recv, recvcounts, rdispls);
  });
}

Status Collectives::Gather(const void* send, void* recv, size_t count, zc_dtype dtype, int root) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kDirect;
  ZC_INFO(kColl, "gather(count=%zu, %s, root=%d): %s", count, DtypeName(dtype), root,
          coll::AlgoName(algo));
  return Run(Kind::kGather, count, dtype, ZC_SUM, root, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      if (count && send != recv) memmove(recv, send, count * c.es());
      return Status::Ok();
    }
    return coll::GatherDirect(c, send, recv, count, root);
  });
}

Status Collectives::Scatter(const void* send, void* recv, size_t count, zc_dtype dtype, int root) {
  if (DtypeSize(dtype) == 0) return Error(ZC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  Algo algo = size_ < 2 ? Algo::kLocal : Algo::kDirect;
  ZC_INFO(kColl, "scatter(count=%zu, %s, root=%d): %s", count, DtypeName(dtype), root,
          coll::AlgoName(algo));
  return Run(Kind::kScatter, count, dtype, ZC_SUM, root, algo, [&](coll::OpCtx& c) -> Status {
    if (algo == Algo::kLocal) {
      if (count && send != recv) memmove(recv, send, count * c.es());
      return Status::Ok();
    }
    return coll::ScatterDirect(c, send, recv, count, root);
  });
}

// ---- persistent allreduce plans ----

Status Collectives::PlanAllreduce(size_t count, zc_dtype dtype, zc_op op,
                                  std::unique_ptr<AllreducePlan>* out) {
  ZC_RETURN_IF_ERROR(CheckDtypeOp(dtype, op));
  if (count == 0) return Error(ZC_ERR_INVALID_ARG, "allreduce plan of 0 elements");
  auto plan = std::unique_ptr<AllreducePlan>(new AllreducePlan());
  plan->coll_ = this;
  plan->count_ = count;
  plan->dtype_ = dtype;
  plan->op_ = op;
  plan->algo_ = ChooseAllreduce(count, dtype);
  // Everything a start needs exists now: links (made collectively here) or
  // the shared-memory workspace (made at Create).
  if (!group_->aborted()) {
    Status st = links_->Ensure(AllreducePeers(plan->algo_), group_->NewDeadline());
    if (!st.ok()) return Fail(st.with_context("allreduce plan"));
  }
  ZC_INFO(kColl, "allreduce plan(count=%zu, %s, %s): %s", count, DtypeName(dtype), OpName(op),
          coll::AlgoName(plan->algo_));
  AllreducePlan* p = plan.get();
  plan->thread_ = std::thread([p] { p->Loop(); });
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace zc
