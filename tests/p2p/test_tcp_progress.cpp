// The tcp transport's Progress (p2p/tcp/tcp_progress.h) without processes:
// a Start that fails after it made a progress group must leave Stop (the
// transport's Shutdown, run by its destructor) able to end cleanly, though
// that group's threads were never started; a driver that polls before it
// sleeps still ends its wait when another thread sets a flag.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/wakeup.h"
#include "p2p/tcp/tcp_connection.h"
#include "p2p/tcp/tcp_progress.h"
#include "p2p/tcp/tcp_socket.h"
#include "fake_transport_host.h"

namespace zc {
namespace {

using FakeHost = testing_fakes::FakeTransportHost;

bool FdFree(int fd) { return fcntl(fd, F_GETFD) == -1 && errno == EBADF; }

// Out of descriptors when the progress thread's epoll is made (after the
// driver's epoll and eventfd): Start fails, and Stop must not join the
// Responder thread that was never started (it threw std::system_error,
// which std::terminate'd the process from ~TcpTransport).
TEST(TcpProgress, StopAfterStartFailedInAGroup) {
  FakeHost host;
  tcp::PendingReads reads;
  tcp::Progress progress(&host, &reads, /*timeout_s=*/5, /*poll_us=*/0);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::vector<std::unique_ptr<tcp::Socket>> sockets;
  sockets.push_back(std::make_unique<tcp::Socket>(&host, /*peer=*/1, /*timeout_s=*/5));
  sockets[0]->fd = sv[0];

  // Room for exactly two more descriptors: the driver's epoll and eventfd.
  const int lowest = dup(0);
  ASSERT_GE(lowest, 0);
  close(lowest);
  if (!FdFree(lowest + 1) || !FdFree(lowest + 2)) GTEST_SKIP() << "descriptors above " << lowest << " in use";
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(lowest + 2);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  Status st = progress.Start(sockets, /*num_cqs=*/1);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);

  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tcp: epoll: "), std::string::npos) << st.message();
  progress.Stop();  // must neither throw nor hang
  close(sv[0]);
  close(sv[1]);
}

// A driver polling its sockets (ZC_TCP_POLL_US) must end the wait when a
// flag is set meanwhile (Wakeup::Notify), as its sleep in epoll does: here
// the poll's budget and the wait's timeout are a minute each, so a poll
// that missed the Notify would hold the waiter past the test's deadline.
TEST(TcpProgress, NotifyEndsAPollingDriversWait) {
  FakeHost host;
  tcp::PendingReads reads;
  constexpr int kMinuteUs = 60 * 1000 * 1000;
  tcp::Progress progress(&host, &reads, /*timeout_s=*/5, /*poll_us=*/kMinuteUs);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::vector<std::unique_ptr<tcp::Socket>> sockets;
  sockets.push_back(std::make_unique<tcp::Socket>(&host, /*peer=*/1, /*timeout_s=*/5));
  sockets[0]->fd = sv[0];
  ASSERT_TRUE(progress.Start(sockets, /*num_cqs=*/1).ok());

  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> waiting{false}, returned{false};
    const uint32_t epoch = Wakeup::Epoch();
    std::thread waiter([&] {
      waiting.store(true);
      progress.Sleep(epoch, kMinuteUs, /*poll_first=*/true);
      returned.store(true);
    });
    while (!waiting.load()) std::this_thread::yield();
    progress.Notify();  // before, during or after the waiter's first poll
    Deadline dl(10.0);
    while (!returned.load() && !dl.expired()) std::this_thread::yield();
    EXPECT_TRUE(returned.load()) << "round " << round << ": the driver kept polling after a Notify";
    if (!returned.load()) {
      // Unblock it for the join: the test has failed already.
      progress.Stop();
      waiter.join();
      close(sv[0]);
      close(sv[1]);
      return;
    }
    waiter.join();
  }
  progress.Stop();
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
}  // namespace zc
