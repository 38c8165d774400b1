// trace_scenario SCENARIO: a job that hangs or fails in a known way, for
// the flight recorder's diagnosis tests (test_trace_diagnosis.py runs it
// under zcrun with a short ZC_TIMEOUT and checks what zcrun prints). Every
// rank first runs 5 allreduces of 8 floats (collectives #1..#5, labelled
// "step N"); then, at collective #6:
//   skip      the last rank skips the allreduce and waits elsewhere (until
//             zcrun stops it); the others wait for it in allreduce #6
//   mismatch  the last rank calls a broadcast where the others allreduce
//   stop      the last rank stops itself (SIGSTOP) before allreduce #6
//   deadlock  every rank receives from its left neighbour before it sends
//             to its right one: a cycle of receives (tag 7, 8 bytes)
//   ps_skip   every rank is a parameter-server worker and server
//             (synchronous rounds) of keys 7 and 8; each pushes and pulls
//             both keys for 3 rounds, but in round 3 the last rank skips its
//             push of key 8 and waits elsewhere: the others wait in their
//             pull of key 8 for it
//   send_full rank 0 sends 8-byte messages (tag 7) to the last rank, which
//             never receives, until a send has to wait for a free slot;
//             every other rank waits elsewhere
//   ok        every rank runs allreduce #6, sends 8 bytes to its right
//             neighbour and receives from its left one (tag 5); then a
//             dump on request (zc_comm_dump_trace into argv[2]) and a clean
//             end
#include <signal.h>
#include <unistd.h>
#include <zcomm/zcomm.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int Check(zc_comm* comm, zc_status s, const char* what) {
  if (s == ZC_OK) return 0;
  fprintf(stderr, "rank %d: %s: %s: %s\n", zc_rank(comm), what, zc_status_string(s), zc_last_error(comm));
  return 1;
}

int Step(zc_comm* comm, int step) {
  float x[8];
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(zc_rank(comm) + i + step);
  std::string label = "step " + std::to_string(step);
  zc_trace_set_label(label.c_str());
  zc_status s = zc_allreduce(comm, x, x, 8, ZC_FLOAT32, ZC_SUM);
  zc_trace_set_label(nullptr);
  return Check(comm, s, label.c_str());
}

// The ps_skip scenario (see the top).
[[noreturn]] void WaitForever();

int PsSkip(zc_comm* comm) {
  const bool last = zc_rank(comm) == zc_size(comm) - 1;
  zc_ps* ps = nullptr;
  if (Check(comm, zc_ps_create(comm, ZC_PS_BOTH, nullptr, &ps), "zc_ps_create")) return 1;
  float v[4] = {};
  for (uint64_t key : {7, 8})
    if (Check(comm, zc_ps_declare(ps, key, 4, ZC_FLOAT32, v), "zc_ps_declare")) return 1;
  for (int round = 1; round <= 3; ++round) {
    for (uint64_t key : {7, 8}) {
      for (int i = 0; i < 4; ++i) v[i] = static_cast<float>(zc_rank(comm) + round + i);
      if (round == 3 && key == 8 && last) WaitForever();
      if (Check(comm, zc_ps_push(ps, key, v), "zc_ps_push")) return 1;
    }
    for (uint64_t key : {7, 8})
      if (Check(comm, zc_ps_pull(ps, key, v), "zc_ps_pull")) return 1;
  }
  return Check(comm, zc_ps_free(ps), "zc_ps_free");
}

// Waits "elsewhere" (as a rank stuck in its own work would) until zcrun
// stops the job: pause() returns for every handled signal (SIGUSR2).
[[noreturn]] void WaitForever() {
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: trace_scenario skip|mismatch|stop|deadlock|send_full|ps_skip|ok [DUMP]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  zc_comm* comm = nullptr;
  if (zc_init(&comm) != ZC_OK) {
    fprintf(stderr, "zc_init: %s\n", zc_last_error(nullptr));
    return 1;
  }
  const int rank = zc_rank(comm), size = zc_size(comm);
  const bool last = rank == size - 1;
  for (int step = 1; step <= 5; ++step)
    if (Step(comm, step)) return 1;

  if (scenario == "ps_skip") return PsSkip(comm) || Check(comm, zc_finalize(comm), "zc_finalize");
  if (scenario == "skip" && last) WaitForever();
  if (scenario == "stop" && last) raise(SIGSTOP);
  if (scenario == "mismatch" && last) {
    float x[8] = {};
    return Check(comm, zc_broadcast(comm, x, 8, ZC_FLOAT32, 0), "broadcast");
  }
  if (scenario == "deadlock") {
    char buf[8] = {};
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    if (Check(comm, zc_recv(comm, buf, sizeof(buf), left, 7), "recv")) return 1;
    return Check(comm, zc_send(comm, buf, sizeof(buf), right, 7), "send");
  }
  if (scenario == "send_full") {
    if (rank != 0) WaitForever();
    const char buf[8] = {};
    for (;;)
      if (Check(comm, zc_send(comm, buf, sizeof(buf), size - 1, 7), "send")) return 1;
  }
  if (Step(comm, 6)) return 1;
  if (scenario == "ok" && size > 1) {
    char out[8], in[8] = {};
    memset(out, rank, sizeof(out));
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    if (Check(comm, zc_send(comm, out, sizeof(out), right, 5), "send")) return 1;
    if (Check(comm, zc_recv(comm, in, sizeof(in), left, 5), "recv")) return 1;
    if (in[0] != left || in[7] != left) {
      fprintf(stderr, "rank %d: received %d from rank %d\n", rank, in[0], left);
      return 1;
    }
  }
  if (scenario == "ok" && argc > 2) {
    std::string path = std::string(argv[2]) + "/rank" + std::to_string(rank) + ".json";
    if (Check(comm, zc_comm_dump_trace(comm, path.c_str()), "zc_comm_dump_trace")) return 1;
  }
  return Check(comm, zc_finalize(comm), "zc_finalize");
}
