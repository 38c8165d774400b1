// End-to-end tests of the built zcrun: each starts a real job of the probe
// program (zcrun_probe.cpp) and checks zcrun's output and exit status.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "zcrun_runner.h"

using zcrun_test::Lines;
using zcrun_test::Probe;
using zcrun_test::Result;
using zcrun_test::RunZcrun;
using zcrun_test::Runner;

namespace {

std::string Describe(const Result& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " +
         std::to_string(r.term_signal) + (r.timed_out ? " TIMED OUT" : "") +
         "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

// "[3] ": the prefix zcrun puts on rank 3's lines. (snprintf: GCC 12 warns
// falsely about "[" + std::to_string(n).)
std::string Tag(int rank) {
  char buf[32];
  snprintf(buf, sizeof(buf), "[%d] ", rank);
  return buf;
}

std::map<std::string, std::string> ParseFields(const std::string& line) {
  std::map<std::string, std::string> f;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) f[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return f;
}

bool ProcessGone(pid_t pid) {
  // Gone, or a zombie waiting for a reaper that is not us.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string all;
  std::getline(stat, all);
  size_t paren = all.rfind(')');
  return paren != std::string::npos && paren + 2 < all.size() &&
         all[paren + 2] == 'Z';
}

class ZcrunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(zcrun_test::Zcrun().empty()) << "ZCRUN not set by meson";
    ASSERT_FALSE(Probe().empty()) << "ZCRUN_PROBE not set by meson";
  }
};

TEST_F(ZcrunTest, EveryRankGetsItsEnvironment) {
  const int n = 5;
  Result r = RunZcrun({"-np", std::to_string(n), Probe(), "env"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::set<int> ranks;
  std::set<std::string> stores, keys;
  std::regex line_re(R"(^\[(\d+)\] (rank=.*)$)");
  for (const std::string& line : Lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << line;
    auto f = ParseFields(m[2]);
    int tag = std::stoi(m[1]);
    EXPECT_EQ(f["rank"], std::to_string(tag)) << "prefix and ZC_RANK differ";
    EXPECT_EQ(f["size"], std::to_string(n));
    EXPECT_EQ(f["local_rank"], std::to_string(tag));
    EXPECT_EQ(f["local_size"], std::to_string(n));
    EXPECT_EQ(f["key"].size(), 64u);
    EXPECT_EQ(f["key"].find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(f["store"].rfind("127.0.0.1:", 0), 0u) << f["store"];
    EXPECT_TRUE(ranks.insert(tag).second) << "rank " << tag << " twice";
    stores.insert(f["store"]);
    keys.insert(f["key"]);
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n));
  EXPECT_EQ(stores.size(), 1u);
  EXPECT_EQ(keys.size(), 1u);
  // A second job gets a different key.
  Result r2 = RunZcrun({"-np", "1", Probe(), "env"});
  ASSERT_EQ(r2.exit_code, 0) << Describe(r2);
  EXPECT_EQ(r2.out.find(*keys.begin()), std::string::npos);
}

TEST_F(ZcrunTest, RanksReachTheStoreAndShareValues) {
  Result r = RunZcrun({"-np", "4", Probe(), "store"}, 45);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.out.find(Tag(rank) + "store ok: rank " +
                         std::to_string(rank) + " read 4 values"),
              std::string::npos)
        << Describe(r);
  Result c = RunZcrun({"-np", "3", Probe(), "connect"});
  ASSERT_EQ(c.exit_code, 0) << Describe(c);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(c.out.find("connected " + std::to_string(rank)), std::string::npos);
}

TEST_F(ZcrunTest, OutputIsPrefixedAndStreamsStayApart) {
  Result r = RunZcrun({"-np", "3", Probe(), "streams"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 3; ++rank) {
    for (int i = 0; i <= rank; ++i) {
      std::string tag = Tag(rank);
      std::string id = std::to_string(rank) + "." + std::to_string(i);
      EXPECT_NE(r.out.find(tag + "out " + id + "\n"), std::string::npos) << Describe(r);
      EXPECT_NE(r.err.find(tag + "err " + id + "\n"), std::string::npos) << Describe(r);
    }
  }
  EXPECT_EQ(r.out.find("err "), std::string::npos);
  EXPECT_EQ(r.err.find("out "), std::string::npos);
  EXPECT_EQ(Lines(r.out).size(), 6u);

  Result plain = RunZcrun({"--no-tag-output", "-np", "2", Probe(), "streams"});
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  EXPECT_NE(plain.out.find("out 1.1\n"), std::string::npos);
  EXPECT_EQ(plain.out.find("["), std::string::npos) << Describe(plain);
}

TEST_F(ZcrunTest, LongLinesFromManyRanksNeverInterleave) {
  const int n = 3, lines = 200, len = 5000;
  Result r = RunZcrun({"-np", std::to_string(n), Probe(), "lines",
                  std::to_string(lines), std::to_string(len)}, 45);
  ASSERT_EQ(r.exit_code, 0) << Describe(r).substr(0, 2000);
  std::vector<int> next(n, 0);
  for (const std::string& line : Lines(r.out)) {
    ASSERT_GE(line.size(), 4u);
    ASSERT_EQ(line[0], '[');
    int rank = line[1] - '0';
    ASSERT_TRUE(rank >= 0 && rank < n) << line.substr(0, 80);
    int i = next[rank]++;
    std::string expect = Tag(rank) + "L" + std::to_string(rank) +
                         "." + std::to_string(i) + ":";
    for (int k = 0; k < len + rank * 13; ++k)
      expect += static_cast<char>('a' + (rank + i + k) % 26);
    ASSERT_EQ(line, expect) << "rank " << rank << " line " << i;
  }
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(next[rank], lines);
}

TEST_F(ZcrunTest, PartialLastLineIsFlushed) {
  Result r = RunZcrun({"-np", "2", Probe(), "partial", "no newline here"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("[0] whole line 0\n"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("[0] no newline here\n"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("[1] no newline here\n"), std::string::npos) << Describe(r);
  // Untagged output keeps the bytes as the rank wrote them.
  Result u = RunZcrun({"--no-tag-output", "-np", "1", Probe(), "partial", "tail"});
  EXPECT_EQ(u.out, "whole line 0\ntail") << Describe(u);
}

TEST_F(ZcrunTest, ExitCodeOfAFailingRankIsPropagated) {
  Result ok = RunZcrun({"-np", "2", Probe(), "exit", "0"});
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_EQ(ok.err, "");
  Result bad = RunZcrun({"-np", "1", Probe(), "exit", "42"});
  EXPECT_EQ(bad.exit_code, 42) << Describe(bad);
  EXPECT_NE(bad.err.find("zcrun: rank 0 (pid "), std::string::npos) << Describe(bad);
  EXPECT_NE(bad.err.find("exited with code 42"), std::string::npos) << Describe(bad);
}

TEST_F(ZcrunTest, OneFailingRankStopsTheOthersQuickly) {
  Result r = RunZcrun({"-np", "3", Probe(), "fail-rank", "1", "7"}, 30);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_LT(r.seconds, 10.0) << Describe(r);
  std::regex msg(R"(zcrun: rank 1 \(pid \d+ on host \S+\) exited with code 7)");
  EXPECT_TRUE(std::regex_search(r.err, msg)) << Describe(r);
  // The rank's own last words come before zcrun's message about it.
  size_t own = r.err.find("[1] rank 1 failing on purpose");
  ASSERT_NE(own, std::string::npos) << Describe(r);
  EXPECT_LT(own, r.err.find("zcrun: rank 1 ("));
  // Ranks stopped by zcrun are not reported as failures of their own.
  EXPECT_EQ(r.err.find("zcrun: rank 0 ("), std::string::npos) << Describe(r);
  EXPECT_EQ(r.err.find("zcrun: rank 2 ("), std::string::npos) << Describe(r);
}

TEST_F(ZcrunTest, ARankKilledBySignalIsReported) {
  Result r = RunZcrun({"-np", "3", Probe(), "kill-rank", "2"}, 30);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 128 + 9) << Describe(r);
  EXPECT_LT(r.seconds, 10.0) << Describe(r);
  std::regex msg(R"(zcrun: rank 2 \(pid \d+ on host \S+\) was killed by signal SIGKILL \(9\))");
  EXPECT_TRUE(std::regex_search(r.err, msg)) << Describe(r);
}

TEST_F(ZcrunTest, RanksIgnoringSigtermGetSigkill) {
  Result r = RunZcrun({"-np", "3", Probe(), "stubborn-fail", "0"}, 30);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_NE(r.err.find("still running after 3 s: sending SIGKILL"), std::string::npos)
      << Describe(r);
  EXPECT_LT(r.seconds, 15.0);
}

TEST_F(ZcrunTest, ChildrenOfARankDieWithTheJob) {
  char dir[] = "/tmp/zcrun-orphan-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string base = std::string(dir) + "/pid";
  Result r = RunZcrun({"-np", "2", Probe(), "orphan-fail", base}, 30);
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::string path = base + "." + std::to_string(rank);
    std::ifstream f(path);
    int pid = 0;
    ASSERT_TRUE(f >> pid) << "rank " << rank << " wrote no pid";
    // SIGKILL is delivered at once; reaping by init may take a moment.
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      gone = ProcessGone(pid);
      if (!gone) usleep(20000);
    }
    EXPECT_TRUE(gone) << "rank " << rank << "'s child " << pid << " survived";
    unlink(path.c_str());
  }
  rmdir(dir);
}

TEST_F(ZcrunTest, TimeoutKillsTheJob) {
  Result r = RunZcrun({"--timeout", "1.5", "-np", "2", Probe(), "sleep", "60"}, 30);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 124) << Describe(r);
  EXPECT_NE(r.err.find("zcrun: job timed out after 1.5 s"), std::string::npos)
      << Describe(r);
  EXPECT_LT(r.seconds, 10.0);
  // A job that finishes in time is not affected.
  Result ok = RunZcrun({"--timeout", "30", "-np", "2", Probe(), "exit", "0"});
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);
}

TEST_F(ZcrunTest, SigintIsForwardedToEveryRank) {
  Runner job({"-np", "3", Probe(), "ready-sleep"});
  ASSERT_TRUE(job.Start());
  for (int rank = 0; rank < 3; ++rank)
    ASSERT_TRUE(job.WaitForOutput("ready " + std::to_string(rank), 20));
  job.Signal(SIGINT);
  Result r = job.Finish(20);
  EXPECT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << Describe(r);
  EXPECT_NE(r.err.find("received SIGINT (2): forwarding it to every rank"),
            std::string::npos) << Describe(r);
}

TEST_F(ZcrunTest, ExportedVariables) {
  Result r = RunZcrun({"-x", "ZCT_SET=a b'c", "-x", "ZCT_FWD", "-x", "ZCT_MISSING",
                  "-np", "2", Probe(), "env", "ZCT_SET", "ZCT_FWD", "ZCT_MISSING"},
                 30, {"ZCT_FWD=forwarded value", "ZCT_OTHER=x"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::string tag = Tag(rank);
    EXPECT_NE(r.out.find(tag + "ZCT_SET=a b'c\n"), std::string::npos) << Describe(r);
    EXPECT_NE(r.out.find(tag + "ZCT_FWD=forwarded value\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "ZCT_MISSING=<unset>\n"), std::string::npos);
  }
  EXPECT_NE(r.err.find("-x ZCT_MISSING: ZCT_MISSING is not set"), std::string::npos);
}

TEST_F(ZcrunTest, RemoteRanksGoThroughTheRshTemplate) {
  // A local stand-in for ssh: "env ZC_FAKE_HOST={host}" runs the command
  // the way a remote shell would, with the host visible to the rank.
  Result r = RunZcrun({"--rsh", "env ZC_FAKE_HOST={host}", "-H", "fakehost:2,otherhost:1",
                  "-x", "ZCT_Q=it's \"quoted\" $HOME", Probe(), "env",
                  "ZC_FAKE_HOST", "ZCT_Q"},
                 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::vector<std::string> expect_host = {"fakehost", "fakehost", "otherhost"};
  std::vector<std::string> expect_local = {"0", "1", "0"};
  std::vector<std::string> expect_lsize = {"2", "2", "1"};
  for (int rank = 0; rank < 3; ++rank) {
    std::string tag = Tag(rank);
    EXPECT_NE(r.out.find(tag + "ZC_FAKE_HOST=" + expect_host[rank] + "\n"),
              std::string::npos) << Describe(r);
    EXPECT_NE(r.out.find(tag + "ZCT_Q=it's \"quoted\" $HOME\n"), std::string::npos)
        << Describe(r);
    std::string env_line = r.out.substr(r.out.find(tag + "rank="));
    auto f = ParseFields(env_line.substr(0, env_line.find('\n')));
    EXPECT_EQ(f["size"], "3");
    EXPECT_EQ(f["local_rank"], expect_local[rank]);
    EXPECT_EQ(f["local_size"], expect_lsize[rank]);
  }
  // Arguments with spaces and quotes arrive intact.
  Result a = RunZcrun({"--rsh", "env ZC_FAKE_HOST={host}", "-H", "fakehost", Probe(),
                  "args", "two words", "", "semi;colon", "back\\slash"},
                 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  EXPECT_NE(a.out.find("[0] arg0=[two words]\n[0] arg1=[]\n[0] arg2=[semi;colon]\n"
                       "[0] arg3=[back\\slash]\n"),
            std::string::npos) << Describe(a);
}

TEST_F(ZcrunTest, RemoteRanksReachTheStore) {
  // Store bound to the interface ZC_SOCKET_IFNAME picks (loopback here).
  Result r = RunZcrun({"--rsh", "env ZC_FAKE_HOST={host}", "-H", "fakehost:2,localhost:1",
                  Probe(), "store"},
                 45, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find("store ok: rank " + std::to_string(rank) + " read 3"),
              std::string::npos) << Describe(r);
}

TEST_F(ZcrunTest, HostfileFillsHostsInOrder) {
  char path[] = "/tmp/zcrun-hostfile-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "# test hosts\nalpha slots=2\n\nbeta:1   # one slot\nlocalhost slots=1\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), (ssize_t)text.size());
  close(fd);
  Result r = RunZcrun({"--hostfile", path, "--rsh", "env ZC_FAKE_HOST={host}", Probe(),
                  "env", "ZC_FAKE_HOST"},
                 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("[0] ZC_FAKE_HOST=alpha\n"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("[1] ZC_FAKE_HOST=alpha\n"), std::string::npos);
  EXPECT_NE(r.out.find("[2] ZC_FAKE_HOST=beta\n"), std::string::npos);
  EXPECT_NE(r.out.find("[3] ZC_FAKE_HOST=<unset>\n"), std::string::npos);  // local
  EXPECT_NE(r.out.find("[3] rank=3 size=4 local_rank=0 local_size=1"), std::string::npos);

  // A bad line is a usage error naming file and line.
  fd = open(path, O_WRONLY | O_TRUNC);
  std::string bad = "alpha slots=2\nbeta slots=x\n";
  ASSERT_EQ(write(fd, bad.data(), bad.size()), (ssize_t)bad.size());
  close(fd);
  Result b = RunZcrun({"--hostfile", path, Probe(), "env"});
  EXPECT_EQ(b.exit_code, 2) << Describe(b);
  EXPECT_NE(b.err.find(std::string(path) + ":2"), std::string::npos) << Describe(b);
  unlink(path);
}

TEST_F(ZcrunTest, UsageErrors) {
  Result help = RunZcrun({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: zcrun -np N"), std::string::npos);

  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"-np", "0", Probe()}, 2, "bad -np '0'"},
      {{"-np", "x", Probe()}, 2, "bad -np 'x'"},
      {{"-np"}, 2, "option -np needs a value"},
      {{"-np", "2"}, 2, "no program given"},
      {{"--bogus", "-np", "1", Probe()}, 2, "unknown option '--bogus'"},
      {{"-H", "a:0", Probe(), "env"}, 2, "bad host entry 'a:0'"},
      {{"-H", "a,,b", Probe(), "env"}, 2, "empty entry"},
      {{"-H", "a;rm:1", Probe(), "env"}, 2, "bad host entry 'a;rm:1'"},
      {{"-np", "3", "-H", "a:1,b:1", Probe(), "env"}, 2, "only 2 slots"},
      {{"--bind-to", "socket", "-np", "1", Probe()}, 2, "bad --bind-to 'socket'"},
      {{"--timeout", "-1", "-np", "1", Probe()}, 2, "bad --timeout '-1'"},
      {{"-np", "1", "no-such-program-zcrun"}, 127, "'no-such-program-zcrun' not found"},
      {{"-np", "1", "/nonexistent/prog"}, 127, "cannot run program '/nonexistent/prog'"},
      {{"--hostfile", "/nonexistent/hosts", Probe()}, 2, "cannot read hostfile"},
  };
  for (const Case& c : cases) {
    Result r = RunZcrun(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.message << "\n" << Describe(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << Describe(r);
  }
}

TEST_F(ZcrunTest, OversubscribingThisHostIsAllowed) {
  Result r = RunZcrun({"-H", "localhost:1", "-np", "3", Probe(), "env"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("[2] rank=2 size=3 local_rank=2 local_size=3"), std::string::npos)
      << Describe(r);
}

TEST_F(ZcrunTest, ReportedBindingsMatchTheRanksAffinity) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  Result r = RunZcrun({"--bind-to", "core", "--report-bindings", "-np", "2", Probe(),
                  "affinity"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::regex rep(R"(zcrun: rank (\d) bound to core (\d+) \(cpuset 0x[0-9a-f,x]+\))");
  int reports = 0;
  for (const std::string& line : Lines(r.err)) {
    std::smatch m;
    if (std::regex_match(line, m, rep)) ++reports;
  }
  EXPECT_EQ(reports, 2) << Describe(r);
  if (cpus >= 2) {
    // Two ranks on two different cores see disjoint CPU sets.
    std::regex aff(R"(\[(\d)\] cpus=([0-9,]+))");
    std::map<int, std::string> sets;
    for (const std::string& line : Lines(r.out)) {
      std::smatch m;
      if (std::regex_match(line, m, aff)) sets[std::stoi(m[1])] = m[2];
    }
    ASSERT_EQ(sets.size(), 2u) << Describe(r);
    EXPECT_NE(sets[0], sets[1]) << Describe(r);
  }
  Result none = RunZcrun({"--bind-to", "none", "--report-bindings", "-np", "1", Probe(),
                     "affinity"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.err.find("zcrun: rank 0 not bound"), std::string::npos) << Describe(none);
}

// The default binding gives each local rank its share of the cores: the
// ranks' CPU sets are disjoint and together cover every CPU (one rank: all).
TEST_F(ZcrunTest, DefaultBindingSharesTheCores) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const int cpus = CPU_COUNT(&allowed);
  for (int np : {1, 2}) {
    if (np > cpus) continue;
    Result r = RunZcrun({"--report-bindings", "-np", std::to_string(np).c_str(), Probe(), "affinity"});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    std::regex aff(R"(\[(\d)\] cpus=([0-9,]+))");
    std::map<int, std::string> sets;
    for (const std::string& line : Lines(r.out)) {
      std::smatch m;
      if (std::regex_match(line, m, aff)) sets[std::stoi(m[1])] = m[2];
    }
    ASSERT_EQ(sets.size(), static_cast<size_t>(np)) << Describe(r);
    std::set<std::string> all;
    size_t listed = 0;
    for (const auto& [rank, list] : sets) {
      std::stringstream ss(list);
      for (std::string cpu; std::getline(ss, cpu, ',');) {
        all.insert(cpu);
        ++listed;
      }
    }
    EXPECT_EQ(listed, all.size()) << "ranks share a CPU\n" << Describe(r);
    EXPECT_EQ(all.size(), static_cast<size_t>(cpus)) << "CPUs left unused\n" << Describe(r);
    if (np == 1 && cpus >= 2)
      EXPECT_NE(r.err.find("zcrun: rank 0 bound to cores 0-"), std::string::npos) << Describe(r);
  }
}

TEST_F(ZcrunTest, JobSharedMemorySegmentsAreRemoved) {
  Result r = RunZcrun({"-np", "2", Probe(), "shm"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  std::regex made(R"(made (/dev/shm/zc-[0-9a-f]{16}-probe\d))");
  int checked = 0;
  for (const std::string& line : Lines(r.out)) {
    std::smatch m;
    if (!std::regex_search(line, m, made)) continue;
    struct stat st;
    EXPECT_NE(stat(m[1].str().c_str(), &st), 0) << m[1] << " left behind";
    ++checked;
  }
  EXPECT_EQ(checked, 2) << Describe(r);
}

}  // namespace

namespace {

TEST_F(ZcrunTest, CommandsSurviveASshLikeRemoteShell) {
  // fake-ssh joins its arguments and hands them to /bin/sh like sshd: only
  // correctly quoted words arrive intact.
  std::string fake = zcrun_test::EnvPath("ZCRUN_FAKE_SSH");
  ASSERT_FALSE(fake.empty());
  Result r = RunZcrun({"--rsh", fake + " -o BatchMode=yes {host}", "-H", "node1:2",
                  "-x", "ZCT_Q=it's \"quoted\" $HOME `x` *", Probe(), "args",
                  "two words", "", "semi;colon", "$PATH"},
                 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::string t = Tag(rank);
    EXPECT_NE(r.out.find(t + "arg0=[two words]\n" + t + "arg1=[]\n" + t +
                         "arg2=[semi;colon]\n" + t + "arg3=[$PATH]\n"),
              std::string::npos) << Describe(r);
  }
  Result e = RunZcrun({"--rsh", fake + " {host}", "-H", "node1",
                  "-x", "ZCT_Q=it's \"quoted\" $HOME `x` *", Probe(), "env",
                  "ZCT_Q", "ZC_FAKE_HOST"},
                 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(e.exit_code, 0) << Describe(e);
  EXPECT_NE(e.out.find("[0] ZCT_Q=it's \"quoted\" $HOME `x` *\n"), std::string::npos)
      << Describe(e);
  EXPECT_NE(e.out.find("[0] ZC_FAKE_HOST=node1\n"), std::string::npos) << Describe(e);
}

TEST_F(ZcrunTest, JobKeyIsOnNoCommandLine) {
  // Remote ranks get the key through the remote shell's standard input:
  // while they run, no process on the machine (zcrun, the ssh stand-in,
  // the shell, the rank) has it in its command line, yet they hold it.
  std::string fake = zcrun_test::EnvPath("ZCRUN_FAKE_SSH");
  ASSERT_FALSE(fake.empty());
  Result r = RunZcrun({"--rsh", fake + " {host}", "-H", "node1:2", Probe(), "key-on-cmdline"},
                      30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("[0] key_on_cmdline=0 "), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("[1] key_on_cmdline=0 "), std::string::npos) << Describe(r);
  Result local = RunZcrun({"-np", "2", Probe(), "key-on-cmdline"}, 30, {"ZC_SOCKET_IFNAME=lo"});
  ASSERT_EQ(local.exit_code, 0) << Describe(local);
  EXPECT_NE(local.out.find("[0] key_on_cmdline=0 "), std::string::npos) << Describe(local);
}

}  // namespace

namespace {

// Network namespaces as hosts, as in docs/launcher.md: zcrun runs in a hub
// namespace, ranks in two "host" namespaces reached through veth pairs, and
// every rank must reach the store over a routed address. Needs root (and
// iproute2); skipped otherwise. Nothing is changed outside the namespaces.
class NetnsTest : public ZcrunTest {
 protected:
  void SetUp() override {
    ZcrunTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
    tag_ = "zcl" + std::to_string(getpid() % 100000);
    std::string s = "set -e; ip netns add " + tag_ + "hub; ";
    for (int i = 1; i <= 2; ++i) {
      std::string n = std::to_string(i), h = tag_ + "h" + n;
      std::string v = tag_ + "v" + n, p = tag_ + "p" + n;
      s += "ip netns add " + h + "; ip link add " + v + " type veth peer name " + p +
           "; ip link set " + v + " netns " + tag_ + "hub; ip link set " + p +
           " netns " + h + "; ip -n " + tag_ + "hub addr add 10.77." + n + ".1/24 dev " +
           v + "; ip -n " + h + " addr add 10.77." + n + ".2/24 dev " + p +
           "; ip -n " + tag_ + "hub link set " + v + " up; ip -n " + h + " link set " +
           p + " up; ip -n " + h + " link set lo up; ip -n " + h +
           " route add default via 10.77." + n + ".1; ";
    }
    s += "ip -n " + tag_ + "hub link set lo up; ";
    // The hub routes between the hosts (data connections go host to host).
    s += "ip netns exec " + tag_ + "hub sysctl -qw net.ipv4.ip_forward=1";
    created_ = true;
    if (system(("(" + s + ") >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "cannot create network namespaces here";
  }
  void TearDown() override {
    if (!created_) return;
    std::string s = "ip netns del " + tag_ + "h1; ip netns del " + tag_ +
                    "h2; ip netns del " + tag_ + "hub";
    if (system(("(" + s + ") >/dev/null 2>&1").c_str()) != 0) {
      // Partly created: nothing more to remove.
    }
  }
  std::string tag_;
  bool created_ = false;
};

TEST_F(NetnsTest, RanksInOtherNamespacesReachTheStore) {
  Result r = RunZcrun({"--rsh", "ip netns exec {host}", "-H",
                       tag_ + "h1:2," + tag_ + "h2:1", Probe(), "store"},
                      45, {"ZC_SOCKET_IFNAME==" + tag_ + "v1"},
                      {"ip", "netns", "exec", tag_ + "hub"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find(Tag(rank) + "store ok: rank " + std::to_string(rank) +
                         " read 3 values"),
              std::string::npos) << Describe(r);
  Result e = RunZcrun({"--rsh", "ip netns exec {host}", "-H",
                       tag_ + "h1," + tag_ + "h2", Probe(), "env"},
                      30, {"ZC_SOCKET_IFNAME==" + tag_ + "v1"},
                      {"ip", "netns", "exec", tag_ + "hub"});
  ASSERT_EQ(e.exit_code, 0) << Describe(e);
  EXPECT_NE(e.out.find("[1] rank=1 size=2 local_rank=0 local_size=1 store=10.77.1.1:"),
            std::string::npos) << Describe(e);
}

// Two hosts, one rank each: the data path crosses the veth pairs over the
// tcp transport (every collective of the C ABI, checked by the program).
TEST_F(NetnsTest, CollectivesAcrossNamespacesOverTcp) {
  const char* prog = getenv("ZCRUN_C_ABI_PROGRAM");
  ASSERT_NE(prog, nullptr);
  Result r = RunZcrun({"--rsh", "ip netns exec {host}", "-H", tag_ + "h1:1," + tag_ + "h2:1",
                       "-x", "ZC_TRANSPORT=tcp", "-x", "ZC_SOCKET_IFNAME=^lo", "-x", "ZC_TIMEOUT=30",
                       prog},
                      90, {"ZC_SOCKET_IFNAME==" + tag_ + "v1"}, {"ip", "netns", "exec", tag_ + "hub"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("c_abi_program: 2 ranks OK"), std::string::npos) << Describe(r);
}

}  // namespace
