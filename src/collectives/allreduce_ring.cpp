// Ring allreduce: reduce-scatter then allgather around the ring, each step
// streamed in chunks of at most chunk_bytes through the persistent slots to
// the right neighbour (docs/algorithms.md, "Ring allreduce").
#include "collectives/collectives.h"
#include "collectives/links.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {

std::vector<int> RingPeers(int rank, int size) {
  if (size < 2) return {};
  return {(rank + 1) % size, (rank + size - 1) % size};
}

Status AllreduceRing(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype,
                     zc_op op) {
  const int n = c.size(), r = c.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = c.es();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  auto begin = [&](int k) { return SegBegin(count, n, ((k % n) + n) % n); };
  auto len = [&](int k) { return SegLen(count, n, ((k % n) + n) % n); };

  // Reduce-scatter: at step s send segment r-s (my input at s = 0, the
  // partial sum I made at s-1 after), receive segment r-s-1 and add my
  // input to it. After n-1 steps segment r+1 is complete here.
  for (int s = 0; s < n - 1; ++s) {
    int sk = r - s, rk = r - s - 1;
    const char* src = (s == 0 ? in : out) + begin(sk) * es;
    size_t rb = begin(rk);
    ZC_RETURN_IF_ERROR(c.Exchange(right, src, len(sk), left, len(rk), s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    size_t at = (rb + off) * es;
                                    Reduce2(dtype, op, out + at, in + at, payload, m);
                                  }));
  }
  if (op == ZC_AVG) ScaleDiv(dtype, out + begin(r + 1) * es, len(r + 1), n);
  // Allgather: at step s forward segment r+1-s, receive segment r-s.
  for (int s = 0; s < n - 1; ++s) {
    int sk = r + 1 - s, rk = r - s;
    size_t rb = begin(rk);
    ZC_RETURN_IF_ERROR(c.Exchange(right, out + begin(sk) * es, len(sk), left, len(rk), n - 1 + s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(out + (rb + off) * es, payload, m * es);
                                  }));
  }
  return Status::Ok();
}

}  // namespace zc::coll
