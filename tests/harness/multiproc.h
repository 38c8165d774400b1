// Multi-process tests: fork N ranks of the calling test, with a key-value
// store served by the parent and the ZC_* environment zcrun would set. Each
// child runs body(rank) and exits with its return value; the parent collects
// exit codes, signals and output. A child that outlives timeout_s is killed.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

// In a rank's body: fail the rank (return 1) with a message naming the line.
#define CHILD_CHECK(cond, ...)                \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);           \
      fprintf(stderr, "\n");                  \
      return 1;                               \
    }                                         \
  } while (0)

// A C ABI call that must succeed (`comm` in scope): the status and detail.
#define CHILD_OK(call)                                                                         \
  do {                                                                                         \
    zc_status s_ = (call);                                                                     \
    CHILD_CHECK(s_ == ZC_OK, "%s: %s: %s", #call, zc_status_string(s_), zc_last_error(comm)); \
  } while (0)

namespace zc::test {

struct RankResult {
  int rank = -1;
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // killed by this signal
  std::string output;  // stdout and stderr of the rank
  double seconds = 0;  // wall time until it ended
};

using Env = std::vector<std::pair<std::string, std::string>>;

// What RunRanks does when a rank fails: exits non-zero, or dies of a signal
// other than SIGKILL (the signal tests kill their victims with). kWait lets
// the others run on (a test of how they notice); kStopAll kills the others
// at once (their output names the rank that failed and its last line), so a
// wrong result ends the test in milliseconds, not at a timeout of ranks that
// wait for it.
enum class OnRankFailure { kWait, kStopAll };

std::vector<RankResult> RunRanks(int n, const std::function<int(int rank)>& body,
                                 const Env& env = {}, double timeout_s = 120,
                                 OnRankFailure on_failure = OnRankFailure::kWait);

// Formats results for a failure message.
std::string Describe(const std::vector<RankResult>& results);

// Value of check for every rank: 0 exit code and no signal.
bool AllOk(const std::vector<RankResult>& results);

}  // namespace zc::test
