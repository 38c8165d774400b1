#include "harness/shared_counter.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace zc::test {

// Process-shared and robust: a rank killed while holding the mutex (it never
// should be) leaves it usable by the others.
struct SharedCounter::Shared {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int value;
};

namespace {

void Lock(pthread_mutex_t* mu) {
  if (pthread_mutex_lock(mu) == EOWNERDEAD) pthread_mutex_consistent(mu);
}

}  // namespace

SharedCounter::SharedCounter() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("SharedCounter: mmap");
    abort();
  }
  s_ = static_cast<Shared*>(p);
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s_->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s_->cv, &ca);
  pthread_condattr_destroy(&ca);
  s_->value = 0;
}

SharedCounter::~SharedCounter() { munmap(s_, sizeof(Shared)); }

void SharedCounter::Add(int n) {
  Lock(&s_->mu);
  s_->value += n;
  pthread_cond_broadcast(&s_->cv);
  pthread_mutex_unlock(&s_->mu);
}

int SharedCounter::value() const {
  Lock(&s_->mu);
  int v = s_->value;
  pthread_mutex_unlock(&s_->mu);
  return v;
}

bool SharedCounter::WaitAtLeast(int n, double timeout_s) const {
  timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  long long ns = until.tv_nsec + static_cast<long long>(timeout_s * 1e9);
  until.tv_sec += static_cast<time_t>(ns / 1000000000);
  until.tv_nsec = static_cast<long>(ns % 1000000000);
  Lock(&s_->mu);
  int rc = 0;
  while (s_->value < n && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&s_->cv, &s_->mu, &until);
    if (rc == EOWNERDEAD) pthread_mutex_consistent(&s_->mu);
  }
  bool reached = s_->value >= n;
  pthread_mutex_unlock(&s_->mu);
  return reached;
}

}  // namespace zc::test
