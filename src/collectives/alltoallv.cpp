// Alltoallv by pairwise exchange, as alltoall: at step s (1..n-1) rank r
// sends sendcounts[r+s] elements from sdispls[r+s] to rank r+s and receives
// recvcounts[r-s] elements at rdispls[r-s] from rank r-s, chunked in
// lockstep. Every message carries the element count of the whole block
// (OpCtx::Block): a sender and receiver that disagree fail with
// ZC_ERR_MISMATCH on the first chunk. An empty block is still one empty
// message, so the steps of every rank stay in step whatever the counts.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"

namespace zc::coll {

Status AlltoallvPairwise(OpCtx& c, const void* send, const size_t* sendcounts,
                         const size_t* sdispls, void* recv, const size_t* recvcounts,
                         const size_t* rdispls) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.es();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<int> peers;
  for (int p = 0; p < n; ++p)
    if (p != r) peers.push_back(p);
  ZC_RETURN_IF_ERROR(c.Ensure(peers));
  // The caller checked sendcounts[r] == recvcounts[r].
  if (sendcounts[r]) memmove(out + rdispls[r] * es, in + sdispls[r] * es, sendcounts[r] * es);
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n, from = (r - s + n) % n;
    const OpCtx::Block sb{r, sendcounts[to]}, rb{from, recvcounts[from]};
    const char* src = sendcounts[to] ? in + sdispls[to] * es : nullptr;
    char* dst = recvcounts[from] ? out + rdispls[from] * es : nullptr;
    ZC_RETURN_IF_ERROR(c.ExchangeBlocks(to, src, sendcounts[to], &sb, from, recvcounts[from], &rb,
                                        s, [&](size_t off, const void* payload, size_t m) {
                                          memcpy(dst + off * es, payload, m * es);
                                        }));
  }
  return Status::Ok();
}

}  // namespace zc::coll
