// A loop of verified collectives for the fault-tolerance tests: each
// iteration's results are exact functions of the members' original ranks,
// so a survivor's result after a shrink or a grow is checked exactly.
#pragma once

#include <zcomm/zcomm.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zc_elastic_test {

// What original rank `orig` contributes in iteration it, element i.
inline int64_t Contribution(int orig, int it, size_t i) {
  return (orig + 1) * 1000003LL + it * 31LL + static_cast<int64_t>(i);
}

// One iteration on comm, whose rank r is original rank members[r]: an
// allreduce of an odd size, a broadcast of bcast_count elements from a
// moving root, an allgather;
// every result checked exactly. *bad names a wrong value: where, what it
// is and what it should be.
inline zc_status VerifiedStep(zc_comm* comm, const std::vector<int>& members, int it, size_t bcast_count,
                              std::string* bad) {
  const int rank = zc_rank(comm), size = zc_size(comm), orig = members[rank];
  const size_t count = 1 + (static_cast<size_t>(it) * 7919) % 1031;  // 1 .. 1031, mostly primes' neighbours
  std::vector<int64_t> in(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = Contribution(orig, it, i);
  zc_status s = zc_allreduce(comm, in.data(), out.data(), count, ZC_INT64, ZC_SUM);
  if (s != ZC_OK) return s;
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int m : members) want += Contribution(m, it, i);
    if (out[i] != want) {
      *bad = "allreduce it " + std::to_string(it) + " [" + std::to_string(i) + "] = " + std::to_string(out[i]) +
             ", want " + std::to_string(want);
      return ZC_ERR_INTERNAL;
    }
  }
  const int root = it % size;
  std::vector<int32_t> b(bcast_count);
  for (size_t i = 0; i < b.size(); ++i) b[i] = rank == root ? members[root] * 100 + it + static_cast<int>(i) : -1;
  s = zc_broadcast(comm, b.data(), b.size(), ZC_INT32, root);
  if (s != ZC_OK) return s;
  for (size_t i = 0; i < b.size(); ++i) {
    const int32_t want = members[root] * 100 + it + static_cast<int>(i);
    if (b[i] != want) {
      *bad = "broadcast it " + std::to_string(it) + " from root " + std::to_string(root) + " [" + std::to_string(i) +
             "] = " + std::to_string(b[i]) + ", want " + std::to_string(want);
      return ZC_ERR_INTERNAL;
    }
  }
  int32_t mine[3] = {orig * 10, orig * 10 + 1, it};
  std::vector<int32_t> all(3 * static_cast<size_t>(size), -1);
  s = zc_allgather(comm, mine, all.data(), 3, ZC_INT32);
  if (s != ZC_OK) return s;
  for (int r = 0; r < size; ++r) {
    const int32_t want[3] = {members[r] * 10, members[r] * 10 + 1, it};
    for (int k = 0; k < 3; ++k)
      if (all[3 * r + k] != want[k]) {
        *bad = "allgather it " + std::to_string(it) + " [" + std::to_string(3 * r + k) +
               "] = " + std::to_string(all[3 * r + k]) + ", want " + std::to_string(want[k]);
        return ZC_ERR_INTERNAL;
      }
  }
  return ZC_OK;
}

}  // namespace zc_elastic_test
