// Ring allreduce: reduce-scatter then allgather around the ring, each step
// streamed in chunks of at most chunk_bytes through the persistent slots to
// the right neighbour (docs/algorithms.md, "Ring allreduce"). The two halves
// run over any ring of ranks, so the hierarchical allreduce reuses them
// inside a host and across hosts.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"
#include "p2p/region_hold.h"

namespace zc::coll {

// Where the link allows it (OpCtx::CanWriteDirect), the allgather half
// writes every segment straight into the right neighbour's receive buffer
// (OpCtx::WriteDirect): it arrives in its final place, with no slot in
// between, no copy out of the slot and no credit to return. Each rank
// therefore tells its left neighbour, before the reduce-scatter, where its
// receive buffer is. A link's answer is the same on both of its ends.
struct DirectRing {
  bool out = false;  // I write to my right neighbour directly
  bool in = false;   // my left neighbour writes to me directly
  RemoteRegion right_buf;  // the right neighbour's receive buffer region
  uint64_t right_off = 0;  // its receive buffer's offset in right_buf
  RegionHold mine;         // my receive buffer, held while peers write it
  // Direct writes sent and awaited so far: numbered over the whole
  // allgather, alike on both ends (the sender's segment at step s is the
  // receiver's).
  uint32_t sent = 0, seen = 0;
};

namespace {

// Step of the message that carries a rank's receive buffer descriptor to
// its left neighbour (ring steps count from 0; the agreement is ~0u).
constexpr uint32_t kDescStep = 0xfffffffeu;

// Sends my receive buffer's descriptor left, reads the right neighbour's.
Status ExchangeDirectRing(OpCtx& c, int left, int right, void* recv, size_t bytes, DirectRing* d) {
  d->in = c.CanWriteDirect(left);
  d->out = c.CanWriteDirect(right);
  if (d->in) {
    ZC_RETURN_IF_ERROR(c.HoldForDirect(recv, bytes, &d->mine));
    std::string msg = d->mine->remote().Serialize();
    uint64_t off = d->mine->offset_of(recv);
    msg.append(reinterpret_cast<const char*>(&off), sizeof(off));
    ZC_RETURN_IF_ERROR(c.Send(left, msg.data(), msg.size(), MessageTag(kDescStep, 0)));
  }
  if (d->out) {
    const size_t want = RemoteRegion().Serialize().size() + sizeof(uint64_t);
    const void* payload = nullptr;
    ZC_RETURN_IF_ERROR(c.Recv(right, want, MessageTag(kDescStep, 0), &payload));
    std::string msg(static_cast<const char*>(payload), want);
    ZC_RETURN_IF_ERROR(c.Release(right));
    ZC_RETURN_IF_ERROR(RemoteRegion::Parse(msg.substr(0, want - sizeof(uint64_t)), &d->right_buf));
    memcpy(&d->right_off, msg.data() + want - sizeof(uint64_t), sizeof(uint64_t));
    // The same count on both ends (the signature says so): the buffer holds it.
    if (!d->right_buf.Contains(d->right_off, bytes))
      return Error(ZC_ERR_INTERNAL, "rank %d's receive buffer (%llu bytes at %llu) cannot hold %zu bytes",
                   right, static_cast<unsigned long long>(d->right_buf.size),
                   static_cast<unsigned long long>(d->right_off), bytes);
  }
  return Status::Ok();
}

// Messages for a segment of m elements: direct writes send nothing for an
// empty one; the slots send at least one (it carries the signature).
size_t ChunksOf(const OpCtx& c, bool direct, size_t m) {
  return direct ? (m + c.chunk_elems() - 1) / c.chunk_elems() : c.Chunks(m);
}

// Elements in the chunk at element `off` of a segment of m.
size_t ChunkLen(const OpCtx& c, size_t m, size_t off) {
  return m > off ? std::min(c.chunk_elems(), m - off) : 0;
}

// Elements [at, at+m) of buf to the right neighbour: a direct write or a
// slot message.
Status SendChunk(OpCtx& c, DirectRing& d, int right, const char* buf, size_t at, size_t m,
                 uint64_t tag) {
  const size_t es = c.es();
  const char* src = buf + at * es;
  if (d.out) return c.WriteDirect(right, src, m * es, d.right_buf, d.right_off + at * es, d.sent++);
  return c.Send(right, m ? src : nullptr, m * es, tag);
}

// Elements [at, at+m) of buf from the left neighbour: its direct write, or
// its slot message copied into place.
Status RecvChunk(OpCtx& c, DirectRing& d, int left, char* buf, size_t at, size_t m, uint64_t tag) {
  if (d.in) return c.AwaitDirect(left, d.seen++);
  const size_t es = c.es();
  const void* payload = nullptr;
  ZC_RETURN_IF_ERROR(c.Recv(left, m * es, tag, &payload));
  if (m) memcpy(buf + at * es, payload, m * es);
  return c.Release(left);
}

}  // namespace

std::vector<int> RingPeers(int rank, int size) {
  if (size < 2) return {};
  return {(rank + 1) % size, (rank + size - 1) % size};
}

Status RingReduceScatter(OpCtx& c, const std::vector<int>& ring, int me, const void* send,
                         void* recv, size_t count, zc_dtype dtype, zc_op op, uint32_t step0) {
  const int n = static_cast<int>(ring.size());
  const size_t es = c.es();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (n < 2) {
    ReduceOne(dtype, out, in, count);  // bool: 0 or 1
    return Status::Ok();
  }
  const int right = ring[(me + 1) % n], left = ring[(me + n - 1) % n];
  auto begin = [&](int k) { return SegBegin(count, n, ((k % n) + n) % n); };
  auto len = [&](int k) { return SegLen(count, n, ((k % n) + n) % n); };
  // At step s send segment me-s (my input at s = 0, the partial sum I made
  // at s-1 after), receive segment me-s-1 and add my input to it. After n-1
  // steps segment me+1 is complete here.
  for (int s = 0; s < n - 1; ++s) {
    int sk = me - s, rk = me - s - 1;
    const char* src = (s == 0 ? in : out) + begin(sk) * es;
    size_t rb = begin(rk);
    ZC_RETURN_IF_ERROR(c.Exchange(right, src, len(sk), left, len(rk), step0 + s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    size_t at = (rb + off) * es;
                                    Reduce2(dtype, op, out + at, in + at, payload, m);
                                  }));
  }
  return Status::Ok();
}

Status RingAllgatherSegments(OpCtx& c, const std::vector<int>& ring, int me, void* buf,
                             size_t count, uint32_t step0, DirectRing* direct) {
  const int n = static_cast<int>(ring.size());
  if (n < 2) return Status::Ok();
  DirectRing slots_only;
  DirectRing& d = direct ? *direct : slots_only;
  char* out = static_cast<char*>(buf);
  const int right = ring[(me + 1) % n], left = ring[(me + n - 1) % n];
  auto begin = [&](int k) { return SegBegin(count, n, ((k % n) + n) % n); };
  auto len = [&](int k) { return SegLen(count, n, ((k % n) + n) % n); };
  // At step s forward segment me+1-s, receive segment me-s, chunk by chunk
  // in lockstep as OpCtx::Exchange (send chunk i, then receive chunk i).
  for (int s = 0; s < n - 1; ++s) {
    const size_t sb = begin(me + 1 - s), sn = len(me + 1 - s), rb = begin(me - s), rn = len(me - s);
    const size_t ns = ChunksOf(c, d.out, sn), nr = ChunksOf(c, d.in, rn);
    for (size_t i = 0; i < ns || i < nr; ++i) {
      const size_t off = i * c.chunk_elems();
      const uint64_t tag = MessageTag(step0 + s, i);
      if (i < ns) ZC_RETURN_IF_ERROR(SendChunk(c, d, right, out, sb + off, ChunkLen(c, sn, off), tag));
      if (i < nr) ZC_RETURN_IF_ERROR(RecvChunk(c, d, left, out, rb + off, ChunkLen(c, rn, off), tag));
    }
  }
  return Status::Ok();
}

Status AllreduceRing(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype,
                     zc_op op) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.es();
  std::vector<int> ring(n);
  for (int i = 0; i < n; ++i) ring[i] = i;
  DirectRing direct;
  ZC_RETURN_IF_ERROR(
      ExchangeDirectRing(c, (r + n - 1) % n, (r + 1) % n, recv, count * es, &direct));
  ZC_RETURN_IF_ERROR(RingReduceScatter(c, ring, r, send, recv, count, dtype, op, 0));
  const int own = (r + 1) % n;
  if (op == ZC_AVG)
    ScaleDiv(dtype, static_cast<char*>(recv) + SegBegin(count, n, own) * es, SegLen(count, n, own), n);
  return RingAllgatherSegments(c, ring, r, recv, count, n - 1, &direct);
}

}  // namespace zc::coll
