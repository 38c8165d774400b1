// Where waits ran (PeerHealth::AttachCpuWords, Backoff::WatchSetter), across
// processes: a rank's wait publishes its CPU in its control plane's CPU
// word, a peer on the same host reads it through its mapping, and a wait on
// a peer whose last wait ran on the waiter's own CPU yields from the check
// on instead of spinning. Two ranks (with more ranks than cores every wait
// yields at once anyway), bound to one CPU, then to two; over tcp no peer's
// word is read (no mapping).
#include <gtest/gtest.h>
#include <sched.h>
#include <zcomm/zcomm.h>

#include <vector>

#include "api/comm.h"
#include "harness/multiproc.h"
#include "p2p/control_plane.h"
#include "p2p/device.h"

namespace {

using zc::test::AllOk;
using zc::test::Describe;
using zc::test::RunRanks;

// The CPUs this test may bind ranks to (the caller's affinity).
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool BindTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Whether a wait on peer's flags, by this rank now, stops spinning at the
// CPU check (it watches peer's word and peer last waited on this CPU).
bool YieldsAtCheck(zc_comm* comm, int peer) {
  zc::Backoff b = comm->device->health().BackoffFor(peer);
  while (b.spinning() && b.count() < zc::Backoff::kCpuCheckSpins) b.Pause();
  return !b.spinning();
}

// A wait's spin phase up to the check, as every wait longer than that does:
// publishes this rank's CPU (the peer given only picks whose word is read).
void PublishMyCpu(zc_comm* comm, int peer) { (void)YieldsAtCheck(comm, peer); }

// Rank r on cpus[r]; each rank publishes, then checks its word and its
// peer's. shared: whether the peer's word can be read at all (shm; over tcp
// no wait watches a peer, so none publishes, and a tcp wait's spin phase is
// 2 pauses before it drives the sockets anyway).
int Body(int rank, const std::vector<int>& cpus, bool shared) {
  const int cpu = cpus[rank];
  CHILD_CHECK(BindTo(cpu), "rank %d: cannot bind to CPU %d", rank, cpu);
  zc_comm* comm = nullptr;
  CHILD_CHECK(zc_init(&comm) == ZC_OK, "init: %s", zc_last_error(nullptr));
  CHILD_CHECK(zc_size(comm) == 2, "rank %d: %d ranks", rank, zc_size(comm));
  const int peer = 1 - rank;
  PublishMyCpu(comm, peer);
  CHILD_OK(zc_barrier(comm));
  const uint64_t mine = comm->device->control()->cpu_word()->load();
  const uint64_t want = shared ? static_cast<uint64_t>(cpu) + 1 : 0;
  CHILD_CHECK(mine == want, "rank %d (CPU %d): its CPU word holds %llu, expected %llu", rank, cpu,
              static_cast<unsigned long long>(mine), static_cast<unsigned long long>(want));
  const bool same_cpu = cpus[0] == cpus[1];
  for (int round = 0; shared && round < 3; ++round) {  // repeated waits read the same words
    const bool yields = YieldsAtCheck(comm, peer);
    CHILD_CHECK(yields == same_cpu, "rank %d (CPU %d), peer %d (CPU %d), round %d: the wait %s at the CPU check",
                rank, cpu, peer, cpus[peer], round, yields ? "stopped spinning" : "spun on");
  }
  CHILD_OK(zc_barrier(comm));
  CHILD_OK(zc_finalize(comm));
  return 0;
}

void RunPinned(const std::vector<int>& cpus, bool shared, const zc::test::Env& env) {
  auto results = RunRanks(2, [&](int rank) { return Body(rank, cpus, shared); }, env, 60);
  EXPECT_TRUE(AllOk(results)) << "ranks on CPUs " << cpus[0] << " and " << cpus[1] << "\n"
                              << Describe(results);
}

TEST(CpuWords, AWaitOnAPeerThatSharesItsCpuYieldsAtTheCheck) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to bind ranks to";
  const zc::test::Env shm = {{"ZC_TRANSPORT", "shm"}};
  RunPinned({cpus[0], cpus[0]}, true, shm);
  RunPinned({cpus[1], cpus[1]}, true, shm);
  RunPinned({cpus[0], cpus[1]}, true, shm);
  RunPinned({cpus[1], cpus[0]}, true, shm);
}

TEST(CpuWords, TcpPeersAreNotWatched) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to bind ranks to";
  const zc::test::Env tcp = {{"ZC_TRANSPORT", "tcp"}, {"ZC_SOCKET_IFNAME", "lo"}};
  RunPinned({cpus[0], cpus[0]}, false, tcp);
  RunPinned({cpus[0], cpus[1]}, false, tcp);
}

}  // namespace
