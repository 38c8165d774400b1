// Alltoall by pairwise exchange: at step s (1..n-1) every rank sends its
// block for rank r+s and receives the block from rank r-s, in chunks.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"

namespace zc::coll {

Status AlltoallPairwise(OpCtx& c, const void* send, void* recv, size_t count,
                        std::vector<char>* scratch) {
  const int n = c.size(), r = c.rank();
  const size_t block = count * c.es();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<int> peers;
  for (int p = 0; p < n; ++p)
    if (p != r) peers.push_back(p);
  ZC_RETURN_IF_ERROR(c.Ensure(peers));
  // Overlapping buffers (in place): blocks still to be sent would be
  // overwritten by blocks received, so send from a copy.
  const char* in_end = in + n * block;
  const char* out_end = out + n * block;
  if (in < out_end && out < in_end) {
    if (scratch->size() < n * block) scratch->resize(n * block);
    memcpy(scratch->data(), in, n * block);
    in = scratch->data();
  }
  memcpy(out + r * block, in + r * block, block);
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n, from = (r - s + n) % n;
    char* dst = out + from * block;
    ZC_RETURN_IF_ERROR(c.Exchange(to, in + to * block, count, from, count, s,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(dst + off * c.es(), payload, m * c.es());
                                  }));
  }
  return Status::Ok();
}

}  // namespace zc::coll
