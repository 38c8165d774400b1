// A rank program for the zcrun tests. First argument chooses what it does;
// behaviour depends on ZC_RANK so that tests can tell ranks apart.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <zcomm/zcomm.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store_client.h"
#include "common/socket.h"
#include "zcomm/zcomm.h"

namespace {

int Rank() {
  const char* r = getenv("ZC_RANK");
  if (!r) r = getenv("PMIX_RANK");  // under mpirun
  return r ? atoi(r) : -1;
}

const char* Get(const char* name) {
  const char* v = getenv(name);
  return v ? v : "<unset>";
}

// A rank that keeps running until zcrun stops it: the sleep is the subject
// (a busy rank), bounded so that a zcrun that fails to stop it leaves no
// process behind for long.
[[noreturn]] void SleepForever(int seconds) {
  sleep(static_cast<unsigned>(seconds));
  _exit(0);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Writes text to path whole (through a temporary name and a rename).
void WriteFile(const std::string& path, const std::string& text) {
  FILE* f = fopen((path + ".tmp").c_str(), "w");
  if (!f) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());
}

// Readiness through the job's store (ZC_STORE, served by zcrun): a rank that
// acts on the job (fails, dies) first waits until every other rank has said
// it is ready, instead of guessing how long they take to start.
// For the launcher-death modes: stderr to DIR/err.<rank> (a dead
// launcher's pipes die with it), zc_init, 1 MiB of pool memory (shared
// segments). 0, or the probe's exit code for the step that failed.
int InitWithPoolMemory(const std::string& dir, int* rank, zc_comm** comm) {
  int fd = open((dir + "/err." + std::to_string(*rank)).c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || dup2(fd, 2) < 0) return 20;
  if (zc_init(comm) != ZC_OK) {
    fprintf(stderr, "zc_init: %s\n", zc_last_error(nullptr));
    return 21;
  }
  *rank = zc_rank(*comm);
  void* mem = nullptr;
  return zc_mem_alloc(*comm, 1 << 20, &mem) == ZC_OK ? 0 : 22;
}

std::unique_ptr<zc::StoreClient> JobStore(int rank) {
  std::unique_ptr<zc::StoreClient> client;
  zc::Status st = zc::StoreClient::Connect(Get("ZC_STORE"), Get("ZC_JOB_KEY"),
                                          zc::Deadline(20), &client);
  if (!st.ok()) {
    fprintf(stderr, "rank %d: store connect: %s\n", rank, st.message().c_str());
    _exit(10);
  }
  return client;
}

void MarkReady(int rank) {
  zc::Status st = JobStore(rank)->Set("probe/ready/" + std::to_string(rank), "1");
  if (!st.ok()) {
    fprintf(stderr, "rank %d: store: %s\n", rank, st.message().c_str());
    _exit(12);
  }
}

void WaitOthersReady(int rank) {
  int size = atoi(Get("ZC_SIZE"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    if (r != rank) keys.push_back("probe/ready/" + std::to_string(r));
  zc::Status st = JobStore(rank)->Wait(keys, 20);
  if (!st.ok()) {
    fprintf(stderr, "rank %d: waiting for the others: %s\n", rank, st.message().c_str());
    _exit(12);
  }
}

int Usage() {
  fprintf(stderr, "zcrun_probe: unknown mode\n");
  return 99;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string mode = argv[1];
  int rank = Rank();

  if (mode == "env") {
    // The six variables zcrun sets, then any extra names asked for.
    printf("rank=%s size=%s local_rank=%s local_size=%s store=%s key=%s\n",
           Get("ZC_RANK"), Get("ZC_SIZE"), Get("ZC_LOCAL_RANK"),
           Get("ZC_LOCAL_SIZE"), Get("ZC_STORE"), Get("ZC_JOB_KEY"));
    for (int i = 2; i < argc; ++i) printf("%s=%s\n", argv[i], Get(argv[i]));
    return 0;
  }
  if (mode == "key-on-cmdline") {
    // Whether this rank's job key appears in any process's command line
    // (readable by every user with ps): prints the pids where it does.
    const char* key = getenv("ZC_JOB_KEY");
    if (!key || strlen(key) < 16) {
      printf("no job key\n");
      return 1;
    }
    int found = 0, scanned = 0;
    if (DIR* d = opendir("/proc")) {
      while (dirent* e = readdir(d)) {
        if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
        std::string path = std::string("/proc/") + e->d_name + "/cmdline";
        FILE* f = fopen(path.c_str(), "r");
        if (!f) continue;
        std::string cmd;
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) cmd.append(buf, n);
        fclose(f);
        ++scanned;
        if (cmd.find(key) != std::string::npos) {
          printf("key in the command line of pid %s\n", e->d_name);
          ++found;
        }
      }
      closedir(d);
    }
    printf("key_on_cmdline=%d scanned=%d\n", found, scanned);
    return 0;
  }
  if (mode == "args") {  // each argument on its own line, bracketed
    for (int i = 2; i < argc; ++i) printf("arg%d=[%s]\n", i - 2, argv[i]);
    return 0;
  }
  if (mode == "streams") {
    // rank+1 lines on each stream, with different text.
    for (int i = 0; i <= rank; ++i) {
      printf("out %d.%d\n", rank, i);
      fflush(stdout);
      fprintf(stderr, "err %d.%d\n", rank, i);
    }
    return 0;
  }
  if (mode == "lines" && argc == 4) {
    // Many long lines written in small pieces: zcrun must still emit each
    // line whole.
    int n = atoi(argv[2]), len = atoi(argv[3]) + rank * 13;
    setvbuf(stdout, nullptr, _IONBF, 0);
    for (int i = 0; i < n; ++i) {
      std::string line = "L" + std::to_string(rank) + "." + std::to_string(i) + ":";
      for (int k = 0; k < len; ++k) line += static_cast<char>('a' + (rank + i + k) % 26);
      line += "\n";
      for (size_t off = 0; off < line.size(); off += 97)
        fwrite(line.data() + off, 1, std::min<size_t>(97, line.size() - off), stdout);
    }
    return 0;
  }
  if (mode == "partial" && argc == 3) {
    printf("whole line %d\n%s", rank, argv[2]);
    return 0;
  }
  if (mode == "exit" && argc == 3) {
    printf("exiting with %s\n", argv[2]);
    return atoi(argv[2]);
  }
  if (mode == "fail-rank" && argc == 4) {
    // Rank argv[2] exits with code argv[3]; the others sleep a minute.
    if (rank == atoi(argv[2])) {
      fprintf(stderr, "rank %d failing on purpose\n", rank);
      return atoi(argv[3]);
    }
    SleepForever(60);
  }
  if (mode == "kill-rank" && argc == 3) {
    // Rank argv[2] dies by SIGKILL once the others run (zcrun must stop them).
    if (rank == atoi(argv[2])) {
      WaitOthersReady(rank);
      raise(SIGKILL);
    }
    MarkReady(rank);
    SleepForever(60);
  }
  if (mode == "stubborn-fail" && argc == 3) {
    // Others ignore SIGTERM: only zcrun's SIGKILL ends them.
    if (rank == atoi(argv[2])) {
      WaitOthersReady(rank);  // every other rank ignores SIGTERM by now
      return 5;
    }
    signal(SIGTERM, SIG_IGN);
    printf("ignoring SIGTERM\n");
    fflush(stdout);
    MarkReady(rank);
    SleepForever(60);
  }
  if (mode == "orphan-fail" && argc == 3) {
    // Leaves a child behind in its process group, then fails.
    pid_t child = fork();
    if (child == 0) SleepForever(60);
    // Written under a temporary name and renamed: readers never see half.
    std::string path = std::string(argv[2]) + "." + std::to_string(rank);
    FILE* f = fopen((path + ".tmp").c_str(), "w");
    if (f) {
      fprintf(f, "%d\n", static_cast<int>(child));
      fclose(f);
      rename((path + ".tmp").c_str(), path.c_str());
    }
    if (rank == 0) {
      // Fail once every rank has its child, so that all of them are tested.
      int size = atoi(Get("ZC_SIZE"));
      // (Polls for the files: an observable condition, 10 s at most.)
      for (int r = 0; r < size; ++r) {
        std::string other = std::string(argv[2]) + "." + std::to_string(r);
        for (int i = 0; i < 1000 && access(other.c_str(), F_OK) != 0; ++i) usleep(10000);
      }
    }
    if (rank == 0) return 3;
    SleepForever(60);
  }
  if (mode == "init-wait" && argc == 3) {
    // zc_init, say so, and hold the job (its sockets) until file argv[2]
    // exists (60 s at most), for a test that inspects the job from outside.
    zc_comm* comm = nullptr;
    if (zc_init(&comm) != ZC_OK) {
      fprintf(stderr, "rank %d: zc_init: %s\n", rank, zc_last_error(nullptr));
      return 1;
    }
    printf("ready rank %d pid %d\n", rank, static_cast<int>(getpid()));
    fflush(stdout);
    for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; ++i) usleep(10000);
    return zc_finalize(comm) == ZC_OK ? 0 : 1;
  }
  if (mode == "ready-sleep") {
    printf("ready %d\n", rank);
    fflush(stdout);
    SleepForever(60);
  }
  if (mode == "sleep" && argc == 3) {
    // A job that outlives zcrun's --timeout: the sleep is the subject.
    sleep(static_cast<unsigned>(atoi(argv[2])));
    return 0;
  }
  if (mode == "affinity") {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
    std::string cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    printf("cpus=%s\n", cpus.c_str());
    return 0;
  }
  if (mode == "store") {
    // Every rank publishes a rank-dependent value, counts itself in, and
    // reads every other rank's value through the job's store.
    int size = atoi(Get("ZC_SIZE"));
    std::unique_ptr<zc::StoreClient> client;
    zc::Status st = zc::StoreClient::Connect(Get("ZC_STORE"), Get("ZC_JOB_KEY"),
                                            zc::Deadline(20), &client);
    if (!st.ok()) {
      fprintf(stderr, "rank %d: store connect: %s\n", rank, st.message().c_str());
      return 10;
    }
    std::string mine = "value-" + std::to_string(rank * 7 + 3);
    st = client->Set("probe/" + std::to_string(rank), mine);
    int64_t count = 0;
    if (st.ok()) st = client->Add("probe/count", 1, &count);
    for (int r = 0; st.ok() && r < size; ++r) {
      std::string v;
      st = client->Get("probe/" + std::to_string(r), &v, 20);
      if (st.ok() && v != "value-" + std::to_string(r * 7 + 3)) {
        fprintf(stderr, "rank %d: rank %d's value is '%s'\n", rank, r, v.c_str());
        return 11;
      }
    }
    if (!st.ok()) {
      fprintf(stderr, "rank %d: store: %s\n", rank, st.message().c_str());
      return 12;
    }
    printf("store ok: rank %d read %d values\n", rank, size);
    return 0;
  }
  if (mode == "connect") {
    // Plain TCP reachability of ZC_STORE (no handshake).
    std::string host;
    int port = 0;
    zc::Status st = zc::net::ParseHostPort(Get("ZC_STORE"), &host, &port);
    int fd = -1;
    if (st.ok()) st = zc::net::Connect(host, port, zc::Deadline(10), &fd);
    if (!st.ok()) {
      fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
      return 13;
    }
    close(fd);
    printf("connected %d\n", rank);
    return 0;
  }
  if (mode == "shm" && argc == 2) {
    // Leaves a segment named as the shm transport would, then fails.
    std::string name = "/dev/shm/zc-" + std::string(Get("ZC_JOB_KEY")).substr(0, 16) +
                       "-probe" + std::to_string(rank);
    FILE* f = fopen(name.c_str(), "w");
    if (!f) return 14;
    fputs("x", f);
    fclose(f);
    printf("made %s\n", name.c_str());
    fflush(stdout);
    if (rank == 0) return 0;
    // Fail only once rank 0's segment exists, so both are left to clean
    // (polled: an observable condition, 10 s at most).
    std::string first = name.substr(0, name.rfind("probe")) + "probe0";
    for (int i = 0; i < 1000 && access(first.c_str(), F_OK) != 0; ++i) usleep(10000);
    return 6;
  }
  if (mode == "coll-kill" && argc >= 3) {
    // Allreduces until rank argv[2] kills itself with SIGKILL: after 20
    // rounds, or once the file argv[3] exists. The others fail with the
    // lost peer and exit with code 4, racing zcrun's report of the kill.
    zc_comm* comm = nullptr;
    if (zc_init(&comm) != ZC_OK) {
      fprintf(stderr, "rank %d: zc_init: %s\n", rank, zc_last_error(nullptr));
      return 10;
    }
    if (argc >= 4) WriteFile(std::string(argv[3]) + ".pid" + std::to_string(rank),
                             std::to_string(getpid()) + "\n");
    double start = Now();
    for (int i = 0; Now() - start < 60; ++i) {
      if (rank == atoi(argv[2]) && (argc >= 4 ? access(argv[3], F_OK) == 0 : i == 20))
        raise(SIGKILL);
      double x = 1;
      if (zc_allreduce(comm, &x, &x, 1, ZC_FLOAT64, ZC_SUM) != ZC_OK) {
        fprintf(stderr, "rank %d: allreduce: %s\n", rank, zc_last_error(comm));
        return 4;
      }
    }
    return 0;
  }
  if (mode == "exit-unfinalized" && argc == 3) {
    // Pool memory, one allreduce, then exit(0) without zc_finalize; stderr
    // to DIR/err.<rank>, "<pid>" to DIR/pid.<rank>.
    std::string dir = argv[2];
    zc_comm* comm = nullptr;
    if (int code = InitWithPoolMemory(dir, &rank, &comm)) return code;
    double x = 1;
    if (zc_allreduce(comm, &x, &x, 1, ZC_FLOAT64, ZC_SUM) != ZC_OK) return 23;
    WriteFile(dir + "/pid." + std::to_string(rank), std::to_string(getpid()) + "\n");
    exit(0);
  }
  if (mode == "orphan-wait" && argc == 3) {
    // For zcrun's (or mpirun's) death: stderr goes to DIR/err.<rank> (the
    // launcher's pipes die with it); DIR/pid.<rank> says "<pid> <job tag>".
    // Rank 0 computes without calls, the others block in an allreduce that
    // rank 0 never joins. Both hold pool memory (shared segments).
    std::string dir = argv[2];
    zc_comm* comm = nullptr;
    if (int code = InitWithPoolMemory(dir, &rank, &comm)) return code;
    const char* key = getenv("ZC_JOB_KEY");
    WriteFile(dir + "/pid." + std::to_string(rank),
              std::to_string(getpid()) + " " +
                  (key ? std::string(key).substr(0, 16) : std::string("-")) + "\n");
    printf("ready %d\n", rank);
    fflush(stdout);
    if (rank == 0) {
      volatile double sink = 0;
      double start = Now();
      while (Now() - start < 120)
        for (int i = 0; i < 1000000; ++i) sink = sink + i * 0.5;
      return 0;
    }
    double x = 1;
    zc_status s = zc_allreduce(comm, &x, &x, 1, ZC_FLOAT64, ZC_SUM);
    fprintf(stderr, "rank %d: allreduce returned %s: %s\n", rank, zc_status_string(s),
            zc_last_error(comm));
    return 4;
  }
  return Usage();
}
