// zc_comm: what the C ABI's opaque handle holds. One bootstrap, one Device,
// one Collectives engine, and a worker thread for nonblocking calls.
#pragma once

#include <zcomm/zcomm.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "p2p/device.h"

namespace zc {
class Collectives;
}

struct zc_request {
  std::atomic<int> done{0};
  zc::Status status;
};

struct zc_comm {
  zc::Config config;
  std::unique_ptr<zc::Bootstrap> bootstrap;
  std::unique_ptr<zc::Device> device;
  std::unique_ptr<zc::Collectives> coll;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::atomic<uint64_t> op_seq{0};
  std::mutex coll_mu;  // one collective at a time per communicator
  // Nonblocking collectives queued or running, plus plans started and not
  // yet waited for: a blocking collective is refused while any is.
  std::atomic<int> inflight{0};

  // Nonblocking operations run here, in order.
  std::mutex work_mu;
  std::condition_variable work_cv;
  std::deque<std::function<void()>> work;
  std::thread worker;
  bool stopping = false;
};
