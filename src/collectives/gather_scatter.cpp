// Gather and scatter, direct: the root receives (gather) or sends (scatter)
// each rank's block of count elements over its link with that rank, chunked;
// the other ranks talk to the root only. The root moves (n-1) x B bytes, the
// others B (B = count x element size).
//
// Ranks that disagree on the root would otherwise wait for each other (two
// roots that only receive) or leave messages nobody reads. So both begin
// with an agreement step: every rank sends one empty message (the signature:
// count, dtype, root) to its right ring neighbour and checks the one from
// its left. If any two ranks differ, some neighbouring pair differs and that
// rank fails with ZC_ERR_MISMATCH (and aborts the others) before any data
// moves.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"

namespace zc::coll {
namespace {

constexpr uint32_t kAgreeStep = 0, kDataStep = 1;

Status Agree(OpCtx& c) {
  const int n = c.size(), r = c.rank();
  ZC_RETURN_IF_ERROR(c.Ensure(RingPeers(r, n)));
  return c.Exchange((r + 1) % n, nullptr, 0, (r + n - 1) % n, 0, kAgreeStep,
                    [](size_t, const void*, size_t) {});
}

std::vector<int> RootPeers(int rank, int size, int root) {
  if (rank != root) return {root};
  std::vector<int> peers;
  for (int p = 0; p < size; ++p)
    if (p != root) peers.push_back(p);
  return peers;
}

}  // namespace

Status GatherDirect(OpCtx& c, const void* send, void* recv, size_t count, int root) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.es(), block = count * es;
  ZC_RETURN_IF_ERROR(Agree(c));
  ZC_RETURN_IF_ERROR(c.Ensure(RootPeers(r, n, root)));
  auto none = [](size_t, const void*, size_t) {};
  if (r != root) return c.Exchange(root, send, count, -1, 0, kDataStep, none);
  char* out = static_cast<char*>(recv);
  if (block && out + r * block != send) memmove(out + r * block, send, block);
  for (int p = 0; p < n; ++p) {
    if (p == root) continue;
    char* dst = out + p * block;
    ZC_RETURN_IF_ERROR(c.Exchange(-1, nullptr, 0, p, count, kDataStep,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(dst + off * es, payload, m * es);
                                  }));
  }
  return Status::Ok();
}

Status ScatterDirect(OpCtx& c, const void* send, void* recv, size_t count, int root) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.es(), block = count * es;
  ZC_RETURN_IF_ERROR(Agree(c));
  ZC_RETURN_IF_ERROR(c.Ensure(RootPeers(r, n, root)));
  char* out = static_cast<char*>(recv);
  auto into_recv = [&](size_t off, const void* payload, size_t m) {
    memcpy(out + off * es, payload, m * es);
  };
  if (r != root) return c.Exchange(-1, nullptr, 0, root, count, kDataStep, into_recv);
  const char* in = static_cast<const char*>(send);
  for (int p = 0; p < n; ++p) {
    if (p == root) continue;
    ZC_RETURN_IF_ERROR(c.Exchange(p, in + p * block, count, -1, 0, kDataStep, into_recv));
  }
  if (block && out != in + r * block) memmove(out, in + r * block, block);
  return Status::Ok();
}

}  // namespace zc::coll
