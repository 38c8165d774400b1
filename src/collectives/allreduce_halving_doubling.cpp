// Recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by
// recursive halving, then an allgather by recursive doubling, log2(p) steps
// each. With a rank count that is not a power of two the first 2*extra ranks
// fold in pairs first (even ranks hand their vector to the odd neighbour and
// get the result back at the end). docs/algorithms.md has the details.
#include "collectives/collectives.h"
#include "collectives/op_ctx.h"
#include "collectives/reduce_kernels.h"

namespace zc::coll {
namespace {

struct HdShape {
  int p = 1;      // largest power of two <= size
  int extra = 0;  // size - p
  int nr = -1;    // my rank among the p (-1: folded away)
  // The real rank of new rank v.
  int Real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
};

HdShape Shape(int rank, int size) {
  HdShape h;
  while (h.p * 2 <= size) h.p *= 2;
  h.extra = size - h.p;
  if (rank < 2 * h.extra) h.nr = (rank % 2) ? rank / 2 : -1;
  else h.nr = rank - h.extra;
  return h;
}

}  // namespace

std::vector<int> HalvingDoublingPeers(int rank, int size) {
  std::vector<int> peers;
  if (size < 2) return peers;
  HdShape h = Shape(rank, size);
  if (rank < 2 * h.extra) peers.push_back(rank ^ 1);
  if (h.nr >= 0)
    for (int mask = 1; mask < h.p; mask <<= 1) peers.push_back(h.Real(h.nr ^ mask));
  return peers;
}

Status AllreduceHalvingDoubling(OpCtx& c, const void* send, void* recv, size_t count,
                                zc_dtype dtype, zc_op op) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.es();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  HdShape h = Shape(r, n);
  auto copy_in = [&](size_t off, const void* payload, size_t m) {
    memcpy(out + off * es, payload, m * es);
  };

  bool have_partial = false;  // out holds my running partial sums
  if (r < 2 * h.extra) {
    if (h.nr < 0) {
      // Folded away: hand the whole vector over, get the result back.
      ZC_RETURN_IF_ERROR(c.Exchange(r + 1, in, count, -1, 0, 0, copy_in));
      return c.Exchange(-1, nullptr, 0, r + 1, count, 1000, copy_in);
    }
    ZC_RETURN_IF_ERROR(c.Exchange(-1, nullptr, 0, r - 1, count, 0,
                                  [&](size_t off, const void* payload, size_t m) {
                                    Reduce2(dtype, op, out + off * es, in + off * es, payload, m);
                                  }));
    have_partial = true;
  }

  // Recursive halving: keep one half of the current range, send the other.
  std::vector<std::pair<size_t, size_t>> ranges;  // range before each step
  size_t lo = 0, hi = count;
  uint32_t step = 1;
  for (int mask = h.p / 2; mask >= 1; mask >>= 1, ++step) {
    int partner = h.Real(h.nr ^ mask);
    size_t mid = lo + (hi - lo) / 2;
    bool lower = (h.nr & mask) == 0;
    size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    size_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    const char* src = (have_partial ? out : in) + give_lo * es;
    bool first = !have_partial;
    ZC_RETURN_IF_ERROR(c.Exchange(partner, src, give_hi - give_lo, partner, keep_hi - keep_lo, step,
                                  [&](size_t off, const void* payload, size_t m) {
                                    size_t at = (keep_lo + off) * es;
                                    if (first) Reduce2(dtype, op, out + at, in + at, payload, m);
                                    else ReduceInto(dtype, op, out + at, payload, m);
                                  }));
    have_partial = true;
    ranges.push_back({lo, hi});
    lo = keep_lo;
    hi = keep_hi;
  }
  if (op == ZC_AVG) ScaleDiv(dtype, out + lo * es, hi - lo, n);

  // Recursive doubling: exchange my range for the partner's, in reverse.
  step = 100;
  for (int mask = 1; mask < h.p; mask <<= 1, ++step) {
    int partner = h.Real(h.nr ^ mask);
    auto [elo, ehi] = ranges.back();
    ranges.pop_back();
    size_t plo = lo == elo ? hi : elo, phi = lo == elo ? ehi : lo;
    ZC_RETURN_IF_ERROR(c.Exchange(partner, out + lo * es, hi - lo, partner, phi - plo, step,
                                  [&](size_t off, const void* payload, size_t m) {
                                    memcpy(out + (plo + off) * es, payload, m * es);
                                  }));
    lo = elo;
    hi = ehi;
  }
  // Unfold: the even neighbour gets the result.
  if (r < 2 * h.extra) return c.Exchange(r - 1, out, count, -1, 0, 1000, copy_in);
  return Status::Ok();
}

}  // namespace zc::coll
