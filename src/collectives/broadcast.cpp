// Broadcast and reduce over a tree rooted at `root`, pipelined in chunks:
// a binomial tree (log2 n rounds of latency) for small messages, a chain
// (root -> root+1 -> ...; every rank sends the message once) for large ones.
// Per chunk a rank receives from its parent and forwards to its children
// (broadcast), or receives from its children, reduces and forwards to its
// parent (reduce).
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {
namespace {

struct Tree {
  int parent = -1;
  std::vector<int> children;  // largest subtree first
};

Tree MakeTree(int rank, int size, int root, bool chain) {
  Tree t;
  int vr = (rank - root + size) % size;
  auto real = [&](int v) { return (v + root) % size; };
  if (chain) {
    if (vr > 0) t.parent = real(vr - 1);
    if (vr + 1 < size) t.children.push_back(real(vr + 1));
    return t;
  }
  int mask = 1;
  while (mask < size) {
    if (vr & mask) {
      t.parent = real(vr - mask);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < size) t.children.push_back(real(vr + mask));
  return t;
}

}  // namespace

std::vector<int> TreePeers(int rank, int size, int root, bool chain) {
  Tree t = MakeTree(rank, size, root, chain);
  std::vector<int> peers = t.children;
  if (t.parent >= 0) peers.push_back(t.parent);
  return peers;
}

Status BroadcastTree(OpCtx& c, void* buf, size_t count, int root, bool chain) {
  Tree t = MakeTree(c.rank(), c.size(), root, chain);
  ZC_RETURN_IF_ERROR(c.Ensure(TreePeers(c.rank(), c.size(), root, chain)));
  ZC_RETURN_IF_ERROR(c.BeginAgreement());
  char* p = static_cast<char*>(buf);
  const size_t es = c.es(), ce = c.chunk_elems();
  for (size_t i = 0, nc = c.Chunks(count); i < nc; ++i) {
    size_t off = i * ce, m = std::min(ce, count - off);
    uint64_t tag = MessageTag(0, i);
    if (t.parent >= 0) {
      const void* payload;
      ZC_RETURN_IF_ERROR(c.Recv(t.parent, m * es, tag, &payload));
      memcpy(p + off * es, payload, m * es);
      // My next message goes to the parent when it is my ring neighbour
      // (2 ranks): the next collective's agreement.
      ZC_RETURN_IF_ERROR(c.Release(t.parent, /*reply_follows=*/t.parent == c.agreement_peer()));
    }
    for (int child : t.children) ZC_RETURN_IF_ERROR(c.Send(child, p + off * es, m * es, tag));
  }
  return c.EndAgreement();
}

Status ReduceTree(OpCtx& c, const void* send, void* recv, size_t count, zc_dtype dtype, zc_op op,
                  int root, bool chain, std::vector<char>* scratch) {
  Tree t = MakeTree(c.rank(), c.size(), root, chain);
  ZC_RETURN_IF_ERROR(c.Ensure(TreePeers(c.rank(), c.size(), root, chain)));
  ZC_RETURN_IF_ERROR(c.BeginAgreement());
  const bool is_root = c.rank() == root;
  const char* in = static_cast<const char*>(send);
  const size_t es = c.es(), ce = c.chunk_elems();
  if (!is_root && !t.children.empty() && scratch->size() < ce * es) scratch->resize(ce * es);
  for (size_t i = 0, nc = c.Chunks(count); i < nc; ++i) {
    size_t off = i * ce, m = std::min(ce, count - off);
    uint64_t tag = MessageTag(0, i);
    const char* mine = in + off * es;
    // The root accumulates in its output, others in a chunk of scratch; a
    // leaf sends its input as it is.
    char* acc = is_root ? static_cast<char*>(recv) + off * es : scratch->data();
    const char* result = mine;
    for (size_t k = 0; k < t.children.size(); ++k) {
      int child = t.children[t.children.size() - 1 - k];  // smallest subtree first
      const void* payload;
      ZC_RETURN_IF_ERROR(c.Recv(child, m * es, tag, &payload));
      if (k == 0) Reduce2(dtype, op, acc, mine, payload, m);
      else ReduceInto(dtype, op, acc, payload, m);
      // As in BroadcastTree: a child that is my ring neighbour gets my next
      // message (2 ranks).
      ZC_RETURN_IF_ERROR(c.Release(child, /*reply_follows=*/child == c.agreement_peer()));
      result = acc;
    }
    if (t.parent >= 0) {
      ZC_RETURN_IF_ERROR(c.Send(t.parent, result, m * es, tag));
    } else {
      if (result != acc) memmove(acc, result, m * es);
      if (op == ZC_AVG) ScaleDiv(dtype, acc, m, c.size());
    }
  }
  return c.EndAgreement();
}

}  // namespace zc::coll
