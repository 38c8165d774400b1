// Multi-process tests: fork N ranks of the calling test, with a key-value
// store served by the parent and the ZC_* environment zcrun would set. Each
// child runs body(rank) and exits with its return value; the parent collects
// exit codes, signals and output. A child that outlives timeout_s is killed.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace zc::test {

struct RankResult {
  int rank = -1;
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // killed by this signal
  std::string output;  // stdout and stderr of the rank
  double seconds = 0;  // wall time until it ended
};

using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<RankResult> RunRanks(int n, const std::function<int(int rank)>& body,
                                 const Env& env = {}, double timeout_s = 120);

// Formats results for a failure message.
std::string Describe(const std::vector<RankResult>& results);

// Value of check for every rank: 0 exit code and no signal.
bool AllOk(const std::vector<RankResult>& results);

}  // namespace zc::test
