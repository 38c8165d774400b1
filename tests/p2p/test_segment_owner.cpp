// Stale shared-memory cleanup judges a segment by its owner's lock, not by
// the pid in its name: a live segment of a process in another pid namespace
// survives Segment::SweepStale(); a segment whose owner was killed goes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "p2p/segment.h"

namespace {

std::string Owner() {
  const char* v = getenv("SEGMENT_OWNER");
  return v ? v : "";
}

bool Exists(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// A random tag, so that parallel runs never share names.
std::string Tag() {
  char buf[32];
  snprintf(buf, sizeof(buf), "t%08x%07x", static_cast<unsigned>(getpid()),
           static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count() & 0xfffffff));
  return buf;
}

// A segment_owner process: its stdin is ours to close, its first line says
// which segment it made.
struct OwnerProcess {
  pid_t pid = -1;
  int in_fd = -1;
  std::string name;
  std::string error;

  bool Start(std::vector<std::string> argv) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return false;
    pid = fork();
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_fd = in[1];
    // Wait (10 s at most) for "owner NAME pid N".
    std::string text;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (text.find('\n') == std::string::npos && std::chrono::steady_clock::now() < until) {
      struct pollfd p = {out[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      ssize_t r = read(out[0], buf, sizeof(buf));
      if (r <= 0) break;
      text.append(buf, static_cast<size_t>(r));
    }
    close(out[0]);
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(R"(owner (\S+) pid (\d+))"))) {
      error = "no owner line: '" + text + "'";
      return false;
    }
    name = m[1];
    return true;
  }
  // Ends it: cleanly (stdin closed) or by SIGKILL.
  int Stop(bool kill_it) {
    if (kill_it) kill(pid, SIGKILL);
    if (in_fd >= 0) close(in_fd);
    in_fd = -1;
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return st;
  }
  ~OwnerProcess() {
    if (pid > 0) Stop(true);
  }
};

TEST(SegmentOwner, KilledOwnersSegmentIsSweptLiveOneIsNot) {
  std::string tag = Tag();
  OwnerProcess live, dead;
  ASSERT_TRUE(live.Start({Owner(), tag + "a"})) << live.error;
  ASSERT_TRUE(dead.Start({Owner(), tag + "b"})) << dead.error;
  dead.Stop(/*kill_it=*/true);
  ASSERT_TRUE(Exists(dead.name)) << "SIGKILL leaves the segment behind";
  zc::Segment::SweepStale();
  EXPECT_FALSE(Exists(dead.name)) << dead.name << ": its owner was killed";
  EXPECT_TRUE(Exists(live.name)) << live.name << ": its owner is alive";
  EXPECT_EQ(live.Stop(false), 0);
  EXPECT_FALSE(Exists(live.name)) << "the owner removes its segment on exit";
}

// The owner runs in its own pid namespace, under a pid that no process
// outside has: the old cleanup (kill(pid, 0) == ESRCH) deleted its segment.
TEST(SegmentOwner, LiveSegmentOfAnotherPidNamespaceSurvivesTheSweep) {
  if (system("unshare --pid --fork --mount-proc true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "cannot make a pid namespace here (unshare --pid needs root)";
  // A pid free outside; the namespace's fresh counter gives it to the owner.
  FILE* f = fopen("/proc/sys/kernel/pid_max", "r");
  long pid_max = 32768;
  if (f) {
    if (fscanf(f, "%ld", &pid_max) != 1) pid_max = 32768;
    fclose(f);
  }
  long want = pid_max - 10;
  while (want > 300 && !(kill(static_cast<pid_t>(want), 0) != 0 && errno == ESRCH)) --want;
  ASSERT_GT(want, 300);

  std::string tag = Tag();
  OwnerProcess inside, dead;
  ASSERT_TRUE(inside.Start({"unshare", "--pid", "--fork", "--mount-proc", Owner(), tag + "n",
                            std::to_string(want)}))
      << inside.error;
  ASSERT_NE(inside.name.find("-" + std::to_string(want) + "-"), std::string::npos) << inside.name;
  ASSERT_NE(kill(static_cast<pid_t>(want), 0), 0) << "pid " << want << " exists outside too";
  // A really stale one next to it.
  ASSERT_TRUE(dead.Start({Owner(), tag + "d"})) << dead.error;
  dead.Stop(true);

  zc::Segment::SweepStale();
  EXPECT_TRUE(Exists(inside.name)) << inside.name << ": live in another pid namespace, deleted";
  EXPECT_FALSE(Exists(dead.name)) << dead.name << ": owner killed, kept";
  EXPECT_EQ(inside.Stop(false), 0);
  EXPECT_FALSE(Exists(inside.name));
}

TEST(SegmentOwner, UnlinkOwnedRemovesOnlyThisProcesssSegments) {
  std::string tag = Tag();
  std::unique_ptr<zc::Segment> a, b, other;
  std::string pid = std::to_string(getpid());
  ASSERT_TRUE(zc::Segment::Create("zc-" + tag + "-0-" + pid + "-0", 4096, &a).ok());
  ASSERT_TRUE(zc::Segment::Create("zc-" + tag + "-0-" + pid + "-1", 4096, &b).ok());
  ASSERT_TRUE(zc::Segment::Create("zc-" + tag + "-0-" + pid + "1-0", 4096, &other).ok());
  EXPECT_EQ(zc::Segment::UnlinkOwned(tag.c_str(), getpid()), 2);
  EXPECT_FALSE(Exists(a->name()));
  EXPECT_FALSE(Exists(b->name()));
  EXPECT_TRUE(Exists(other->name())) << "pid " << pid << "1 is another process";
  static_cast<char*>(a->data())[0] = 1;  // the mapping stays usable
}

}  // namespace
