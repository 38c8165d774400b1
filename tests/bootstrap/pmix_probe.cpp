// Run under mpirun: creates the bootstrap from the environment, checks that
// it is PMIx with the job's rank and size, and AllGathers rank-dependent
// binary strings twice.
//   pmix_probe --expect-size N [--expect-kind pmix]
// Without the expected size a job that fell back to one process per job
// (each rank alone, size 1) would pass, so it is required. The launcher's own
// view (OMPI_COMM_WORLD_SIZE/RANK, when set) must agree too.
// Exit 0 on success, 1 on a failed check, 77 (meson's "skip") with --skip.
#include <cstdio>
#include <cstdlib>
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
  int expect_size = -1;
  const char* expect_kind = "pmix";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--expect-size") == 0) expect_size = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--expect-kind") == 0) expect_kind = argv[i + 1];
    else {
      fprintf(stderr, "pmix_probe: unknown argument %s\n", argv[i]);
      return 1;
    }
  }
  if (expect_size < 1) {
    fprintf(stderr, "usage: pmix_probe --expect-size N [--expect-kind pmix]\n");
    return 1;
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
  if (strcmp(b->kind(), expect_kind) != 0) {
    fprintf(stderr, "pmix_probe: rank %d: bootstrap is %s, expected %s\n", rank,
            b->kind(), expect_kind);
    ++bad;
  }
  if (size != expect_size) {
    fprintf(stderr, "pmix_probe: rank %d: size %d, expected %d\n", rank, size, expect_size);
    ++bad;
  }
  if (rank < 0 || rank >= size) {
    fprintf(stderr, "pmix_probe: rank %d out of range [0, %d)\n", rank, size);
    ++bad;
  }
  // Open MPI's launcher says what it started; PMIx must agree with it.
  const char* world_size = getenv("OMPI_COMM_WORLD_SIZE");
  const char* world_rank = getenv("OMPI_COMM_WORLD_RANK");
  if (world_size && atoi(world_size) != size) {
    fprintf(stderr, "pmix_probe: rank %d: size %d, mpirun started %s\n", rank, size,
            world_size);
    ++bad;
  }
  if (world_rank && atoi(world_rank) != rank) {
    fprintf(stderr, "pmix_probe: rank %d, but mpirun says rank %s\n", rank, world_rank);
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
