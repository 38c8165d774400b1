// zc_comm: what the C ABI's opaque handle holds. A communicator is a Group
// (a view of ranks with a context id) over a World (bootstrap and Device),
// with collective state of its own and a queue for nonblocking
// collectives. zc_init and zc_comm_init_rank make a World; zc_comm_split and
// zc_comm_dup make new communicators over their parent's World, sharing its
// connections and pool (the World lives while any of them does).
#pragma once

#include <zcomm/zcomm.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "api/collective_queue.h"
#include "api/stream_p2p.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher_watch.h"
#include "bootstrap/store_client.h"
#include "bootstrap/store_server.h"
#include "common/config.h"
#include "common/flight_recorder.h"
#include "common/spin_lock.h"
#include "gpu/device_path.h"
#include "ps/wait_watch.h"
#include "p2p/device.h"
#include "p2p/group.h"
#include "p2p/messenger.h"

namespace zc {
class Collectives;

// What every communicator over one Device shares.
struct World {
  Config config;
  // zc_comm_init_rank in the process that made the id: its rendezvous.
  std::unique_ptr<StoreServer> rendezvous;
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<Device> device;
  // Ends this rank when its launcher dies (api/launcher_death.h).
  std::unique_ptr<LauncherWatch> launcher_watch;

  // Context ids of this process's communicators over the Device: in use, or
  // reserved by a zc_comm_split in progress (value: its token).
  std::mutex contexts_mu;
  std::map<uint32_t, uint64_t> contexts;  // id -> 0 (in use) or the reserving split's token
  uint64_t next_token = 1;
  // Ids used before a shrink (an older epoch), never given out again: late
  // control messages of a revoked communicator must find no new owner.
  std::set<uint32_t> retired_contexts;
  // One shrink at a time over this World (api/elastic_c.cpp).
  std::mutex shrink_mu;
  // A connection to the job's store for zc_comm_join_pending and
  // zc_comm_grow (api/grow_c.cpp), made on first use; one grow at a time.
  std::mutex grow_mu;
  std::unique_ptr<StoreClient> grow_store;

  ~World() {
    launcher_watch.reset();  // its hook uses the device
    device.reset();  // before the bootstrap and the store it may use
    bootstrap.reset();
    grow_store.reset();
    rendezvous.reset();
  }
};
}  // namespace zc

struct zc_request {
  std::atomic<int> done{0};
  zc::Status status;
  // A nonblocking collective: its task on the communicator's queue (which
  // the request keeps alive, so that a request outliving zc_finalize still
  // completes).
  std::shared_ptr<zc::api::CollectiveQueue> queue;
  std::shared_ptr<zc::api::CollectiveQueue::Task> task;
  // zc_isend / zc_irecv: the messenger's request, the error context ("rank R:
  // isend to P"), and what completion still has to do (copy a staged
  // receive to device memory), run once by zc_test or zc_wait.
  std::shared_ptr<zc::P2pRequest> p2p;
  std::string context;
  std::function<zc::Status()> on_complete;
  // Its flight-recorder record (0: none), finished when it completes.
  std::shared_ptr<zc::trace::FlightRecorder> trace;
  uint64_t trace_id = 0;
  // zc_irecv_source: where the sender's rank goes once the request is done.
  int* source = nullptr;
  // A parameter-server request: how its wait spins (its Device's setting,
  // PeerHealth::spins), and for a push, what tells the engine that its
  // caller waits (zc_test, zc_wait).
  uint64_t spins = zc::Backoff::kSpins;
  std::shared_ptr<zc::ps::WaitWatch> ps_watch;
};

struct zc_comm {
  // Every entry point checks this word first: a handle already finalized
  // (zc_finalize writes kDead before freeing it; the allocator then reuses
  // the first words) is refused with a clear error instead of a crash or a
  // double free. Best effort: memory reused for a new communicator at the
  // same address cannot be told apart (docs/concepts.md).
  static constexpr uint64_t kLive = 0x5a43434f4d4d4c56;  // "ZCCOMMLV"
  static constexpr uint64_t kDead = 0x5a43434f4d4d4444;  // "ZCCOMMDD"
  volatile uint64_t magic = kLive;
  zc::Config config;
  std::shared_ptr<zc::World> world;
  // world->device, sharing world's lifetime.
  std::shared_ptr<zc::Device> device;
  std::unique_ptr<zc::Group> group;
  std::unique_ptr<zc::Collectives> coll;
  // Point to point (zc_send/recv, zc_isend/irecv), tags scoped by context.
  std::unique_ptr<zc::Messenger> p2p;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::atomic<uint64_t> op_seq{0};
  // One collective at a time per communicator (a SpinLock: two atomic
  // operations on a small collective's path, waiters back off).
  zc::SpinLock coll_mu;
  // Plans started and not yet waited for; with the queue's pending tasks,
  // what a blocking collective is refused for (CheckNothingInFlight).
  std::atomic<int> inflight{0};
  // Device memory: staging and the same-host CUDA IPC path with its state
  // (peers' mapped buffers). Every entry point that takes buffers goes
  // through it; it passes everything through in builds without CUDA.
  std::unique_ptr<zc::gpu::DevicePath> gpu;

  // The last operations of this communicator (common/flight_recorder.h);
  // shared with the p2p requests that still have to finish their record.
  std::shared_ptr<zc::trace::FlightRecorder> trace;

  // The nonblocking collectives, in call order: run by its worker thread or
  // by a waiter (api/collective_queue.h).
  std::shared_ptr<zc::api::CollectiveQueue> queue;
  // zc_send_on_stream / zc_recv_on_stream: their thread, made on first use.
  std::mutex stream_p2p_mu;
  std::unique_ptr<zc::api::StreamP2p> stream_p2p;

  // Fault tolerance (api/elastic_c.cpp): agreements on this communicator,
  // numbered in call order (the same on every rank), one at a time.
  std::mutex agree_mu;
  uint32_t agree_seq = 0;
};

namespace zc::api {
// A World over bootstrap (its Device, the launcher's watch); collective
// over the bootstrap's ranks (comm_c.cpp).
Status MakeWorldOver(const Config& config, std::unique_ptr<Bootstrap> bootstrap, std::shared_ptr<World>* out);
// The communicator of `members` (Device ranks in the new rank order) over
// world with context ctx (comm_c.cpp). Collective over the members.
// parent_gpu: the DevicePath of the communicator it comes from, or null.
Status MakeComm(const std::shared_ptr<World>& world, std::vector<int> members, uint32_t ctx,
                const gpu::DevicePath* parent_gpu, std::unique_ptr<zc_comm>* out);
// Gives context id ctx of world back.
void ReleaseContext(World* world, uint32_t ctx);
// zc_finalize; barrier = false leaves out its barrier, for a caller that
// has made sure otherwise that no peer still writes into comm's memory
// (an asynchronous zc_ps after a worker's loss: its LeaveBarrier).
zc_status FinalizeComm(zc_comm* comm, bool barrier);
}  // namespace zc::api
