#include "remote_dumps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "common/deadline.h"
#include "common/log.h"
#include "remote_command.h"

namespace zc::launcher {
namespace {

// A child of ours with its own process group (killed whole at the deadline).
struct Child {
  std::string host;
  pid_t pid = -1;
  std::string out_path;  // its standard output ("" : /dev/null)
  std::string err_path;  // its standard error ("" : ours)
  bool done = false;
  int status = 0;
};

// zcrun has threads (the store): the child only makes system calls.
pid_t StartChild(const std::vector<std::string>& args, const std::string& out_path,
                 const std::string& err_path = "") {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  int in = open("/dev/null", O_RDONLY);
  int out = out_path.empty() ? open("/dev/null", O_WRONLY)
                             : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = err_path.empty() ? 2 : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in < 0 || out < 0 || err < 0) _exit(126);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  execvp(argv[0], argv.data());
  _exit(127);
}

// Waits for every child until the deadline; the rest get SIGKILL.
void WaitAll(std::vector<Child>* children, double deadline_s) {
  Deadline dl(deadline_s);
  for (;;) {
    bool pending = false;
    for (Child& c : *children) {
      if (c.done || c.pid <= 0) continue;
      pid_t r = waitpid(c.pid, &c.status, WNOHANG);
      if (r == c.pid || (r < 0 && errno != EINTR)) c.done = true;
      else pending = true;
    }
    if (!pending || dl.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Child& c : *children) {
    if (c.done || c.pid <= 0) continue;
    kill(-c.pid, SIGKILL);
    kill(c.pid, SIGKILL);
    while (waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

// The last line a child wrote to its standard error (ssh's reason, such as
// "ssh: connect to host n2 port 22: Connection refused"), at most 200
// bytes; "" when it wrote nothing.
std::string LastErrorLine(const std::string& err_path) {
  if (err_path.empty()) return "";
  std::ifstream in(err_path);
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  if (last.size() > 200) last = last.substr(0, 200) + "...";
  return last;
}

std::string ChildFailure(const Child& c, double deadline_s) {
  if (c.pid <= 0) return "could not start the remote command";
  if (!c.done) return Format("no answer within %.0f s", deadline_s);
  const std::string said = LastErrorLine(c.err_path);
  const std::string cause = said.empty() ? "" : ": " + said;
  if (WIFSIGNALED(c.status)) return "killed by signal " + std::to_string(WTERMSIG(c.status)) + cause;
  int code = WEXITSTATUS(c.status);
  if (code == 0) return "";
  if (code == 255) {
    if (said.empty()) return "ssh failed (exit code 255: the host cannot be reached or refused us)";
    return "ssh failed (exit code 255)" + cause;
  }
  return Format("exited with code %d", code) + cause;
}

off_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

const char* RemoteDumpScript() {
  // SigCgt's low 32 bits hold SIGUSR2 (bit 11); the high half is cut off
  // so that the shell's arithmetic never overflows. Only the job's own
  // processes carry ZC_STORE=<its store>; the host's are those in the
  // network namespace the --rsh template leads to (hosts emulated by
  // namespaces share one /proc).
  return R"sh(d=$1 store=$2 wait=$3 asked= net=$(readlink /proc/self/ns/net)
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$net" ] || continue
  tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "ZC_STORE=$store" || continue
  m=$(sed -n 's/^SigCgt:[[:space:]]*[0-9a-f]*\([0-9a-f]\{8\}\)$/\1/p' "$p/status" 2>/dev/null)
  [ -n "$m" ] && [ $(( (0x$m >> 11) & 1 )) = 1 ] || continue
  rm -f "$d/.zctrace-p$pid.done"
  kill -USR2 "$pid" 2>/dev/null && asked="$asked $pid"
done
n=0
for pid in $asked; do
  while [ ! -e "$d/.zctrace-p$pid.done" ] && [ $n -lt "$wait" ] && kill -0 "$pid" 2>/dev/null &&
        ! grep -q '^State:[[:space:]]*[Tt]' "/proc/$pid/status" 2>/dev/null; do
    sleep 0.1; n=$((n + 1))
  done
done
[ -d "$d" ] || exit 0
cd "$d" && exec tar -c --exclude='./.zctrace-*' -f - .)sh";
}

std::vector<std::string> RemoteDumpFetcher::HostCommand(const std::string& host,
                                                        const std::vector<std::string>& sh_args) const {
  std::vector<std::string> words;
  if (!ExpandRshTemplate(source_.rsh, host, &words).ok()) return {};
  if (TemplateUsesRemoteShell(words)) words.push_back(ShellJoin(sh_args));  // the remote shell splits it again
  else words.insert(words.end(), sh_args.begin(), sh_args.end());
  return words;
}

void RemoteDumpFetcher::Fetch(const std::string& local_dir, double signal_wait_s, double deadline_s) {
  std::vector<Child> fetches;
  const std::string wait = std::to_string(static_cast<int>(signal_wait_s * 10));
  for (const std::string& host : hosts_) {
    Child c;
    c.host = host;
    c.out_path = local_dir + "/.remote-" + host + ".tar";
    c.err_path = local_dir + "/.remote-" + host + ".err";
    std::vector<std::string> argv =
        HostCommand(host, {"sh", "-c", RemoteDumpScript(), "sh", source_.remote_dir, source_.store_addr, wait});
    if (!argv.empty()) c.pid = StartChild(argv, c.out_path, c.err_path);
    fetches.push_back(c);
  }
  WaitAll(&fetches, deadline_s);
  // One host after the other: hosts that share a file system send the
  // same files, which two tar processes must not create at once.
  for (const Child& c : fetches) {
    std::string why = ChildFailure(c, deadline_s);
    if (!why.empty()) {
      missing_.push_back({c.host, why});
    } else if (FileSize(c.out_path) > 0) {  // empty: the host has no dumps
      std::vector<Child> unpack(1);
      unpack[0].pid = StartChild({"tar", "-x", "--skip-old-files", "-f", c.out_path, "-C", local_dir}, "");
      WaitAll(&unpack, deadline_s);
      why = ChildFailure(unpack[0], deadline_s);
      if (!why.empty()) missing_.push_back({c.host, "unpacking its dumps failed: " + why});
    }
    unlink(c.out_path.c_str());
    unlink(c.err_path.c_str());
  }
  ZC_INFO(kLauncher, "fetched the flight-recorder dumps of %zu hosts (%zu failed)", hosts_.size(), missing_.size());
}

void RemoteDumpFetcher::RemoveRemoteDirs(double deadline_s) {
  std::vector<Child> removals;
  for (const std::string& host : hosts_) {
    Child c;
    c.host = host;
    std::vector<std::string> argv = HostCommand(host, {"rm", "-rf", source_.remote_dir});
    if (!argv.empty()) c.pid = StartChild(argv, "");
    removals.push_back(c);
  }
  WaitAll(&removals, deadline_s);
}

}  // namespace zc::launcher
