// The paper's training benchmark (§5.2, Table 2) on the parameter server:
// one step = the table's computation time (emulated by sleeping: only
// communication is measured here), then push every gradient tensor and pull
// every variable, for AlexNet, Inception-v3, VGG-16, LSTM, GRU and FCN-5 as
// lists of variable tensors whose sizes add up to Table 2's model sizes.
// The same tensors are then allreduced (in place, one call per tensor) among
// the workers, for the "PS within 1.2x of allreduce" comparison.
//
//   zcrun -np 2 zc_ps_train                 # 2 workers, 2 co-located servers
//   zcrun -np 4 zc_ps_train --servers 1     # 3 workers + 1 server-only rank
//   options: --models vgg16,lstm  --steps N  --no-compute  --json FILE
// The transport comes from ZC_TRANSPORT (shm, tcp). C ABI only.
// Times are rank 0's: step_ms (compute + push + pull) and ps_comm_ms
// (push + pull) min and median over the steps after a warm-up step,
// allreduce_ms likewise. --json writes them per model (rewritten after each
// model), with "wrong": tensors whose pulled value was not the round's sum.
#include <zcomm/zcomm.h>

#include "common/ps_models.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

using ps_models::Model;
using ps_models::Models;
using ps_models::Sum;

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    zc_status s_ = (call);                                                               \
    if (s_ != ZC_OK) {                                                                   \
      fprintf(stderr, "%s: %s: %s\n", #call, zc_status_string(s_), zc_last_error(comm)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  std::string model;
  double mib;
  size_t tensors;
  double step_min, step_med, comm_min, comm_med, ar_min, ar_med, compute;
  int wrong;
};

void WriteJson(const char* path, int workers, int servers, bool colocated, const char* transport,
               int steps, const std::vector<Row>& rows, bool complete) {
  if (!path) return;
  std::string tmp = std::string(path) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return;
  fprintf(f,
          "{\"benchmark\": \"ps_train\", \"library\": \"zcomm\", \"transport\": \"%s\", "
          "\"workers\": %d, \"servers\": %d, \"colocated\": %s, \"steps\": %d, \"complete\": %s, "
          "\"error\": null, \"results\": [",
          transport, workers, servers, colocated ? "true" : "false", steps, complete ? "true" : "false");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    fprintf(f,
            "%s\n {\"model\": \"%s\", \"mib\": %.3f, \"tensors\": %zu, \"step_ms_min\": %.3f, "
            "\"step_ms_median\": %.3f, \"comm_ms_min\": %.3f, \"comm_ms_median\": %.3f, "
            "\"allreduce_ms_min\": %.3f, \"allreduce_ms_median\": %.3f, \"compute_ms\": %.2f, "
            "\"wrong\": %d}",
            i ? "," : "", r.model.c_str(), r.mib, r.tensors, r.step_min, r.step_med, r.comm_min, r.comm_med,
            r.ar_min, r.ar_med, r.compute, r.wrong);
  }
  fprintf(f, "]}\n");
  fclose(f);
  rename(tmp.c_str(), path);
}

void SleepMs(double ms) {
  timespec ts{static_cast<time_t>(ms / 1e3), static_cast<long>(std::fmod(ms, 1e3) * 1e6)};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  int servers_only = 0, steps = 5;
  bool compute = true;
  std::string only;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--servers") && i + 1 < argc) servers_only = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--models") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--no-compute")) compute = false;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--servers K] [--steps N] [--models a,b] [--no-compute] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  if (steps < 1) steps = 1;
  zc_comm* comm = nullptr;
  CHECK(zc_init(&comm));
  const int rank = zc_rank(comm), n = zc_size(comm);
  if (servers_only < 0 || servers_only >= n) {
    fprintf(stderr, "--servers %d: must leave at least one worker among %d ranks\n", servers_only, n);
    return 2;
  }
  const bool server_only = rank >= n - servers_only;
  zc_comm* workers = nullptr;  // allreduce among the workers
  CHECK(zc_comm_split(comm, server_only ? ZC_SPLIT_NONE : 0, rank, &workers));
  const char* transport = getenv("ZC_TRANSPORT") ? getenv("ZC_TRANSPORT") : "auto";
  if (rank == 0)
    printf("# zc_ps_train: %d workers, %d servers (%s), transport %s, placement %s, %d steps, compute %s\n",
           n - servers_only, servers_only ? servers_only : n,
           servers_only ? "server-only ranks" : "co-located", transport,
           getenv("ZC_PS_PLACEMENT") ? getenv("ZC_PS_PLACEMENT") : "balanced (default)", steps,
           compute ? "emulated" : "off");
  if (rank == 0)
    printf("%-11s %9s %7s %7s %10s %10s %12s %10s %8s\n", "model", "MiB", "table", "tensors", "step_ms",
           "ps_comm_ms", "allreduce_ms", "compute_ms", "ps/ar");
  std::vector<Row> rows;
  for (const Model& m : Models()) {
    if (!only.empty() && ("," + only + ",").find("," + m.name + ",") == std::string::npos) continue;
    zc_ps* ps = nullptr;
    CHECK(zc_ps_create(comm, server_only ? ZC_PS_SERVER : ZC_PS_BOTH, nullptr, &ps));
    if (server_only) {
      CHECK(zc_ps_serve(ps));
      CHECK(zc_ps_free(ps));
      continue;
    }
    const size_t total = Sum(m.elems);
    std::vector<float> grad(total), param(total);
    for (size_t i = 0; i < total; ++i) grad[i] = static_cast<float>((i + rank) % 7);
    std::vector<size_t> off(m.elems.size());
    for (size_t t = 0, o = 0; t < m.elems.size(); o += m.elems[t], ++t) off[t] = o;
    for (size_t t = 0; t < m.elems.size(); ++t) CHECK(zc_ps_declare(ps, t, m.elems[t], ZC_FLOAT32, nullptr));
    std::vector<zc_request*> preq(m.elems.size()), qreq(m.elems.size());
    std::vector<double> st, ct, at;
    for (int s = 0; s <= steps; ++s) {  // step 0: warm-up
      CHECK(zc_barrier(workers));
      double t0 = NowMs();
      if (compute) SleepMs(m.compute_ms);
      double t1 = NowMs();
      for (size_t t = 0; t < m.elems.size(); ++t) CHECK(zc_ps_ipush(ps, t, grad.data() + off[t], &preq[t]));
      for (size_t t = 0; t < m.elems.size(); ++t) CHECK(zc_ps_ipull(ps, t, param.data() + off[t], &qreq[t]));
      for (size_t t = 0; t < m.elems.size(); ++t) {
        CHECK(zc_wait(preq[t]));
        CHECK(zc_wait(qreq[t]));
      }
      double t2 = NowMs();
      if (s > 0) {
        st.push_back(t2 - t0);
        ct.push_back(t2 - t1);
      }
    }
    // Check one element of every tensor: the round's sum over workers.
    int W = zc_ps_num_workers(ps), wrong = 0;
    for (size_t t = 0; t < m.elems.size(); ++t) {
      size_t i = off[t];
      float want = 0;
      for (int w = 0; w < W; ++w) want += static_cast<float>((i + w) % 7);
      if (param[i] != want) {
        fprintf(stderr, "error: rank %d: %s tensor %zu: got %g, want %g\n", rank, m.name.c_str(), t, param[i],
                want);
        ++wrong;
      }
    }
    CHECK(zc_ps_free(ps));
    if (wrong) {
      if (rank == 0) {
        rows.push_back(Row{m.name, total * 4.0 / 1048576.0, m.elems.size(), 0, 0, 0, 0, 0, 0, 0, wrong});
        WriteJson(json, n - servers_only, servers_only ? servers_only : n, !servers_only, transport, steps, rows,
                  false);
      }
      return 1;
    }
    for (int s = 0; s <= steps; ++s) {
      CHECK(zc_barrier(workers));
      double t0 = NowMs();
      for (size_t t = 0; t < m.elems.size(); ++t)
        CHECK(zc_allreduce(workers, grad.data() + off[t], param.data() + off[t], m.elems[t], ZC_FLOAT32, ZC_SUM));
      double t1 = NowMs();
      if (s > 0) at.push_back(t1 - t0);
    }
    const double best_step = *std::min_element(st.begin(), st.end());
    const double best_comm = *std::min_element(ct.begin(), ct.end());
    const double best_ar = *std::min_element(at.begin(), at.end());
    if (rank == 0) {
      printf("%-11s %9.2f %7.2f %3zu/%-3d %10.2f %10.2f %12.2f %10.2f %8.2f\n", m.name.c_str(),
             total * 4.0 / 1048576.0, m.table_mib, m.elems.size(), m.table_tensors, best_step, best_comm,
             best_ar, compute ? m.compute_ms : 0.0, best_comm / best_ar);
      rows.push_back(Row{m.name, total * 4.0 / 1048576.0, m.elems.size(), best_step, Median(st), best_comm,
                         Median(ct), best_ar, Median(at), compute ? m.compute_ms : 0.0, 0});
      WriteJson(json, n - servers_only, servers_only ? servers_only : n, !servers_only, transport, steps, rows,
                false);
    }
    fflush(stdout);
  }
  if (rank == 0)
    WriteJson(json, n - servers_only, servers_only ? servers_only : n, !servers_only, transport, steps, rows, true);
  if (workers) CHECK(zc_finalize(workers));
  CHECK(zc_finalize(comm));
  return 0;
}
