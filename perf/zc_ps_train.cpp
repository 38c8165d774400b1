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
//   options: --models vgg16,lstm  --steps N  --no-compute
// The transport comes from ZC_TRANSPORT (shm, tcp). C ABI only.
#include <zcomm/zcomm.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

struct Model {
  std::string name;
  double table_mib;   // Table 2: model size (MB, read as MiB: VGG-16 then matches exactly)
  int table_tensors;  // Table 2: variable tensors
  double compute_ms;  // Table 2: computation time
  std::vector<size_t> elems;  // float32 elements of each variable tensor
};

size_t Target(double mib) { return static_cast<size_t>(std::llround(mib * 1048576.0 / 4.0)); }
size_t Sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}
void Conv(std::vector<size_t>* v, size_t k, size_t cin, size_t cout) {
  v->push_back(k * k * cin * cout);
  v->push_back(cout);
}
void Fc(std::vector<size_t>* v, size_t in, size_t out) {
  v->push_back(in * out);
  v->push_back(out);
}

std::vector<Model> Models() {
  std::vector<Model> ms;
  {  // VGG-16, 10 classes: exactly Table 2's 512.32 MiB in 32 tensors.
    Model m{"vgg16", 512.32, 32, 30.92, {}};
    size_t c[][2] = {{3, 64}, {64, 64}, {64, 128}, {128, 128}, {128, 256}, {256, 256}, {256, 256},
                     {256, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}};
    for (auto& p : c) Conv(&m.elems, 3, p[0], p[1]);
    Fc(&m.elems, 25088, 4096);
    Fc(&m.elems, 4096, 4096);
    Fc(&m.elems, 4096, 10);
    ms.push_back(m);
  }
  {  // AlexNet (tf_cnn_benchmarks layers); fc6's input width fitted to the total.
    Model m{"alexnet", 176.42, 16, 7.61, {}};
    Conv(&m.elems, 11, 3, 64);
    Conv(&m.elems, 5, 64, 192);
    Conv(&m.elems, 3, 192, 384);
    Conv(&m.elems, 3, 384, 256);
    Conv(&m.elems, 3, 256, 256);
    std::vector<size_t> rest;
    Fc(&rest, 4096, 4096);
    Fc(&rest, 4096, 1000);
    size_t fixed = Sum(m.elems) + Sum(rest) + 4096;
    Fc(&m.elems, (Target(m.table_mib) - fixed) / 4096, 4096);
    m.elems.insert(m.elems.end(), rest.begin(), rest.end());
    ms.push_back(m);
  }
  {  // Inception-v3: real stem and heads (main and auxiliary), 94 convolutions
     // each with its batch-norm beta, 196 tensors; the mixed blocks' 89
     // convolutions are given equal shares of the remaining size.
    Model m{"inception3", 92.90, 196, 68.32, {}};
    size_t stem[][3] = {{3, 3, 32}, {3, 32, 32}, {3, 32, 64}, {1, 64, 80}, {3, 80, 192}};
    for (auto& s : stem) Conv(&m.elems, s[0], s[1], s[2]);
    std::vector<size_t> head;
    Conv(&head, 1, 768, 128);
    Conv(&head, 5, 128, 768);
    Fc(&head, 768, 1000);
    Fc(&head, 2048, 1000);
    size_t left = Target(m.table_mib) - Sum(m.elems) - Sum(head);
    const size_t n = 89, cout = 192;
    size_t each = left / n - cout;
    for (size_t i = 0; i < n; ++i) {
      size_t w = i + 1 < n ? each : left - (n - 1) * (each + cout) - cout;
      m.elems.push_back(w);
      m.elems.push_back(cout);
    }
    m.elems.insert(m.elems.end(), head.begin(), head.end());
    ms.push_back(m);
  }
  {  // LSTM, hidden 1024: per gate W_x, W_h (1024x1024) and b; the output
     // layer's width fitted (about 1000 classes).
    Model m{"lstm", 35.93, 14, 33.33, {}};
    for (int g = 0; g < 4; ++g) {
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024);
    }
    size_t out = (Target(m.table_mib) - Sum(m.elems)) / 1025;
    Fc(&m.elems, 1024, out);
    ms.push_back(m);
  }
  {  // GRU, hidden 1024: 3 gates, same construction.
    Model m{"gru", 27.92, 11, 30.44, {}};
    for (int g = 0; g < 3; ++g) {
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024);
    }
    size_t out = (Target(m.table_mib) - Sum(m.elems)) / 1025;
    Fc(&m.elems, 1024, out);
    ms.push_back(m);
  }
  {  // FCN-5: input, three hidden 4096-wide layers, output (5 x (W, b));
     // input and output width fitted.
    Model m{"fcn5", 204.47, 10, 4.88, {}};
    size_t io = (Target(m.table_mib) - 3 * (4096 * 4096 + 4096) - 4096) / (2 * 4096 + 1);
    Fc(&m.elems, io, 4096);
    for (int i = 0; i < 3; ++i) Fc(&m.elems, 4096, 4096);
    Fc(&m.elems, 4096, io);
    // 5 weight matrices: the fifth is 4096 x io, so fix the total with the first.
    m.elems[0] += Target(m.table_mib) - Sum(m.elems);
    ms.push_back(m);
  }
  return ms;
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    zc_status s_ = (call);                                                               \
    if (s_ != ZC_OK) {                                                                   \
      fprintf(stderr, "%s: %s: %s\n", #call, zc_status_string(s_), zc_last_error(comm)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

void SleepMs(double ms) {
  timespec ts{static_cast<time_t>(ms / 1e3), static_cast<long>(std::fmod(ms, 1e3) * 1e6)};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  int servers_only = 0, steps = 5;
  bool compute = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--servers") && i + 1 < argc) servers_only = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--models") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--no-compute")) compute = false;
    else {
      fprintf(stderr, "usage: %s [--servers K] [--steps N] [--models a,b] [--no-compute]\n", argv[0]);
      return 2;
    }
  }
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
    printf("# zc_ps_train: %d workers, %d servers (%s), transport %s, %d steps, compute %s\n",
           n - servers_only, servers_only ? servers_only : n,
           servers_only ? "server-only ranks" : "co-located", transport, steps, compute ? "emulated" : "off");
  if (rank == 0)
    printf("%-11s %9s %7s %7s %10s %10s %12s %10s %8s\n", "model", "MiB", "table", "tensors", "step_ms",
           "ps_comm_ms", "allreduce_ms", "compute_ms", "ps/ar");
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
    double best_step = 1e30, best_comm = 1e30;
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
        best_step = std::min(best_step, t2 - t0);
        best_comm = std::min(best_comm, t2 - t1);
      }
    }
    // Check one element of every tensor: the round's sum over workers.
    int W = zc_ps_num_workers(ps);
    for (size_t t = 0; t < m.elems.size(); ++t) {
      size_t i = off[t];
      float want = 0;
      for (int w = 0; w < W; ++w) want += static_cast<float>((i + w) % 7);
      if (param[i] != want) {
        fprintf(stderr, "rank %d: %s tensor %zu: got %g, want %g\n", rank, m.name.c_str(), t, param[i], want);
        return 1;
      }
    }
    CHECK(zc_ps_free(ps));
    double best_ar = 1e30;
    for (int s = 0; s <= steps; ++s) {
      CHECK(zc_barrier(workers));
      double t0 = NowMs();
      for (size_t t = 0; t < m.elems.size(); ++t)
        CHECK(zc_allreduce(workers, grad.data() + off[t], param.data() + off[t], m.elems[t], ZC_FLOAT32, ZC_SUM));
      double t1 = NowMs();
      if (s > 0) best_ar = std::min(best_ar, t1 - t0);
    }
    if (rank == 0)
      printf("%-11s %9.2f %7.2f %3zu/%-3d %10.2f %10.2f %12.2f %10.2f %8.2f\n", m.name.c_str(),
             total * 4.0 / 1048576.0, m.table_mib, m.elems.size(), m.table_tensors, best_step, best_comm,
             best_ar, compute ? m.compute_ms : 0.0, best_comm / best_ar);
    fflush(stdout);
  }
  if (workers) CHECK(zc_finalize(workers));
  CHECK(zc_finalize(comm));
  return 0;
}
