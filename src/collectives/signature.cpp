#include "collectives/signature.h"

#include "collectives/dtype.h"

namespace zc::coll {

const char* MemPathName(MemPath m) {
  switch (m) {
    case MemPath::kHost: return "host memory";
    case MemPath::kCudaIpc: return "device memory over CUDA IPC";
    case MemPath::kStagedParts: return "device memory staged in parts";
  }
  return "unknown memory path";
}

bool Signature::Unpack(const uint64_t* aux, Signature* out) {
  const uint64_t dtype = (aux[0] >> 8) & 0xff, op = (aux[0] >> 16) & 0xff, mem = aux[0] >> 57;
  if (dtype > static_cast<uint64_t>(kLastDtype) || op > ZC_BXOR || mem > static_cast<uint64_t>(MemPath::kStagedParts))
    return false;
  Signature s;
  s.kind = static_cast<Kind>(aux[0] & 0xff);
  s.dtype = static_cast<zc_dtype>(dtype);
  s.op = static_cast<zc_op>(op);
  s.algo = static_cast<Algo>((aux[0] >> 24) & 0xff);
  // root + 1 on the wire (25 bits: ZC_SIZE is at most 2^24): 0 is "no root".
  const uint32_t root1 = static_cast<uint32_t>(aux[0] >> 32) & 0x1ffffff;
  s.root = static_cast<int>(root1) - 1;
  s.mem = static_cast<MemPath>(mem);
  s.count = aux[1];
  s.seq = aux[2];
  *out = s;
  return true;
}

std::string Signature::Describe(bool with_algo, bool with_seq, bool with_mem) const {
  std::string s = Format("%s(", KindName(kind));
  bool has_type = kind != Kind::kBarrier;
  bool has_op = kind == Kind::kAllreduce || kind == Kind::kReduce || kind == Kind::kReduceScatter;
  bool has_root = kind == Kind::kBroadcast || kind == Kind::kReduce || kind == Kind::kGather ||
                  kind == Kind::kScatter;
  if (kind == Kind::kAlltoallv)
    s += DtypeName(dtype);  // per-peer counts: checked message by message
  else if (kind == Kind::kAllgatherv)
    s += Format("total=%llu, %s", static_cast<unsigned long long>(count), DtypeName(dtype));
  else if (has_type)
    s += Format("count=%llu, %s", static_cast<unsigned long long>(count), DtypeName(dtype));
  if (has_op) s += Format(", %s", OpName(op));
  if (has_root) s += Format(", root=%d", root);
  if (with_algo) s += Format("%salgo=%s", has_type ? ", " : "", AlgoName(algo));
  if (with_mem) s += Format("%s%s", has_type || with_algo ? ", " : "", MemPathName(mem));
  s += ")";
  if (with_seq) s += Format(" as collective #%llu", static_cast<unsigned long long>(seq));
  return s;
}

bool Signature::SameCall(const Signature& o) const {
  return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root && algo == o.algo &&
         count == o.count && seq == o.seq && mem == o.mem;
}

Status SignatureDiffers(const Signature& mine, int my_rank, uint64_t expect_tag, const uint64_t* aux,
                        int peer) {
  Signature theirs;
  if (!Signature::Unpack(aux, &theirs))
    return Error(ZC_ERR_INTERNAL,
                 "%s: rank %d sent a corrupt operation signature (dtype %u, op %u)",
                 mine.Describe().c_str(), peer, static_cast<unsigned>((aux[0] >> 8) & 0xff),
                 static_cast<unsigned>((aux[0] >> 16) & 0xff));
  if (!theirs.SameCall(mine)) {
    // Name what differs; the algorithm and sequence number only when the
    // visible arguments agree (ZC_ALGO set differently, or calls skipped).
    // The memory path is always named when it differs: the arguments may
    // differ too, but the path is what the caller has to fix first.
    bool with_mem = theirs.mem != mine.mem;
    bool args_same = theirs.Describe() == mine.Describe();
    bool with_algo = args_same && !with_mem && theirs.algo != mine.algo;
    bool with_seq = args_same && !with_mem && !with_algo;
    return Error(ZC_ERR_MISMATCH, "rank %d called %s but rank %d called %s", peer,
                 theirs.Describe(with_algo, with_seq, with_mem).c_str(), my_rank,
                 mine.Describe(with_algo, with_seq, with_mem).c_str());
  }
  if (aux[3] != expect_tag || static_cast<int>(aux[4]) != peer)
    return Error(ZC_ERR_INTERNAL,
                 "%s: message from rank %d out of step (step %u chunk %u, expected step %u chunk %u)",
                 mine.Describe().c_str(), peer, static_cast<unsigned>(aux[3] >> 32),
                 static_cast<unsigned>(aux[3]), static_cast<unsigned>(expect_tag >> 32),
                 static_cast<unsigned>(expect_tag));
  return Status::Ok();
}

Status CheckSlotMessage(const Signature& mine, int my_rank, uint64_t expect_tag,
                        uint64_t expect_bytes, const MessageBlock* block, const uint64_t* aux,
                        uint64_t bytes, int peer) {
  ZC_RETURN_IF_ERROR(CheckSignature(mine, my_rank, expect_tag, aux, peer));
  if (block && (aux[kSigWords] != static_cast<uint64_t>(block->owner) ||
                aux[kSigWords + 1] != block->elems))
    return Error(ZC_ERR_MISMATCH,
                 "%s: rank %d sends %llu elements as rank %d's block, but rank %d expects %llu "
                 "elements of rank %d's block (counts differ between ranks)",
                 mine.Describe().c_str(), peer, static_cast<unsigned long long>(aux[kSigWords + 1]),
                 static_cast<int>(aux[kSigWords]), my_rank,
                 static_cast<unsigned long long>(block->elems), block->owner);
  if (bytes != expect_bytes)
    return Error(ZC_ERR_INTERNAL, "%s: message of %llu bytes from rank %d, expected %llu",
                 mine.Describe().c_str(), static_cast<unsigned long long>(bytes), peer,
                 static_cast<unsigned long long>(expect_bytes));
  return Status::Ok();
}

}  // namespace zc::coll
