#include "spawn.h"

#include "output.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace zc::launcher {
namespace {

// write(2) of a C string in the child (async-signal-safe).
void ChildWrite(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void CloseIfOpen(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

std::vector<std::string> MergeEnvironment(const EnvList& vars) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = strchr(*e, '=');
    if (!eq) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    bool replaced = false;
    for (const auto& kv : vars)
      if (kv.first == name) replaced = true;
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

Status FindProgram(const std::string& prog, std::string* resolved) {
  auto check = [](const std::string& path, int* err) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      *err = errno;
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      *err = EISDIR;
      return false;
    }
    if (access(path.c_str(), X_OK) != 0) {
      *err = errno;
      return false;
    }
    return true;
  };
  int err = ENOENT;
  if (prog.find('/') != std::string::npos) {
    if (check(prog, &err)) {
      *resolved = prog;
      return Status::Ok();
    }
    return SystemError(err, "cannot run program '%s'", prog.c_str());
  }
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  int first_err = ENOENT;
  size_t start = 0;
  while (true) {
    size_t colon = dirs.find(':', start);
    // An empty PATH entry means the current directory.
    std::string cand = colon == start ? std::string(".")
                                      : dirs.substr(start, colon - start);
    cand += '/';
    cand += prog;
    if (check(cand, &err)) {
      *resolved = cand;
      return Status::Ok();
    }
    if (err != ENOENT && err != ENOTDIR && first_err == ENOENT) first_err = err;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (first_err != ENOENT)
    return SystemError(first_err, "cannot run program '%s'", prog.c_str());
  return Error(ZC_ERR_INVALID_ARG, "program '%s' not found in PATH (%s)",
               prog.c_str(), dirs.c_str());
}

Status SpawnRank(const SpawnRequest& req, SpawnedRank* out) {
  if (req.argv.empty())
    return Error(ZC_ERR_INVALID_ARG, "rank %d: empty command", req.rank);

  // Everything the child touches is built now.
  std::vector<char*> argv, envp;
  for (const std::string& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string exec_fail = Format("zcrun: rank %d: cannot execute '%s': ",
                                 req.rank, req.argv[0].c_str());
  std::string bind_fail;
  if (req.binder) {
    const BindTarget& t = req.binder->TargetFor(req.local_rank);
    if (t.bound)
      bind_fail = Format("zcrun: rank %d: cannot be %s: ", req.rank,
                         req.binder->Describe(req.local_rank).c_str());
  }

  // The parent pid as the child will see it until we die.
  pid_t launcher = getpid();
  std::string orphaned = Format("zcrun: rank %d: zcrun (pid %d) exited before the rank "
                                "started; not starting it\n", req.rank, (int)launcher);

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  // Standard input: /dev/null, or a pipe already holding all of
  // req.stdin_data (a few bytes, far below the pipe's capacity) and closed
  // behind it, so the rank reads it and then end of file.
  int in_fd = -1;
  if (req.stdin_data.empty()) {
    in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  } else {
    int in_pipe[2];
    if (req.stdin_data.size() > 4096 || pipe2(in_pipe, O_CLOEXEC) != 0)
      return Error(ZC_ERR_SYSTEM, "rank %d: cannot create the input pipe", req.rank);
    bool written = WriteFully(in_pipe[1], req.stdin_data.data(), req.stdin_data.size());
    close(in_pipe[1]);
    if (!written) {
      close(in_pipe[0]);
      return Error(ZC_ERR_SYSTEM, "rank %d: cannot write the rank's input", req.rank);
    }
    in_fd = in_pipe[0];
  }
  if (in_fd < 0)
    return SystemError(errno, "rank %d: cannot open /dev/null", req.rank);
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(in_fd);
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]})
      CloseIfOpen(fd);
    return SystemError(err, "rank %d: cannot create output pipes", req.rank);
  }

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(in_fd);
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]})
      CloseIfOpen(fd);
    return SystemError(err, "rank %d: fork failed", req.rank);
  }

  if (pid == 0) {
    // Child. zcrun blocks and catches signals; the rank starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT})
      sigaction(s, &dfl, nullptr);
    setpgid(0, 0);
    // If zcrun dies (even by SIGKILL) the rank gets SIGTERM: no rank runs on
    // without its launcher. The signal follows the death of the *thread*
    // that forked: ranks are forked by zcrun's main thread, which lives as
    // long as zcrun. A zcrun that died before prctl() took effect is seen
    // in getppid() (we were reparented already).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) {
      ChildWrite(orphaned.c_str());
      _exit(127);
    }
    if (dup2(in_fd, 0) < 0 || dup2(out_pipe[1], 1) < 0 ||
        dup2(err_pipe[1], 2) < 0)
      _exit(127);
    if (req.binder) {
      int err = req.binder->ApplyInChild(req.local_rank);
      if (err != 0) {  // run unbound rather than not at all
        ChildWrite(bind_fail.c_str());
        ChildWrite(strerror(err));
        ChildWrite("\n");
      }
    }
    execvpe(argv[0], argv.data(), envp.data());
    int err = errno;
    ChildWrite(exec_fail.c_str());
    ChildWrite(strerror(err));
    ChildWrite("\n");
    _exit(127);
  }

  // Parent. Also set the group here: whichever runs first, a kill sent
  // right after fork() reaches the group.
  setpgid(pid, pid);
  close(in_fd);
  close(out_pipe[1]);
  close(err_pipe[1]);
  fcntl(out_pipe[0], F_SETFL, fcntl(out_pipe[0], F_GETFL) | O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, fcntl(err_pipe[0], F_GETFL) | O_NONBLOCK);
  out->pid = pid;
  out->out_fd = out_pipe[0];
  out->err_fd = err_pipe[0];
  return Status::Ok();
}

}  // namespace zc::launcher
