// zcrun: starts the ranks of a zcomm job, serves its key-value store, and
// supervises it. See docs/launcher.md.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "binding.h"
#include "elastic_supervisor.h"
#include "bootstrap/store_server.h"
#include "common/config.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/socket.h"
#include "common/status.h"
#include "hosts.h"
#include "job_resources.h"
#include "options.h"
#include "remote_command.h"
#include "spawn.h"
#include "supervisor.h"
#include "torch_env.h"
#include "trace_collect.h"
#include "zc_build_config.h"

namespace zc::launcher {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitNotFound = 127;

void Say(const std::string& line) {
  std::string s = "zcrun: " + line + "\n";
  WriteFully(2, s.data(), s.size());
}

// -x VAR=VAL as given; -x VAR takes the current value.
EnvList ResolveExports(const std::vector<std::string>& exports) {
  EnvList env;
  for (const std::string& x : exports) {
    size_t eq = x.find('=');
    std::string name = x.substr(0, eq);
    std::string value;
    if (eq != std::string::npos) {
      value = x.substr(eq + 1);
    } else {
      const char* v = getenv(name.c_str());
      if (!v) {
        Say(Format("warning: -x %s: %s is not set here; not forwarded",
                   name.c_str(), name.c_str()));
        continue;
      }
      value = v;
    }
    for (auto it = env.begin(); it != env.end(); ++it)
      if (it->first == name) { env.erase(it); break; }
    env.emplace_back(name, value);
  }
  return env;
}

Status StartStore(const Placement& placement, const std::string& job_key,
                  std::unique_ptr<StoreServer>* server,
                  std::string* store_addr) {
  std::string ip = "127.0.0.1";
  if (!placement.all_local()) {
    // Remote ranks need an address they can route to.
    const char* spec = getenv("ZC_SOCKET_IFNAME");
    std::string ifname;
    Status st = net::PickInterfaceAddress(spec ? spec : "", &ip, &ifname);
    if (!st.ok())
      return st.with_context(
          "cannot choose the store address for remote ranks (set "
          "ZC_SOCKET_IFNAME)");
    if (ip.rfind("127.", 0) == 0)
      Say(Format("warning: the store listens on loopback %s (interface %s); "
                 "remote ranks will not reach it (set ZC_SOCKET_IFNAME)",
                 ip.c_str(), ifname.c_str()));
    ZC_INFO(kLauncher, "store on interface %s (%s)", ifname.c_str(), ip.c_str());
  }
  ZC_RETURN_IF_ERROR(StoreServer::Start(ip, 0, job_key, server)
                         .with_context("cannot start the job's store"));
  *store_addr = ip + ":" + std::to_string((*server)->port());
  return Status::Ok();
}

// Steps of RunJob return 0 to go on, else the exit code of zcrun (they
// have said why).
int Stop(const Status& st, int code) {
  Say(st.message());
  return code;
}

// What the ranks of a job share once it is set up.
struct Job {
  Placement placement;
  int size = 0;
  std::unique_ptr<Binder> binder;
  std::string job_key;
  std::unique_ptr<StoreServer> store;
  std::string store_addr;
  TorchMaster torch_master;
};

int PlaceJob(const Options& opts, Job* job) {
  std::vector<HostSlots> hosts;
  for (const std::string& list : opts.host_lists) {
    Status st = ParseHostList(list, &hosts);
    if (!st.ok()) return Stop(st, kExitUsage);
  }
  if (!opts.hostfile.empty()) {
    Status st = ReadHostfile(opts.hostfile, &hosts);
    if (!st.ok()) return Stop(st, kExitUsage);
  }
  Status st = PlaceRanks(hosts, opts.np, opts.oversubscribe, &job->placement);
  if (!st.ok()) return Stop(st, kExitUsage);
  job->size = static_cast<int>(job->placement.ranks.size());
  return 0;
}

int CheckCanStart(const Options& opts, const Placement& placement) {
  // The program must exist here before anything starts (remote hosts are
  // checked by their own shell, which reports it as exit code 127).
  if (placement.local_rank_count() > 0) {
    std::string resolved;
    Status st = FindProgram(opts.command[0], &resolved);
    if (!st.ok()) return Stop(st, kExitNotFound);
  }
  if (!placement.all_local()) {
    // Check the template once so a quoting mistake is a usage error.
    std::vector<std::string> words;
    Status st = ExpandRshTemplate(opts.rsh, "h", &words);
    if (!st.ok()) return Stop(st, kExitUsage);
  }
  return 0;
}

// Binding, job key, store and the torch rendezvous address.
int PrepareJob(const Options& opts, Job* job) {
  Status st = Binder::Create(opts.bind, job->placement.local_rank_count(), &job->binder);
  if (!st.ok()) return Stop(st, st.code() == ZC_ERR_UNSUPPORTED ? kExitUsage : 1);
  if (!job->binder->note().empty()) Say("warning: " + job->binder->note());
  st = GenerateJobKey(&job->job_key);
  if (!st.ok()) return Stop(st, 1);
  st = StartStore(job->placement, job->job_key, &job->store, &job->store_addr);
  if (!st.ok()) return Stop(st, 1);
  ZC_INFO(kLauncher, "job of %d ranks, store %s", job->size, job->store_addr.c_str());
  st = ChooseTorchMaster(job->placement, job->store_addr.substr(0, job->store_addr.rfind(':')),
                         &job->torch_master);
  if (!st.ok()) return Stop(st, 1);
  return 0;
}

EnvList RankEnvironment(const Job& job, const EnvList& exports, const Node& node, const RankPlace& place) {
  EnvList env = exports;
  env.emplace_back("ZC_RANK", std::to_string(place.rank));
  env.emplace_back("ZC_SIZE", std::to_string(job.size));
  env.emplace_back("ZC_LOCAL_RANK", std::to_string(place.local_rank));
  env.emplace_back("ZC_LOCAL_SIZE", std::to_string(place.local_size));
  env.emplace_back("ZC_STORE", job.store_addr);
  env.emplace_back("ZC_JOB_KEY", job.job_key);
  // Ranks on this host watch zcrun itself; remote ranks its store.
  env.emplace_back("ZC_LAUNCHER_PID", node.local ? std::to_string(getpid()) : "0");
  AddTorchEnv(job.torch_master, place, job.size, &env);
  return env;
}

// Sets NAME=value in env, replacing an earlier value.
void SetVariable(EnvList* env, const std::string& name, const std::string& value) {
  for (auto& [k, v] : *env)
    if (k == name) {
      v = value;
      return;
    }
  env->emplace_back(name, value);
}

// How to start one rank: directly (bound as asked) or through the remote shell.
int BuildSpawnRequest(const Options& opts, const Job& job, const Node& node, const RankPlace& place,
                      const EnvList& env, SpawnRequest* req) {
  req->rank = place.rank;
  req->local_rank = place.local_rank;
  if (node.local) {
    req->argv = opts.command;
    req->env = MergeEnvironment(env);
    if (job.binder->policy() != BindPolicy::kNone) req->binder = job.binder.get();
    if (opts.report_bindings) {
      Say(Format("rank %d %s", place.rank,
                 req->binder ? job.binder->Describe(place.local_rank).c_str() : "not bound"));
    }
    return 0;
  }
  Status st = BuildRemoteArgv(opts.rsh, node.host, env, opts.command, &req->argv);
  if (!st.ok()) return Stop(st, kExitUsage);
  req->env = MergeEnvironment({});
  req->stdin_data = SecretInput(env);
  if (opts.report_bindings) Say(Format("rank %d not bound (on remote host %s)", place.rank, node.host.c_str()));
  ZC_INFO(kLauncher, "rank %d: %s", place.rank, ShellJoin(req->argv).c_str());
  return 0;
}

// Starts every rank in order; stops at the first that cannot start and
// returns its exit code (the ranks started so far are in *ranks).
int SpawnRanks(const Options& opts, const Job& job, TraceCollector* trace, std::vector<RankProcess>* ranks) {
  EnvList exports = ResolveExports(opts.exports);
  trace->Prepare(job.placement.all_local(), ToHex(Sha256::Hash(job.job_key).data(), 8), exports, &exports);
  std::vector<std::string> remote_hosts;
  for (const Node& node : job.placement.nodes)
    if (!node.local && node.nranks > 0) remote_hosts.push_back(node.host);
  trace->PrepareRemote(opts.rsh, remote_hosts, job.store_addr);
  ranks->resize(static_cast<size_t>(job.size));
  for (const RankPlace& place : job.placement.ranks) {
    const Node& node = job.placement.nodes[static_cast<size_t>(place.node)];
    RankProcess& rp = (*ranks)[static_cast<size_t>(place.rank)];
    rp.rank = place.rank;
    rp.host = node.local ? "localhost" : node.host;
    if (node.local) {
      char buf[256] = {};
      if (gethostname(buf, sizeof(buf) - 1) == 0 && buf[0]) rp.host = buf;
    }
    SpawnRequest req;
    EnvList env = RankEnvironment(job, exports, node, place);
    if (trace->active()) SetVariable(&env, "ZC_TRACE_DIR", trace->DirForRank(node.local));
    int code = BuildSpawnRequest(opts, job, node, place, env, &req);
    if (code) return code;
    rp.via_remote_shell = !node.local && TemplateUsesRemoteShell(req.argv);
    SpawnedRank sp;
    Status st = SpawnRank(req, &sp);
    if (!st.ok()) return Stop(st, 1);
    rp.pid = sp.pid;
    rp.out_fd = sp.out_fd;
    rp.err_fd = sp.err_fd;
    std::string prefix = Format("[%d] ", place.rank);
    rp.out = std::make_unique<LineForwarder>(1, prefix, opts.tag_output);
    rp.err = std::make_unique<LineForwarder>(2, prefix, opts.tag_output);
  }
  return 0;
}

// Runs the started ranks to the end (or aborts them at once after a spawn
// failure); returns zcrun's exit code.
int Supervise(const Options& opts, std::vector<RankProcess>* ranks, int signal_fd, int spawn_failure,
              TraceCollector* trace) {
  // Ranks never started count as reaped.
  std::vector<RankProcess> started;
  for (RankProcess& r : *ranks)
    if (r.pid > 0) started.push_back(std::move(r));
  SupervisorOptions sopts;
  sopts.timeout_s = opts.timeout_s;
  if (trace->active() && !spawn_failure)
    sopts.before_stop = [trace](const std::vector<RankProcess>& r) { trace->RequestDumps(r); };
  Supervisor supervisor(&started, signal_fd, sopts);
  if (spawn_failure) supervisor.Abort(spawn_failure);
  return supervisor.Run();
}

// zcrun --elastic: a process that joins the running job (ZC_JOIN=1, no
// rank: the job's grow gives it one), on host.
Status SpawnJoiner(const Options& opts, const Job& job, const EnvList& exports, const std::string& host,
                   int joiner_no, RankProcess* out) {
  Node node;
  node.host = host;
  node.local = IsLocalHost(host);
  EnvList env = exports;
  env.emplace_back("ZC_JOIN", "1");
  env.emplace_back("ZC_STORE", job.store_addr);
  env.emplace_back("ZC_JOB_KEY", job.job_key);
  env.emplace_back("ZC_LAUNCHER_PID", node.local ? std::to_string(getpid()) : "0");
  SpawnRequest req;
  req.rank = 1000 + joiner_no;
  if (node.local) {
    req.argv = opts.command;
    req.env = MergeEnvironment(env);
  } else {
    ZC_RETURN_IF_ERROR(BuildRemoteArgv(opts.rsh, node.host, env, opts.command, &req.argv));
    req.env = MergeEnvironment({});
    req.stdin_data = SecretInput(env);
  }
  SpawnedRank sp;
  ZC_RETURN_IF_ERROR(SpawnRank(req, &sp));
  out->rank = req.rank;
  out->host = node.local ? "localhost" : host;
  out->pid = sp.pid;
  out->out_fd = sp.out_fd;
  out->err_fd = sp.err_fd;
  out->via_remote_shell = !node.local && TemplateUsesRemoteShell(req.argv);
  std::string prefix = Format("[j%d] ", joiner_no);
  out->out = std::make_unique<LineForwarder>(1, prefix, opts.tag_output);
  out->err = std::make_unique<LineForwarder>(2, prefix, opts.tag_output);
  return Status::Ok();
}

// zcrun --elastic: supervises the started ranks and the joiners it adds.
int SuperviseElastic(const Options& opts, const Job& job, std::vector<RankProcess>* ranks, int signal_fd) {
  std::vector<RankProcess> started;
  for (RankProcess& r : *ranks)
    if (r.pid > 0) started.push_back(std::move(r));
  ElasticOptions eo;
  eo.min_np = opts.min_np ? opts.min_np : job.size;
  eo.max_np = opts.max_np ? opts.max_np : (opts.host_discovery_script.empty() ? job.size : 1 << 20);
  eo.discovery_script = opts.host_discovery_script;
  for (const Node& n : job.placement.nodes)
    eo.fixed_hosts[n.local ? "localhost" : n.host] += std::max(n.slots, n.nranks);  // as -H/--hostfile say
  if (opts.host_lists.empty() && opts.hostfile.empty()) eo.fixed_hosts = {{"localhost", eo.max_np}};
  eo.timeout_s = opts.timeout_s;
  eo.store_addr = job.store_addr;
  eo.job_key = job.job_key;
  EnvList exports = ResolveExports(opts.exports);
  ElasticSupervisor sup(std::move(started), signal_fd, eo,
                        [&](const std::string& host, int no, RankProcess* out) {
                          return SpawnJoiner(opts, job, exports, host, no, out);
                        });
  return sup.Run();
}

void CleanUp(Job* job) {
  job->store->Stop();
  std::string err;
  int removed = RemoveJobShmSegments(job->job_key, "/dev/shm", &err);
  if (removed > 0) ZC_INFO(kLauncher, "removed %d shared-memory segments of the job", removed);
  if (!err.empty()) Say("warning: " + err);
}

int RunJob(const Options& opts, int signal_fd) {
  Job job;
  if (int code = PlaceJob(opts, &job)) return code;
  if (int code = CheckCanStart(opts, job.placement)) return code;
  if (int code = PrepareJob(opts, &job)) return code;
  TraceCollector trace;
  std::vector<RankProcess> ranks;
  int spawn_failure = SpawnRanks(opts, job, &trace, &ranks);
  int code = opts.elastic && !spawn_failure ? SuperviseElastic(opts, job, &ranks, signal_fd)
                                            : Supervise(opts, &ranks, signal_fd, spawn_failure, &trace);
  if (code != 0 && !spawn_failure) trace.Report();
  CleanUp(&job);
  return code;
}

}  // namespace
}  // namespace zc::launcher

int main(int argc, char** argv) {
  using namespace zc::launcher;
  // Before any thread exists (the store starts threads): signals arrive
  // through a signalfd, and a closed stdout must not kill zcrun.
  sigset_t handled;
  HandledSignals(&handled);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Options opts;
  zc::Status st = ParseOptions(argc, argv, &opts);
  if (!st.ok()) {
    fprintf(stderr, "zcrun: %s\n", st.message().c_str());
    return 2;
  }
  if (opts.help) {
    fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (opts.version) {
    printf("zcrun (zcomm) %s\n", ZC_VERSION);
    return 0;
  }
  zc::Config config;
  st = zc::Config::FromEnv(&config);  // also configures ZC_DEBUG logging
  if (!st.ok()) fprintf(stderr, "zcrun: warning: %s\n", st.message().c_str());

  int sfd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) {
    fprintf(stderr, "zcrun: signalfd: %s\n", strerror(errno));
    return 1;
  }
  int code = RunJob(opts, sfd);
  close(sfd);
  return code;
}
