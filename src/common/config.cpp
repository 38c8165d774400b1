#include "common/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace zc {

const std::vector<ConfigVar>& ConfigVars() {
  static const std::vector<ConfigVar> vars = {
      {"ZC_RANK", "(set by zcrun)", "rank of this process, 0..ZC_SIZE-1"},
      {"ZC_SIZE", "(set by zcrun)", "number of ranks in the job"},
      {"ZC_LOCAL_RANK", "(set by zcrun)", "rank among the ranks on this host"},
      {"ZC_LOCAL_SIZE", "(set by zcrun)", "number of ranks on this host"},
      {"ZC_STORE", "(set by zcrun)", "host:port of the job's key-value store"},
      {"ZC_JOB_KEY", "(set by zcrun)",
       "secret every bootstrap and data connection proves it knows"},
      {"ZC_LAUNCHER_PID", "(set by zcrun)",
       "pid of zcrun on this host (0: zcrun runs on another host); ranks watch it and exit when it dies"},
      {"ZC_JOIN", "(set by zcrun --elastic)",
       "1: this process joins a running job (zc_is_joiner, zc_comm_join) instead of starting one"},
      {"ZC_TIMEOUT", "300", "deadline in seconds of every wait"},
      {"ZC_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
      {"ZC_DEBUG_SUBSYS", "all",
       "comma list of subsystems to log (common, bootstrap, p2p, shm, tcp, "
       "verbs, coll, ps, engine, gpu, launcher); ^list excludes"},
      {"ZC_TRANSPORT", "auto",
       "auto (shm on one host, verbs if a NIC works, else tcp), shm, tcp or "
       "verbs"},
      {"ZC_SOCKET_IFNAME", "(NCCL's order: ib, then not docker/lo/virbr, then those)",
       "network interface for tcp, NCCL_SOCKET_IFNAME's grammar: prefixes "
       "such as eth,ib; ^ excludes; = for exact names (=eth0, ^=docker0)"},
      {"ZC_SOCKETS_PER_PEER", "2", "tcp sockets per peer (1..16)"},
      {"ZC_TCP_CONGESTION", "auto",
       "congestion control of the tcp data sockets: auto (reno to peers on this host, where "
       "bbr's pacing only delays loopback data; the system's default to others), system, or a "
       "name such as reno, cubic, bbr"},
      {"ZC_TCP_RECV_POST", "on",
       "tcp point to point: a receive of 64 KiB or more posted before its message arrives "
       "announces its buffer and the sender writes straight into it (on), or every message "
       "goes eager or rendezvous (off)"},
      {"ZC_TCP_POLL_US", "200",
       "tcp: microseconds a waiting thread polls its sockets before it sleeps in epoll (0..100000; "
       "0 = sleep at once); no polling while ranks outnumber the host's cores"},
      {"ZC_NUM_CQS", "4", "progress threads (the paper's CQ polling threads)"},
      {"ZC_QPS_PER_PEER", "4", "connections (QPs) per peer, spread over the progress threads"},
      {"ZC_POOL_CHUNK", "64M", "registered pool growth step"},
      {"ZC_POOL_MAX", "0",
       "registered pool limit in bytes, the library's workspace included; 0 = "
       "unlimited, else at least ZC_POOL_CHUNK"},
      {"ZC_SHM_CMA", "auto",
       "cross-memory attach for user buffers: auto (fall back to staged "
       "copies when refused), on, off"},
      {"ZC_IB_DEVICE", "(first active)", "RDMA device name, e.g. mlx5_0"},
      {"ZC_IB_PORT", "1", "RDMA device port"},
      {"ZC_VERBS_FLAG", "imm",
       "imm: RDMA_WRITE_WITH_IMM sets the flag; ordered: one write with a "
       "trailing flag (NICs that place data in ascending order)"},
      {"ZC_ALGO", "auto",
       "collective algorithms: auto, a name (ring, hd, shm, tree, chain, ...) for every collective "
       "that has it, or a list such as allreduce=ring,broadcast=chain"},
      {"ZC_CHUNK", "1M", "pipeline chunk size of ring algorithms"},
      {"ZC_GPU_IPC", "auto",
       "same-host allreduce of device buffers through CUDA IPC: auto (from "
       "ZC_GPU_IPC_MIN_BYTES up), 0 never (host staging), 1 always"},
      {"ZC_GPU_IPC_MIN_BYTES", "4M", "smallest allreduce that takes the CUDA IPC path in auto mode"},
      {"ZC_GPU_CHUNK_BYTES", "1M",
       "stream-ordered allreduce, broadcast and reduce: staging copies and host collective overlap in "
       "chunks of this many bytes (0: one piece); the same on every rank"},
      {"ZC_PS_PARTITION", "4M",
       "parameter server: keys are cut into chunks of at most this many bytes spread over the servers"},
      {"ZC_PS_SERVER_THREADS", "2", "parameter server: aggregation threads per server (1..64)"},
      {"ZC_PS_LEND_MS", "1000",
       "parameter server: how long a nonblocking push nobody waits for keeps its pieces lent to this "
       "rank's server before they are copied into their slots (0..3600000; a waiting caller: 0.5 ms)"},
      {"ZC_PS_PLACEMENT", "balanced",
       "parameter server: chunk placement, balanced (equal chunks, the same bytes on every server), "
       "roundrobin (whole partitions in declaration order) or hash (of key and chunk)"},
      {"ZC_FUSION_THRESHOLD", "128M",
       "engine: largest fused allreduce (bytes of the registered fusion buffer); 0 = no fusion"},
      {"ZC_CYCLE_TIME", "1", "engine: milliseconds between negotiation cycles (0.01..10000)"},
      {"ZC_CACHE_CAPACITY", "1024",
       "engine: response cache entries (0..1000000); 0 = every tensor negotiated in full"},
      {"ZC_TIMELINE", "(none)", "engine: Chrome-trace JSON file that rank 0 writes"},
      {"ZC_STALL_WARNING", "60",
       "engine: seconds a tensor some ranks submitted may wait for the others before rank 0 "
       "logs the missing ranks; 0 = never"},
      {"ZC_STALL_SHUTDOWN", "0",
       "engine: seconds after which such a stall shuts every rank's engine down with an error; "
       "0 = never, else more than ZC_STALL_WARNING"},
      {"ZC_TRACE_BUFFER_SIZE", "2000",
       "flight recorder: operations each communicator keeps (0..10000000); 0 = off"},
      {"ZC_TRACE_DIR", "(none)",
       "flight recorder: folder for the dumps written on a failed call and on SIGUSR2; unset = "
       "no automatic dumps (zcrun sets a temporary one)"},
      {"ZC_TRACE_CLOCK", "coarse",
       "flight recorder: coarse = record times from a word refreshed every millisecond (no clock read "
       "per call); precise = every record reads the time stamp counter (about 25 ns a call)"},
  };
  return vars;
}

bool ParseDouble(const char* text, double* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseInt(const char* text, long min, long max, long* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseBytes(const char* text, size_t* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text || text[0] == '-') return false;
  unsigned long long mult = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': mult = 1ull << 10; break;
      case 'm': case 'M': mult = 1ull << 20; break;
      case 'g': case 'G': mult = 1ull << 30; break;
      default: return false;
    }
    ++end;
    if (*end == 'i' || *end == 'B') ++end;
    if (*end == 'B') ++end;
    if (*end) return false;
  }
  if (v > (~0ull) / mult) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

namespace {

Status Bad(const char* name, const char* value, const char* expected) {
  return Error(ZC_ERR_INVALID_ARG, "environment variable %s=\"%s\" is invalid: expected %s",
               name, value, expected);
}

// The option v names, in the option's own spelling (values are matched
// without regard to case), or nullptr. Callers store what this returns, so
// code that compares a stored value never meets "ON" for "on".
const char* Match(const char* v, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (strcasecmp(v, o) == 0) return o;
  return nullptr;
}

}  // namespace

namespace {

// A variable's value, or nullptr when it is unset or empty.
const char* Get(const char* name) {
  const char* s = getenv(name);
  return (s && *s) ? s : nullptr;
}

// Where this rank is in the job, and how to reach the job's store.
Status ReadJob(Config* c) {
  struct IntVar {
    const char* name;
    int* field;
    long min, max;
  };
  const IntVar ints[] = {
      {"ZC_RANK", &c->rank, 0, 1 << 24},
      {"ZC_SIZE", &c->size, 1, 1 << 24},
      {"ZC_LOCAL_RANK", &c->local_rank, 0, 1 << 24},
      {"ZC_LOCAL_SIZE", &c->local_size, 1, 1 << 24},
      {"ZC_LAUNCHER_PID", &c->launcher_pid, 0, 1 << 30},
      {"ZC_SOCKETS_PER_PEER", &c->sockets_per_peer, 1, 16},
      {"ZC_NUM_CQS", &c->num_cqs, 1, 64},
      {"ZC_TCP_POLL_US", &c->tcp_poll_us, 0, 100000},
      {"ZC_QPS_PER_PEER", &c->qps_per_peer, 1, 64},
      {"ZC_IB_PORT", &c->ib_port, 1, 255},
      {"ZC_PS_SERVER_THREADS", &c->ps_server_threads, 1, 64},
      {"ZC_PS_LEND_MS", &c->ps_lend_ms, 0, 3600000},
  };
  const char* v;
  long n;
  for (const auto& iv : ints) {
    if ((v = Get(iv.name))) {
      if (!ParseInt(v, iv.min, iv.max, &n))
        return Bad(iv.name, v, Format("an integer in [%ld, %ld]", iv.min, iv.max).c_str());
      *iv.field = static_cast<int>(n);
    }
  }
  if (c->rank >= 0 && c->size > 0 && c->rank >= c->size)
    return Bad("ZC_RANK", Get("ZC_RANK"), "a rank below ZC_SIZE");
  if ((v = Get("ZC_STORE"))) c->store = v;
  if ((v = Get("ZC_JOB_KEY"))) c->job_key = v;
  if ((v = Get("ZC_TIMEOUT"))) {
    if (!ParseDouble(v, &c->timeout_s) || c->timeout_s <= 0)
      return Bad("ZC_TIMEOUT", v, "a positive number of seconds");
  }
  return Status::Ok();
}

// The item of a ZC_DEBUG_SUBSYS list that is not a subsystem.
std::string UnknownSubsys(const char* v) {
  std::string list(v[0] == '^' ? v + 1 : v);
  size_t pos = 0;
  for (;;) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
    unsigned ignored;
    if (item.empty() || !log::ParseSubsysList(item.c_str(), &ignored)) return item;
    if (comma == std::string::npos) return "";
    pos = comma + 1;
  }
}

Status ReadLogging(Config* c) {
  const char* v;
  if ((v = Get("ZC_DEBUG"))) {
    if (strcasecmp(v, "NONE") == 0) c->debug = log::Level::kNone;
    else if (strcasecmp(v, "WARN") == 0) c->debug = log::Level::kWarn;
    else if (strcasecmp(v, "INFO") == 0) c->debug = log::Level::kInfo;
    else if (strcasecmp(v, "TRACE") == 0) c->debug = log::Level::kTrace;
    else return Bad("ZC_DEBUG", v, "NONE, WARN, INFO or TRACE");
  }
  if ((v = Get("ZC_DEBUG_SUBSYS")) && !log::ParseSubsysList(v, &c->debug_subsys))
    return Bad("ZC_DEBUG_SUBSYS", v,
               Format("all, or a comma list (^list excludes) of %s; \"%s\" is not one",
                      log::SubsysNames().c_str(), UnknownSubsys(v).c_str())
                   .c_str());
  return Status::Ok();
}

// Transports, sockets and the registered pool.
Status ReadTransport(Config* c) {
  const char* v;
  // Set but empty is a mistake (a script's unset variable), not a request
  // for the default: which transport runs matters too much to guess.
  if (const char* t = getenv("ZC_TRANSPORT"); t && !*t)
    return Bad("ZC_TRANSPORT", t, "auto, shm, tcp or verbs (unset it for the default, auto)");
  if ((v = Get("ZC_TRANSPORT"))) {
    const char* m = Match(v, {"auto", "shm", "tcp", "verbs"});
    if (!m) return Bad("ZC_TRANSPORT", v, "auto, shm, tcp or verbs");
    c->transport = m;
  }
  if ((v = Get("ZC_SOCKET_IFNAME"))) c->socket_ifname = v;
  if ((v = Get("ZC_TCP_CONGESTION"))) {
    // The kernel's names: at most 15 characters (TCP_CA_NAME_MAX).
    bool ok = strlen(v) < 16;
    for (const char* q = v; *q && ok; ++q) ok = isalnum(static_cast<unsigned char>(*q)) || *q == '_' || *q == '-';
    if (!ok) return Bad("ZC_TCP_CONGESTION", v, "auto, system, or an algorithm name such as reno");
    c->tcp_congestion = v;
  }
  if ((v = Get("ZC_POOL_CHUNK"))) {
    if (!ParseBytes(v, &c->pool_chunk_bytes) || c->pool_chunk_bytes < 4096)
      return Bad("ZC_POOL_CHUNK", v, "a size of at least 4096 bytes (k, M, G suffixes)");
  }
  if ((v = Get("ZC_POOL_MAX"))) {
    if (!ParseBytes(v, &c->pool_max_bytes))
      return Bad("ZC_POOL_MAX", v, "a size in bytes (k, M, G suffixes)");
    // The pool starts with one chunk, and zc_init takes the library's own
    // workspace (control mailboxes) from it: a smaller limit could only
    // fail later, in zc_init or the first collective.
    if (c->pool_max_bytes && c->pool_max_bytes < c->pool_chunk_bytes)
      return Bad("ZC_POOL_MAX", v,
                 Format("0 (unlimited) or at least ZC_POOL_CHUNK (%zu bytes; lower ZC_POOL_CHUNK "
                        "for a smaller pool)", c->pool_chunk_bytes)
                     .c_str());
  }
  if ((v = Get("ZC_TCP_RECV_POST"))) {
    const char* m = Match(v, {"on", "off"});
    if (!m) return Bad("ZC_TCP_RECV_POST", v, "on or off");
    c->tcp_recv_post = strcmp(m, "on") == 0;
  }
  if ((v = Get("ZC_SHM_CMA"))) {
    const char* m = Match(v, {"auto", "on", "off"});
    if (!m) return Bad("ZC_SHM_CMA", v, "auto, on or off");
    c->shm_cma = m;
  }
  if ((v = Get("ZC_IB_DEVICE"))) c->ib_device = v;
  if ((v = Get("ZC_VERBS_FLAG"))) {
    const char* m = Match(v, {"imm", "ordered"});
    if (!m) return Bad("ZC_VERBS_FLAG", v, "imm or ordered");
    c->verbs_flag_mode = m;
  }
  return Status::Ok();
}

Status ReadGpu(Config* c) {
  const char* v;
  if ((v = Get("ZC_GPU_IPC"))) {
    const char* m = Match(v, {"auto", "0", "1"});
    if (!m) return Bad("ZC_GPU_IPC", v, "auto, 0 or 1");
    c->gpu_ipc = m;
  }
  if ((v = Get("ZC_GPU_IPC_MIN_BYTES"))) {
    if (!ParseBytes(v, &c->gpu_ipc_min_bytes))
      return Bad("ZC_GPU_IPC_MIN_BYTES", v, "a size in bytes (k, M, G suffixes)");
  }
  if ((v = Get("ZC_GPU_CHUNK_BYTES"))) {
    if (!ParseBytes(v, &c->gpu_chunk_bytes))
      return Bad("ZC_GPU_CHUNK_BYTES", v, "a size in bytes (k, M, G suffixes)");
  }
  return Status::Ok();
}

// The Horovod-style engine's knobs.
Status ReadEngine(Config* c) {
  const char* v;
  if ((v = Get("ZC_FUSION_THRESHOLD"))) {
    if (!ParseBytes(v, &c->fusion_threshold))
      return Bad("ZC_FUSION_THRESHOLD", v, "a size in bytes (k, M, G suffixes); 0 = no fusion");
  }
  if ((v = Get("ZC_CYCLE_TIME"))) {
    if (!ParseDouble(v, &c->cycle_time_ms) || c->cycle_time_ms < 0.01 || c->cycle_time_ms > 10000)
      return Bad("ZC_CYCLE_TIME", v, "milliseconds between 0.01 and 10000");
  }
  if ((v = Get("ZC_CACHE_CAPACITY"))) {
    long n;
    if (!ParseInt(v, 0, 1000000, &n)) return Bad("ZC_CACHE_CAPACITY", v, "an integer from 0 to 1000000");
    c->cache_capacity = static_cast<int>(n);
  }
  if ((v = Get("ZC_TIMELINE"))) c->timeline = v;
  if ((v = Get("ZC_STALL_WARNING"))) {
    if (!ParseDouble(v, &c->stall_warning_s) || c->stall_warning_s < 0)
      return Bad("ZC_STALL_WARNING", v, "seconds >= 0 (0 = never)");
  }
  if ((v = Get("ZC_STALL_SHUTDOWN"))) {
    if (!ParseDouble(v, &c->stall_shutdown_s) || c->stall_shutdown_s < 0)
      return Bad("ZC_STALL_SHUTDOWN", v, "seconds >= 0 (0 = never)");
    if (c->stall_shutdown_s > 0 && c->stall_warning_s > 0 && c->stall_shutdown_s <= c->stall_warning_s)
      return Bad("ZC_STALL_SHUTDOWN", v, "more seconds than ZC_STALL_WARNING");
  }
  if ((v = Get("ZC_TRACE_BUFFER_SIZE"))) {
    long n;
    if (!ParseInt(v, 0, 10000000, &n)) return Bad("ZC_TRACE_BUFFER_SIZE", v, "an integer from 0 to 10000000");
    c->trace_buffer_size = static_cast<size_t>(n);
  }
  if ((v = Get("ZC_TRACE_DIR"))) c->trace_dir = v;
  if ((v = Get("ZC_TRACE_CLOCK"))) {
    const char* m = Match(v, {"coarse", "precise"});
    if (!m) return Bad("ZC_TRACE_CLOCK", v, "coarse or precise");
    c->trace_precise_clock = strcmp(m, "precise") == 0;
  }
  return Status::Ok();
}

// Collective algorithms and the parameter server.
Status ReadCollectives(Config* c) {
  const char* v;
  if ((v = Get("ZC_ALGO"))) {
    // Its grammar (auto, a name, or collective=name lists) is parsed and
    // checked by the collectives (collectives/algo_select.h) at Create.
    // Only its alphabet is checked here.
    for (const char* p = v; *p; ++p)
      if (!isalnum(static_cast<unsigned char>(*p)) && *p != '_' && *p != '=' && *p != ',')
        return Bad("ZC_ALGO", v, "auto, an algorithm name, or collective=algorithm,...");
    c->algo = v;
    for (auto& ch : c->algo) ch = static_cast<char>(tolower(ch));
  }
  if ((v = Get("ZC_CHUNK"))) {
    if (!ParseBytes(v, &c->chunk_bytes) || c->chunk_bytes < 4096 || c->chunk_bytes > (1u << 30))
      return Bad("ZC_CHUNK", v, "a size between 4k and 1G");
  }
  if ((v = Get("ZC_PS_PARTITION"))) {
    if (!ParseBytes(v, &c->ps_partition_bytes) || c->ps_partition_bytes < 64 ||
        c->ps_partition_bytes > (size_t{1} << 30))
      return Bad("ZC_PS_PARTITION", v, "a size between 64 bytes and 1G");
  }
  if ((v = Get("ZC_PS_PLACEMENT"))) {
    if (strcasecmp(v, "balanced") == 0) c->ps_placement = "balanced";
    else if (strcasecmp(v, "roundrobin") == 0) c->ps_placement = "roundrobin";
    else if (strcasecmp(v, "hash") == 0) c->ps_placement = "hash";
    else return Bad("ZC_PS_PLACEMENT", v, "balanced, roundrobin or hash");
  }
  return Status::Ok();
}

}  // namespace

Status Config::FromEnv(Config* out) {
  Config c;
  for (Status (*read)(Config*) : {ReadJob, ReadLogging, ReadTransport, ReadGpu, ReadEngine, ReadCollectives})
    ZC_RETURN_IF_ERROR(read(&c));
  *out = c;
  return Status::Ok();
}

}  // namespace zc
