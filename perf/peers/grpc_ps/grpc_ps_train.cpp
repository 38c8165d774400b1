// grpc_ps_train — the paper's baseline for Table 2: a parameter server over
// gRPC, as TensorFlow's PS path moves variables (protobuf `bytes` in unary
// calls over TCP; here on 127.0.0.1).
//
// The same step as perf/zc_ps_train.cpp, on the same tensors
// (perf/common/ps_models.h): the table's computation time (emulated by
// sleeping), then every worker pushes every gradient and pulls every value.
// Placement as zcomm's PS, with zcomm's own code (src/ps/placement.h): chunks
// of at most ZC_PS_PARTITION bytes (default 4M = 4 MiB) placed as
// ZC_PS_PLACEMENT says (default balanced: every tensor spread evenly over
// the servers; roundrobin: whole partitions, the g-th chunk of the model on
// server g mod S). One unary call per chunk and
// direction, all issued at once (pushes first, then pulls) on one channel per
// server. Synchronous rounds: a server sums the round's pushes of all workers
// and answers the round's pulls once all have pushed.
//
//   grpc_ps_train --workers 2 --servers 2 --colocated   # 2 processes, each a
//                                        # worker with its server in-process
//   grpc_ps_train --workers 3 --servers 1               # 3 workers + 1 server
//   options: --models vgg16,lstm  --steps N (5)  --no-compute  --json FILE
//            --timeout-s T (per call deadline, 600)
//
// The program forks its processes itself (before gRPC is initialized); the
// parent is only a coordinator: it passes the servers' ports and runs the
// barrier before each step through pipes. Times are worker 0's, min and
// median over the steps after one warm-up step: step_ms (compute + push +
// pull) and comm_ms (push + pull). After the steps every worker checks the
// first and last element of every chunk against the round's sum ("wrong"
// counts mismatches; any mismatch fails the run).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ps_models.h"
#include "ps/placement.h"
#include "ps.grpc.pb.h"

namespace {

using ps_models::Model;

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void SleepMs(double ms) {
  timespec ts{static_cast<time_t>(ms / 1e3), static_cast<long>(std::fmod(ms, 1e3) * 1e6)};
  nanosleep(&ts, nullptr);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// ZC_PS_PARTITION as zcomm parses it: a number with an optional K/M/G
// (binary) suffix; default 4M.
size_t PartitionBytes() {
  const char* v = getenv("ZC_PS_PARTITION");
  if (!v || !*v) return size_t{4} << 20;
  char* end = nullptr;
  double x = strtod(v, &end);
  size_t mul = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': mul = size_t{1} << 10; break;
      case 'm': case 'M': mul = size_t{1} << 20; break;
      case 'g': case 'G': mul = size_t{1} << 30; break;
      default: break;
    }
  }
  size_t b = static_cast<size_t>(x * static_cast<double>(mul));
  return b < 64 ? 64 : b;
}

struct Chunk {
  size_t offset;  // first float of the model's flat buffer
  size_t elems;
  int server;
};

// ZC_PS_PLACEMENT as zcomm reads it (balanced when unset); a name zcomm
// refuses ends the program, as it fails zcomm's run.
zc::ps::PlacementPolicy PolicyFromEnv() {
  const char* v = getenv("ZC_PS_PLACEMENT");
  auto policy = zc::ps::PlacementPolicy::kBalanced;
  if (v && *v && !zc::ps::PolicyFromName(v, &policy)) {
    fprintf(stderr, "grpc_ps_train: ZC_PS_PLACEMENT=%s: must be balanced, roundrobin or hash\n", v);
    exit(2);
  }
  return policy;
}

// The model's chunks in declaration order (tensor i is key i), placed by
// zcomm's Placement: the chunks zcomm's PS moves for the same model.
std::vector<Chunk> Cut(const Model& m, size_t partition, int servers) {
  const zc::ps::Placement placement(partition, PolicyFromEnv(), servers);
  zc::ps::Declared declared(servers);
  std::vector<Chunk> out;
  size_t base = 0;
  for (size_t key = 0; key < m.elems.size(); ++key) {
    const std::vector<zc::ps::ChunkPlace> chunks = placement.Cut(key, m.elems[key], sizeof(float), declared);
    for (const zc::ps::ChunkPlace& c : chunks) out.push_back(Chunk{base + c.offset, c.elems, c.server});
    declared.Add(chunks, sizeof(float));
    base += m.elems[key];
  }
  return out;
}

// ---------------------------------------------------------------- server --

class PsServer final : public zcperf::ps::ParameterServer::CallbackService {
 public:
  explicit PsServer(int workers) : workers_(workers) {}

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const zcperf::ps::PushRequest* req,
                                 zcperf::ps::PushReply* rep) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    State* s = Get(req->model(), req->chunk());
    const size_t n = req->data().size() / sizeof(float);
    std::vector<std::pair<grpc::ServerUnaryReactor*, zcperf::ps::PullReply*>> ready;
    {
      std::lock_guard<std::mutex> lk(s->mu);
      if (req->round() != s->round || s->pushed >= workers_) {
        r->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "push out of round"));
        return r;
      }
      const float* g = reinterpret_cast<const float*>(req->data().data());
      if (s->pushed == 0) {
        s->accum.assign(g, g + n);
      } else {
        if (s->accum.size() != n) {
          r->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "push size differs between workers"));
          return r;
        }
        float* a = s->accum.data();
        for (size_t i = 0; i < n; ++i) a[i] += g[i];
      }
      if (++s->pushed == workers_) {  // the round is complete: publish it
        s->result.swap(s->accum);
        s->result_round = static_cast<int64_t>(s->round);
        s->round++;
        s->pushed = 0;
        for (auto it = s->waiting.begin(); it != s->waiting.end();) {
          if (it->round == s->result_round) {
            it->rep->set_round(it->round);
            it->rep->set_chunk(it->chunk);
            it->rep->set_data(reinterpret_cast<const char*>(s->result.data()), s->result.size() * sizeof(float));
            ready.emplace_back(it->reactor, it->rep);
            it = s->waiting.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    for (auto& p : ready) p.first->Finish(grpc::Status::OK);
    rep->set_round(req->round());
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const zcperf::ps::PullRequest* req,
                                 zcperf::ps::PullReply* rep) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    State* s = Get(req->model(), req->chunk());
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->result_round == static_cast<int64_t>(req->round())) {
      rep->set_round(req->round());
      rep->set_chunk(req->chunk());
      rep->set_data(reinterpret_cast<const char*>(s->result.data()), s->result.size() * sizeof(float));
      r->Finish(grpc::Status::OK);
    } else if (static_cast<int64_t>(req->round()) > s->result_round) {
      s->waiting.push_back(Waiter{r, rep, static_cast<int64_t>(req->round()), req->chunk()});
    } else {
      r->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "pull of an old round"));
    }
    return r;
  }

 private:
  struct Waiter {
    grpc::ServerUnaryReactor* reactor;
    zcperf::ps::PullReply* rep;
    int64_t round;
    uint64_t chunk;
  };
  struct State {
    std::mutex mu;
    uint64_t round = 0;  // round being accumulated
    int pushed = 0;
    std::vector<float> accum, result;
    int64_t result_round = -1;
    std::vector<Waiter> waiting;
  };

  State* Get(uint32_t model, uint64_t chunk) {
    std::lock_guard<std::mutex> lk(mu_);
    if (model != model_) {  // every worker has finished the earlier model
      states_.clear();
      model_ = model;
    }
    auto& p = states_[chunk];
    if (!p) p.reset(new State);
    return p.get();
  }

  const int workers_;
  std::mutex mu_;
  uint32_t model_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<State>> states_;
};

// -------------------------------------------------------------- plumbing --

// Child <-> coordinator messages (one byte): 'B' barrier, 'E' final barrier;
// the coordinator answers 'G' (go) or 'Q' (quit: another process failed).
bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

struct Opts {
  int workers = 2, servers = 2, steps = 5, timeout_s = 600;
  bool colocated = false, compute = true;
  std::string only;
  const char* json = nullptr;
};

struct Row {
  std::string model;
  double mib;
  size_t tensors, chunks;
  double step_min, step_med, comm_min, comm_med, compute;
  long wrong;
};

void WriteJson(const Opts& o, const std::vector<Row>& rows, bool complete, const char* error) {
  if (!o.json) return;
  std::string tmp = std::string(o.json) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return;
  fprintf(f,
          "{\"benchmark\": \"ps_train\", \"library\": \"grpc\", \"transport\": \"grpc/tcp(127.0.0.1)\", "
          "\"workers\": %d, \"servers\": %d, \"colocated\": %s, \"steps\": %d, \"partition_bytes\": %zu, "
          "\"placement\": \"%s\", \"complete\": %s, \"error\": ",
          o.workers, o.servers, o.colocated ? "true" : "false", o.steps, PartitionBytes(),
          zc::ps::PolicyName(static_cast<uint32_t>(PolicyFromEnv())),
          complete ? "true" : "false");
  if (error) {
    fputc('"', f);
    for (const char* c = error; *c; ++c) {
      if (*c == '"' || *c == '\\') fputc('\\', f);
      fputc(*c == '\n' ? ' ' : *c, f);
    }
    fputc('"', f);
  } else {
    fputs("null", f);
  }
  fputs(", \"results\": [", f);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    fprintf(f,
            "%s\n {\"model\": \"%s\", \"mib\": %.3f, \"tensors\": %zu, \"chunks\": %zu, \"step_ms_min\": %.3f, "
            "\"step_ms_median\": %.3f, \"comm_ms_min\": %.3f, \"comm_ms_median\": %.3f, \"compute_ms\": %.2f, "
            "\"wrong\": %ld}",
            i ? "," : "", r.model.c_str(), r.mib, r.tensors, r.chunks, r.step_min, r.step_med, r.comm_min,
            r.comm_med, r.compute, r.wrong);
  }
  fputs("]}\n", f);
  fclose(f);
  rename(tmp.c_str(), o.json);
}

struct Child {
  int index;       // process index
  int worker;      // worker index or -1
  int server;      // server index or -1
  int to_parent;   // write end
  int from_parent; // read end
};

bool Barrier(const Child& c, char what) {
  char go = 0;
  return WriteAll(c.to_parent, &what, 1) && ReadAll(c.from_parent, &go, 1) && go == 'G';
}

#define FAIL(...)                                       \
  do {                                                  \
    fprintf(stderr, "error: worker %d: ", c.worker);    \
    fprintf(stderr, __VA_ARGS__);                       \
    fputc('\n', stderr);                                \
    return 1;                                           \
  } while (0)

int RunWorker(const Child& c, const Opts& o, const std::vector<int>& ports) {
  const size_t partition = PartitionBytes();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  std::vector<std::unique_ptr<zcperf::ps::ParameterServer::Stub>> stubs;
  for (int s = 0; s < o.servers; ++s) {
    auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(ports[s]),
                                        grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30)))
      FAIL("cannot connect to server %d on 127.0.0.1:%d", s, ports[s]);
    stubs.push_back(zcperf::ps::ParameterServer::NewStub(ch));
  }
  const int W = o.workers;
  std::vector<Row> rows;
  if (c.worker == 0) {
    printf("# grpc_ps_train: %d workers, %d servers (%s), gRPC %s over 127.0.0.1, partition %zu bytes, "
           "placement %s, %d steps, compute %s\n",
           W, o.servers, o.colocated ? "co-located, in the workers' processes" : "server-only processes",
           grpc::Version().c_str(), partition, zc::ps::PolicyName(static_cast<uint32_t>(PolicyFromEnv())),
           o.steps, o.compute ? "emulated" : "off");
    printf("%-11s %9s %7s %7s %7s %10s %12s %10s %10s\n", "model", "MiB", "table", "tensors", "chunks",
           "step_ms", "step_med_ms", "comm_ms", "compute_ms");
    fflush(stdout);
  }
  uint32_t model_index = 0;
  for (const Model& m : ps_models::Models()) {
    if (!o.only.empty() && ("," + o.only + ",").find("," + m.name + ",") == std::string::npos) continue;
    ++model_index;
    const std::vector<Chunk> chunks = Cut(m, partition, o.servers);
    const size_t total = ps_models::Sum(m.elems), nc = chunks.size();
    std::vector<float> grad(total), param(total);
    for (size_t i = 0; i < total; ++i) grad[i] = static_cast<float>((i + c.worker) % 7);
    std::vector<double> st, ct;
    for (int step = 0; step <= o.steps; ++step) {  // step 0: warm-up
      if (!Barrier(c, 'B')) FAIL("coordinator stopped the run");
      std::fill(param.begin(), param.end(), -1.0f);
      const double t0 = NowMs();
      if (o.compute) SleepMs(m.compute_ms);
      const double t1 = NowMs();
      grpc::CompletionQueue cq;
      std::vector<zcperf::ps::PushRequest> preq(nc);
      std::vector<zcperf::ps::PushReply> prep(nc);
      std::vector<zcperf::ps::PullRequest> qreq(nc);
      std::vector<zcperf::ps::PullReply> qrep(nc);
      std::vector<grpc::Status> pst(nc), qst(nc);
      std::vector<std::unique_ptr<grpc::ClientContext>> pctx(nc), qctx(nc);
      std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<zcperf::ps::PushReply>>> pcall(nc);
      std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<zcperf::ps::PullReply>>> qcall(nc);
      const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(o.timeout_s);
      for (size_t k = 0; k < nc; ++k) {  // pushes: serialize each chunk into a message
        preq[k].set_worker(c.worker);
        preq[k].set_model(model_index);
        preq[k].set_round(step);
        preq[k].set_chunk(k);
        preq[k].set_data(reinterpret_cast<const char*>(grad.data() + chunks[k].offset),
                         chunks[k].elems * sizeof(float));
        pctx[k].reset(new grpc::ClientContext);
        pctx[k]->set_deadline(deadline);
        pcall[k] = stubs[chunks[k].server]->AsyncPush(pctx[k].get(), preq[k], &cq);
        pcall[k]->Finish(&prep[k], &pst[k], reinterpret_cast<void*>(2 * k + 1));
      }
      for (size_t k = 0; k < nc; ++k) {  // pulls
        qreq[k].set_worker(c.worker);
        qreq[k].set_model(model_index);
        qreq[k].set_round(step);
        qreq[k].set_chunk(k);
        qctx[k].reset(new grpc::ClientContext);
        qctx[k]->set_deadline(deadline);
        qcall[k] = stubs[chunks[k].server]->AsyncPull(qctx[k].get(), qreq[k], &cq);
        qcall[k]->Finish(&qrep[k], &qst[k], reinterpret_cast<void*>(2 * k + 2));
      }
      for (size_t done = 0; done < 2 * nc; ++done) {
        void* tag = nullptr;
        bool ok = false;
        if (!cq.Next(&tag, &ok) || !ok) FAIL("%s: completion queue failed", m.name.c_str());
        const size_t t = reinterpret_cast<size_t>(tag);
        const size_t k = (t - 1) / 2;
        if (t % 2 == 1) {
          if (!pst[k].ok())
            FAIL("%s: push of chunk %zu failed: %s (code %d)", m.name.c_str(), k, pst[k].error_message().c_str(),
                 static_cast<int>(pst[k].error_code()));
        } else {
          if (!qst[k].ok())
            FAIL("%s: pull of chunk %zu failed: %s (code %d)", m.name.c_str(), k, qst[k].error_message().c_str(),
                 static_cast<int>(qst[k].error_code()));
          const std::string& d = qrep[k].data();
          if (d.size() != chunks[k].elems * sizeof(float) || qrep[k].round() != static_cast<uint64_t>(step))
            FAIL("%s: pull of chunk %zu: %zu bytes of round %llu, want %zu bytes of round %d", m.name.c_str(), k,
                 d.size(), static_cast<unsigned long long>(qrep[k].round()), chunks[k].elems * sizeof(float), step);
          memcpy(param.data() + chunks[k].offset, d.data(), d.size());  // parse: into the variable
        }
      }
      const double t2 = NowMs();
      cq.Shutdown();
      if (step > 0) {
        st.push_back(t2 - t0);
        ct.push_back(t2 - t1);
      }
    }
    long wrong = 0;
    for (const Chunk& ch : chunks) {
      for (size_t i : {ch.offset, ch.offset + ch.elems - 1}) {
        float want = 0;
        for (int w = 0; w < W; ++w) want += static_cast<float>((i + w) % 7);
        if (param[i] != want) {
          if (wrong < 5)
            fprintf(stderr, "error: worker %d: %s element %zu: got %g, want %g\n", c.worker, m.name.c_str(), i,
                    param[i], want);
          ++wrong;
        }
      }
    }
    if (c.worker == 0) {
      Row r{m.name, total * 4.0 / 1048576.0, m.elems.size(), nc,
            st.empty() ? 0 : *std::min_element(st.begin(), st.end()), Median(st),
            ct.empty() ? 0 : *std::min_element(ct.begin(), ct.end()), Median(ct),
            o.compute ? m.compute_ms : 0.0, wrong};
      rows.push_back(r);
      printf("%-11s %9.2f %7.2f %3zu/%-3d %7zu %10.2f %12.2f %10.2f %10.2f\n", m.name.c_str(), r.mib, m.table_mib,
             m.elems.size(), m.table_tensors, nc, r.step_min, r.step_med, r.comm_min, r.compute);
      fflush(stdout);
      WriteJson(o, rows, false, wrong ? "wrong results" : nullptr);
    }
    if (wrong) return 1;
  }
  if (c.worker == 0) WriteJson(o, rows, true, nullptr);
  return 0;
}

int RunChild(const Child& c, const Opts& o) {
  std::unique_ptr<PsServer> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  if (c.server >= 0) {
    service.reset(new PsServer(o.workers));
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.SetMaxReceiveMessageSize(-1);
    b.SetMaxSendMessageSize(-1);
    b.RegisterService(service.get());
    server = b.BuildAndStart();
    if (!server || port == 0) {
      fprintf(stderr, "error: server %d could not listen on 127.0.0.1\n", c.server);
      port = -1;
    }
  }
  if (!WriteAll(c.to_parent, &port, sizeof port) || port < 0) return 1;
  std::vector<int> ports(o.servers);
  if (!ReadAll(c.from_parent, ports.data(), ports.size() * sizeof(int))) return 1;
  int rc = 0;
  if (c.worker >= 0) {
    rc = RunWorker(c, o, ports);
    if (rc == 0 && !Barrier(c, 'E')) rc = 1;  // the others may still use this process's server
  } else {
    char q = 0;  // server-only: serve until the coordinator says quit
    (void)!read(c.from_parent, &q, 1);
  }
  if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return rc;
}

void Usage() {
  fprintf(stderr,
          "usage: grpc_ps_train [--workers W] [--servers S] [--colocated] [--models a,b] [--steps N]\n"
          "                     [--no-compute] [--json FILE] [--timeout-s T]\n");
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const bool has = i + 1 < argc;
    if (!strcmp(a, "--workers") && has) o.workers = atoi(argv[++i]);
    else if (!strcmp(a, "--servers") && has) o.servers = atoi(argv[++i]);
    else if (!strcmp(a, "--colocated")) o.colocated = true;
    else if (!strcmp(a, "--steps") && has) o.steps = atoi(argv[++i]);
    else if (!strcmp(a, "--models") && has) o.only = argv[++i];
    else if (!strcmp(a, "--no-compute")) o.compute = false;
    else if (!strcmp(a, "--json") && has) o.json = argv[++i];
    else if (!strcmp(a, "--timeout-s") && has) o.timeout_s = atoi(argv[++i]);
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { Usage(); return 0; }
    else { Usage(); return 2; }
  }
  if (o.workers < 1 || o.servers < 1 || o.steps < 1 || o.timeout_s < 1 ||
      (o.colocated && o.servers != o.workers)) {
    fprintf(stderr, "error: need workers >= 1, servers >= 1, steps >= 1 (--colocated: servers == workers)\n");
    return 2;
  }
  PolicyFromEnv();  // a bad ZC_PS_PLACEMENT ends here, before any process starts
  signal(SIGPIPE, SIG_IGN);
  const int np = o.colocated ? o.workers : o.workers + o.servers;
  std::vector<Child> kids(np);
  std::vector<int> up(np), down(np);  // parent's ends: read from child, write to child
  std::vector<pid_t> pids(np, -1);
  for (int i = 0; i < np; ++i) {
    int a[2], b[2];
    if (pipe(a) != 0 || pipe(b) != 0) { perror("pipe"); return 1; }
    kids[i] = Child{i, i < o.workers ? i : -1, o.colocated ? i : (i >= o.workers ? i - o.workers : -1), a[1], b[0]};
    up[i] = a[0];
    down[i] = b[1];
  }
  fflush(stdout);
  for (int i = 0; i < np; ++i) {  // fork every process before gRPC starts anywhere
    pids[i] = fork();
    if (pids[i] < 0) { perror("fork"); return 1; }
    if (pids[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the coordinator
      for (int j = 0; j < np; ++j) {
        close(up[j]);
        close(down[j]);
        if (j != i) {
          close(kids[j].to_parent);
          close(kids[j].from_parent);
        }
      }
      int rc = RunChild(kids[i], o);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
  }
  for (int i = 0; i < np; ++i) {
    close(kids[i].to_parent);
    close(kids[i].from_parent);
  }
  std::string error;
  auto stop_all = [&](const std::string& why) {
    if (error.empty()) error = why;
    for (int i = 0; i < np; ++i)
      if (pids[i] > 0) kill(pids[i], SIGKILL);
  };
  // Ports of the servers, in server order.
  std::vector<int> ports(o.servers, 0);
  for (int i = 0; i < np && error.empty(); ++i) {
    int p = 0;
    if (!ReadAll(up[i], &p, sizeof p) || p < 0) stop_all("process " + std::to_string(i) + " did not start");
    if (kids[i].server >= 0) ports[kids[i].server] = p;
  }
  for (int i = 0; i < np && error.empty(); ++i)
    if (!WriteAll(down[i], ports.data(), ports.size() * sizeof(int))) stop_all("process died at start");
  // Barriers among the workers until the final one.
  while (error.empty()) {
    char last = 0;
    for (int w = 0; w < o.workers && error.empty(); ++w) {
      char m = 0;
      if (!ReadAll(up[w], &m, 1)) stop_all("worker " + std::to_string(w) + " failed (see its error above)");
      else if (w > 0 && m != last) stop_all("workers out of step");
      last = m;
    }
    if (!error.empty()) break;
    for (int w = 0; w < o.workers; ++w) WriteAll(down[w], "G", 1);
    if (last == 'E') break;
  }
  for (int i = 0; i < np; ++i) WriteAll(down[i], "Q", 1);  // server-only processes end
  int rc = error.empty() ? 0 : 1;
  for (int i = 0; i < np; ++i) {
    int st = 0;
    if (pids[i] > 0 && waitpid(pids[i], &st, 0) == pids[i] && error.empty() &&
        (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
      error = "process " + std::to_string(i) + " exited with status " + std::to_string(st);
      rc = 1;
    }
  }
  if (rc) {
    fprintf(stderr, "error: %s\n", error.c_str());
    // Keep the rows worker 0 wrote; mark the run failed.
    if (o.json) {
      FILE* f = fopen(o.json, "r");
      std::string body;
      if (f) {
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, f)) > 0) body.append(buf, k);
        fclose(f);
      }
      size_t at = body.find("\"error\": null");
      if (at != std::string::npos) {
        body.replace(at, 13, "\"error\": \"" + error + "\"");
        f = fopen(o.json, "w");
        if (f) {
          fputs(body.c_str(), f);
          fclose(f);
        }
      } else if (body.find("\"error\": \"") == std::string::npos) {
        std::vector<Row> none;
        WriteJson(o, none, false, error.c_str());
      }
    }
  }
  return rc;
}
