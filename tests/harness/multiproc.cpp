#include "harness/multiproc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bootstrap/store_server.h"
#include "common/status.h"

namespace zc::test {

namespace {

// Forks a process that serves the job's store until it is killed (or this
// process dies: it watches its parent). Returns its pid and the address, or
// -1 and the error in *addr.
pid_t StartStoreProcess(const std::string& key, std::string* addr) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *addr = strerror(errno);
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Ends with the test process: RunRanks kills it, or, should the test
    // process die first, the kernel does (no orphaned store).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    close(fds[0]);
    std::unique_ptr<StoreServer> store;
    Status st = StoreServer::Start("127.0.0.1", 0, key, &store);
    std::string msg = st.ok() ? "+" + store->address() : "-" + st.message();
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(1);
    close(fds[1]);
    for (;;) pause();  // the store serves on its own thread
  }
  close(fds[1]);
  std::string msg;
  char buf[256];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  if (pid < 0 || msg.empty() || msg[0] != '+') {
    *addr = pid < 0 ? std::string("fork: ") + strerror(errno) : msg.empty() ? "store process died" : msg.substr(1);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    return -1;
  }
  *addr = msg.substr(1);
  return pid;
}

// Whether a rank's wait status is a failure (not a victim's SIGKILL).
bool Failed(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status) != 0;
  return WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL;
}

// The last non-empty line of a rank's output: what it said as it failed.
std::string LastLine(const std::string& output) {
  size_t end = output.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  size_t begin = output.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return output.substr(begin, end + 1 - begin);
}

}  // namespace

std::vector<RankResult> RunRanks(int n, const std::function<int(int rank)>& body, const Env& env,
                                 double timeout_s, OnRankFailure on_failure) {
  std::vector<RankResult> results(n);
  char keybuf[33];
  snprintf(keybuf, sizeof(keybuf), "%08x%08x%08x%08x", static_cast<unsigned>(getpid()),
           static_cast<unsigned>(rand()), static_cast<unsigned>(time(nullptr)), 0x5a43u);
  std::string key = keybuf;
  // The store runs in a process of its own, forked while this process has no
  // other thread; the ranks are forked after it, still from a single-threaded
  // process. (Forking while the store's threads run can leave a child stuck
  // on a lock one of them held: seen under AddressSanitizer.)
  std::string store_addr;
  pid_t store_pid = StartStoreProcess(key, &store_addr);
  if (store_pid < 0) {
    for (int r = 0; r < n; ++r) results[r].output = "store: " + store_addr;
    return results;
  }
  std::vector<pid_t> pids(n);
  std::vector<int> out_fds(n);
  auto start = std::chrono::steady_clock::now();
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; ++r) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(pipefd[1], 1);
      dup2(pipefd[1], 2);
      setenv("ZC_RANK", std::to_string(r).c_str(), 1);
      setenv("ZC_SIZE", std::to_string(n).c_str(), 1);
      setenv("ZC_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("ZC_LOCAL_SIZE", std::to_string(n).c_str(), 1);
      setenv("ZC_STORE", store_addr.c_str(), 1);
      setenv("ZC_JOB_KEY", key.c_str(), 1);
      for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      int rc = body(r);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    close(pipefd[1]);
    pids[r] = pid;
    out_fds[r] = pipefd[0];
    results[r].rank = r;
  }
  // Appends what rank r's pipe holds now to its output.
  auto ReadAvailable = [&](int r) {
    if (out_fds[r] < 0) return;
    char buf[4096];
    for (;;) {
      pollfd p{out_fds[r], POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) break;
      ssize_t k = read(out_fds[r], buf, sizeof(buf));
      if (k <= 0) {
        close(out_fds[r]);
        out_fds[r] = -1;
        break;
      }
      results[r].output.append(buf, static_cast<size_t>(k));
    }
  };
  int alive = n;
  std::vector<bool> done(n, false);
  int first_failed = -1;  // under kStopAll: the rank whose failure stops the others
  bool stopped = false;
  while (alive > 0) {
    std::vector<pollfd> fds;
    for (int r = 0; r < n; ++r)
      if (out_fds[r] >= 0) fds.push_back({out_fds[r], POLLIN, 0});
    // Wakes for output, else every 20 ms to reap ranks (waitpid below): polls
    // observable conditions, never a guessed delay.
    if (!fds.empty()) poll(fds.data(), fds.size(), 20);
    else usleep(20000);
    for (int r = 0; r < n; ++r) ReadAvailable(r);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      int status;
      pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w == pids[r]) {
        done[r] = true;
        --alive;
        results[r].seconds = elapsed;
        if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status), results[r].signal = 0;
        else if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
        if (on_failure == OnRankFailure::kStopAll && first_failed < 0 && Failed(status)) first_failed = r;
      } else if (elapsed > timeout_s) {
        kill(pids[r], SIGKILL);
        results[r].output += "\n[harness] killed after timeout\n";
      }
    }
    if (first_failed >= 0 && !stopped) {
      stopped = true;
      ReadAvailable(first_failed);  // its last words, written just before it exited
      const std::string why = Format("[harness] stopped: rank %d failed first: %s", first_failed,
                                     LastLine(results[first_failed].output).c_str());
      for (int r = 0; r < n; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        results[r].output += "\n" + why + "\n";
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (out_fds[r] >= 0) close(out_fds[r]);
  kill(store_pid, SIGKILL);
  waitpid(store_pid, nullptr, 0);
  return results;
}

std::string Describe(const std::vector<RankResult>& results) {
  std::string s;
  for (auto& r : results) {
    s += Format("--- rank %d: exit %d signal %d (%.1f s)\n", r.rank, r.exit_code, r.signal, r.seconds);
    s += r.output.size() > 4000 ? r.output.substr(r.output.size() - 4000) : r.output;
    s += "\n";
  }
  return s;
}

bool AllOk(const std::vector<RankResult>& results) {
  for (auto& r : results)
    if (r.signal != 0 || r.exit_code != 0) return false;
  return true;
}

}  // namespace zc::test
