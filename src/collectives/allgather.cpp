// Allgather and reduce-scatter around the ring, each step streamed in chunks
// through the persistent slots to the right neighbour. Allgather gathers
// into one buffer or into one buffer per rank (AllgatherRingList).
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {

namespace {

// The ring over blocks wherever they are: block(k) is rank k's place. The
// same messages as with one buffer, so a rank gathering into separate
// buffers and one gathering into one buffer take part in one allgather.
template <typename BlockAt>
Status AllgatherRingAt(OpCtx& c, const void* send, BlockAt block, size_t sendcount) {
  const int n = c.size(), r = c.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // My block first (memmove: send may lie inside recv).
  if (send != block(r)) memmove(block(r), send, sendcount * c.es());
  // Step s: forward block r-s, receive block r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    int sk = (r - s + n) % n, rk = (r - s - 1 + n) % n;
    char* dst = block(rk);
    ZC_RETURN_IF_ERROR(c.Exchange(right, block(sk), sendcount, left, sendcount, s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(dst + off * c.es(), payload, m * c.es());
                                  }));
  }
  return Status::Ok();
}

}  // namespace

Status AllgatherRing(OpCtx& c, const void* send, void* recv, size_t sendcount) {
  char* out = static_cast<char*>(recv);
  const size_t bytes = sendcount * c.es();
  return AllgatherRingAt(c, send, [out, bytes](int k) { return out + k * bytes; }, sendcount);
}

Status AllgatherRingList(OpCtx& c, const void* send, void* const* recvs, size_t sendcount) {
  return AllgatherRingAt(c, send, [recvs](int k) { return static_cast<char*>(recvs[k]); }, sendcount);
}

Status ReduceScatterRing(OpCtx& c, const void* send, void* recv, size_t recvcount, zc_dtype dtype,
                         zc_op op, std::vector<char>* scratch) {
  const int n = c.size(), r = c.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = c.es(), block = recvcount * es;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  // Two blocks of scratch: the partial sum received at step s is forwarded
  // at step s+1 while the next one arrives.
  if (n > 2 && scratch->size() < 2 * block) scratch->resize(2 * block);
  char* part[2] = {n > 2 ? scratch->data() : nullptr, n > 2 ? scratch->data() + block : nullptr};
  // Step s: send block r-s-1 (my input at s = 0, my partial sum after),
  // receive block r-s-2 and add my input. The last block received is r.
  for (int s = 0; s < n - 1; ++s) {
    int sk = (r - s - 1 + 2 * n) % n, rk = (r - s - 2 + 2 * n) % n;
    const char* src = s == 0 ? in + sk * block : part[(s - 1) % 2];
    char* dst = s == n - 2 ? out : part[s % 2];
    const char* mine = in + rk * block;
    ZC_RETURN_IF_ERROR(c.Exchange(right, src, recvcount, left, recvcount, s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    Reduce2(dtype, op, dst + off * es, mine + off * es, payload, m);
                                  }));
  }
  if (op == ZC_AVG) ScaleDiv(dtype, out, recvcount, n);
  return Status::Ok();
}

}  // namespace zc::coll
