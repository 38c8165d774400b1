// Run under mpirun: creates the bootstrap from the environment (PMIx), checks
// rank/size, and AllGathers rank-dependent binary strings twice.
// Exit 0 on success, 1 on a failed check, 77 (meson's "skip") with --skip.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"

static std::string RankValue(int rank, int round) {
  std::string s = zc::Format("r%d/%d:", rank, round);
  size_t n = static_cast<size_t>(rank * 53 + round * 7 + 5);
  for (size_t i = 0; i < n; ++i)
    s += static_cast<char>((i * 31 + static_cast<size_t>(rank) + round) & 0xff);
  return s;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--skip") == 0) {
    printf("pmix_probe: skipped (%s)\n", argc > 2 ? argv[2] : "no reason given");
    return 77;
  }
  zc::Config config;
  zc::Status st = zc::Config::FromEnv(&config);
  if (!st.ok()) { fprintf(stderr, "pmix_probe: %s\n", st.message().c_str()); return 1; }
  config.timeout_s = 60;
  std::unique_ptr<zc::Bootstrap> b;
  st = zc::Bootstrap::Create(config, &b);
  if (!st.ok()) { fprintf(stderr, "pmix_probe: %s\n", st.message().c_str()); return 1; }
  int rank = b->rank(), size = b->size();
  int bad = 0;
  if (getenv("PMIX_RANK") && strcmp(b->kind(), "pmix") != 0) {
    fprintf(stderr, "pmix_probe: rank %d: bootstrap is %s, expected pmix\n", rank,
            b->kind());
    ++bad;
  }
  if (b->local_rank() < 0 || b->local_rank() >= b->local_size() ||
      b->local_size() > size) {
    fprintf(stderr, "pmix_probe: rank %d: bad local rank %d of %d\n", rank,
            b->local_rank(), b->local_size());
    ++bad;
  }
  for (int round = 0; round < 2 && !bad; ++round) {
    std::vector<std::string> all;
    st = b->AllGather(zc::Format("probe%d", round), RankValue(rank, round), &all, 60);
    if (!st.ok()) {
      fprintf(stderr, "pmix_probe: %s\n", st.message().c_str());
      return 1;
    }
    for (int r = 0; r < size; ++r) {
      if (all[r] != RankValue(r, round)) {
        fprintf(stderr, "pmix_probe: rank %d: round %d: wrong value from rank %d "
                "(%zu bytes)\n", rank, round, r, all[r].size());
        ++bad;
      }
    }
  }
  if (bad) return 1;
  printf("pmix_probe: rank %d of %d (local %d of %d, %s) ok\n", rank, size,
         b->local_rank(), b->local_size(), b->kind());
  return 0;
}
