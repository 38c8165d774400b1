// Dissemination barrier: in round k (distance 2^k) every rank sends an empty
// message (header and flag only) to rank r+2^k and waits for the one from
// rank r-2^k; after ceil(log2 n) rounds every rank has heard, directly or
// not, from every other.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"

namespace zc::coll {

std::vector<int> DisseminationPeers(int rank, int size) {
  std::vector<int> peers;
  for (int d = 1; d < size; d <<= 1) {
    peers.push_back((rank + d) % size);
    peers.push_back((rank - d + size) % size);
  }
  return peers;
}

Status BarrierDissemination(OpCtx& c) {
  const int n = c.size(), r = c.rank();
  ZC_RETURN_IF_ERROR(c.Ensure(DisseminationPeers(r, n)));
  uint32_t step = 0;
  for (int d = 1; d < n; d <<= 1, ++step)
    ZC_RETURN_IF_ERROR(c.Exchange((r + d) % n, nullptr, 0, (r - d + n) % n, 0, step,
                                  [](size_t, const void*, size_t) {}));
  return Status::Ok();
}

}  // namespace zc::coll
