// Fault-injection soak: rounds of N ranks (forked here, joined through a
// unique id, shared memory or tcp on loopback) doing random verified
// collectives and point-to-point while this driver kills, stops and
// resumes ranks, makes one call zc_abort, or drops one of their tcp
// connections (ss -K). Each round checks that
//   - no result is ever wrong;
//   - every survivor reports the fault (its first failing call's time on
//     the shared board) within the bound, and zc_finalize then returns
//     promptly; a short stop is no fault at all (every rank finishes clean);
//   - nothing hangs (every rank exits before a hard deadline);
//   - nothing leaks: no segment of a rank that exited is left in /dev/shm,
//     and the killed ranks' segments are gone after the next job's start.
// Prints one line per round and a summary with detection times
// (min/median/max per fault and transport); exits 1 on any failure.
//   fault_soak [--seconds S] [--rounds R] [--seed N] [--ranks 2-5]
//              [--transports shm,tcp] [--faults kill,stop,stop-long,abort,drop,none]
//              [--timeout T] [--detect-ms MS] [--finalize-ms MS] [-v]
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <new>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "soak_rank.h"
#include "soak_status.h"

namespace zc::soak {
namespace {

enum Fault { kNone, kKill, kStopShort, kStopLong, kAbort, kDrop, kNumFaults };
const char* kFaultNames[] = {"none", "kill", "stop", "stop-long", "abort", "drop"};

struct Options {
  double seconds = 60;
  int rounds = 0;  // 0: until --seconds
  uint64_t seed = 1;
  int min_ranks = 2, max_ranks = 5;
  std::vector<std::string> transports{"shm", "tcp"};
  std::vector<Fault> faults{kNone, kKill, kStopShort, kStopLong, kAbort, kDrop};
  double timeout_s = 4;     // ZC_TIMEOUT of the ranks
  double detect_ms = 1000;  // a survivor reports a kill/abort/drop within this
  double finalize_ms = 2000;
  bool verbose = false;
};

[[noreturn]] void Usage(const char* why) {
  if (why) fprintf(stderr, "fault_soak: %s\n", why);
  fprintf(stderr,
          "usage: fault_soak [--seconds S] [--rounds R] [--seed N] [--ranks MIN-MAX]\n"
          "                  [--transports shm,tcp] [--faults kill,stop,stop-long,abort,drop,none]\n"
          "                  [--timeout T] [--detect-ms MS] [--finalize-ms MS] [-v]\n"
          "  --seconds S      run rounds for S seconds (default 60)\n"
          "  --rounds R       run exactly R rounds instead\n"
          "  --seed N         seed of the whole run (rounds, faults, data)\n"
          "  --ranks MIN-MAX  ranks per round, 2..%d (default 2-5)\n"
          "  --transports     which transports rounds use (default shm,tcp)\n"
          "  --faults         which faults rounds inject (default all)\n"
          "  --timeout T      the ranks' ZC_TIMEOUT in seconds (default 4)\n"
          "  --detect-ms MS   bound on reporting a kill, abort or dropped connection (default 1000)\n"
          "  --finalize-ms MS bound on zc_finalize after a failure (default 2000)\n"
          "  -v               print every survivor's error message\n",
          kMaxRanks);
  exit(2);
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

double ParseNumber(const char* flag, const char* v, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || d < lo || d > hi) {
    char why[160];
    snprintf(why, sizeof(why), "%s %s: expected a number in [%g, %g]", flag, v, lo, hi);
    Usage(why);
  }
  return d;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--seconds") o.seconds = ParseNumber("--seconds", value(), 1, 1e7);
    else if (a == "--rounds") o.rounds = static_cast<int>(ParseNumber("--rounds", value(), 1, 1e9));
    else if (a == "--seed") o.seed = static_cast<uint64_t>(ParseNumber("--seed", value(), 0, 1e15));
    else if (a == "--timeout") o.timeout_s = ParseNumber("--timeout", value(), 1, 3600);
    else if (a == "--detect-ms") o.detect_ms = ParseNumber("--detect-ms", value(), 1, 1e7);
    else if (a == "--finalize-ms") o.finalize_ms = ParseNumber("--finalize-ms", value(), 1, 1e7);
    else if (a == "--ranks") {
      std::string v = value();
      int lo = 0, hi = 0;
      if (sscanf(v.c_str(), "%d-%d", &lo, &hi) != 2) lo = hi = atoi(v.c_str());
      if (lo < 2 || hi > kMaxRanks || lo > hi) Usage(("--ranks " + v + ": expected MIN-MAX within 2-8").c_str());
      o.min_ranks = lo;
      o.max_ranks = hi;
    } else if (a == "--transports") {
      o.transports = SplitComma(value());
      for (const auto& t : o.transports)
        if (t != "shm" && t != "tcp") Usage(("--transports: unknown transport '" + t + "' (shm, tcp)").c_str());
      if (o.transports.empty()) Usage("--transports: none given");
    } else if (a == "--faults") {
      o.faults.clear();
      for (const auto& f : SplitComma(value())) {
        int k = 0;
        while (k < kNumFaults && f != kFaultNames[k]) ++k;
        if (k == kNumFaults) Usage(("--faults: unknown fault '" + f + "' (none, kill, stop, stop-long, abort, drop)").c_str());
        o.faults.push_back(static_cast<Fault>(k));
      }
      if (o.faults.empty()) Usage("--faults: none given");
    } else if (a == "-v" || a == "--verbose") o.verbose = true;
    else if (a == "-h" || a == "--help") Usage(nullptr);
    else Usage(("unknown argument '" + a + "'").c_str());
  }
  return o;
}

// ---- processes ------------------------------------------------------------

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A rank process: rank 0 makes the id and hands it to the others through
// pipes (the id's maker serves its rendezvous, so it must be a rank).
[[noreturn]] void RankProcess(int rank, int n, const std::string& transport, double timeout_s,
                              uint64_t seed, Board* board, std::vector<std::array<int, 2>>& pipes) {
  setenv("ZC_TRANSPORT", transport.c_str(), 1);
  setenv("ZC_SOCKET_IFNAME", "lo", 1);
  char t[32];
  snprintf(t, sizeof(t), "%g", timeout_s);
  setenv("ZC_TIMEOUT", t, 1);
  for (int q = 0; q < n; ++q) {
    if (q != rank) close(pipes[q][0]);
    if (rank != 0 || q == 0) close(pipes[q][1]);
  }
  zc_unique_id id;
  if (rank == 0) {
    if (zc_get_unique_id(&id) != ZC_OK) {
      fprintf(stderr, "rank 0: zc_get_unique_id: %s\n", zc_last_error(nullptr));
      _exit(kExitInitFailed);
    }
    // Bytes 6..7 of the id: its rendezvous port, big-endian (unique_id.h).
    const auto* raw = reinterpret_cast<const unsigned char*>(&id);
    board->store_port.store(raw[6] << 8 | raw[7]);
    for (int q = 1; q < n; ++q) WriteAll(pipes[q][1], &id, sizeof(id));
    for (int q = 1; q < n; ++q) close(pipes[q][1]);
  } else if (!ReadAll(pipes[rank][0], &id, sizeof(id))) {
    fprintf(stderr, "rank %d: no id from rank 0\n", rank);
    _exit(kExitInitFailed);
  }
  int rc = RunRank(rank, n, id, seed, board);
  fflush(stdout);
  fflush(stderr);
  exit(rc);  // exit, not _exit: LeakSanitizer checks the rank
}

std::set<std::string> ShmSegments() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, "zc-", 3) == 0) out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

// The pid field of "zc-<tag>-<rank>-<pid>-<n>".
long SegmentPid(const std::string& name) {
  int dashes = 0;
  for (size_t i = 0; i < name.size(); ++i)
    if (name[i] == '-' && ++dashes == 3) return strtol(name.c_str() + i + 1, nullptr, 10);
  return -1;
}

struct Connection {
  std::string local, peer;  // "addr:port"
  int peer_pid;
};

int Port(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  return colon == std::string::npos ? -1 : atoi(endpoint.c_str() + colon + 1);
}

// Established loopback tcp connections from `victim` to another of `pids`,
// but not those to the unique id's rendezvous store (on `store_port`): it
// is idle after the start, and the job rightly carries on without it.
std::vector<Connection> RankConnections(int victim, const std::vector<int>& pids, int store_port) {
  std::vector<Connection> mine;
  std::map<std::string, int> owner;  // local endpoint -> pid
  FILE* f = popen("ss -tnpH state established 2>/dev/null", "r");
  if (!f) return mine;
  char line[1024];
  struct Row { std::string local, peer; int pid; };
  std::vector<Row> rows;
  while (fgets(line, sizeof(line), f)) {
    char recvq[32], sendq[32], local[128], peer[128];
    if (sscanf(line, "%31s %31s %127s %127s", recvq, sendq, local, peer) != 4) continue;
    const char* p = strstr(line, "pid=");
    if (!p) continue;
    int pid = atoi(p + 4);
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) continue;
    rows.push_back({local, peer, pid});
    owner[local] = pid;
  }
  pclose(f);
  for (const Row& r : rows) {
    if (Port(r.local) == store_port || Port(r.peer) == store_port) continue;
    if (r.pid == victim && owner.count(r.peer) && owner[r.peer] != victim)
      mine.push_back({r.local, r.peer, owner[r.peer]});
  }
  return mine;
}

// ---- rounds ---------------------------------------------------------------

struct Sample {  // one survivor's report of one fault
  double detect_ms;
  double finalize_ms;
  int error;
};

struct Totals {
  int rounds = 0, failures = 0;
  std::map<std::string, int> rounds_by;
  std::map<std::string, std::vector<Sample>> samples;  // "fault/transport"
  std::map<int, int> errors;                           // zc_status -> count
};

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

class Round {
 public:
  Round(const Options& o, int index, std::mt19937_64& rng, Totals* totals)
      : o_(o), index_(index), totals_(totals) {
    n_ = o.min_ranks + static_cast<int>(rng() % static_cast<uint64_t>(o.max_ranks - o.min_ranks + 1));
    transport_ = o.transports[rng() % o.transports.size()];
    fault_ = o.faults[rng() % o.faults.size()];
    if (fault_ == kDrop && transport_ != "tcp") transport_ = "tcp";  // drops need sockets
    victim_ = static_cast<int>(rng() % static_cast<uint64_t>(n_));
    warmup_ = 1 + rng() % 24;
    stop_ms_ = o.timeout_s * 1000 * (0.1 + 0.3 * static_cast<double>(rng() % 1000) / 1000);
    seed_ = rng();
  }

  // Runs the round; false when a check failed (already printed).
  bool Run() {
    board_ = static_cast<Board*>(mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (board_ == MAP_FAILED) return Bad("mmap of the board failed: %s", strerror(errno));
    new (board_) Board();
    bool ok = Start() && Inject() && Collect();
    KillAll();
    if (!ok && !reported_) {
      printf("%s: FAILED\n", Label().c_str());
      for (const std::string& p : problems_) printf("    %s\n", p.c_str());
      fflush(stdout);
    }
    munmap(board_, sizeof(Board));
    return ok && problems_.empty();
  }

  const std::vector<int>& killed_pids() const { return killed_pids_; }

 private:
  bool Bad(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    problems_.push_back(buf);
    return false;
  }

  std::string Label() const {
    char buf[128];
    snprintf(buf, sizeof(buf), "round %d: %d ranks %s, fault %s", index_, n_, transport_.c_str(),
             kFaultNames[fault_]);
    std::string s = buf;
    if (fault_ != kNone) s += " (rank " + std::to_string(victim_) + ")";
    return s;
  }

  bool Start() {
    std::vector<std::array<int, 2>> pipes(n_);
    for (auto& p : pipes)
      if (pipe(p.data()) != 0) return Bad("pipe: %s", strerror(errno));
    for (int q = 0; q < n_; ++q) {
      pid_t pid = fork();
      if (pid < 0) return Bad("fork: %s", strerror(errno));
      if (pid == 0) RankProcess(q, n_, transport_, o_.timeout_s, seed_, board_, pipes);
      pids_.push_back(pid);
    }
    for (auto& p : pipes) close(p[0]), close(p[1]);
    // Every rank joined and ran `warmup_` iterations (an observable state).
    const int64_t limit = MonotonicNs() + static_cast<int64_t>((o_.timeout_s + 20) * 1e9);
    for (;;) {
      bool all = true;
      for (int q = 0; q < n_; ++q) {
        const RankStatus& s = board_->rank[q];
        if (s.phase.load() != kRunning) {
          if (s.phase.load() != kStarting) return Bad("rank %d failed before any fault: %s", q, Message(q).c_str());
          all = false;
        } else if (s.iterations.load() < warmup_) {
          all = false;
        }
      }
      if (all) return true;
      if (Reap() || MonotonicNs() > limit) return Bad("the job did not start (%s)", Describe().c_str());
      usleep(1000);
    }
  }

  // Reaps exited ranks; true when one exited.
  bool Reap() {
    bool any = false;
    for (int q = 0; q < n_; ++q) {
      if (exited_[q] || !pids_[q]) continue;
      int st = 0;
      if (waitpid(pids_[q], &st, WNOHANG) == pids_[q]) {
        exited_[q] = true;
        status_[q] = st;
        exit_ns_[q] = MonotonicNs();
        any = true;
      }
    }
    return any;
  }

  bool AllExited() const {
    for (int q = 0; q < n_; ++q)
      if (!exited_[q]) return false;
    return true;
  }

  // Waits until every rank exited or `until`; true when all did.
  bool WaitExits(int64_t until) {
    for (;;) {
      Reap();
      if (AllExited()) return true;
      if (MonotonicNs() > until) return false;
      usleep(1000);
    }
  }

  std::string Message(int q) const {
    const RankStatus& s = board_->rank[q];
    return s.message_ready.load() ? std::string(s.message) : std::string("(no message)");
  }

  std::string Describe() const {
    std::string out;
    for (int q = 0; q < n_; ++q) {
      const RankStatus& s = board_->rank[q];
      char buf[160];
      snprintf(buf, sizeof(buf), "%srank %d: phase %d, %llu iterations%s", q ? "; " : "", q,
               s.phase.load(), static_cast<unsigned long long>(s.iterations.load()),
               exited_[q] ? ", exited" : "");
      out += buf;
    }
    return out;
  }

  bool Inject() {
    const int64_t grace = static_cast<int64_t>((o_.timeout_s + 10) * 1e9);
    switch (fault_) {
      case kNone:
        usleep(static_cast<useconds_t>(stop_ms_ * 1000));
        board_->stop.store(1);
        return true;
      case kStopShort: {
        // Shorter than ZC_TIMEOUT: no fault at all; the job goes on.
        kill(pids_[victim_], SIGSTOP);
        usleep(static_cast<useconds_t>(stop_ms_ * 1000));
        uint64_t before = board_->rank[victim_].iterations.load();
        kill(pids_[victim_], SIGCONT);
        const int64_t limit = MonotonicNs() + grace;
        while (board_->rank[victim_].iterations.load() < before + 2 && !Reap()) {
          if (MonotonicNs() > limit) return Bad("no progress after SIGCONT (%s)", Describe().c_str());
          usleep(1000);
        }
        board_->stop.store(1);
        return true;
      }
      case kKill:
        fault_ns_ = MonotonicNs();
        kill(pids_[victim_], SIGKILL);
        killed_pids_.push_back(pids_[victim_]);
        return true;
      case kStopLong: {
        fault_ns_ = MonotonicNs();
        kill(pids_[victim_], SIGSTOP);
        // The survivors fail by their deadline; then the victim resumes and
        // must notice that its job is gone.
        const int64_t limit = fault_ns_ + static_cast<int64_t>((o_.timeout_s * 1000 + o_.detect_ms + o_.finalize_ms) * 1e6) + grace;
        for (;;) {
          Reap();
          bool others = true;
          for (int q = 0; q < n_; ++q)
            if (q != victim_ && !exited_[q]) others = false;
          if (others) break;
          if (MonotonicNs() > limit) {
            kill(pids_[victim_], SIGCONT);
            return Bad("survivors still running %.0f ms after rank %d stopped (ZC_TIMEOUT %g s): %s",
                       Ms(MonotonicNs() - fault_ns_), victim_, o_.timeout_s, Describe().c_str());
          }
          usleep(1000);
        }
        resume_ns_ = MonotonicNs();
        kill(pids_[victim_], SIGCONT);
        return true;
      }
      case kAbort:
        board_->abort_rank.store(victim_);
        return true;
      case kDrop: {
        auto conns = RankConnections(pids_[victim_], pids_, board_->store_port.load());
        if (conns.empty()) return Bad("rank %d has no tcp connection to another rank (ss -tnp)", victim_);
        auto& c = conns[static_cast<size_t>(seed_ % conns.size())];
        std::string cmd = "ss -K -tnH src " + c.local + " dst " + c.peer + " >/dev/null 2>&1";
        fault_ns_ = MonotonicNs();
        if (system(cmd.c_str()) != 0) return Bad("'%s' failed", cmd.c_str());
        drop_ = c.local + " -> " + c.peer;
        for (int q = 0; q < n_; ++q)
          if (pids_[q] == c.peer_pid) drop_peer_ = q;
        return true;
      }
      default:
        return true;
    }
  }

  bool Collect() {
    const double bound_ms = o_.timeout_s * 1000 + o_.detect_ms + o_.finalize_ms;
    const int64_t until = MonotonicNs() + static_cast<int64_t>((bound_ms + 10000) * 1e6);
    if (!WaitExits(until)) {
      Bad("HANG: ranks still running %.0f ms after the fault: %s", bound_ms + 10000, Describe().c_str());
      return false;
    }
    if (fault_ == kAbort) fault_ns_ = board_->rank[victim_].error_ns.load();
    const bool clean_expected = fault_ == kNone || fault_ == kStopShort;
    std::vector<Sample> samples;
    for (int q = 0; q < n_; ++q) {
      const RankStatus& s = board_->rank[q];
      const int st = status_[q];
      if (s.phase.load() == kWrong || (WIFEXITED(st) && WEXITSTATUS(st) == kExitWrong)) {
        Bad("rank %d: %s", q, Message(q).c_str());
        continue;
      }
      const bool victim = fault_ != kNone && q == victim_;
      if (fault_ == kKill && victim) {
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) Bad("rank %d was killed but exited with status 0x%x", q, st);
        continue;
      }
      if (WIFSIGNALED(st)) {
        Bad("rank %d died by signal %d (%s)", q, WTERMSIG(st), strsignal(WTERMSIG(st)));
        continue;
      }
      const int code = WEXITSTATUS(st);
      if (clean_expected) {
        if (code != kExitClean) Bad("rank %d: exit code %d where no fault was due: %s", q, code, Message(q).c_str());
        continue;
      }
      if (code != kExitFault) {
        Bad("rank %d: exit code %d, expected %d (fault reported): %s", q, code, kExitFault, Message(q).c_str());
        continue;
      }
      if (victim) {
        if (fault_ == kStopLong) {
          // Resumed after its peers left: it must notice at once.
          double after = Ms(s.error_ns.load() - resume_ns_);
          if (after > o_.detect_ms + o_.finalize_ms)
            Bad("rank %d (resumed after a long stop) reported only %.0f ms after SIGCONT", q, after);
        }
        continue;  // the aborting rank / the dropped end's owner: reported by definition
      }
      Sample smp;
      smp.error = s.first_error.load();
      smp.detect_ms = Ms(s.error_ns.load() - fault_ns_);
      smp.finalize_ms = Ms(s.finalized_ns.load() - s.error_ns.load());
      // A long stop is noticed by the deadline; the others at once, except
      // that ranks not connected to a dropped connection may wait for theirs.
      double bound = o_.detect_ms;
      if (fault_ == kStopLong || (fault_ == kDrop && q != drop_peer_)) bound += o_.timeout_s * 1000;
      if (smp.detect_ms > bound)
        Bad("rank %d reported the fault %.0f ms after it (bound %.0f ms): %s", q, smp.detect_ms, bound, Message(q).c_str());
      // A fault is a lost peer, an abort or a deadline: any other status
      // (a mismatch, an internal error) would send the user the wrong way.
      if (smp.error != ZC_ERR_PEER_LOST && smp.error != ZC_ERR_ABORTED && smp.error != ZC_ERR_TIMEOUT)
        Bad("rank %d reported %s for a %s fault: %s", q, zc_status_string(static_cast<zc_status>(smp.error)),
            kFaultNames[fault_], Message(q).c_str());
      if (smp.finalize_ms > o_.finalize_ms)
        Bad("rank %d: zc_finalize took %.0f ms after the failure (bound %.0f ms)", q, smp.finalize_ms, o_.finalize_ms);
      if (o_.verbose) printf("    rank %d: %.1f ms: %s\n", q, smp.detect_ms, Message(q).c_str());
      samples.push_back(smp);
      totals_->errors[smp.error]++;
    }
    // No segment of a rank that exited may stay behind.
    for (const std::string& name : ShmSegments()) {
      long pid = SegmentPid(name);
      for (int q = 0; q < n_; ++q)
        if (pid == pids_[q] && !(fault_ == kKill && q == victim_))
          Bad("leak: /dev/shm/%s of rank %d (exited) is still there", name.c_str(), q);
    }
    std::string key = std::string(kFaultNames[fault_]) + "/" + transport_;
    auto& all = totals_->samples[key];
    all.insert(all.end(), samples.begin(), samples.end());
    totals_->rounds_by[key]++;
    double worst = 0;
    for (const Sample& s : samples) worst = std::max(worst, s.detect_ms);
    printf("%s: %s", Label().c_str(), problems_.empty() ? "ok" : "FAILED");
    if (!samples.empty()) printf(", %zu survivors reported within %.1f ms", samples.size(), worst);
    if (!drop_.empty()) printf(" [dropped %s]", drop_.c_str());
    printf("\n");
    for (const std::string& p : problems_) printf("    %s\n", p.c_str());
    fflush(stdout);
    reported_ = true;
    return problems_.empty();
  }

  void KillAll() {
    for (int q = 0; q < static_cast<int>(pids_.size()); ++q) {
      if (exited_[q]) continue;
      kill(pids_[q], SIGCONT);
      kill(pids_[q], SIGKILL);
      waitpid(pids_[q], &status_[q], 0);
      exited_[q] = true;
      killed_pids_.push_back(pids_[q]);
    }
  }

  const Options& o_;
  const int index_;
  Totals* totals_;
  int n_ = 2, victim_ = 0;
  std::string transport_;
  Fault fault_ = kNone;
  uint64_t warmup_ = 1, seed_ = 0;
  double stop_ms_ = 0;
  Board* board_ = nullptr;
  std::vector<int> pids_;
  bool exited_[kMaxRanks] = {};
  int status_[kMaxRanks] = {};
  int64_t exit_ns_[kMaxRanks] = {};
  int64_t fault_ns_ = 0, resume_ns_ = 0;
  std::string drop_;
  int drop_peer_ = -1;  // the rank at the other end of the dropped connection
  std::vector<int> killed_pids_;
  std::vector<std::string> problems_;
  bool reported_ = false;
};

void PrintSummary(const Totals& t, double seconds) {
  printf("\nfault soak: %d rounds in %.0f s, %d failed\n", t.rounds, seconds, t.failures);
  printf("%-18s %7s %9s %12s %12s %12s %14s\n", "fault/transport", "rounds", "reports", "detect min",
         "median", "max (ms)", "finalize max");
  for (const auto& [key, n] : t.rounds_by) {
    auto it = t.samples.find(key);
    std::vector<Sample> s = it == t.samples.end() ? std::vector<Sample>() : it->second;
    if (s.empty()) {
      printf("%-18s %7d %9d %12s %12s %12s %14s\n", key.c_str(), n, 0, "-", "-", "-", "-");
      continue;
    }
    std::sort(s.begin(), s.end(), [](const Sample& a, const Sample& b) { return a.detect_ms < b.detect_ms; });
    double fin = 0;
    for (const Sample& x : s) fin = std::max(fin, x.finalize_ms);
    printf("%-18s %7d %9zu %12.1f %12.1f %12.1f %14.1f\n", key.c_str(), n, s.size(), s.front().detect_ms,
           s[s.size() / 2].detect_ms, s.back().detect_ms, fin);
  }
  printf("survivors' errors:");
  for (const auto& [e, n] : t.errors) printf(" %s x%d", zc_status_string(static_cast<zc_status>(e)), n);
  printf("\n");
}

}  // namespace
}  // namespace zc::soak

int main(int argc, char** argv) {
  using namespace zc::soak;
  Options o = ParseOptions(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::mt19937_64 rng(o.seed);
  Totals totals;
  const int64_t start = MonotonicNs();
  std::vector<int> killed;
  for (int i = 1;; ++i) {
    if (o.rounds ? i > o.rounds : Ms(MonotonicNs() - start) > o.seconds * 1000) break;
    Round r(o, i, rng, &totals);
    totals.rounds++;
    if (!r.Run()) totals.failures++;
    killed.insert(killed.end(), r.killed_pids().begin(), r.killed_pids().end());
  }
  // A final clean job: its start sweeps the segments the killed ranks left.
  if (!killed.empty()) {
    Options clean = o;
    clean.faults = {kNone};
    clean.transports = {"shm"};
    std::mt19937_64 r2(o.seed + 1);
    Round last(clean, totals.rounds + 1, r2, &totals);
    totals.rounds++;
    if (!last.Run()) totals.failures++;
    for (const std::string& name : ShmSegments()) {
      long pid = SegmentPid(name);
      if (std::find(killed.begin(), killed.end(), pid) != killed.end()) {
        printf("leak: /dev/shm/%s of killed pid %ld survived the next job's start\n", name.c_str(), pid);
        totals.failures++;
      }
    }
  }
  PrintSummary(totals, Ms(MonotonicNs() - start) / 1000);
  return totals.failures ? 1 : 0;
}
