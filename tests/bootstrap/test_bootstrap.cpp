// Bootstrap: StoreBootstrap with 3-5 ranks as forked processes (a StoreServer
// in the parent), plus the single-process bootstrap and error cases.
#include <gtest/gtest.h>

#include <thread>
#include <vector>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_bootstrap.h"
#include "bootstrap/store_server.h"

namespace zc {
namespace {

const char* kKey = "fork-test-key";

// Rank- and round-dependent value with an odd, varying length and bytes that
// include NUL and 0xff.
std::string RankValue(int rank, int round) {
  std::string s = Format("rank%d:", rank);
  size_t n = static_cast<size_t>(rank * 37 + round * 11 + 3);
  for (size_t i = 0; i < n; ++i)
    s += static_cast<char>((i * 13 + static_cast<size_t>(rank) * 7 + round) & 0xff);
  return s;
}

#define CHILD_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "child rank %d: check failed: %s: ", rank, #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fprintf(stderr, "\n");                                     \
      return 1;                                                  \
    }                                                            \
  } while (0)

// Body of one forked rank; returns the exit code.
int ChildMain(int rank, int size, const std::string& store, bool set_local) {
  setenv("ZC_RANK", std::to_string(rank).c_str(), 1);
  setenv("ZC_SIZE", std::to_string(size).c_str(), 1);
  if (set_local) {
    setenv("ZC_LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("ZC_LOCAL_SIZE", std::to_string(size).c_str(), 1);
  } else {
    unsetenv("ZC_LOCAL_RANK");
    unsetenv("ZC_LOCAL_SIZE");
  }
  setenv("ZC_STORE", store.c_str(), 1);
  setenv("ZC_JOB_KEY", kKey, 1);
  setenv("ZC_TIMEOUT", "30", 1);
  Config config;
  Status st = Config::FromEnv(&config);
  CHILD_CHECK(st.ok(), "%s", st.message().c_str());
  std::unique_ptr<Bootstrap> b;
  st = Bootstrap::Create(config, &b);
  CHILD_CHECK(st.ok(), "%s", st.message().c_str());
  CHILD_CHECK(std::string(b->kind()) == "store", "kind %s", b->kind());
  CHILD_CHECK(b->rank() == rank && b->size() == size, "rank %d size %d",
              b->rank(), b->size());
  // All forked ranks share this host.
  CHILD_CHECK(b->local_rank() == rank && b->local_size() == size,
              "local %d of %d", b->local_rank(), b->local_size());
  CHILD_CHECK(!b->host_id().empty(), "empty host id");
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> all;
    st = b->AllGather(Format("ag%d", round), RankValue(rank, round),
                      &all, 30);
    CHILD_CHECK(st.ok(), "%s", st.message().c_str());
    CHILD_CHECK(static_cast<int>(all.size()) == size, "%zu entries", all.size());
    for (int r = 0; r < size; ++r)
      CHILD_CHECK(all[r] == RankValue(r, round), "round %d entry %d wrong",
                  round, r);
  }
  // Point-to-point style: read the right neighbour's key after a fence.
  st = b->Put("addr", Format("host-of-%d", rank * rank));
  CHILD_CHECK(st.ok(), "%s", st.message().c_str());
  st = b->Fence(30);
  CHILD_CHECK(st.ok(), "%s", st.message().c_str());
  int right = (rank + 1) % size;
  std::string v;
  st = b->Get(right, "addr", &v, 30);
  CHILD_CHECK(st.ok() && v == Format("host-of-%d", right * right), "%s",
              st.message().c_str());
  st = b->Get(size, "addr", &v, 1);
  CHILD_CHECK(st.code() == ZC_ERR_INVALID_ARG, "out-of-range rank accepted");
  // Everyone must still be here for the last reads before anyone exits.
  st = b->Fence(30);
  CHILD_CHECK(st.ok(), "%s", st.message().c_str());
  return 0;
}

// Forks `size` ranks running ChildMain and waits (bounded) for all of them.
void RunRanks(int size, bool set_local) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::Start("127.0.0.1", 0, kKey, &server).ok());
  std::string store = server->address();
  fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The server thread does not exist here: leave without destructors.
      _exit(ChildMain(r, size, store, set_local));
    }
    pids.push_back(pid);
  }
  Deadline dl(45);
  std::vector<int> codes(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0 && !dl.expired()) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      pid_t p = waitpid(pids[i], &status, WNOHANG);
      if (p == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left > 0) usleep(10000);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (codes[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
      ADD_FAILURE() << "rank " << i << " did not finish in time";
    } else {
      EXPECT_EQ(codes[i], 0) << "rank " << i << " of " << size;
    }
  }
  EXPECT_EQ(server->refused_connections(), 0u);
}

TEST(StoreBootstrapFork, ThreeRanks) { RunRanks(3, true); }
TEST(StoreBootstrapFork, FiveRanksDerivingLocalRanks) { RunRanks(5, false); }

Config StoreConfig(const std::string& store, int rank, int size,
                   const std::string& key) {
  Config c;
  c.rank = rank;
  c.size = size;
  c.local_rank = rank;
  c.local_size = size;
  c.store = store;
  c.job_key = key;
  c.timeout_s = 10;
  return c;
}

TEST(StoreBootstrap, WrongJobKeyIsRefused) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::Start("127.0.0.1", 0, kKey, &server).ok());
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::Create(
      StoreConfig(server->address(), 0, 2, "wrong"), &b);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("authentication failed"), std::string::npos);
}

TEST(StoreBootstrap, FenceTimesOutNamingTheCount) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::Start("127.0.0.1", 0, kKey, &server).ok());
  std::unique_ptr<Bootstrap> b;
  ASSERT_TRUE(Bootstrap::Create(StoreConfig(server->address(), 1, 3, kKey), &b).ok());
  Status st = b->Fence(0.3);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("1 of 3 ranks"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos);
  EXPECT_NE(st.message().find("missing ranks: 0, 2"), std::string::npos) << st.message();
  std::string v;
  st = b->Get(2, "never", &v, 0.2);
  EXPECT_EQ(st.code(), ZC_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("never"), std::string::npos);
}

// Issue 17: ranks 0 and 1 of 3 fence while rank 2 never comes; both name it.
TEST(StoreBootstrap, FenceTimeoutNamesTheMissingRank) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::Start("127.0.0.1", 0, kKey, &server).ok());
  Status st[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      st[r] = Bootstrap::Create(StoreConfig(server->address(), r, 3, kKey), &b);
      if (st[r].ok()) st[r] = b->Fence(1.0);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), ZC_ERR_TIMEOUT) << st[r].message();
    EXPECT_NE(st[r].message().find("2 of 3 ranks arrived; missing rank: 2"), std::string::npos)
        << st[r].message();
  }
}

TEST(StoreBootstrap, BadConfigIsRejected) {
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::Create(StoreConfig("127.0.0.1:1", 3, 3, kKey), &b).code(),
            ZC_ERR_INVALID_ARG);
  Config c = StoreConfig("127.0.0.1:1", 0, 2, kKey);
  c.local_rank = 2;
  EXPECT_EQ(Bootstrap::Create(c, &b).code(), ZC_ERR_INVALID_ARG);
}

TEST(SingleBootstrap, JobOfOne) {
  unsetenv("PMIX_RANK");
  unsetenv("PMIX_NAMESPACE");
  Config c;
  std::unique_ptr<Bootstrap> b;
  ASSERT_TRUE(Bootstrap::Create(c, &b).ok());
  EXPECT_STREQ(b->kind(), "single");
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->local_size(), 1);
  EXPECT_EQ(b->host_id(), LocalHostId());
  std::vector<std::string> all;
  std::string mine("solo\0value", 10);
  ASSERT_TRUE(b->AllGather("k", mine, &all, 5).ok());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], mine);
  std::string v;
  EXPECT_EQ(b->Get(0, "missing", &v, 0.05).code(), ZC_ERR_TIMEOUT);
  EXPECT_EQ(b->Get(1, "k", &v, 0.05).code(), ZC_ERR_INVALID_ARG);
}

TEST(Bootstrap, SizeWithoutStoreIsAnError) {
  unsetenv("PMIX_RANK");
  unsetenv("PMIX_NAMESPACE");
  Config c;
  c.rank = 0;
  c.size = 4;
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::Create(c, &b);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("ZC_STORE"), std::string::npos);
}

TEST(LocalHostId, StableAndNonEmpty) {
  EXPECT_FALSE(LocalHostId().empty());
  EXPECT_EQ(LocalHostId(), LocalHostId());
}

}  // namespace
}  // namespace zc
