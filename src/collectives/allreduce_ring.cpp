// Ring allreduce: reduce-scatter then allgather around the ring, each step
// streamed in chunks of at most chunk_bytes through the persistent slots to
// the right neighbour (docs/algorithms.md, "Ring allreduce"). The two halves
// run over any ring of ranks, so the hierarchical allreduce reuses them
// inside a host and across hosts.
#include "collectives/collectives.h"
#include "collectives/links.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {

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
    if (in != out) memmove(out, in, count * es);
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
                             size_t count, uint32_t step0) {
  const int n = static_cast<int>(ring.size());
  if (n < 2) return Status::Ok();
  const size_t es = c.es();
  char* out = static_cast<char*>(buf);
  const int right = ring[(me + 1) % n], left = ring[(me + n - 1) % n];
  auto begin = [&](int k) { return SegBegin(count, n, ((k % n) + n) % n); };
  auto len = [&](int k) { return SegLen(count, n, ((k % n) + n) % n); };
  // At step s forward segment me+1-s, receive segment me-s.
  for (int s = 0; s < n - 1; ++s) {
    int sk = me + 1 - s, rk = me - s;
    size_t rb = begin(rk);
    ZC_RETURN_IF_ERROR(c.Exchange(right, out + begin(sk) * es, len(sk), left, len(rk), step0 + s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(out + (rb + off) * es, payload, m * es);
                                  }));
  }
  return Status::Ok();
}

Status AllreduceRing(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype,
                     zc_op op) {
  const int n = c.size(), r = c.rank();
  std::vector<int> ring(n);
  for (int i = 0; i < n; ++i) ring[i] = i;
  ZC_RETURN_IF_ERROR(RingReduceScatter(c, ring, r, send, recv, count, dtype, op, 0));
  const size_t es = c.es();
  const int own = (r + 1) % n;
  if (op == ZC_AVG)
    ScaleDiv(dtype, static_cast<char*>(recv) + SegBegin(count, n, own) * es, SegLen(count, n, own), n);
  return RingAllgatherSegments(c, ring, r, recv, count, n - 1);
}

}  // namespace zc::coll
