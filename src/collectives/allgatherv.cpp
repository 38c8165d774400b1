// Allgatherv around the ring: as allgather, but block k has recvcounts[k]
// elements and lands at displs[k]. Every message carries its block's owner
// and element count (OpCtx::Block), so ranks that disagree on recvcounts
// fail with ZC_ERR_MISMATCH on the first chunk of the first block they see
// differently, never with wrong data or a hang.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"

namespace zc::coll {

Status AllgathervRing(OpCtx& c, const void* send, void* recv, const size_t* recvcounts,
                      const size_t* displs) {
  const int n = c.size(), r = c.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = c.es();
  char* out = static_cast<char*>(recv);
  // Block k's place in recv; null for an empty block (recv may be NULL then).
  auto at = [&](int k) { return recvcounts[k] ? out + displs[k] * es : nullptr; };
  if (recvcounts[r] && at(r) != send) memmove(at(r), send, recvcounts[r] * es);
  // Step s: forward block r-s (mine, from send, at s = 0), receive r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    int sk = (r - s + n) % n, rk = (r - s - 1 + n) % n;
    const OpCtx::Block sb{sk, recvcounts[sk]}, rb{rk, recvcounts[rk]};
    char* dst = at(rk);
    ZC_RETURN_IF_ERROR(c.ExchangeBlocks(right, s == 0 ? send : at(sk), recvcounts[sk], &sb, left,
                                        recvcounts[rk], &rb, s,
                                        [&](size_t off, const void* payload, size_t m) {
                                          memcpy(dst + off * es, payload, m * es);
                                        }));
  }
  return Status::Ok();
}

}  // namespace zc::coll
