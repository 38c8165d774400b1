// Progress: who takes messages off the tcp sockets, and when. Private to
// src/p2p/tcp.
//
//   progress threads  min(ZC_NUM_CQS, sockets) of them (the paper's CQ
//                     threads), the sockets dealt round-robin: each waits
//                     in its epoll and serves what arrives (ProgressLoop),
//                     and sends its sockets' lazy flags on time;
//   the driver        one thread waiting for a flag at a time waits in
//                     epoll on every socket itself and takes what arrives
//                     (Sleep, the transport's WaitDriver): one wake-up per
//                     message instead of two; as a wait begins it polls
//                     first (ZC_TCP_POLL_US), so that a message that comes
//                     within that time costs no wake-up at all;
//   Service           one thread at a time per socket pumps it
//                     (MessageHandler) and reports a dropped or finished one.
// Every epoll is edge-triggered, with exclusive entries; the driver's come
// first on each socket's wait queue.
#pragma once

#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/wakeup.h"
#include "p2p/tcp/tcp_connection.h"
#include "p2p/tcp/tcp_messages.h"
#include "p2p/tcp/tcp_responder.h"
#include "p2p/tcp/tcp_socket.h"
#include "p2p/transport.h"

namespace zc::tcp {

// One progress thread: its sockets, its epoll, its Responder, and what the
// threads that send on or drive its sockets read of it (Socket::group).
struct ProgressGroup {
  ProgressGroup(TransportHost* host, double timeout_s, const std::atomic<bool>& stopping)
      : responder(host, timeout_s, stopping) {}
  std::vector<Socket*> sockets;
  int ep = -1;
  std::thread thread;
  Responder responder;
  // The progress thread sleeps long (idle): a lazy flag is then sent at once.
  std::atomic<bool> long_sleep{false};
  // Passes of the driver (Progress::Sleep) over these sockets that took
  // messages. When the driver took most of them in the last millisecond
  // (a ping-pong), the progress thread spends the next one off the sockets'
  // wait queues (ProgressLoop): a message of more than one loopback segment (64 KiB)
  // wakes the driver with its first, and the next ones, arriving while the
  // driver reads, would wake the progress thread too (the driver has left
  // epoll_wait): a second wake-up per message, ~10 us one way here.
  std::atomic<uint64_t> driven{0};
  // When this thread last ended a window (of ProgressLoop's MuteWindow) in
  // which it took at least a third as many of these sockets' messages as
  // the driver (steady clock ticks). A driver polls (Progress::Poll) only
  // when no progress thread did so within kShareFresh: while it polls it is
  // no waiter in epoll, so each segment wakes the progress thread instead,
  // and where that thread carries a share of the traffic (a window of
  // nonblocking messages) the poll only took cores from the threads moving
  // data (5-14% of windowed bandwidth at 1-64 KiB). A verdict expires: a
  // thread that sleeps long leaves no stale veto behind.
  std::atomic<int64_t> shared_at{0};
  static constexpr auto kShareFresh = std::chrono::milliseconds(2);

  // While the driver reads a large payload off s (Socket::TakeBytes), this
  // group's entry is off s's wait queue: each segment would wake this
  // thread only to find s served (the driver's entry, first on the queue,
  // wakes nobody while the driver reads), five times or more a MiB on
  // loopback, each wake-up taking a core from the two copies. Loud puts
  // it back, behind the driver's as before, and reports s at once if more
  // came meanwhile.
  void Quiet(Socket* s);
  void Loud(Socket* s);

  // Wakes this group's thread from a long sleep: an offer waits on one of
  // its sockets (Progress::OfferWaits), and the thread ends the wait when
  // no receive takes it in time.
  int wake_fd = -1;
};

class Progress final : public WaitDriver {
 public:
  // poll_us: how long a driver that begins a wait polls (0: never).
  Progress(TransportHost* host, PendingReads* reads, double timeout_s, int poll_us)
      : host_(host), timeout_s_(timeout_s), poll_us_(poll_us), messages_(host, reads, this, timeout_s) {}

  // Watches the connected sockets and starts the threads.
  Status Start(const std::vector<std::unique_ptr<Socket>>& sockets, int num_cqs);
  // Sets the stop word, joins every thread, closes the epolls.
  void Stop();
  // An offer waits, unread, on s (MessageHandler::HandleOffer): its
  // group's thread looks at it every turn (1 ms) until it is taken or
  // refused, woken now if it sleeps long.
  void OfferWaits(Socket* s);
  // A receive that may take a waiting offer was armed: each of these
  // sockets with an offer waiting is served now, on this thread.
  void ServeOffers(const std::vector<Socket*>& sockets);
  const std::atomic<bool>& stopping() const { return stop_; }

  // WaitDriver: one waiting thread at a time waits in epoll on every socket
  // and takes what arrives off the socket itself (one wake-up per message,
  // not two: the progress thread's, then the waiter's). The progress
  // threads' epoll entries are exclusive and registered after the
  // driver's, so while it waits the kernel wakes it alone.
  void Sleep(uint32_t epoch, int timeout_us, bool poll_first) override {
    SleepOrDrive(epoch, timeout_us, poll_first, true);
  }
  // count: the passes that take messages count in ProgressGroup::driven.
  void SleepOrDrive(uint32_t epoch, int timeout_us, bool poll_first, bool count);
  // Drives for a one-sided read, without counting in ProgressGroup::driven: a
  // window of rendezvous reads is bulk data, where the progress threads
  // take their share (muting them cost ~10% of 512 KiB bandwidth).
  struct ReadDriver : WaitDriver {
    explicit ReadDriver(Progress* p) : p(p) {}
    void Sleep(uint32_t epoch, int timeout_us, bool poll_first) override {
      p->SleepOrDrive(epoch, timeout_us, poll_first, false);
    }
    Progress* p;
  };
  WaitDriver* read_driver() { return &read_driver_; }

  // Wakeup::Notify, and the driving thread when it waits in epoll.
  void Notify() {
    Wakeup::Notify();
    if (driver_waiting_.load(std::memory_order_seq_cst) && drive_evfd_ >= 0) {
      uint64_t one = 1;
      IgnoreError(write(drive_evfd_, &one, sizeof(one)) == sizeof(one) ? Status::Ok()
                                                                         : Error(ZC_ERR_SYSTEM, "eventfd"),
                  "the driver then wakes at its timeout");
    }
  }

 private:
  // The driver's epoll (every socket, and drive_evfd_).
  Status OpenDriver();
  // The progress threads' groups and epolls (not started yet).
  Status MakeGroups(int num_cqs);
  void ProgressLoop(ProgressGroup* g);
  void ParkUntilStopped();
  // One turn's wait in the group's epoll; the events go to evs.
  int Wait(ProgressGroup* g, epoll_event* evs, int max, bool muted, int* active_turns);
  // Sleep's wait in epoll, as the one driving thread.
  void Drive(uint32_t epoch, int timeout_us, bool poll_first, bool count);
  // The driver's polls of its epoll, for up to budget_us, before it sleeps:
  // a wake-up from epoll_wait costs 20-30 us on this project's VM (the
  // vCPU leaves its halt), more than a small message's whole trip, and a
  // ping-pong's next message comes within about one message's time. Each
  // empty poll yields the core to any thread that wants it. Returns the
  // events found, 0 when the budget ran out, -1 when a flag was set
  // (the epoch moved).
  int Poll(uint32_t epoch, int budget_us, epoll_event* evs, int max);
  // No progress thread took a share of the messages lately
  // (ProgressGroup::shared_at, kShareFresh): the driver takes them, and
  // may poll.
  bool DriverLeads() const;
  // The driver's sleep in epoll (the eventfd wakes it when another thread
  // sets a flag). Returns the events found.
  int SleepInEpoll(uint32_t epoch, int timeout_us, epoll_event* evs, int max);
  // Pump (one thread at a time, see Socket::service_req), then what a
  // dropped or finished socket needs.
  // Returns whether it took a message off the socket. by_driver: the
  // caller is the driver (Drive), not a progress thread.
  bool Service(Socket* s, bool by_driver);
  // A socket this pass ended (an error, or the peer's goodbye): out of the
  // epolls, and its peer reported lost once every socket of it is done.
  void Ended(Socket* s, const Status& st);
  // Serves the group's sockets with an offer waiting; true when one waits.
  bool ServeWaitingOffers(ProgressGroup* g);
  // Removes a dead socket from the epolls (its fd stays open until Shutdown).
  void Unwatch(Socket* s);
  // True when every socket to peer has received the peer's goodbye.
  bool AllSaidBye(int peer) const {
    for (Socket* s : sockets_)
      if (s->peer == peer && !s->said_bye.load()) return false;
    return true;
  }

  TransportHost* host_;
  const double timeout_s_;
  const int poll_us_;  // ZC_TCP_POLL_US; 0 when ranks outnumber cores
  MessageHandler messages_;
  std::vector<Socket*> sockets_;  // all of them (owned by the transport)
  std::vector<std::unique_ptr<ProgressGroup>> groups_;  // one per progress thread
  int drive_ep_ = -1;    // every socket, and drive_evfd_
  int drive_evfd_ = -1;  // wakes the driver when another thread set a flag
  std::mutex drive_mu_;  // the one driving thread
  std::atomic<bool> driver_waiting_{false};
  // Threads that found another driving and sleep in Wakeup::Sleep: the
  // driver wakes them when it leaves, so that one drives next (the progress
  // threads may be off the sockets for a millisecond, ProgressLoop).
  std::atomic<int> passengers_{0};
  ReadDriver read_driver_{this};
  std::atomic<bool> stop_{false};
  // A progress thread whose sockets are all dead waits here for Stop()
  // (ParkUntilStopped).
  std::mutex park_mu_;
  std::condition_variable park_cv_;
};

}  // namespace zc::tcp
