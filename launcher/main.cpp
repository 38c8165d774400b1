// zcrun: starts the ranks of a zcomm job, serves its key-value store, and
// supervises it. See docs/launcher.md.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "binding.h"
#include "bootstrap/store_server.h"
#include "common/config.h"
#include "common/log.h"
#include "common/socket.h"
#include "common/status.h"
#include "hosts.h"
#include "job_resources.h"
#include "options.h"
#include "remote_command.h"
#include "spawn.h"
#include "supervisor.h"
#include "torch_env.h"
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

int RunJob(const Options& opts, int signal_fd) {
  // Hosts and placement.
  std::vector<HostSlots> hosts;
  for (const std::string& list : opts.host_lists) {
    Status st = ParseHostList(list, &hosts);
    if (!st.ok()) {
      Say(st.message());
      return kExitUsage;
    }
  }
  if (!opts.hostfile.empty()) {
    Status st = ReadHostfile(opts.hostfile, &hosts);
    if (!st.ok()) {
      Say(st.message());
      return kExitUsage;
    }
  }
  Placement placement;
  Status st = PlaceRanks(hosts, opts.np, opts.oversubscribe, &placement);
  if (!st.ok()) {
    Say(st.message());
    return kExitUsage;
  }
  const int size = static_cast<int>(placement.ranks.size());
  const int local_ranks = placement.local_rank_count();

  // The program must exist here before anything starts (remote hosts are
  // checked by their own shell, which reports it as exit code 127).
  if (local_ranks > 0) {
    std::string resolved;
    st = FindProgram(opts.command[0], &resolved);
    if (!st.ok()) {
      Say(st.message());
      return kExitNotFound;
    }
  }
  if (!placement.all_local()) {
    // Check the template once so a quoting mistake is a usage error.
    std::vector<std::string> words;
    st = ExpandRshTemplate(opts.rsh, "h", &words);
    if (!st.ok()) {
      Say(st.message());
      return kExitUsage;
    }
  }

  std::unique_ptr<Binder> binder;
  st = Binder::Create(opts.bind, local_ranks, &binder);
  if (!st.ok()) {
    Say(st.message());
    return st.code() == ZC_ERR_UNSUPPORTED ? kExitUsage : 1;
  }
  if (!binder->note().empty()) Say("warning: " + binder->note());

  std::string job_key;
  st = GenerateJobKey(&job_key);
  if (!st.ok()) {
    Say(st.message());
    return 1;
  }
  std::unique_ptr<StoreServer> store;
  std::string store_addr;
  st = StartStore(placement, job_key, &store, &store_addr);
  if (!st.ok()) {
    Say(st.message());
    return 1;
  }
  ZC_INFO(kLauncher, "job of %d ranks, store %s", size, store_addr.c_str());

  TorchMaster torch_master;
  st = ChooseTorchMaster(placement, store_addr.substr(0, store_addr.rfind(':')), &torch_master);
  if (!st.ok()) {
    Say(st.message());
    return 1;
  }

  EnvList exports = ResolveExports(opts.exports);
  std::vector<RankProcess> ranks(static_cast<size_t>(size));
  int spawn_failure = 0;
  for (const RankPlace& place : placement.ranks) {
    const Node& node = placement.nodes[static_cast<size_t>(place.node)];
    RankProcess& rp = ranks[static_cast<size_t>(place.rank)];
    rp.rank = place.rank;
    rp.host = node.local ? "localhost" : node.host;
    if (node.local) {
      char buf[256] = {};
      if (gethostname(buf, sizeof(buf) - 1) == 0 && buf[0]) rp.host = buf;
    }
    EnvList env = exports;
    env.emplace_back("ZC_RANK", std::to_string(place.rank));
    env.emplace_back("ZC_SIZE", std::to_string(size));
    env.emplace_back("ZC_LOCAL_RANK", std::to_string(place.local_rank));
    env.emplace_back("ZC_LOCAL_SIZE", std::to_string(place.local_size));
    env.emplace_back("ZC_STORE", store_addr);
    env.emplace_back("ZC_JOB_KEY", job_key);
    // Ranks on this host watch zcrun itself; remote ranks its store.
    env.emplace_back("ZC_LAUNCHER_PID", node.local ? std::to_string(getpid()) : "0");
    AddTorchEnv(torch_master, place, size, &env);

    SpawnRequest req;
    req.rank = place.rank;
    req.local_rank = place.local_rank;
    if (node.local) {
      req.argv = opts.command;
      req.env = MergeEnvironment(env);
      if (binder->policy() != BindPolicy::kNone) req.binder = binder.get();
      if (opts.report_bindings) {
        const BindTarget& t = binder->TargetFor(place.local_rank);
        if (req.binder && t.bound)
          Say(Format("rank %d bound to %s %d (cpuset %s)", place.rank, t.unit,
                     t.index, t.cpuset_hex.c_str()));
        else
          Say(Format("rank %d not bound", place.rank));
      }
    } else {
      st = BuildRemoteArgv(opts.rsh, node.host, env, opts.command, &req.argv);
      if (!st.ok()) {
        Say(st.message());
        spawn_failure = kExitUsage;
        break;
      }
      req.env = MergeEnvironment({});
      req.stdin_data = SecretInput(env);
      if (opts.report_bindings)
        Say(Format("rank %d not bound (on remote host %s)", place.rank,
                   node.host.c_str()));
      ZC_INFO(kLauncher, "rank %d: %s", place.rank, ShellJoin(req.argv).c_str());
    }

    SpawnedRank sp;
    st = SpawnRank(req, &sp);
    if (!st.ok()) {
      Say(st.message());
      spawn_failure = 1;
      break;
    }
    rp.pid = sp.pid;
    rp.out_fd = sp.out_fd;
    rp.err_fd = sp.err_fd;
    std::string prefix = Format("[%d] ", place.rank);
    rp.out = std::make_unique<LineForwarder>(1, prefix, opts.tag_output);
    rp.err = std::make_unique<LineForwarder>(2, prefix, opts.tag_output);
  }
  // Ranks never started count as reaped.
  std::vector<RankProcess> started;
  for (RankProcess& r : ranks)
    if (r.pid > 0) started.push_back(std::move(r));

  SupervisorOptions sopts;
  sopts.timeout_s = opts.timeout_s;
  Supervisor supervisor(&started, signal_fd, sopts);
  if (spawn_failure) supervisor.Abort(spawn_failure);
  int code = supervisor.Run();

  store->Stop();
  std::string err;
  int removed = RemoveJobShmSegments(job_key, "/dev/shm", &err);
  if (removed > 0)
    ZC_INFO(kLauncher, "removed %d shared-memory segments of the job", removed);
  if (!err.empty()) Say("warning: " + err);
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
