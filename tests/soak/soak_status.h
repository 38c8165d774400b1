// What a soak rank tells the driver, in memory shared across fork
// (MAP_SHARED | MAP_ANONYMOUS): lock-free atomics only, so a rank killed at
// any instant never leaves it half-written in a way that matters (the
// message is read only after the rank's phase says it is complete).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>

namespace zc::soak {

enum Phase : int {
  kStarting = 0,
  kRunning,    // zc_comm_init_rank returned OK
  kFailed,     // a call returned an error; first_error/at_ns are set
  kFinalized,  // zc_finalize returned (after success or failure)
  kWrong,      // a result differed from the expected value: never allowed
};

constexpr int kMaxRanks = 8;

struct RankStatus {
  std::atomic<int> pid{0};
  std::atomic<int> phase{kStarting};
  std::atomic<uint64_t> iterations{0};
  std::atomic<int> first_error{0};      // zc_status
  std::atomic<int64_t> error_ns{0};     // CLOCK_MONOTONIC of the first error
  std::atomic<int64_t> finalized_ns{0};
  std::atomic<int> message_ready{0};
  char message[480];
};

struct Board {
  std::atomic<int> stop{0};        // the driver asks the job to end (rank 0 broadcasts it)
  std::atomic<int> abort_rank{-1}; // this rank calls zc_abort at its next iteration
  std::atomic<int> store_port{0};  // the unique id's rendezvous (not a data connection)
  RankStatus rank[kMaxRanks];
};

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace zc::soak
