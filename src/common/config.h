// Config: every ZC_* environment variable, parsed and validated in one place.
// An invalid value is an error naming the variable; docs/environment.md
// lists the same table (name, default, meaning). Keep the two in step:
// tests/test_config.cpp checks that every variable here appears in the doc.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace zc {

struct Config {
  // Bootstrap (set by zcrun; read by the store bootstrap).
  int rank = -1, size = -1, local_rank = -1, local_size = -1;
  std::string store;    // ZC_STORE host:port
  std::string job_key;  // ZC_JOB_KEY
  // ZC_LAUNCHER_PID: zcrun's pid on this host, 0 when zcrun is on another
  // host, -1 when not launched by zcrun (then nothing watches a launcher).
  int launcher_pid = -1;
  // Membership generation of a grown job (api/grow_c.cpp), not from the
  // environment: 0 for the job as started; above 0 the Device's segment
  // names carry it, so they never collide with an older generation's.
  int generation = 0;

  double timeout_s = 300.0;          // ZC_TIMEOUT: deadline of every wait
  log::Level debug = log::Level::kWarn;
  unsigned debug_subsys = log::kAll;

  std::string transport = "auto";    // ZC_TRANSPORT: auto|shm|tcp|verbs
  std::string socket_ifname;         // ZC_SOCKET_IFNAME: "eth0", "^lo", ...
  int sockets_per_peer = 2;          // ZC_SOCKETS_PER_PEER
  std::string tcp_congestion = "auto";  // ZC_TCP_CONGESTION: auto|system|NAME (reno, cubic, bbr...)
  bool tcp_recv_post = true;         // ZC_TCP_RECV_POST: on|off (receiver-posted transfers, p2p/recv_post.h)
  int num_cqs = 4;                   // ZC_NUM_CQS: progress (CQ) threads
  int tcp_poll_us = 200;             // ZC_TCP_POLL_US: a waiter's polling of its sockets before it sleeps
  int qps_per_peer = 4;              // ZC_QPS_PER_PEER: connections per peer
  size_t pool_chunk_bytes = 64u << 20;  // ZC_POOL_CHUNK: pool growth step
  size_t pool_max_bytes = 0;         // ZC_POOL_MAX: 0 = unlimited
  std::string shm_cma = "auto";      // ZC_SHM_CMA: auto|on|off
  std::string ib_device;             // ZC_IB_DEVICE: e.g. mlx5_0
  int ib_port = 1;                   // ZC_IB_PORT
  std::string verbs_flag_mode = "imm";  // ZC_VERBS_FLAG: imm|ordered
  std::string algo = "auto";         // ZC_ALGO: auto|NAME|coll=NAME,... (collectives/algo_select.h)
  size_t chunk_bytes = 1u << 20;     // ZC_CHUNK: pipeline chunk of the ring
  std::string gpu_ipc = "auto";      // ZC_GPU_IPC: auto|0|1 (same-host CUDA IPC allreduce)
  size_t gpu_ipc_min_bytes = 4u << 20;  // ZC_GPU_IPC_MIN_BYTES: auto mode threshold
  size_t gpu_chunk_bytes = 1u << 20;    // ZC_GPU_CHUNK_BYTES: stream-ordered staging pipeline chunk
  size_t ps_partition_bytes = 4u << 20;  // ZC_PS_PARTITION: parameter-server chunk (BytePS's 4 MB)
  int ps_server_threads = 2;            // ZC_PS_SERVER_THREADS: aggregation threads per server
  int ps_lend_ms = 1000;                // ZC_PS_LEND_MS: an unwatched push's pieces stay lent this long
  std::string ps_placement = "balanced";  // ZC_PS_PLACEMENT: balanced|roundrobin|hash

  // Engine (src/engine, include/zcomm/zcomm_engine.h).
  size_t fusion_threshold = 128u << 20;  // ZC_FUSION_THRESHOLD: fusion buffer bytes; 0 = no fusion
  double cycle_time_ms = 1.0;        // ZC_CYCLE_TIME: milliseconds between negotiation cycles
  int cache_capacity = 1024;         // ZC_CACHE_CAPACITY: response cache entries; 0 = no cache
  std::string timeline;              // ZC_TIMELINE: Chrome-trace JSON file written by rank 0
  double stall_warning_s = 60.0;     // ZC_STALL_WARNING: seconds before a stall is reported; 0 = never
  double stall_shutdown_s = 0.0;     // ZC_STALL_SHUTDOWN: seconds before a stall shuts down; 0 = never

  // Flight recorder (common/flight_recorder.h, docs/debugging.md).
  size_t trace_buffer_size = 2000;   // ZC_TRACE_BUFFER_SIZE: operations kept per communicator; 0 = off
  std::string trace_dir;             // ZC_TRACE_DIR: where dumps go on failure and SIGUSR2; empty = none
  bool trace_precise_clock = false;  // ZC_TRACE_CLOCK=precise: every record reads the clock (else coarse)

  // Reads the environment. Returns ZC_ERR_INVALID_ARG naming the first
  // variable with a bad value.
  static Status FromEnv(Config* out);
};

struct ConfigVar {
  const char* name;
  const char* default_value;
  const char* meaning;
};
// The documented table of every variable (for docs and the doc test).
const std::vector<ConfigVar>& ConfigVars();

// Parsers shared with the launcher. Each returns false on a bad value.
bool ParseDouble(const char* text, double* out);
bool ParseInt(const char* text, long min, long max, long* out);
// "64M", "1G", "4096", "512k" -> bytes.
bool ParseBytes(const char* text, size_t* out);

}  // namespace zc
