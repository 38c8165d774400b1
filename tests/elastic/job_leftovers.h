// What an elastic test checks is left behind by a job (open descriptors,
// shared-memory segments), and the seed of its random kill points; shared
// by test_elastic.cpp and test_grow.cpp.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace zc::test {

// Open descriptors of this process.
inline int CountFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory's own fd
}

// The job's shared-memory segments still in /dev/shm.
inline std::vector<std::string> SegmentsOf(const char* tag) {
  std::vector<std::string> out;
  std::string prefix = std::string("zc-") + tag + "-";
  DIR* d = opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
  closedir(d);
  return out;
}

// A rank writes its job's segment tag (ZC_JOB_KEY's first 16 characters)
// into memory the test process shares, which then looks for leftovers.
inline void NoteJobTag(char (&job_tag)[17]) {
  const char* key = getenv("ZC_JOB_KEY");
  if (key) snprintf(job_tag, sizeof(job_tag), "%.16s", key);
}

inline void ExpectNoSegments(const char (&job_tag)[17]) {
  std::vector<std::string> left = SegmentsOf(job_tag);
  EXPECT_TRUE(job_tag[0] && left.empty()) << left.size() << " segments left, first "
                                          << (left.empty() ? "" : left[0]);
}

// ZC_TEST_SEED, or one from the clock; printed so that a failure reruns.
inline unsigned Seed() {
  const char* s = getenv("ZC_TEST_SEED");
  unsigned seed = s ? static_cast<unsigned>(strtoul(s, nullptr, 10))
                    : static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count() % 100000);
  printf("seed %u (ZC_TEST_SEED reruns it)\n", seed);
  return seed;
}

}  // namespace zc::test
