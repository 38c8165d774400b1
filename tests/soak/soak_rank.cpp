#include "soak_rank.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace zc::soak {
namespace {

// Sizes in elements: zero, one, primes, unaligned, up to ~1 MiB of doubles.
constexpr size_t kCounts[] = {0, 1, 2, 3, 7, 13, 31, 127, 1021, 4099, 16411, 65537, 131101};
constexpr size_t kMaxCount = 131101;

enum OpKind {
  kAllreduce, kIallreduce, kBroadcast, kReduce, kAllgather, kReduceScatter, kAlltoall,
  kGather, kScatter, kAllgatherv, kRingP2p, kBarrier, kNumOps
};

const char* OpName(int op) {
  static const char* names[] = {"allreduce", "iallreduce", "broadcast", "reduce", "allgather",
                                "reduce_scatter", "alltoall", "gather", "scatter", "allgatherv",
                                "ring isend/irecv", "barrier"};
  return op >= 0 && op < kNumOps ? names[op] : "?";
}

// Small exact values: sums over 8 ranks stay exact in every dtype used.
int32_t Val(int rank, size_t i, uint32_t salt) {
  return (rank + 1) * 7 + static_cast<int32_t>((i * 13 + salt) % 97);
}

struct Dtype {
  zc_dtype id;
  size_t size;
};
constexpr Dtype kDtypes[] = {{ZC_INT32, 4}, {ZC_INT64, 8}, {ZC_FLOAT32, 4}, {ZC_FLOAT64, 8}};

// Element i of a typed buffer as a double (exact for these values), and back.
double Get(const void* buf, zc_dtype t, size_t i) {
  switch (t) {
    case ZC_INT32: return static_cast<const int32_t*>(buf)[i];
    case ZC_INT64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case ZC_FLOAT32: return static_cast<const float*>(buf)[i];
    default: return static_cast<const double*>(buf)[i];
  }
}
void Put(void* buf, zc_dtype t, size_t i, double v) {
  switch (t) {
    case ZC_INT32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case ZC_INT64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case ZC_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(buf)[i] = v; break;
  }
}

double Reduce(zc_op op, int nranks, size_t i, uint32_t salt) {
  double acc = Val(0, i, salt);
  for (int q = 1; q < nranks; ++q) {
    double v = Val(q, i, salt);
    acc = op == ZC_SUM ? acc + v : op == ZC_MAX ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

class Rank {
 public:
  Rank(int rank, int nranks, uint64_t seed, Board* board)
      : rank_(rank), n_(nranks), seed_(seed), board_(board), me_(board->rank[rank]),
        a_(kMaxCount * kMaxRanks), b_(kMaxCount * kMaxRanks) {}

  int Run(const zc_unique_id& id) {
    me_.pid.store(getpid());
    zc_status st = zc_comm_init_rank(&comm_, n_, &id, rank_);
    if (st != ZC_OK) {
      Fail(st, "zc_comm_init_rank: %s", zc_last_error(nullptr));
      return kExitInitFailed;
    }
    me_.phase.store(kRunning);
    int rc = Loop();
    // After a failed call, abort the communicator before finalizing, as a
    // framework does (NCCL's ncclCommAbort): a send/recv failure leaves the
    // communicator usable, and a rank that met its peers' collective in
    // zc_finalize's barrier would be reported to them as a mismatch.
    if (rc != kExitClean) zc_abort(comm_);
    zc_status fst = zc_finalize(comm_);
    me_.finalized_ns.store(MonotonicNs());
    if (rc == kExitClean && fst != ZC_OK) {
      Fail(fst, "zc_finalize after a clean run: %s", zc_last_error(nullptr));
      rc = kExitFault;
    }
    if (me_.phase.load() != kWrong) me_.phase.store(kFinalized);
    return rc;
  }

 private:
  // Records the first failure with its time; the message comes last so the
  // driver never reads it half-written.
  void Fail(zc_status st, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    if (me_.first_error.load() != 0) return;
    me_.error_ns.store(MonotonicNs());
    me_.first_error.store(st == ZC_OK ? ZC_ERR_INTERNAL : st);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(me_.message, sizeof(me_.message), fmt, ap);
    va_end(ap);
    me_.message_ready.store(1);
    me_.phase.store(kFailed);
  }

  int Wrong(const char* what, size_t i, double got, double want) {
    if (me_.first_error.load() == 0) {
      me_.error_ns.store(MonotonicNs());
      me_.first_error.store(ZC_ERR_INTERNAL);
      snprintf(me_.message, sizeof(me_.message),
               "WRONG RESULT: iteration %llu, %s, element %zu: got %.17g, want %.17g",
               static_cast<unsigned long long>(me_.iterations.load()), what, i, got, want);
      me_.message_ready.store(1);
    }
    me_.phase.store(kWrong);
    return kExitWrong;
  }

  int Loop() {
    for (uint64_t it = 0;; ++it) {
      if (board_->abort_rank.load() == rank_) {
        Fail(ZC_ERR_ABORTED, "rank %d called zc_abort on purpose (the driver asked)", rank_);
        zc_abort(comm_);
        return kExitFault;
      }
      // Every fourth iteration rank 0 broadcasts whether the driver asked
      // the job to stop, so every rank leaves after the same operation.
      if (it % 4 == 0) {
        int32_t stop = rank_ == 0 ? board_->stop.load() : -1;
        zc_status st = zc_broadcast(comm_, &stop, 1, ZC_INT32, 0);
        if (st != ZC_OK) return Failed(st, "broadcast of the stop flag");
        if (stop != 0 && stop != 1) return Wrong("stop flag broadcast", 0, stop, 0);
        if (stop) return kExitClean;
      }
      std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + it);
      int rc = OneOp(rng, static_cast<uint32_t>(it));
      if (rc != kExitClean) return rc;
      me_.iterations.store(it + 1);
    }
  }

  int Failed(zc_status st, const char* what) {
    Fail(st, "rank %d, iteration %llu, %s: %s: %s", rank_,
         static_cast<unsigned long long>(me_.iterations.load()), what, zc_status_string(st),
         zc_last_error(comm_));
    return kExitFault;
  }

  int OneOp(std::mt19937_64& rng, uint32_t salt) {
    const int op = static_cast<int>(rng() % kNumOps);
    const size_t count = kCounts[rng() % (sizeof(kCounts) / sizeof(kCounts[0]))];
    const Dtype dt = kDtypes[rng() % 4];
    const zc_op rop = static_cast<zc_op>(std::array<int, 3>{ZC_SUM, ZC_MAX, ZC_MIN}[rng() % 3]);
    const int root = static_cast<int>(rng() % static_cast<uint64_t>(n_));
    const bool in_place = rng() % 2 == 0;
    void* a = a_.data();
    void* b = b_.data();
    const zc_dtype t = dt.id;
    char what[96];
    snprintf(what, sizeof(what), "%s count %zu dtype %d", OpName(op), count, static_cast<int>(t));
    zc_status st = ZC_OK;
    switch (op) {
      case kAllreduce:
      case kIallreduce: {
        for (size_t i = 0; i < count; ++i) Put(a, t, i, Val(rank_, i, salt));
        void* out = in_place ? a : b;
        if (op == kAllreduce) {
          st = zc_allreduce(comm_, a, out, count, t, rop);
        } else {
          zc_request* req = nullptr;
          st = zc_iallreduce(comm_, a, out, count, t, rop, &req);
          if (st == ZC_OK) st = zc_wait(req);
        }
        if (st != ZC_OK) return Failed(st, what);
        for (size_t i = 0; i < count; ++i) {
          double want = Reduce(rop, n_, i, salt);
          if (Get(out, t, i) != want) return Wrong(what, i, Get(out, t, i), want);
        }
        break;
      }
      case kBroadcast: {
        for (size_t i = 0; i < count; ++i) Put(a, t, i, rank_ == root ? Val(root, i, salt) : -1);
        st = zc_broadcast(comm_, a, count, t, root);
        if (st != ZC_OK) return Failed(st, what);
        for (size_t i = 0; i < count; ++i)
          if (Get(a, t, i) != Val(root, i, salt)) return Wrong(what, i, Get(a, t, i), Val(root, i, salt));
        break;
      }
      case kReduce: {
        for (size_t i = 0; i < count; ++i) Put(a, t, i, Val(rank_, i, salt));
        st = zc_reduce(comm_, a, rank_ == root ? b : nullptr, count, t, rop, root);
        if (st != ZC_OK) return Failed(st, what);
        if (rank_ == root)
          for (size_t i = 0; i < count; ++i) {
            double want = Reduce(rop, n_, i, salt);
            if (Get(b, t, i) != want) return Wrong(what, i, Get(b, t, i), want);
          }
        break;
      }
      case kAllgather:
      case kGather: {
        for (size_t i = 0; i < count; ++i) Put(a, t, i, Val(rank_, i, salt));
        const bool all = op == kAllgather;
        st = all ? zc_allgather(comm_, a, b, count, t)
                 : zc_gather(comm_, a, rank_ == root ? b : nullptr, count, t, root);
        if (st != ZC_OK) return Failed(st, what);
        if (all || rank_ == root)
          for (int q = 0; q < n_; ++q)
            for (size_t i = 0; i < count; ++i)
              if (Get(b, t, q * count + i) != Val(q, i, salt))
                return Wrong(what, q * count + i, Get(b, t, q * count + i), Val(q, i, salt));
        break;
      }
      case kScatter: {
        if (rank_ == root)
          for (int q = 0; q < n_; ++q)
            for (size_t i = 0; i < count; ++i) Put(a, t, q * count + i, Val(q, i, salt));
        st = zc_scatter(comm_, rank_ == root ? a : nullptr, b, count, t, root);
        if (st != ZC_OK) return Failed(st, what);
        for (size_t i = 0; i < count; ++i)
          if (Get(b, t, i) != Val(rank_, i, salt)) return Wrong(what, i, Get(b, t, i), Val(rank_, i, salt));
        break;
      }
      case kReduceScatter: {
        for (size_t i = 0; i < count * n_; ++i) Put(a, t, i, Val(rank_, i, salt));
        st = zc_reduce_scatter(comm_, a, b, count, t, rop);
        if (st != ZC_OK) return Failed(st, what);
        for (size_t i = 0; i < count; ++i) {
          double want = Reduce(rop, n_, rank_ * count + i, salt);
          if (Get(b, t, i) != want) return Wrong(what, i, Get(b, t, i), want);
        }
        break;
      }
      case kAlltoall: {
        // Block q of rank r's input goes to rank q: value Val(r, q*count+i).
        for (size_t i = 0; i < count * n_; ++i) Put(a, t, i, Val(rank_, i, salt));
        st = zc_alltoall(comm_, a, b, count, t);
        if (st != ZC_OK) return Failed(st, what);
        for (int q = 0; q < n_; ++q)
          for (size_t i = 0; i < count; ++i) {
            double want = Val(q, rank_ * count + i, salt);
            if (Get(b, t, q * count + i) != want) return Wrong(what, q * count + i, Get(b, t, q * count + i), want);
          }
        break;
      }
      case kAllgatherv: {
        // Uneven counts, zero for some ranks.
        std::vector<size_t> counts(n_), displs(n_);
        size_t total = 0;
        for (int q = 0; q < n_; ++q) {
          counts[q] = (q + salt) % 3 == 1 ? 0 : count / (q + 1);
          displs[q] = total;
          total += counts[q];
        }
        for (size_t i = 0; i < counts[rank_]; ++i) Put(a, t, i, Val(rank_, i, salt));
        st = zc_allgatherv(comm_, a, counts[rank_], b, counts.data(), displs.data(), t);
        if (st != ZC_OK) return Failed(st, what);
        for (int q = 0; q < n_; ++q)
          for (size_t i = 0; i < counts[q]; ++i)
            if (Get(b, t, displs[q] + i) != Val(q, i, salt))
              return Wrong(what, displs[q] + i, Get(b, t, displs[q] + i), Val(q, i, salt));
        break;
      }
      case kRingP2p: {
        // Each rank sends to the next and receives from the previous one.
        const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
        const size_t bytes = count * dt.size;
        for (size_t i = 0; i < count; ++i) Put(a, t, i, Val(rank_, i, salt));
        zc_request* rreq = nullptr;
        zc_request* sreq = nullptr;
        const int tag = static_cast<int>(salt % 1000);
        st = zc_irecv(comm_, b, bytes, prev, tag, &rreq);
        if (st != ZC_OK) return Failed(st, what);
        st = zc_isend(comm_, a, bytes, next, tag, &sreq);
        if (st != ZC_OK) {
          zc_wait(rreq);
          return Failed(st, what);
        }
        zc_status s1 = zc_wait(sreq);
        zc_status s2 = zc_wait(rreq);
        if (s1 != ZC_OK) return Failed(s1, what);
        if (s2 != ZC_OK) return Failed(s2, what);
        for (size_t i = 0; i < count; ++i)
          if (Get(b, t, i) != Val(prev, i, salt)) return Wrong(what, i, Get(b, t, i), Val(prev, i, salt));
        break;
      }
      case kBarrier:
        st = zc_barrier(comm_);
        if (st != ZC_OK) return Failed(st, what);
        break;
    }
    return kExitClean;
  }

  const int rank_, n_;
  const uint64_t seed_;
  Board* board_;
  RankStatus& me_;
  zc_comm* comm_ = nullptr;
  std::vector<double> a_, b_;  // 8-byte elements: room for every dtype
};

}  // namespace

int RunRank(int rank, int nranks, const zc_unique_id& id, uint64_t seed, Board* board) {
  Rank r(rank, nranks, seed, board);
  return r.Run(id);
}

}  // namespace zc::soak
