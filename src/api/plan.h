// zc_plan: a persistent allreduce plan of the C ABI (zc_allreduce_plan_init,
// zc_plan_start/wait/free in nonblocking_c.cpp, zc_plan_start_on_stream in
// stream_c.cpp).
#pragma once

#include <zcomm/zcomm.h>

#include <memory>

#include "api/collective_queue.h"
#include "collectives/allreduce_plan.h"
#include "gpu/host_staging.h"

struct zc_plan {
  zc_comm* comm;
  std::unique_ptr<zc::AllreducePlan> plan;
  bool started = false;
  // Started on device buffers: their pinned copies, copied out at the wait.
  std::unique_ptr<zc::gpu::HostStaging> staging;
  // The host part of the last zc_plan_start_on_stream (on the
  // communicator's queue): zc_plan_free waits for it, since it uses plan.
  std::shared_ptr<zc::api::CollectiveQueue::Task> stream_task;
};
