// Runs the built zcrun as a child process with its stdout and stderr
// captured separately, with a deadline (a hung zcrun fails the test instead
// of hanging it) and the ability to signal it mid-run.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace zcrun_test {

inline std::string EnvPath(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}
inline std::string Zcrun() { return EnvPath("ZCRUN"); }
inline std::string Probe() { return EnvPath("ZCRUN_PROBE"); }

struct Result {
  int exit_code = -1;     // -1: did not exit by itself
  int term_signal = 0;
  bool timed_out = false;
  double seconds = 0;
  std::string out, err;
};

class Runner {
 public:
  // `wrapper` runs zcrun through another command (ip netns exec ns).
  explicit Runner(std::vector<std::string> args,
                  std::vector<std::string> extra_env = {},
                  std::vector<std::string> wrapper = {})
      : args_(std::move(args)), env_(std::move(extra_env)),
        wrapper_(std::move(wrapper)) {}
  ~Runner() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  // Runs `argv` as given instead of zcrun (another launcher: mpirun).
  static Runner Command(std::vector<std::string> argv,
                        std::vector<std::string> extra_env = {}) {
    Runner r(std::move(argv), std::move(extra_env));
    r.raw_ = true;
    return r;
  }
  Runner(Runner&& o) noexcept
      : args_(std::move(o.args_)), env_(std::move(o.env_)),
        wrapper_(std::move(o.wrapper_)), raw_(o.raw_) {}

  pid_t pid() const { return pid_; }

  bool Start() {
    int o[2], e[2];
    if (pipe2(o, O_CLOEXEC) != 0 || pipe2(e, O_CLOEXEC) != 0) return false;
    start_ = std::chrono::steady_clock::now();
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(o[1], 1);
      dup2(e[1], 2);
      for (const std::string& kv : env_) putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv;
      for (const std::string& w : wrapper_) argv.push_back(const_cast<char*>(w.c_str()));
      std::string zcrun = Zcrun();
      if (!raw_) argv.push_back(const_cast<char*>(zcrun.c_str()));
      for (const std::string& a : args_) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(126);
    }
    close(o[1]);
    close(e[1]);
    out_fd_ = o[0];
    err_fd_ = e[0];
    return true;
  }

  // Reads until stdout contains `text` or the deadline; true when seen.
  bool WaitForOutput(const std::string& text, double seconds) {
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<long>(seconds * 1000));
    while (result_.out.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (!Pump(100) && out_fd_ < 0 && err_fd_ < 0) return false;
    }
    return true;
  }

  void Signal(int sig) { kill(pid_, sig); }

  // Waits for exit (killing zcrun after `seconds`) and returns everything.
  Result Finish(double seconds) {
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<long>(seconds * 1000));
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (std::chrono::steady_clock::now() >= until) {
        result_.timed_out = true;
        kill(pid_, SIGKILL);
        break;
      }
      Pump(100);
    }
    int st = 0;
    while (!result_.timed_out) {
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() >= until) {
        result_.timed_out = true;
        kill(pid_, SIGKILL);
      }
      usleep(10000);
    }
    if (result_.timed_out) waitpid(pid_, &st, 0);
    done_ = true;
    if (WIFEXITED(st)) result_.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) result_.term_signal = WTERMSIG(st);
    result_.seconds = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start_).count();
    return result_;
  }

 private:
  // One poll round over the open pipes; false when nothing was read.
  bool Pump(int ms) {
    struct pollfd p[2];
    int n = 0;
    int* fds[2] = {&out_fd_, &err_fd_};
    std::string* bufs[2] = {&result_.out, &result_.err};
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (*fds[i] >= 0) {
        p[n] = {*fds[i], POLLIN, 0};
        which[n++] = i;
      }
    }
    if (n == 0) return false;
    if (poll(p, n, ms) <= 0) return false;
    bool any = false;
    for (int k = 0; k < n; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t r = read(*fds[which[k]], buf, sizeof(buf));
      if (r > 0) {
        bufs[which[k]]->append(buf, static_cast<size_t>(r));
        any = true;
      } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(*fds[which[k]]);
        *fds[which[k]] = -1;
      }
    }
    return any;
  }

  std::vector<std::string> args_, env_, wrapper_;
  bool raw_ = false;
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool done_ = false;
  std::chrono::steady_clock::time_point start_;
  Result result_;
};

// Runs zcrun with args to completion (at most `seconds`).
inline Result RunZcrun(std::vector<std::string> args, double seconds = 30,
                       std::vector<std::string> extra_env = {},
                       std::vector<std::string> wrapper = {}) {
  Runner r(std::move(args), std::move(extra_env), std::move(wrapper));
  if (!r.Start()) return Result{};
  return r.Finish(seconds);
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

}  // namespace zcrun_test
