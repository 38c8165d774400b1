// zcrun --elastic (docs/launcher.md, docs/elastic.md) with elastic_worker:
// a killed rank is replaced and the job finishes (exit 0); fewer than
// --min-np left ends the job with the cause and a non-zero status, at once;
// a discovery script that lists more slots makes ranks join up to --max-np;
// joiners that no grow admits are stopped once the ranks have finished;
// the ranks on a host that leaves the discovery script's output are stopped
// and the others shrink and finish (or, below --min-np, the job ends).
// After each job no worker process and no shared-memory segment is left.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "zcrun_runner.h"

namespace {

using zcrun_test::Result;
using zcrun_test::Runner;

std::string Worker() { return zcrun_test::EnvPath("ELASTIC_WORKER"); }

std::string Describe(const Result& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.term_signal) +
         (r.timed_out ? " (timed out)" : "") + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What the workers printed: their segment tag and pids.
void Leftovers(const Result& r, std::vector<std::string>* segments, std::vector<int>* live_pids) {
  std::regex line(R"(tag (\S+) pid (\d+))");
  std::string tag;
  for (std::sregex_iterator m(r.out.begin(), r.out.end(), line), end; m != end; ++m) {
    tag = (*m)[1];
    int pid = std::stoi((*m)[2]);
    if (kill(pid, 0) == 0) live_pids->push_back(pid);
  }
  if (tag.empty()) return;
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  std::string prefix = "zc-" + tag + "-";
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) segments->push_back(e->d_name);
  closedir(d);
}

void ExpectNothingLeft(const Result& r) {
  std::vector<std::string> segments;
  std::vector<int> pids;
  Leftovers(r, &segments, &pids);
  EXPECT_TRUE(segments.empty()) << segments.size() << " segments left, first " << segments[0];
  EXPECT_TRUE(pids.empty()) << pids.size() << " workers still running, first pid " << pids[0];
}

std::vector<std::string> Env(std::vector<std::string> more) {
  more.push_back("ZC_SOCKET_IFNAME=lo");
  more.push_back("ZC_TIMEOUT=60");
  return more;
}

TEST(ZcrunElastic, KilledRankIsReplacedAndTheJobFinishes) {
  Runner job({"--timeout", "100", "-np", "3", "--min-np", "2", "--max-np", "3", Worker()},
             Env({"ELASTIC_DIE=1:5", "ELASTIC_TARGET=3", "ELASTIC_STEPS=30"}));
  ASSERT_TRUE(job.Start());
  Result r = job.Finish(110);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("rank 1 (pid"), std::string::npos) << Describe(r);
  EXPECT_NE(r.err.find("was killed by signal SIGKILL (9); 2 processes go on (--min-np 2)"), std::string::npos)
      << Describe(r);
  EXPECT_EQ(Count(r.err, "to join the job"), 1) << Describe(r);
  EXPECT_EQ(Count(r.out, " of 3\n"), 3) << Describe(r);  // "done: rank R of 3", the replacement's included
  EXPECT_NE(r.out.find("[j1] done: rank 2 of 3"), std::string::npos) << Describe(r);
  ExpectNothingLeft(r);
}

TEST(ZcrunElastic, FewerThanMinNpEndsTheJobWithTheCause) {
  Runner job({"--timeout", "100", "-np", "3", "--min-np", "3", Worker()},
             Env({"ELASTIC_DIE=2:4", "ELASTIC_TARGET=3", "ELASTIC_STEPS=1000000"}));
  ASSERT_TRUE(job.Start());
  Result r = job.Finish(110);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << Describe(r);
  EXPECT_NE(r.err.find("rank 2 (pid"), std::string::npos) << Describe(r);
  EXPECT_NE(r.err.find("was killed by signal SIGKILL (9); 2 processes left, fewer than --min-np 3: ending the job"),
            std::string::npos)
      << Describe(r);
  EXPECT_EQ(Count(r.err, "to join the job"), 0) << Describe(r);
  EXPECT_EQ(Count(r.out, "done:"), 0) << Describe(r);
  ExpectNothingLeft(r);
}

TEST(ZcrunElastic, JoinersNobodyAdmitsAreStoppedWhenTheRanksFinish) {
  // A free slot gets a joiner at once; these ranks never grow.
  Runner job({"--timeout", "100", "-np", "2", "--max-np", "3", "-H", "localhost:3", Worker()},
             Env({"ELASTIC_TARGET=0", "ELASTIC_STEPS=20"}));
  ASSERT_TRUE(job.Start());
  Result r = job.Finish(110);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(Count(r.err, "to join the job"), 1) << Describe(r);
  EXPECT_EQ(Count(r.out, " of 2\n"), 2) << Describe(r);
  EXPECT_EQ(Count(r.out, "[j1] done"), 0) << Describe(r);
  ExpectNothingLeft(r);
}

TEST(ZcrunElastic, DiscoveredSlotsAddRanksUpToMaxNp) {
  char dir[] = "/tmp/zcrun-elastic-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string trigger = std::string(dir) + "/more", script = std::string(dir) + "/discover.sh";
  FILE* f = fopen(script.c_str(), "w");
  ASSERT_NE(f, nullptr);
  // Two slots, then four once rank 0 has made the cue file.
  fprintf(f, "#!/bin/sh\nif [ -e '%s' ]; then echo localhost:4; else echo localhost:2; fi\n", trigger.c_str());
  fclose(f);
  chmod(script.c_str(), 0755);
  Runner job({"--timeout", "100", "-np", "2", "--max-np", "3", "--host-discovery-script", script, Worker()},
             Env({"ELASTIC_TRIGGER=" + trigger, "ELASTIC_TARGET=3", "ELASTIC_STEPS=20"}));
  ASSERT_TRUE(job.Start());
  Result r = job.Finish(110);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(Count(r.err, "to join the job"), 1) << Describe(r);  // --max-np 3 of the 4 slots
  EXPECT_EQ(Count(r.out, " of 3\n"), 3) << Describe(r);
  EXPECT_NE(r.out.find("[j1] done: rank 2 of 3"), std::string::npos) << Describe(r);
  ExpectNothingLeft(r);
  unlink(trigger.c_str());
  unlink(script.c_str());
  rmdir(dir);
}

// A discovery script that lists localhost:2 and host "gone" (a rank started
// through --rsh "env ZC_FAKE_HOST={host}", on this machine really), and
// only localhost:2 once rank 0 has made the cue file.
class HostLeaves : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_NE(mkdtemp(dir_), nullptr);
    trigger_ = std::string(dir_) + "/gone";
    script_ = std::string(dir_) + "/discover.sh";
    FILE* f = fopen(script_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f, "#!/bin/sh\necho localhost:2\n[ -e '%s' ] || echo gone:1\n", trigger_.c_str());
    fclose(f);
    chmod(script_.c_str(), 0755);
  }
  void TearDown() override {
    unlink(trigger_.c_str());
    unlink(script_.c_str());
    rmdir(dir_);
  }
  Result RunJob(const std::string& min_np) {
    Runner job({"--timeout", "100", "-np", "3", "-H", "localhost:2,gone:1", "--rsh", "env ZC_FAKE_HOST={host}",
                "--min-np", min_np, "--max-np", "3", "--host-discovery-script", script_, Worker()},
               Env({"ZC_TRANSPORT=" + std::string(GetParam()), "ELASTIC_TRIGGER=" + trigger_, "ELASTIC_STEPS=20",
                    "ELASTIC_UNTIL_SIZE=2"}));
    EXPECT_TRUE(job.Start());
    return job.Finish(110);
  }
  char dir_[32] = "/tmp/zcrun-elastic-XXXXXX";
  std::string trigger_, script_;
};

TEST_P(HostLeaves, ItsRanksAreStoppedAndTheOthersFinish) {
  Result r = RunJob("2");
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("host gone left the host discovery script's output: stopping rank 2 (pid"), std::string::npos)
      << Describe(r);
  EXPECT_NE(r.err.find("(its host left) was killed by signal SIGTERM (15); 2 processes go on"), std::string::npos)
      << Describe(r);
  EXPECT_EQ(Count(r.err, "shrank to 2 ranks"), 2) << Describe(r);
  EXPECT_EQ(Count(r.err, "to join the job"), 0) << Describe(r);  // no slot is free
  EXPECT_EQ(Count(r.out, " of 2\n"), 2) << Describe(r);
  ExpectNothingLeft(r);
}

TEST_P(HostLeaves, BelowMinNpTheJobEndsWithTheCause) {
  Result r = RunJob("3");
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("host gone left the host discovery script's output: 2 processes would be left, fewer than "
                       "--min-np 3: ending the job"),
            std::string::npos)
      << Describe(r);
  EXPECT_EQ(Count(r.out, "done:"), 0) << Describe(r);
  ExpectNothingLeft(r);
}

INSTANTIATE_TEST_SUITE_P(Transports, HostLeaves, ::testing::Values("shm", "tcp"));

}  // namespace
