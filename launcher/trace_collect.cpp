#include "trace_collect.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "common/status.h"

extern char** environ;

namespace zc::launcher {
namespace {

// Every command on another host (signal and fetch, removal) ends by then.
constexpr double kRemoteDeadlineS = 15.0;

void Say(const std::string& line) {
  std::string s = "zcrun: " + line + "\n";
  WriteFully(2, s.data(), s.size());
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The marker a rank's dump thread writes once it has dumped on SIGUSR2
// (common/trace_signal.cpp).
std::string DoneMarker(const std::string& dir, pid_t pid) {
  return dir + "/.zctrace-p" + std::to_string(pid) + ".done";
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

// What the analyzer knows of each rank's process (zcrun-ranks.json).
// A rank on another host: zcrun knows its ssh only; whether the host sent
// its dumps (missing) tells the analyzer why the rank may have none.
void RemoteFate(const RankProcess& r, const std::vector<MissingHost>& missing, std::string* state,
                std::string* detail) {
  *state = "remote";
  *detail = "it did not answer SIGUSR2 on host " + r.host + " in time";
  for (const MissingHost& m : missing)
    if (m.host == r.host) {
      *state = "unreachable";
      *detail = "host " + r.host + " sent no dumps: " + m.why;
    }
}

std::string FatesJson(const std::vector<RankProcess>& ranks, const std::vector<MissingHost>& missing) {
  std::string out = "{\"ranks\":[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankProcess& r = ranks[i];
    std::string state, detail;
    if (r.reaped) {
      state = "exited";
      if (WIFEXITED(r.wait_status)) detail = Format("exit code %d", WEXITSTATUS(r.wait_status));
      else if (WIFSIGNALED(r.wait_status)) detail = "killed by " + SignalDescription(WTERMSIG(r.wait_status));
    } else if (r.via_remote_shell) {
      RemoteFate(r, missing, &state, &detail);
    } else {
      char s = ProcessState(r.pid);
      state = s == 'T' || s == 't' ? "stopped" : s == '?' ? "unknown" : "running";
    }
    out += Format("%s{\"rank\":%d,\"pid\":%d,\"host\":%s,\"state\":%s,\"detail\":%s}", i ? "," : "", r.rank,
                  static_cast<int>(r.pid), JsonString(r.host).c_str(), JsonString(state).c_str(),
                  JsonString(detail).c_str());
  }
  return out + "]}\n";
}

bool AnyDump(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, "zctrace-", 8) == 0) found = true;
  closedir(d);
  return found;
}

void RemoveTree(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    unlink((dir + "/" + e->d_name).c_str());
  }
  closedir(d);
  rmdir(dir.c_str());
}

// Where the zcomm Python package is: next to this zcrun in a build folder
// (<build>/launcher/zcrun, <build>/python), else where it was installed.
std::string PythonPackageDir() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = 0;
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    std::string build = dir + "/../python";
    if (Exists(build + "/zcomm/trace/__main__.py")) return build;
  }
  return ZC_PYTHON_INSTALL_DIR;
}

// Runs the analyzer on dir; its output (stdout and stderr), or "" when it
// could not run.
std::string RunAnalyzer(const std::string& dir, int* exit_code) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  std::string pypath = PythonPackageDir();
  if (const char* old = getenv("PYTHONPATH"); old && *old) pypath += std::string(":") + old;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  env.push_back("PYTHONPATH=" + pypath);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  // ZCRUN_PYTHON: another interpreter (one whose environment has the zcomm
  // package, or a wrapper that a sanitizer run needs to load the module).
  const char* chosen = getenv("ZCRUN_PYTHON");
  std::string python = chosen && *chosen ? chosen : ZC_PYTHON;
  std::vector<std::string> args = {python, "-m", "zcomm.trace", dir};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // zcrun has threads (the store): the child only makes system calls.
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  const int rc = pid > 0 ? 0 : errno;
  close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[4096];
    for (;;) {
      ssize_t k = read(fds[0], buf, sizeof(buf));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      out.append(buf, static_cast<size_t>(k));
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  } else {
    *exit_code = 127;
  }
  close(fds[0]);
  return out;
}

}  // namespace

char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return '?';
  size_t close_paren = text.rfind(')');  // the command may hold spaces and parentheses
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return '?';
  return text[close_paren + 2];
}

bool CatchesSignal(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    unsigned long long mask = strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (sig - 1)) & 1;
  }
  return false;
}

TraceCollector::~TraceCollector() {
  if (owned_) RemoveTree(dir_);
}

void TraceCollector::Prepare(bool all_local, const std::string& job_tag, const EnvList& exports,
                             EnvList* rank_env) {
  for (const auto& [name, value] : exports)
    if (name == "ZC_TRACE_DIR" && !value.empty()) dir_ = value;
  if (dir_.empty())
    if (const char* v = getenv("ZC_TRACE_DIR"); v && *v) dir_ = v;
  if (!dir_.empty()) {  // the user's: the ranks inherit or get it with -x
    remote_dir_ = dir_;
    return;
  }
  // Named now, made only when something is written into it (a rank's dump
  // or our record of the ranks): a job that ends well, or a zcrun killed
  // outright, leaves nothing behind. The job key's hash (a secret's) makes
  // the name unguessable to other users.
  const char* tmp = getenv("TMPDIR");
  dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/zcrun-trace-" + job_tag;
  owned_ = true;
  rank_env->emplace_back("ZC_TRACE_DIR", dir_);
  if (all_local) return;
  // Not TMPDIR's: the remote shell's environment is not ours. A name of
  // its own, so that a host whose /tmp is ours too (a shared file system)
  // never reads and writes the same folder.
  remote_dir_ = "/tmp/zcrun-trace-" + job_tag + ".remote";
  remote_owned_ = true;
}

void TraceCollector::PrepareRemote(const std::string& rsh, const std::vector<std::string>& hosts,
                                   const std::string& store_addr) {
  if (dir_.empty() || hosts.empty()) return;
  remote_ = std::make_unique<RemoteDumpFetcher>(RemoteDumpSource{rsh, remote_dir_, store_addr}, hosts);
}

void TraceCollector::RequestDumps(const std::vector<RankProcess>& ranks, double wait_s) {
  if (dir_.empty() || requested_) return;
  requested_ = true;
  std::vector<pid_t> asked;
  for (const RankProcess& r : ranks) {
    if (r.reaped || r.pid <= 0 || !CatchesSignal(r.pid, SIGUSR2)) continue;
    unlink(DoneMarker(dir_, r.pid).c_str());
    if (kill(r.pid, SIGUSR2) == 0) asked.push_back(r.pid);
  }
  // Before the ranks are stopped: what each process is doing now.
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    ZC_INFO(kLauncher, "cannot make %s: %s", dir_.c_str(), strerror(errno));
  // The other hosts' ranks get their signal and dump meanwhile.
  if (remote_) remote_->Fetch(dir_, wait_s, kRemoteDeadlineS);
  std::string fates = FatesJson(ranks, remote_ ? remote_->missing() : std::vector<MissingHost>{});
  std::ofstream(dir_ + "/zcrun-ranks.json") << fates;
  Deadline dl(wait_s);
  for (pid_t pid : asked) {
    while (!Exists(DoneMarker(dir_, pid)) && !dl.expired() && ProcessState(pid) != 'T')
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ZC_INFO(kLauncher, "asked %zu ranks for their flight-recorder dumps in %s", asked.size(), dir_.c_str());
}

void TraceCollector::Report() {
  if (remote_) {
    for (const MissingHost& m : remote_->missing())
      Say("no flight-recorder dumps from host " + m.host + ": " + m.why);
    // Ranks that outlive zcrun's signals may still dump there: best effort.
    if (remote_owned_) remote_->RemoveRemoteDirs(kRemoteDeadlineS);
  }
  if (dir_.empty() || !AnyDump(dir_)) return;
  int code = 0;
  std::string out = RunAnalyzer(dir_, &code);
  if (code != 0 || out.empty()) {  // no Python, no zcomm package, or no dump it could read
    Say("the flight-recorder dumps are in " + dir_ + " (python3 -m zcomm.trace " + dir_ + " diagnoses them)");
    owned_ = false;  // kept: the user has to read them without us
    return;
  }
  Say("diagnosis from the ranks' flight recorders (python3 -m zcomm.trace):");
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) Say(line);
  if (!owned_) Say("dumps kept in " + dir_);
}

}  // namespace zc::launcher
