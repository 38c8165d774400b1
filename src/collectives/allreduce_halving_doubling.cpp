// Recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by
// recursive halving, then an allgather by recursive doubling, log2(p) steps
// each; small vectors take one recursive doubling of the whole vector
// instead (DoubleWhole). With a rank count that is not a power of two the
// first 2*extra ranks fold in pairs first (even ranks hand their vector to
// the odd neighbour and get the result back at the end). docs/algorithms.md
// has the details.
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

// Up to this size the whole vector travels at every step (DoubleWhole):
// log2(p) S bytes per rank against halving-doubling's 2 (p-1)/p S, for
// half the steps. With 2 ranks in the doubling both move S, so it always
// does. Measured over loopback tcp with 4 ranks (docs/PERFORMANCE.md):
// 0.5x the time at 8 B-8 KiB, 0.6x at 16-32 KiB, 0.85x at 64 KiB, 0.9x at
// 128 KiB and 1.1x at 256 KiB; slower networks move the even point down.
constexpr size_t kWholeMaxBytes = 64 * 1024;

HdShape Shape(int rank, int size) {
  HdShape h;
  while (h.p * 2 <= size) h.p *= 2;
  h.extra = size - h.p;
  if (rank < 2 * h.extra) h.nr = (rank % 2) ? rank / 2 : -1;
  else h.nr = rank - h.extra;
  return h;
}

// Recursive halving, then recursive doubling (Rabenseifner): each rank
// reduces 1/p of the vector, then the owned ranges are gathered back.
Status HalveThenDouble(OpCtx& c, const HdShape& h, const char* in, char* out, size_t count,
                       zc_dtype dtype, zc_op op, bool have_partial) {
  const size_t es = c.es();
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
  if (op == ZC_AVG) ScaleDiv(dtype, out + lo * es, hi - lo, c.size());

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
  return Status::Ok();
}

// Recursive doubling of the whole vector: log2(p) steps where halving then
// doubling takes 2 log2(p), each moving all of it, for vectors whose time
// is the steps' latency (over tcp one step costs a system call and a
// wake-up each way). Both partners of a step combine the lower group's
// partial sum with the upper group's, in that order, so every rank
// computes the same bits (max(-0.0, 0.0) and NaN payloads depend on the
// order of the operands).
Status DoubleWhole(OpCtx& c, const HdShape& h, const char* in, char* out, size_t count,
                   zc_dtype dtype, zc_op op, bool have_partial) {
  const size_t es = c.es();
  uint32_t step = 200;
  for (int mask = 1; mask < h.p; mask <<= 1, ++step) {
    const int partner = h.Real(h.nr ^ mask);
    const bool lower = (h.nr & mask) == 0;
    // Chunk i goes out before the reply's chunk i overwrites it in out.
    const char* mine = have_partial ? out : in;
    ZC_RETURN_IF_ERROR(c.Exchange(partner, mine, count, partner, count, step,
                                  [&](size_t off, const void* payload, size_t m) {
                                    const char* own = mine + off * es;
                                    char* at = out + off * es;
                                    if (lower) Reduce2(dtype, op, at, own, payload, m);
                                    else Reduce2(dtype, op, at, payload, own, m);
                                  }));
    have_partial = true;
  }
  if (op == ZC_AVG) ScaleDiv(dtype, out, count, c.size());
  return Status::Ok();
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

  if (h.p == 2 || count * es <= kWholeMaxBytes) {
    ZC_RETURN_IF_ERROR(DoubleWhole(c, h, in, out, count, dtype, op, have_partial));
  } else {
    ZC_RETURN_IF_ERROR(HalveThenDouble(c, h, in, out, count, dtype, op, have_partial));
  }
  // Unfold: the even neighbour gets the result.
  if (r < 2 * h.extra) return c.Exchange(r - 1, out, count, -1, 0, 1000, copy_in);
  return Status::Ok();
}

}  // namespace zc::coll
