// Progress: the progress threads, the driving waiter and Service; see
// tcp_progress.h.
#include "p2p/tcp/tcp_progress.h"

#include <sched.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace zc::tcp {
namespace {

// Edge-triggered: a thread that finds another serving a socket returns
// (Service) and must not be woken again and again for the same bytes.
// 0, or the errno of epoll_ctl.
int AddEntry(int ep, int fd, void* ptr) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLET;
  ev.data.ptr = ptr;
  return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}
Status Watch(int ep, int fd, void* ptr) {
  const int err = AddEntry(ep, fd, ptr);
  return err == 0 ? Status::Ok() : Error(ZC_ERR_SYSTEM, "tcp: epoll_ctl: %s", strerror(err));
}

// Whether a progress thread spends its next turn off its sockets' wait
// queues. A waiting thread took most messages off these sockets in the last
// window (a ping-pong): it takes what comes, so this thread sleeps a
// window without waiting on them (not woken by them, see
// ProgressGroup::driven), then takes what was left. Where it took few
// (windows of isend/irecv, which the Messenger's thread polls, and one
// blocking ack per window), this thread waits on them.
class MuteWindow {
 public:
  explicit MuteWindow(const std::atomic<uint64_t>& driven)
      : driven_(driven), seen_(driven.load(std::memory_order_relaxed)), start_(Clock::now()) {}
  // One of this thread's passes took messages.
  void Took(bool took) { took_ += took; }
  // Whether the next turn is muted (decided again when the window is over,
  // or after every muted turn).
  bool Next() {
    const auto now = Clock::now();
    if (muted_ || now - start_ >= kWindow) {
      const uint64_t d = driven_.load(std::memory_order_relaxed);
      const uint64_t ms = std::max<uint64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count());
      const bool driver_leads = d - seen_ > 2 * took_;
      muted_ = driver_leads && d - seen_ >= kMinDriven * ms;
      shared_ = !driver_leads && took_ > 0;
      seen_ = d;
      took_ = 0;
      start_ = now;
    }
    return muted_;
  }
  // Whether this thread took at least a third as many messages as the
  // driver in the last window (Next decides it).
  bool shared() const { return shared_; }

 private:
  // Passes that took messages in the current window of kWindow: the
  // driver's (from ProgressGroup::driven) and this thread's.
  static constexpr auto kWindow = std::chrono::milliseconds(1);
  static constexpr uint64_t kMinDriven = 4;  // per millisecond
  const std::atomic<uint64_t>& driven_;
  uint64_t seen_;
  uint64_t took_ = 0;
  Clock::time_point start_;
  bool muted_ = false;
  bool shared_ = false;
};

// The sockets a progress thread left to the driver. It was woken for them
// while a thread waited in the driver's epoll, which comes first on every
// socket's wait queue: that thread was woken for the same bytes (the first
// segment of a large message woke it, a later one this thread) and takes
// them itself; serving them here too made the two race for the socket, and
// when this thread won, the waiting thread slept again until this one
// woke it (one more wake-up per message). Where no pass over a socket
// started since (the driver left without it), this thread serves it on
// its next turn, a millisecond on at most.
class LeftToDriver {
 public:
  void Add(Socket* s) { left_.push_back({s, s->passes.load(std::memory_order_acquire)}); }
  bool empty() const { return left_.empty(); }
  template <typename ServeFn>
  void ServeUnserved(ServeFn serve) {
    for (const Left& l : left_)
      if (l.s->passes.load(std::memory_order_acquire) == l.passes) serve(l.s);
    left_.clear();
  }

 private:
  struct Left {
    Socket* s;
    uint32_t passes;
  };
  std::vector<Left> left_;
};

}  // namespace

Status Progress::Start(const std::vector<std::unique_ptr<Socket>>& sockets, int num_cqs) {
  for (auto& s : sockets) sockets_.push_back(s.get());
  // The driver's epoll first: on each socket's wait queue its exclusive
  // entry comes before the progress thread's (Sleep).
  ZC_RETURN_IF_ERROR(OpenDriver());
  ZC_RETURN_IF_ERROR(MakeGroups(num_cqs));
  for (auto& g : groups_) {
    ProgressGroup* p = g.get();
    p->responder.Start();
    p->thread = std::thread([this, p] { ProgressLoop(p); });
  }
  return Status::Ok();
}

Status Progress::OpenDriver() {
  drive_ep_ = epoll_create1(EPOLL_CLOEXEC);
  drive_evfd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (drive_ep_ < 0 || drive_evfd_ < 0) return Error(ZC_ERR_SYSTEM, "tcp: epoll/eventfd: %s", strerror(errno));
  ZC_RETURN_IF_ERROR(Watch(drive_ep_, drive_evfd_, nullptr));
  for (Socket* s : sockets_) ZC_RETURN_IF_ERROR(Watch(drive_ep_, s->fd, s));
  return Status::Ok();
}

Status Progress::MakeGroups(int num_cqs) {
  // Sockets round-robin over the progress threads (the paper's CQ threads).
  int nthreads = std::max(1, std::min<int>(num_cqs, static_cast<int>(sockets_.size())));
  std::vector<std::vector<Socket*>> dealt(nthreads);
  for (size_t i = 0; i < sockets_.size(); ++i) dealt[i % nthreads].push_back(sockets_[i]);
  for (auto& d : dealt) {
    if (d.empty()) continue;
    groups_.push_back(std::make_unique<ProgressGroup>(host_, timeout_s_, stop_));
    ProgressGroup* g = groups_.back().get();
    g->sockets = std::move(d);
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    if (g->ep < 0) return Error(ZC_ERR_SYSTEM, "tcp: epoll: %s", strerror(errno));
    g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (g->wake_fd < 0) return Error(ZC_ERR_SYSTEM, "tcp: eventfd: %s", strerror(errno));
    ZC_RETURN_IF_ERROR(Watch(g->ep, g->wake_fd, nullptr));
    for (Socket* s : g->sockets) {
      s->group = g;
      ZC_RETURN_IF_ERROR(Watch(g->ep, s->fd, s));
    }
  }
  return Status::Ok();
}

void Progress::Stop() {
  {
    std::lock_guard<std::mutex> lock(park_mu_);  // a parked thread sees it
    stop_.store(true);
  }
  park_cv_.notify_all();
  for (auto& g : groups_)
    if (g->thread.joinable()) g->thread.join();
  for (auto& g : groups_) g->responder.Stop();
  for (auto& g : groups_) {
    if (g->ep >= 0) close(g->ep);
    if (g->wake_fd >= 0) close(g->wake_fd);
  }
  groups_.clear();
  {
    std::lock_guard<std::mutex> lock(drive_mu_);  // no driver in epoll_wait
    if (drive_ep_ >= 0) close(drive_ep_);
    if (drive_evfd_ >= 0) close(drive_evfd_);
    drive_ep_ = drive_evfd_ = -1;
  }
}

void Progress::OfferWaits(Socket* s) {
  ProgressGroup* g = s->group;
  if (!g || !g->long_sleep.load(std::memory_order_seq_cst)) return;
  const uint64_t one = 1;
  IgnoreError(write(g->wake_fd, &one, sizeof(one)) == sizeof(one) ? Status::Ok() : Error(ZC_ERR_SYSTEM, "eventfd"),
              "the thread ends its long sleep within 100 ms anyway");
}

void Progress::ServeOffers(const std::vector<Socket*>& sockets) {
  for (Socket* s : sockets)
    if (s->offer_pending.load(std::memory_order_acquire)) Service(s, true);
}

bool Progress::ServeWaitingOffers(ProgressGroup* g) {
  bool waiting = false;
  for (Socket* s : g->sockets) {
    if (!s->offer_pending.load(std::memory_order_acquire)) continue;
    Service(s, false);
    waiting |= s->offer_pending.load(std::memory_order_acquire);
  }
  return waiting;
}

void ProgressGroup::Quiet(Socket* s) { epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, nullptr); }

void ProgressGroup::Loud(Socket* s) {
  // EEXIST: Quiet found the socket off the epoll already (Start failed
  // midway): it is watched as it was.
  const int err = AddEntry(ep, s->fd, s);
  if (err != 0 && err != EEXIST && !s->dead.exchange(true))
    s->host->OnPeerLost(s->peer, Error(ZC_ERR_SYSTEM, "tcp: watching the socket to peer %d again: epoll_ctl: %s",
                                       s->peer, strerror(err)));
}

void Progress::Unwatch(Socket* s) {
  if (drive_ep_ >= 0) epoll_ctl(drive_ep_, EPOLL_CTL_DEL, s->fd, nullptr);
  for (auto& g : groups_)
    if (g->ep >= 0) epoll_ctl(g->ep, EPOLL_CTL_DEL, s->fd, nullptr);
}

bool Progress::Service(Socket* s, bool by_driver) {
  // Another thread serves the socket: it passes again for this request.
  if (s->service_req.fetch_add(1, std::memory_order_acq_rel) != 0) return false;
  Status st;
  bool took = false;
  bool ended = false;  // dead before, or this pass ended the socket
  bool lost = false;   // this pass ended it: report below
  for (uint32_t n = 1;;) {
    if (!ended && s->dead.load()) {
      ended = true;
      Unwatch(s);  // dropped by a failed send: it may stay readable (EOF)
    } else if (!ended) {
      s->passes.fetch_add(1, std::memory_order_acq_rel);
      s->served_by_driver = by_driver;
      st = messages_.Pump(s, &s->group->responder, &took);
      if (!st.ok() || s->said_bye.load()) {
        ended = true;
        lost = !s->dead.exchange(true);
      }
    }
    // The requests this pass answered; those that came meanwhile get another.
    const uint32_t left = s->service_req.fetch_sub(n, std::memory_order_acq_rel) - n;
    if (left == 0) break;
    n = left;
  }
  if (lost) Ended(s, st);
  return took;
}

void Progress::Ended(Socket* s, const Status& st) {
  Unwatch(s);
  if (stop_.load()) return;
  if (st.ok()) {
    if (AllSaidBye(s->peer))
      host_->OnPeerLost(s->peer, Error(ZC_ERR_PEER_LOST, "peer %d has finalized", s->peer));
  } else {
    host_->OnPeerLost(s->peer, st);
  }
  Notify();
}

void Progress::ProgressLoop(ProgressGroup* g) {
  epoll_event evs[32];
  int active_turns = 0;
  MuteWindow mute(g->driven);
  LeftToDriver left;
  while (!stop_.load(std::memory_order_relaxed)) {
    size_t live = 0;
    for (Socket* s : g->sockets) live += !s->dead.load();
    if (!live) return ParkUntilStopped();
    const bool muted = mute.Next();
    if (mute.shared())
      g->shared_at.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    // An offer waiting on a socket is looked at every turn, and turns stay
    // short while one waits.
    if (ServeWaitingOffers(g)) active_turns = std::max(active_turns, 1);
    const int n = Wait(g, evs, 32, muted, &active_turns);
    for (Socket* s : g->sockets) s->FlushDeferred(std::chrono::microseconds(muted || n > 0 ? 1000 : 0), stop_);
    left.ServeUnserved([&](Socket* s) { mute.Took(Service(s, false)); });
    for (int i = 0; i < n && !stop_.load(); ++i) {
      Socket* s = static_cast<Socket*>(evs[i].data.ptr);
      if (!s) {  // OfferWaits woke us
        uint64_t v;
        IgnoreError(read(g->wake_fd, &v, sizeof(v)) == sizeof(v) ? Status::Ok() : Error(ZC_ERR_SYSTEM, "eventfd"),
                    "drained by the next read");
        continue;
      }
      if (driver_waiting_.load(std::memory_order_seq_cst)) left.Add(s);
      else mute.Took(Service(s, false));
    }
    if (!left.empty()) active_turns = std::max(active_turns, 1);  // a 1 ms turn, not a long sleep
  }
}

// Nothing is left to serve, but the thread ends only when Stop() joins
// it: a rank that exits without zc_finalize after a peer's failure then
// leaves no ended thread that nobody joined (ThreadSanitizer's "thread
// leak"; a process's exit ends a waiting one).
void Progress::ParkUntilStopped() {
  std::unique_lock<std::mutex> lock(park_mu_);
  park_cv_.wait(lock, [&] { return stop_.load(); });
}

int Progress::Wait(ProgressGroup* g, epoll_event* evs, int max, bool muted, int* active_turns) {
  // Blocking wait: an idle rank costs no CPU; 100 ms bounds shutdown time.
  // For 100 ms after traffic, 1 ms turns send lazy flags on time
  // (SendFlagLazy); before a long sleep, any waiting one goes now.
  bool long_sleep = *active_turns == 0 && !muted;
  if (long_sleep) {
    g->long_sleep.store(true, std::memory_order_seq_cst);
    for (Socket* s : g->sockets) s->FlushDeferred(std::chrono::microseconds(0), stop_);
    // An offer that began to wait before the announcement found no long
    // sleep to end (OfferWaits): it is seen here instead.
    for (Socket* s : g->sockets) long_sleep &= !s->offer_pending.load(std::memory_order_seq_cst);
  }
  int n;
  if (muted) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = epoll_wait(g->ep, evs, max, 0);
    *active_turns = 100;
  } else {
    n = epoll_wait(g->ep, evs, max, long_sleep ? 100 : 1);
  }
  g->long_sleep.store(false, std::memory_order_relaxed);
  if (n > 0) *active_turns = 100;
  else if (*active_turns > 0) --*active_turns;
  return n;
}

void Progress::SleepOrDrive(uint32_t epoch, int timeout_us, bool poll_first, bool count) {
  std::unique_lock<std::mutex> drive(drive_mu_, std::try_to_lock);
  if (!drive.owns_lock()) {
    // Counted, then tried again: a driver leaving after our first try
    // either sees the count (and wakes us) or left the lock to us.
    passengers_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!drive.try_lock()) {
      Wakeup::Sleep(epoch, timeout_us);
      passengers_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    passengers_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (stop_.load() || drive_ep_ < 0) {
    drive.unlock();
    Wakeup::Sleep(epoch, timeout_us);
    return;
  }
  Drive(epoch, timeout_us, poll_first, count);
  drive.unlock();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (passengers_.load(std::memory_order_seq_cst) > 0) Wakeup::Notify();
}

bool Progress::DriverLeads() const {
  const int64_t recent = (Clock::now() - ProgressGroup::kShareFresh).time_since_epoch().count();
  for (const auto& g : groups_)
    if (g->shared_at.load(std::memory_order_relaxed) > recent) return false;
  return true;
}

int Progress::Poll(uint32_t epoch, int budget_us, epoll_event* evs, int max) {
  const auto until = Clock::now() + std::chrono::microseconds(budget_us);
  for (;;) {
    const int n = epoll_wait(drive_ep_, evs, max, 0);
    if (n != 0) return std::max(n, 0);
    if (Wakeup::Epoch() != epoch || stop_.load(std::memory_order_relaxed)) return -1;
    if (Clock::now() >= until) return 0;
    sched_yield();
  }
}

void Progress::Drive(uint32_t epoch, int timeout_us, bool poll_first, bool count) {
  epoll_event evs[32];
  int n = 0;
  int sleep_us = timeout_us;
  // Not announced while polling (driver_waiting_): a flag set meanwhile
  // moves the epoch, which the poll reads, and its setter need not write
  // the eventfd.
  if (poll_first && poll_us_ > 0 && DriverLeads()) {
    const int budget = std::min(poll_us_, timeout_us);
    n = Poll(epoch, budget, evs, 32);
    if (n < 0) return;
    sleep_us -= budget;
  }
  if (n == 0 && sleep_us > 0) n = SleepInEpoll(epoch, sleep_us, evs, 32);
  for (int i = 0; i < n; ++i) {
    if (!evs[i].data.ptr) {
      uint64_t v;
      IgnoreError(read(drive_evfd_, &v, sizeof(v)) == sizeof(v) ? Status::Ok() : Error(ZC_ERR_SYSTEM, "eventfd"),
                  "drained by the next read");
      continue;
    }
    Socket* s = static_cast<Socket*>(evs[i].data.ptr);
    if (Service(s, true) && count && s->group) s->group->driven.fetch_add(1, std::memory_order_relaxed);
  }
}

int Progress::SleepInEpoll(uint32_t epoch, int timeout_us, epoll_event* evs, int max) {
  // Announce, then look at the epoch: a thread that set a flag after our
  // caller's check either changed the epoch before this load or sees
  // driver_waiting_ and writes the eventfd (Notify).
  driver_waiting_.store(true, std::memory_order_seq_cst);
  if (Wakeup::Epoch() != epoch) {
    driver_waiting_.store(false, std::memory_order_relaxed);
    return 0;
  }
  int n;
  if (timeout_us < 1000) {
    // A short wait (a post that may be on its way, recv_post.h): not a
    // whole millisecond.
    const timespec ts{0, std::max(1, timeout_us) * 1000L};
    n = epoll_pwait2(drive_ep_, evs, max, &ts, nullptr);
    if (n < 0 && errno == ENOSYS) n = epoll_wait(drive_ep_, evs, max, 1);
  } else {
    n = epoll_wait(drive_ep_, evs, max, timeout_us / 1000);
  }
  driver_waiting_.store(false, std::memory_order_relaxed);
  return std::max(n, 0);
}

}  // namespace zc::tcp
